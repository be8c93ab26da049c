"""``judge``: a rule written in words that only the LLM judge can decide (the engine says ``deferred``)."""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seqjudge.rules.base import (
    Evaluator,
    Operand,
    Ordering,
    RuleBase,
    SelectorFactory,
    Wording,
    check_operand,
)
from seqjudge.rules.evaluate import DEFERRED, Finding

if TYPE_CHECKING:
    from seqjudge.rules.index import View
    from seqjudge.rules.select import Selector


class JudgeCriteria(BaseModel):
    """When a call (or the trace) passes a ``judge`` rule and when it fails, as short lists of conditions.

    The same text is the judge's instruction and the labelling guideline of a golden dataset."""

    # `pass` is a Python keyword: the field is `pass_`, written and dumped as `pass`.
    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    pass_: list[str] = Field(alias="pass", min_length=1)
    fail: list[str] = Field(min_length=1)

    @field_validator("pass_", "fail")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        if any(not item.strip() for item in value):
            raise ValueError("each condition must be a sentence, not blank")
        return value


class JudgeExample(BaseModel):
    """A labelled case of a ``judge`` rule: what happened, and whether it passes or fails."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: Literal["pass", "fail"]
    case: str = Field(min_length=1)


class JudgeRule(RuleBase):
    """A rule written in words that only the LLM judge can decide; the engine reports it ``deferred``.

    ``applies_to`` names the tools (or aliases) whose calls the rule is about: the judge decides each such
    call, and the rule is not exercised on a trace without one."""

    type: Literal["judge"]
    description: str = Field(min_length=1)  # type: ignore[assignment]
    applies_to: Operand | None = None
    criteria: JudgeCriteria | None = None
    examples: list[JudgeExample] = Field(default_factory=list)

    rank = 10
    # The guard skips it, asks the host, or asks the judge (Guard(judge=...)).
    guard_kinds = frozenset()
    guard_at_end = "it is written in words: only the judge (or a person) decides it"
    operand_fields = ("applies_to",)
    may_defer = True

    @field_validator("applies_to")
    @classmethod
    def _applies(cls, value: Operand | None) -> Operand | None:
        return None if value is None else check_operand(value)

    def default_id(self) -> str:
        words = re.findall(r"[A-Za-z0-9]+", self.description.lower())[:6]
        return "judge:" + ("-".join(words) or "rule")

    def describe(self) -> str:
        return self.description

    def requirement(self, say: Wording) -> str:
        if self.applies_to is None:
            return (
                "Written in words: decide it from its description"
                + (" and criteria" if self.criteria else "")
                + " and the whole trace. Violation: `criteria_not_met` at the call it concerns (null "
                "only when the failure concerns no call)."
            )
        by = "the criteria" if self.criteria else "the description"
        return (
            f"Decide each call to {say.tools(self.applies_to)} on its own, failed attempts "
            f"included: the rule fails if any of them fails {by}. Not checked if the trace has no such "
            "call. Violation: `criteria_not_met` at each call that fails, one violation per call."
        )

    def ordering(self) -> Ordering | None:
        return None  # orders no tools against each other

    def compile(self, c: SelectorFactory) -> Evaluator | None:
        # Without applies_to there is nothing for the engine to look at: the judge decides it.
        return None if self.applies_to is None else partial(judged, self, c(self.applies_to))


def judged(rule: JudgeRule, about: Selector, v: View) -> Finding:
    """A `judge` rule with ``applies_to``: only the judge decides it, but whether it is exercised is a fact
    of the trace, the same for the engine, the prompt ("not checked if ...") and the labels."""
    calls, _ = v.positions(about)
    if not calls:
        return Finding("not_exercised", f"{about.text} is never called.")
    return Finding("deferred", DEFERRED, list(calls))
