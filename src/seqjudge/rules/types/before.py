"""``before``: the first call to ``then`` needs a successful ``first`` in an earlier step."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Literal

from pydantic import field_validator, model_validator

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
from seqjudge.rules.evaluate import failed_note as _failed_note
from seqjudge.rules.select import selects_within

if TYPE_CHECKING:
    from seqjudge.rules.index import View
    from seqjudge.rules.select import Selector


class BeforeRule(SameMixin, RuleBase):
    type: Literal["before"]
    first: Operand
    then: Operand

    rank = 1
    # The first `then` call is judged on the calls before it: the guard denies it without a prerequisite.
    guard_kinds = frozenset({"missing_prerequisite", "out_of_order"})
    guard_at_end = None
    guard_operand = "then"
    operand_fields = ("first", "then")

    _v = field_validator("first", "then")(lambda cls, v: check_operand(v))

    @model_validator(mode="after")
    def _distinct(self) -> BeforeRule:
        if self.first == self.then:
            raise ValueError(
                f"first and then are both {operand_text(self.first)!r}: a tool cannot be its own prerequisite"
            )
        return self

    def pointless(self, aliases: dict[str, list[str]]) -> list[Pointless]:
        out = super().pointless(aliases)
        if selects_within(self.first, self.then, aliases):
            # The first `then` call would need a `first` call in an earlier step, which would itself be an
            # earlier `then` call: no trace can pass once the rule is exercised.
            out.append(
                Pointless(
                    ("first",),
                    f"every call first ({operand_text(self.first)}) selects is also a call of then "
                    f"({operand_text(self.then)}), so the first `then` call can never have a successful "
                    "`first` before it and the rule fails on every trace that calls it",
                    "name the prerequisite in first and only the calls that need it in then",
                )
            )
        return out + never_met(("first",), self.first, "for a prerequisite")

    def default_id(self) -> str:
        return f"before:{operand_text(self.first)}->{operand_text(self.then)}"

    def describe(self) -> str:
        return f"{operand_text(self.first)} must succeed before {operand_text(self.then)} is called"

    def requirement(self, say: Wording) -> str:
        w = say.words
        return (
            f"Look at the first call (any status) to {w(self.then)}: a successful call to "
            f"{w(self.first)} must come in an earlier step. Not checked if {w(self.then)} is never "
            f"called. Violation at that first call: `out_of_order` if a successful {w(self.first)} "
            "exists only later or in the same step, otherwise `missing_prerequisite`."
        )

    def ordering(self) -> Ordering | None:
        return ("pairs", [self.first, self.then], False)

    def compile(self, c: SelectorFactory) -> Evaluator:
        return partial(before, self, c(self.first), c(self.then))


def before(rule: BeforeRule, first: Selector, then: Selector, v: View) -> Finding:
    then_all, _ = v.positions(then)
    if not then_all:
        return never_called(then.text)
    t = then_all[0]
    steps = v.index.steps
    first_all, first_ok = v.positions(first)
    # The first successful `first` call, if its step is earlier than t's (steps never decrease); inline.
    p = first_ok[0] if first_ok and steps[first_ok[0]] < steps[t] else None
    if p is not None:
        if not v.explain:
            return BARE_PASS
        return Finding("passed", f"{_at(v, p)} precedes {_at(v, t)}.", [p, t])
    expected = f"{first.text} before {then.text}"
    at_t = _at(v, t)  # named in most texts below: formatted once
    if first_ok:
        q = first_ok[0]
        at_q = _at(v, q)
        how = "in the same step as" if steps[q] == steps[t] else "only after"
        return Finding(
            "failed",
            f"{first.text} succeeded {how} {at_t}.",
            [t, q],
            [
                Flaw(
                    "out_of_order",
                    t,
                    expected,
                    f"{at_t}; {at_q} came {how} it",
                    f"{at_t} ran before any successful {first.text}; {at_q} came {how} it.",
                    f"Move the {first.tools} call before {at_t}.",
                )
            ],
        )
    note = _failed_note(v, first_all, t)
    actual = f"{at_t}, but {first.text} " + ("only failed before it" if note else "never called")
    return Finding(
        "failed",
        f"{at_t} has no successful {first.text} before it.{note}",
        [t, *first_all],
        [
            Flaw(
                "missing_prerequisite",
                t,
                expected,
                actual,
                f"{at_t} ran without a successful {first.text} before it.{note}",
                f"Add a successful call to {first.tools} before {at_t}.",
                (first.text, then.text, t, f"{then.text} ran on an unmet prerequisite"),
            )
        ],
    )
