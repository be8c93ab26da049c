"""``max_calls``: at most ``max`` calls the selector matches: every attempt, unless it selects by status."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from seqjudge.rules.base import (
    ArgsSelector,
    Evaluator,
    Operand,
    Ordering,
    RuleBase,
    SameMixin,
    SelectorFactory,
    Wording,
    check_operand,
    operand_text,
)
from seqjudge.rules.evaluate import BARE_PASS, Finding, Flaw
from seqjudge.rules.evaluate import at as _at

if TYPE_CHECKING:
    from seqjudge.rules.index import View
    from seqjudge.rules.select import Selector


class MaxCallsRule(SameMixin, RuleBase):
    type: Literal["max_calls"]
    tool: Operand
    max: int = Field(ge=0)

    rank = 3
    # The call over the limit is known when it is proposed: the guard denies it.
    guard_kinds = frozenset({"too_many_calls"})
    guard_at_end = None
    guard_operand = "tool"
    operand_fields = ("tool",)

    _v = field_validator("tool")(lambda cls, v: check_operand(v))

    def default_id(self) -> str:
        return f"max_calls:{operand_text(self.tool)}<={self.max}"

    def describe(self) -> str:
        return f"{operand_text(self.tool)} may be called at most {self.max} time(s)"

    def requirement(self, say: Wording) -> str:
        w = say.words
        # A selector with `status:` says which calls count: "every attempt counts" would contradict it.
        counted = "" if _selects_status(self.tool) else " (failed attempts count)"
        if self.max == 0:
            return (
                f"{w(self.tool)} must never be called, not even once{counted}. "
                "Violation: `too_many_calls` at the first call."
            )
        every = "; every attempt counts, failed ones too" if counted else ""
        return (
            f"{w(self.tool)} may be called at most {self.max} time(s){every}. "
            "Violation: `too_many_calls` at the first call over the limit."
        )

    def ordering(self) -> Ordering | None:
        return None  # orders no tools against each other

    def compile(self, c: SelectorFactory) -> Evaluator:
        return partial(max_calls, self, c(self.tool))


def _selects_status(op: Operand) -> bool:
    items = op if isinstance(op, list) else [op]
    return any(isinstance(item, ArgsSelector) and item.status is not None for item in items)


def max_calls(rule: MaxCallsRule, sel: Selector, v: View) -> Finding:
    every, _ = v.positions(sel)
    limit = rule.max
    if len(every) <= limit:
        if not v.explain:
            return BARE_PASS
        return Finding(
            "passed", f"{sel.text} called {len(every)} time(s), at most {limit} allowed.", list(every)
        )
    over = every[limit]
    return Finding(
        "failed",
        f"{sel.text} called {len(every)} times; at most {limit} allowed.",
        list(every),
        [
            Flaw(
                "too_many_calls",
                over,
                f"{sel.text} at most {limit} time(s)",
                f"{sel.text} called {len(every)} times, {limit} allowed; first over: {_at(v, over)}",
                f"{_at(v, over)} exceeds the limit of {limit} call(s) to {sel.text}.",
                (
                    "Do not call " + sel.tools + " at all."
                    if limit == 0
                    else f"Call {sel.tools} at most {limit} time(s); combine the calls or drop the repeats."
                ),
            )
        ],
    )
