"""``after``: every ``trigger`` is followed by a successful ``then`` within ``within`` steps."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from seqjudge.rules.base import (
    Evaluator,
    Operand,
    Ordering,
    Pointless,
    RuleBase,
    SameMixin,
    SelectorFactory,
    Wording,
    check_operand,
    never_met,
    operand_text,
)
from seqjudge.rules.evaluate import BARE_PASS, Finding, Flaw, never_called
from seqjudge.rules.evaluate import at as _at
from seqjudge.rules.select import selects_within

if TYPE_CHECKING:
    from seqjudge.rules.index import View
    from seqjudge.rules.select import Selector


class AfterRule(SameMixin, RuleBase):
    type: Literal["after"]
    trigger: Operand
    then: Operand
    within: int = Field(default=1, ge=1)

    rank = 6
    # Met or missed only by calls after the trigger: nothing to deny before a call.
    guard_kinds = frozenset()
    guard_at_end = "a deadline is met or missed by the calls after its trigger"
    operand_fields = ("trigger", "then")

    _v = field_validator("trigger", "then")(lambda cls, v: check_operand(v))

    def pointless(self, aliases: dict[str, list[str]]) -> list[Pointless]:
        out = super().pointless(aliases)
        if selects_within(self.then, self.trigger, aliases):
            # The last trigger needs a successful `then` in a later step, which would be a later trigger.
            out.append(
                Pointless(
                    ("then",),
                    f"every call then ({operand_text(self.then)}) selects is also a trigger "
                    f"({operand_text(self.trigger)}), so the last trigger can never be followed by one and "
                    "the rule fails on every trace that calls it",
                    "name in then the tool that must follow, different from the trigger",
                )
            )
        return out + never_met(("then",), self.then, "after a trigger")

    def default_id(self) -> str:
        return f"after:{operand_text(self.trigger)}->{operand_text(self.then)}@{self.within}"

    def describe(self) -> str:
        t = operand_text
        return f"{t(self.then)} must succeed within {self.within} step(s) after each {t(self.trigger)}"

    def requirement(self, say: Wording) -> str:
        w = say.words
        return (
            f"Every call to {w(self.trigger)} (any status) must be followed by a successful call to "
            f"{w(self.then)} in a later step, at most {self.within} step(s) after it. Not checked if "
            f"{w(self.trigger)} is never called. Violation: `deadline_missed` at the first call to "
            f"{w(self.trigger)} left without one (also when the trace ends first)."
        )

    def ordering(self) -> Ordering | None:
        return None  # orders no tools against each other

    def compile(self, c: SelectorFactory) -> Evaluator:
        return partial(after, self, c(self.trigger), c(self.then))


def after(rule: AfterRule, trigger: Selector, then: Selector, v: View) -> Finding:
    trig_all, _ = v.positions(trigger)
    if not trig_all:
        return never_called(trigger.text)
    steps = v.index.steps
    _, then_ok = v.positions(then)
    # Every call its own step (the common case): a step is the position, and a million-entry copy is saved.
    sequential = v.index.sequential
    then_steps = then_ok if sequential else [steps[p] for p in then_ok]
    within = rule.within
    missed: list[int] = []
    met: list[int] = []
    # Triggers come in order, so the first successful `then` in a later step only moves forward: one pass
    # over both lists, not a search per trigger (a million-call trace stays linear).
    k, n_then = 0, len(then_steps)
    for t in trig_all:
        st = t if sequential else steps[t]
        while k < n_then and then_steps[k] <= st:
            k += 1
        if k < n_then and then_steps[k] <= st + within:
            met.append(then_ok[k])
        else:
            missed.append(t)
    if not missed:
        if not v.explain:
            return BARE_PASS
        return Finding(
            "passed",
            f"Every {trigger.text} was followed by {then.text} within {within} step(s).",
            # Two sorted runs: sorting merges them in one pass; dict.fromkeys drops repeats, keeping order.
            list(dict.fromkeys(sorted(trig_all + met))),
        )
    t = missed[0]
    at_t = _at(v, t)  # named in four texts: formatted once
    more = f" ({len(missed)} of {len(trig_all)} triggers missed)" if len(missed) > 1 else ""
    return Finding(
        "failed",
        f"{at_t} was not followed by a successful {then.text} within {within} step(s){more}.",
        missed,
        [
            Flaw(
                "deadline_missed",
                t,
                f"{then.text} within {within} step(s) after {trigger.text}",
                f"{at_t}, no successful {then.text} by step {steps[t] + within + 1}",
                f"{at_t} opened a deadline of {within} step(s) for {then.text} that passed{more}.",
                f"Call {then.tools} within {within} step(s) after {at_t}.",
            )
        ],
    )
