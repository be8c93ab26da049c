"""The rule model: one pydantic class per rule type, a discriminated union on ``type``, and the RuleSet.

Unknown keys are errors everywhere here (``extra="forbid"``): a silently dropped key once turned a peer
tool's ``max_calls: 0`` ("never call it") into "call it at least once".
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Severity = Literal["critical", "warning"]


class ArgsSelector(BaseModel):
    """``{tool: NAME | [NAME, ...], args_match: {argument: regex}, status: ok | error}``.

    ``args_match`` is an AND over keys with each regex *searched*; ``status`` narrows the operand to
    successful (or failed) calls, for triggers and limits that should count only calls that took effect.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str | list[str]
    args_match: dict[str, str] = Field(default_factory=dict)
    status: Literal["ok", "error"] | None = None

    @field_validator("tool")
    @classmethod
    def _non_empty(cls, value: str | list[str]) -> str | list[str]:
        names = [value] if isinstance(value, str) else value
        if not names or any(not n for n in names):
            raise ValueError("tool names must be non-empty")
        return value

    @field_validator("args_match")
    @classmethod
    def _compile(cls, value: dict[str, str]) -> dict[str, str]:
        for key, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"args_match.{key}: {pattern!r} is not a valid regular expression ({exc})"
                ) from None
        return value


# A tool operand as written: a name (or alias), a list of names/selectors (any of them), or one selector.
Operand = str | ArgsSelector | list[str | ArgsSelector]


def operand_text(op: Operand) -> str:
    """Compact human text for an operand, used in default ids and messages."""
    if isinstance(op, str):
        return op
    if isinstance(op, ArgsSelector):
        names = op.tool if isinstance(op.tool, str) else "|".join(op.tool)
        conds = [f"{k}~{v}" for k, v in op.args_match.items()]
        if op.status:
            conds.append(f"status={op.status}")
        return f"{names}({','.join(conds)})" if conds else names
    return "|".join(operand_text(o) for o in op)


def _check_operand(op: Operand) -> Operand:
    if isinstance(op, str) and not op:
        raise ValueError("a tool name must be non-empty")
    if isinstance(op, list):
        if not op:
            raise ValueError("a list of tools must name at least one tool")
        for item in op:
            _check_operand(item)
    return op


class _RuleBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    severity: Severity = "critical"
    description: str | None = None
    when: dict[str, Any] | None = None
    # Set by the loader from a shape-2 `tests:` entry; results are grouped by it.
    group: str | None = None

    def default_id(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @model_validator(mode="after")
    def _fill_id(self) -> Any:
        if not self.id:
            self.id = self.default_id()
        return self

    @property
    def rule_id(self) -> str:
        assert self.id is not None
        return self.id


class _SameMixin(BaseModel):
    same: list[str] | None = None

    @field_validator("same")
    @classmethod
    def _same_names(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or any(not v for v in value)):
            raise ValueError("same: must list at least one non-empty argument name")
        return value


class RequireRule(_RuleBase):
    type: Literal["require"]
    tool: Operand

    _v = field_validator("tool")(lambda cls, v: _check_operand(v))

    def default_id(self) -> str:
        return f"require:{operand_text(self.tool)}"


class BeforeRule(_SameMixin, _RuleBase):
    type: Literal["before"]
    first: Operand
    then: Operand

    _v = field_validator("first", "then")(lambda cls, v: _check_operand(v))

    @model_validator(mode="after")
    def _distinct(self) -> BeforeRule:
        if self.first == self.then:
            raise ValueError(
                f"first and then are both {operand_text(self.first)!r}: a tool cannot be its own prerequisite"
            )
        return self

    def default_id(self) -> str:
        return f"before:{operand_text(self.first)}->{operand_text(self.then)}"


class BlocklistRule(_RuleBase):
    type: Literal["blocklist"]
    pattern: str = Field(min_length=1)

    def default_id(self) -> str:
        return f"blocklist:{self.pattern}"


class MaxCallsRule(_SameMixin, _RuleBase):
    type: Literal["max_calls"]
    tool: Operand
    max: int = Field(ge=0)

    _v = field_validator("tool")(lambda cls, v: _check_operand(v))

    def default_id(self) -> str:
        return f"max_calls:{operand_text(self.tool)}<={self.max}"


class EventuallyRule(_RuleBase):
    type: Literal["eventually"]
    tool: Operand
    within: int = Field(ge=1)

    _v = field_validator("tool")(lambda cls, v: _check_operand(v))

    def default_id(self) -> str:
        return f"eventually:{operand_text(self.tool)}@{self.within}"


class NeverAfterRule(_SameMixin, _RuleBase):
    type: Literal["never_after"]
    trigger: Operand
    forbidden: Operand

    _v = field_validator("trigger", "forbidden")(lambda cls, v: _check_operand(v))

    def default_id(self) -> str:
        return f"never_after:{operand_text(self.trigger)}!>{operand_text(self.forbidden)}"


class AfterRule(_SameMixin, _RuleBase):
    type: Literal["after"]
    trigger: Operand
    then: Operand
    within: int = Field(default=1, ge=1)

    _v = field_validator("trigger", "then")(lambda cls, v: _check_operand(v))

    def default_id(self) -> str:
        return f"after:{operand_text(self.trigger)}->{operand_text(self.then)}@{self.within}"


class SequenceRule(_SameMixin, _RuleBase):
    type: Literal["sequence"]
    tools: list[Operand] = Field(min_length=2)
    strict: bool = False

    @field_validator("tools")
    @classmethod
    def _ops(cls, value: list[Operand]) -> list[Operand]:
        for op in value:
            _check_operand(op)
        return value

    def default_id(self) -> str:
        return "sequence:" + ">".join(operand_text(t) for t in self.tools)


class TrajectoryRule(_RuleBase):
    type: Literal["trajectory"]
    expected: list[str] = Field(min_length=1)
    mode: Literal["precedence", "in_order", "any_order", "exact"] = "precedence"

    @field_validator("expected")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if any(not v for v in value):
            raise ValueError("expected tool names must be non-empty")
        return value

    def default_id(self) -> str:
        return "trajectory:" + ">".join(self.expected)


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


class JudgeRule(_RuleBase):
    """A rule written in words that only the LLM judge can decide; the engine reports it ``deferred``.

    ``applies_to`` names the tools (or aliases) whose calls the rule is about: the judge decides each such
    call, and the rule is not exercised on a trace without one."""

    type: Literal["judge"]
    description: str = Field(min_length=1)  # type: ignore[assignment]
    applies_to: Operand | None = None
    criteria: JudgeCriteria | None = None
    examples: list[JudgeExample] = Field(default_factory=list)

    @field_validator("applies_to")
    @classmethod
    def _applies(cls, value: Operand | None) -> Operand | None:
        return None if value is None else _check_operand(value)

    def default_id(self) -> str:
        words = re.findall(r"[A-Za-z0-9]+", self.description.lower())[:6]
        return "judge:" + ("-".join(words) or "rule")


Rule = Annotated[
    RequireRule
    | BeforeRule
    | BlocklistRule
    | MaxCallsRule
    | EventuallyRule
    | NeverAfterRule
    | AfterRule
    | SequenceRule
    | TrajectoryRule
    | JudgeRule,
    Field(discriminator="type"),
]

RULE_TYPES = (
    "require",
    "before",
    "blocklist",
    "max_calls",
    "eventually",
    "never_after",
    "after",
    "sequence",
    "trajectory",
    "judge",
)
DETERMINISTIC_TYPES = tuple(t for t in RULE_TYPES if t != "judge")


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
