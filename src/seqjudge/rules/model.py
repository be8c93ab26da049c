"""The rule model: the discriminated union of every rule type on ``type``, and the RuleSet.

Each rule type is a module of ``seqjudge.rules.types`` (its class carries its evaluator, operand fields,
description and judge requirement); the shared fields and operands are in ``seqjudge.rules.base``. The
names below are re-exported so that ``seqjudge.rules.model`` stays the one import for the rule model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seqjudge.rules.base import (
    ArgsSelector,
    Operand,
    RuleBase,
    Severity,
    operand_text,
    seal_rule_types,
)
from seqjudge.rules.types import load_rule_types
from seqjudge.rules.types.after import AfterRule
from seqjudge.rules.types.before import BeforeRule
from seqjudge.rules.types.blocklist import BlocklistRule
from seqjudge.rules.types.eventually import EventuallyRule
from seqjudge.rules.types.judge import JudgeCriteria, JudgeExample, JudgeRule
from seqjudge.rules.types.max_calls import MaxCallsRule
from seqjudge.rules.types.never_after import NeverAfterRule
from seqjudge.rules.types.require import RequireRule
from seqjudge.rules.types.sequence import SequenceRule
from seqjudge.rules.types.trajectory import TrajectoryRule

__all__ = [
    "RULE_CLASSES",
    "RULE_TYPES",
    "AfterRule",
    "ArgsSelector",
    "BeforeRule",
    "BlocklistRule",
    "EventuallyRule",
    "JudgeCriteria",
    "JudgeExample",
    "JudgeRule",
    "MaxCallsRule",
    "NeverAfterRule",
    "Operand",
    "RequireRule",
    "Rule",
    "RuleBase",
    "RuleSet",
    "SequenceRule",
    "Severity",
    "TrajectoryRule",
    "alias_loop",
    "operand_text",
]

# Every rule type, by name, in listing order; the union is built from it and closed to later additions.
RULE_CLASSES: dict[str, type[RuleBase]] = load_rule_types()
seal_rule_types()
RULE_TYPES = tuple(RULE_CLASSES)

if TYPE_CHECKING:
    # The checker sees the common base; pydantic sees the closed union, discriminated on `type`.
    Rule: TypeAlias = RuleBase
else:
    Rule = Annotated[Union[tuple(RULE_CLASSES.values())], Field(discriminator="type")]  # noqa: UP007


def alias_loop(name: str, aliases: dict[str, list[str]]) -> list[str] | None:
    """The path by which an alias reaches itself through alias members, or None."""
    stack: list[tuple[str, list[str]]] = [(m, [name, m]) for m in aliases[name]]
    seen: set[str] = set()
    while stack:
        cur, path = stack.pop()
        if cur == name:
            return path
        if cur in seen or cur not in aliases:
            continue
        seen.add(cur)
        stack.extend((m, path + [m]) for m in aliases[cur])
    return None


class RuleSet(BaseModel):
    """Every rule-file shape loads to this. ``source`` names the file for messages."""

    model_config = ConfigDict(extra="forbid")

    rules: list[Rule]
    aliases: dict[str, list[str]] = Field(default_factory=dict)
    catalog: str | None = None
    source: str | None = None

    @model_validator(mode="after")
    def _no_alias_reaches_itself(self) -> RuleSet:
        # The loader says this with the file's line; here it holds for rule sets built in Python too, which
        # would otherwise match less than they name (an alias matches its members, never its own name).
        for name in self.aliases:
            path = alias_loop(name, self.aliases)
            if path:
                raise ValueError(
                    f"alias {name!r} includes itself ({' -> '.join(path)}): an alias matches its members, "
                    "never its own name; list the real tool names instead"
                )
        return self

    def by_id(self) -> dict[str, Any]:
        return {r.rule_id: r for r in self.rules}
