"""``require``: at least one successful call to the tool."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Literal

from pydantic import field_validator

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


class RequireRule(RuleBase):
    type: Literal["require"]
    tool: Operand

    rank = 0
    guard_kinds = frozenset()
    guard_at_end = "the required call may still come"
    operand_fields = ("tool",)

    _v = field_validator("tool")(lambda cls, v: check_operand(v))

    def pointless(self, aliases: dict[str, list[str]]) -> list[Pointless]:
        return super().pointless(aliases) + never_met(("tool",), self.tool, "for require")

    def default_id(self) -> str:
        return f"require:{operand_text(self.tool)}"

    def describe(self) -> str:
        return f"{operand_text(self.tool)} must be called successfully"

    def requirement(self, say: Wording) -> str:
        w = say.words
        return (
            f"At least one successful call to {w(self.tool)} must appear in the trace. "
            "Violation: `missing_call` (offending index null)."
        )

    def ordering(self) -> Ordering | None:
        return None  # orders no tools against each other

    def compile(self, c: SelectorFactory) -> Evaluator:
        sel = c(self.tool)
        return partial(require, self, sel, _missing(sel, Finding, []))


def require(rule: RequireRule, sel: Selector, never: Finding, v: View) -> Finding:
    """``never``: the finding when the tool is never called, the same every time (built at compile)."""
    every, ok = v.positions(sel)
    if ok:
        if not v.explain:
            return BARE_PASS
        return Finding("passed", f"{_at(v, ok[0])} succeeded.", [ok[0]])
    if not every:
        return never
    return _missing(sel, Finding, every, _failed_note(v, every))


def _missing(sel: Selector, kind: type[Finding], every: list[int], note: str = "") -> Finding:
    return kind(
        "failed",
        f"No successful call to {sel.text}.{note}",
        list(every),
        [
            Flaw(
                "missing_call",
                None,
                f"at least one successful call to {sel.text}",
                f"{sel.text} never succeeded" if every else f"{sel.text} never called",
                f"The trace never calls {sel.text} successfully.{note}",
                f"Add a successful call to {sel.tools}.",
            )
        ],
    )
