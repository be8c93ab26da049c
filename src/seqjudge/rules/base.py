"""What every rule type shares: operands, the common fields, and the contract a rule type fills in.

A rule type is one module in ``seqjudge.rules.types``: its pydantic class (fields, validators, default id)
carries its own behaviour - the evaluator the engine runs, the fields that hold tool operands, its meaning
in words for reports and the requirement paragraph of the judge prompt. The class checks, when it is
defined, that none of these is missing, so a forgotten piece fails at import instead of falling back to
something quietly wrong (a judge prompt that says only the type's name, a tool check that sees no tools).

Unknown keys are errors everywhere here (``extra="forbid"``): a silently dropped key once turned a peer
tool's ``max_calls: 0`` ("never call it") into "call it at least once".
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from seqjudge.pattern import PatternError, compile_pattern

if TYPE_CHECKING:
    from seqjudge.rules.evaluate import Finding
    from seqjudge.rules.index import View
    from seqjudge.rules.select import Selector

__all__ = [
    "ArgsSelector",
    "Evaluator",
    "Operand",
    "OperandWords",
    "Ordering",
    "Pointless",
    "RuleBase",
    "SameMixin",
    "SelectorFactory",
    "Wording",
    "Severity",
    "by_outcome_only",
    "check_operand",
    "failed_only",
    "never_met",
    "operand_text",
    "rule_classes",
    "seal_rule_types",
]

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
                compile_pattern(pattern)  # the engine's own pattern compiler (seqjudge.pattern)
            except PatternError as exc:
                raise ValueError(
                    f"args_match.{key}: {pattern!r} is not a valid regular expression ({exc})"
                ) from None
        return value


# A tool operand as written: a name (or alias), a list of names/selectors (any of them), or one selector.
Operand = str | ArgsSelector | list[str | ArgsSelector]

# What a rule type's pieces are given: the judge prompt's wording of an operand, and the engine's compiler
# of an operand into a (shared) selector. An evaluator is the rule applied to one view of a trace.
OperandWords = Callable[[Operand], str]


class Wording(NamedTuple):
    """How the judge prompt words an operand: ``words`` as written (an alias named as one), ``tools`` as the
    tools it stands for (aliases spelled out)."""

    words: OperandWords
    tools: OperandWords


SelectorFactory = Callable[[Operand], "Selector"]
Evaluator = Callable[["View"], "Finding"]


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


def check_operand(op: Operand) -> Operand:
    if isinstance(op, str) and not op:
        raise ValueError("a tool name must be non-empty")
    if isinstance(op, list):
        if not op:
            raise ValueError("a list of tools must name at least one tool")
        for item in op:
            check_operand(item)
    return op


def by_outcome_only(op: Operand) -> bool:
    """True when every item of the operand selects calls by their outcome (``status:``): whether a call
    matches is known only once it has run."""
    items = op if isinstance(op, list) else [op]
    return all(isinstance(item, ArgsSelector) and item.status is not None for item in items)


def failed_only(op: Operand) -> bool:
    """True when the operand selects failed calls only (``status: error`` on every item)."""
    items = op if isinstance(op, list) else [op]
    return all(isinstance(item, ArgsSelector) and item.status == "error" for item in items)


class Pointless(NamedTuple):
    """Why a rule can never mean anything: it checks nothing, or it fails on every trace it applies to.

    ``field`` is the path inside the rule the problem is about (``("then",)``); the loader turns it into the
    file's line and path, and refuses the rule file (the lesson of a peer tool's v4, where ``max_calls: 0``
    quietly meant the opposite of what it said)."""

    field: tuple[str | int, ...]
    problem: str
    hint: str


def never_met(path: tuple[str | int, ...], op: Operand, rule_words: str) -> list[Pointless]:
    """The ``Pointless`` of an operand that only a successful call can meet, narrowed to failed calls."""
    if not failed_only(op):
        return []
    field = "".join(f"[{p}]" if isinstance(p, int) else p for p in path)
    return [
        Pointless(
            path,
            f"{field} selects only failed calls (status: error), but {rule_words} only a successful call "
            "counts, so the rule can never pass",
            f"remove `status: error` from {field} (or write `status: ok`)",
        )
    ]


# type name -> class, filled as the classes are defined; sealed once the rule union is built from it.
_RULE_TYPES: dict[str, type[RuleBase]] = {}
_sealed = False

# The methods a rule type must define itself (RuleBase's versions only raise).
_METHODS = ("default_id", "describe", "requirement", "compile", "ordering")

# How a rule orders tools, for lint's cycle check: "pairs" (every tool of the first operand before every
# tool of the second), "chain" (each member before the next one that brings new tools); then the operands,
# and whether the order may hold without being definite (a strict sequence, an in-order trajectory).
Ordering = tuple[Literal["pairs", "chain"], list[Operand], bool]


class RuleBase(BaseModel):
    """The fields every rule has, and the pieces each rule type defines (checked at class definition):

    - ``type: Literal["name"]`` - the name the rule file uses;
    - ``rank`` - where the type is listed in messages ("valid types: ...");
    - ``guard_kinds`` and ``guard_at_end`` - what the guard decides before a call, and what at the end;
    - ``operand_fields`` (fields holding one operand) and, if any, ``operand_list_fields`` (fields holding
      a list of operands): what a tool-name check (catalog, judge validation, lint) must look at;
    - ``default_id()``, ``describe()`` (the meaning in words, for reports), ``requirement(say)`` (the
      engine's exact semantics as a paragraph of the judge prompt, operands worded by ``say``) and
      ``compile(select)`` (the engine's evaluator, operands compiled by ``select``; None for a rule only
      the judge can decide).
    """

    model_config = ConfigDict(extra="forbid")

    if TYPE_CHECKING:
        # Each rule type declares `type: Literal["its name"]` as its own field (after the common ones).
        type: str

    rank: ClassVar[int]
    operand_fields: ClassVar[tuple[str, ...]]
    # Whether the engine may leave the rule to the judge (outcome `deferred`) on some trace: counted and
    # named wherever deferred rules are (a pass must say what it did not decide).
    may_defer: ClassVar[bool] = False
    # What the guard (``seqjudge.guard``) can decide before a call runs, declared by each type: the violation
    # types this rule raises at a call from the calls before it alone ("looks back": the proposed call is
    # denied when one is certain at it), and, when something is decided only once the session ends, why
    # (None: nothing is). A type with no look-back violation only makes sense offline (``lint --guard``).
    guard_kinds: ClassVar[frozenset[str]]
    guard_at_end: ClassVar[str | None]
    # The field whose call a look-back violation is at (``then`` of ``before``), when it is one operand: an
    # operand that counts calls by outcome (``status:``) is a violation only once the call has run, so the
    # guard can never deny it (``lint --guard`` says so).
    guard_operand: ClassVar[str | None] = None
    operand_list_fields: ClassVar[tuple[str, ...]] = ()

    id: str | None = None
    severity: Severity = "critical"
    description: str | None = None
    when: dict[str, Any] | None = None
    # Set by the loader from a shape-2 `tests:` entry; results are grouped by it.
    group: str | None = None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = _type_name(cls)
        missing = [m for m in _METHODS if getattr(cls, m) is getattr(RuleBase, m)]
        declared = ("rank", "operand_fields", "guard_kinds", "guard_at_end")
        missing += [v for v in declared if not hasattr(cls, v)]
        if missing:
            raise TypeError(f"rule type {name!r} ({cls.__qualname__}) does not define {', '.join(missing)}")
        unknown = [f for f in (*cls.operand_fields, *cls.operand_list_fields) if f not in cls.model_fields]
        if unknown:
            raise TypeError(f"rule type {name!r} names operand field(s) it does not have: {unknown}")
        if name in _RULE_TYPES:
            raise TypeError(f"rule type {name!r} is defined twice ({_RULE_TYPES[name].__qualname__})")
        if _sealed:
            raise TypeError(
                f"rule type {name!r} is defined after the rule union was built: put its module in the "
                "seqjudge.rules.types package, which the rule model loads every module of"
            )
        _RULE_TYPES[name] = cls

    def default_id(self) -> str:  # pragma: no cover - every rule type defines its own
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - every rule type defines its own
        """The rule's meaning in words, for reports and the judge, when the file gives no description."""
        raise NotImplementedError

    def requirement(self, say: Wording) -> str:  # pragma: no cover - every rule type defines its own
        """What the rule demands, in the engine's exact semantics (see the README), as one paragraph."""
        raise NotImplementedError

    def compile(self, select: SelectorFactory) -> Evaluator | None:  # pragma: no cover - ditto
        """The evaluator of this rule, or None when only the judge can decide it."""
        raise NotImplementedError

    def ordering(self) -> Ordering | None:  # pragma: no cover - every rule type defines its own
        """The order this rule puts tools in (see ``Ordering``), or None."""
        raise NotImplementedError

    def pointless(self, aliases: dict[str, list[str]]) -> list[Pointless]:
        """Why this rule can never mean anything (empty: it can); the loader refuses a rule file with any.

        Here the cases every type shares; a type with cases of its own extends the list in its module.
        ``aliases`` are the rule file's, for cases that depend on what the operands select."""
        out: list[Pointless] = []
        for path, value in (self.when or {}).items():
            if isinstance(value, list) and not value:
                out.append(
                    Pointless(
                        ("when", path),
                        f"when {path!r} lists no values, so the rule applies to no trace",
                        "list the values the rule applies to, or remove the path",
                    )
                )
        return out

    def operands(self) -> list[Operand]:
        """Every operand the rule names, field by field as declared (an optional one left out is none)."""
        out: list[Operand] = [v for v in (getattr(self, f) for f in self.operand_fields) if v is not None]
        for f in self.operand_list_fields:
            out.extend(getattr(self, f))
        return out

    @model_validator(mode="after")
    def _fill_id(self) -> Any:
        if not self.id:
            self.id = self.default_id()
        return self

    @property
    def rule_id(self) -> str:
        assert self.id is not None
        return self.id


def _type_name(cls: type[RuleBase]) -> str:
    field = cls.model_fields.get("type")
    args = typing.get_args(field.annotation) if field is not None else ()
    if field is None or typing.get_origin(field.annotation) is not Literal or len(args) != 1:
        raise TypeError(f'rule class {cls.__qualname__} needs a field `type: Literal["name"]`')
    return str(args[0])


class SameMixin(BaseModel):
    same: list[str] | None = None

    @field_validator("same")
    @classmethod
    def _same_names(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or any(not v for v in value)):
            raise ValueError("same: must list at least one non-empty argument name")
        return value

    def walks_group(self) -> bool:
        """Whether the evaluator walks every call of a group (``View.every_position``), not only its
        operands' positions. When it does not, a group whose calls hold every call the operands select is
        to it the whole trace, which the engine's ``same:`` evaluation uses."""
        return False


def rule_classes() -> dict[str, type[RuleBase]]:
    """Every rule type, by name, in listing order."""
    return dict(sorted(_RULE_TYPES.items(), key=lambda item: item[1].rank))


def seal_rule_types() -> None:
    """No rule type may be added from now on (the rule union was built from the ones there are)."""
    global _sealed
    _sealed = True
