"""``judge``: a rule written in words that only the LLM judge can decide (the engine says ``deferred``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from seqjudge.rules.base import Evaluator, OperandWords, Ordering, RuleBase, SelectorFactory


class JudgeRule(RuleBase):
    """A rule written in words that only the LLM judge can decide; the engine reports it ``deferred``."""

    type: Literal["judge"]
    description: str = Field(min_length=1)  # type: ignore[assignment]

    rank = 9
    operand_fields = ()

    def default_id(self) -> str:
        words = re.findall(r"[A-Za-z0-9]+", self.description.lower())[:6]
        return "judge:" + ("-".join(words) or "rule")

    def describe(self) -> str:
        return self.description

    def requirement(self, w: OperandWords) -> str:
        return (
            "This rule is written in words only: decide it from the description and the trace, "
            "and use the violation type that fits best."
        )

    def ordering(self) -> Ordering | None:
        return None  # orders no tools against each other

    def compile(self, c: SelectorFactory) -> Evaluator | None:
        return None  # nothing for the engine to evaluate: the judge decides it
