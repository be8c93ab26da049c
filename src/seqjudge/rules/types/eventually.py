"""``eventually``: a successful call within the first ``within`` steps."""

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
    SelectorFactory,
    Wording,
    check_operand,
    never_met,
    operand_text,
)
from seqjudge.rules.evaluate import BARE_PASS, Finding, Flaw
from seqjudge.rules.evaluate import at as _at
from seqjudge.rules.evaluate import failed_note as _failed_note

if TYPE_CHECKING:
    from seqjudge.rules.index import View
    from seqjudge.rules.select import Selector


class EventuallyRule(RuleBase):
    type: Literal["eventually"]
    tool: Operand
    within: int = Field(ge=1)

    rank = 4
    guard_kinds = frozenset()
    guard_at_end = "the call may still succeed within the deadline; decided once the session ends"
    operand_fields = ("tool",)

    _v = field_validator("tool")(lambda cls, v: check_operand(v))

    def pointless(self, aliases: dict[str, list[str]]) -> list[Pointless]:
        return super().pointless(aliases) + never_met(("tool",), self.tool, "for eventually")

    def default_id(self) -> str:
        return f"eventually:{operand_text(self.tool)}@{self.within}"

    def describe(self) -> str:
        return f"{operand_text(self.tool)} must succeed within the first {self.within} step(s)"

    def requirement(self, say: Wording) -> str:
        w = say.words
        return (
            f"A successful call to {w(self.tool)} must happen within the first {self.within} step(s) "
            f"of the trace (steps 0 to {self.within - 1}). Violation: `deadline_missed` if it succeeds "
            "only later, `missing_call` (offending index null) if it never succeeds."
        )

    def ordering(self) -> Ordering | None:
        return None  # orders no tools against each other

    def compile(self, c: SelectorFactory) -> Evaluator:
        sel = c(self.tool)
        return partial(eventually, self, sel, _missing(self, sel, Finding, []))


def eventually(rule: EventuallyRule, sel: Selector, never: Finding, v: View) -> Finding:
    """``never``: the finding when the tool is never called, the same every time (built at compile)."""
    every, ok = v.positions(sel)
    steps = v.index.steps
    within = rule.within
    if ok and steps[ok[0]] < within:
        if not v.explain:
            return BARE_PASS
        return Finding("passed", f"{_at(v, ok[0])} succeeded in step {steps[ok[0]] + 1}.", [ok[0]])
    if ok:
        p = ok[0]
        expected = f"a successful {sel.text} within the first {within} step(s)"  # (a pass needs none)
        return Finding(
            "failed",
            f"{sel.text} first succeeded in step {steps[p] + 1}, after the deadline of {within}.",
            [p],
            [
                Flaw(
                    "deadline_missed",
                    p,
                    expected,
                    f"{sel.text} first succeeded at step {steps[p] + 1}",
                    f"{_at(v, p)} came too late: it had to succeed within {within} step(s).",
                    f"Call {sel.tools} earlier, within the first {within} step(s).",
                )
            ],
        )
    if not every:
        return never
    return _missing(rule, sel, Finding, every, _failed_note(v, every))


def _missing(
    rule: EventuallyRule, sel: Selector, kind: type[Finding], every: list[int], note: str = ""
) -> Finding:
    within = rule.within
    return kind(
        "failed",
        f"{sel.text} never succeeded.{note}",
        list(every),
        [
            Flaw(
                "missing_call",
                None,
                f"a successful {sel.text} within the first {within} step(s)",
                f"{sel.text} never succeeded" if every else f"{sel.text} never called",
                f"The trace never calls {sel.text} successfully.{note}",
                f"Call {sel.tools} within the first {within} step(s).",
            )
        ],
    )
