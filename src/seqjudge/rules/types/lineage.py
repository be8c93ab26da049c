"""``lineage``: a call's argument must carry a value that appeared earlier in the trace, in a named source.

Ordering rules see that *a* lookup came first; they cannot see that the id the agent acted on *came from*
somewhere: a cancellation of an order id the agent never looked up or was told, or an id the model made
up, is a well-formed call on the wrong record. ``lineage`` checks each call of ``tool`` (every attempt: a
failed cancellation of an invented id is still an act on it): each value at ``argument`` must appear in
one of the sources ``from`` names, before the call:

- ``{output: TOOLS, path: P}``: the output of a successful call of TOOLS in an earlier step, at the
  JMESPath P (no path: anywhere in it). A failed call's output is never a source: it is an error, not a
  record. A plain-text output (not JSON) is searched for the value as a whole word when there is no path;
  with a path, a value not found elsewhere is then *undetermined*;
- ``{user: true}``: a user message before the call, searched for the value as a whole word;
- ``{context: P}``: the trace's context at the JMESPath P;
- ``{values: [...]}``: a literal set.

Three outcomes: derived (passed, naming the call and path it came from), not derived (failed: one
violation per value, naming every place looked in), undetermined (``deferred``: decided by the judge, as a
``judge`` rule is, with the evidence in the explanation; never a pass). ``normalize`` lists what makes two
spellings one value (``trim``, ``lowercase``, ``strip_hash``), applied to the value and to every source.

The outputs are parsed once per trace whatever the number of lineage rules (``seqjudge.rules.lineage``).
"""

from __future__ import annotations

from bisect import bisect_left
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from seqjudge.rules.base import (
    Evaluator,
    Operand,
    Ordering,
    RuleBase,
    SelectorFactory,
    Wording,
    check_operand,
    operand_text,
)
from seqjudge.rules.evaluate import BARE_PASS, Finding, Flaw
from seqjudge.rules.evaluate import at as _at
from seqjudge.rules.lineage import NORMALIZERS, SourceKey, compile_path, leaves, normalizer, word_pattern

if TYPE_CHECKING:
    from seqjudge.rules.index import View
    from seqjudge.rules.lineage import Normalizer, Sources
    from seqjudge.rules.select import Selector

_VALUE_CHARS = 80  # a value quoted in a message is cut to this many characters
# A source as the evaluator uses it: as written, its operand compiled, its listed values normalised.
Compiled = tuple["LineageSource", "Selector | None", "frozenset[str] | None", "SourceKey | None"]


class LineageSource(BaseModel):
    """One place a value may come from: exactly one of ``output`` (with ``path``), ``user``, ``context``
    or ``values``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    output: Operand | None = None
    path: str | None = None
    user: Literal[True] | None = None
    context: str | None = None
    values: list[str | int | float | bool] | None = None

    @field_validator("output")
    @classmethod
    def _operand(cls, value: Operand | None) -> Operand | None:
        return None if value is None else check_operand(value)

    @field_validator("path", "context")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None:
            compile_path(value)  # ValueError with JMESPath's own words
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> LineageSource:
        kinds = [k for k in ("output", "user", "context", "values") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                "a source is exactly one of output (with an optional path), user: true, context: PATH or "
                f"values: [...]; this one has {', '.join(kinds) or 'none'}"
            )
        if self.path is not None and self.output is None:
            raise ValueError("path: goes with output: (the JMESPath into that tool's output)")
        if self.values is not None and not self.values:
            raise ValueError("values: lists no value, so no value can come from it")
        return self

    def words(self, tools: Any = operand_text) -> str:
        """The source in a few words ("get_order_details output at `order_id`"), tools worded by ``tools``."""
        if self.output is not None:
            at = f" at `{self.path}`" if self.path else ""
            return f"{tools(self.output)} output{at}"
        if self.user:
            return "the user's messages"
        if self.context is not None:
            return f"the context at `{self.context}`"
        return "the listed values " + ", ".join(repr(v) for v in self.values or [])


Normalize = Literal["trim", "lowercase", "strip_hash"]
assert set(Normalize.__args__) == set(NORMALIZERS)  # type: ignore[attr-defined]


class LineageRule(RuleBase):
    type: Literal["lineage"]
    tool: Operand
    argument: str = Field(min_length=1)
    from_: list[LineageSource] = Field(alias="from", min_length=1)
    normalize: list[Normalize] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, validate_by_name=True)

    rank = 9
    # A value with no source before the call is known when the call is proposed: the guard denies it.
    guard_kinds = frozenset({"missing_prerequisite"})
    guard_at_end = None
    guard_operand = "tool"
    operand_fields = ("tool",)
    may_defer = True

    _v = field_validator("tool")(lambda cls, v: check_operand(v))

    @field_validator("argument")
    @classmethod
    def _argument(cls, value: str) -> str:
        compile_path(value)
        return value

    def operands(self) -> list[Operand]:
        # The source tools are operands too: lint, the catalog check and the judge's validation see them.
        return [*super().operands(), *(s.output for s in self.from_ if s.output is not None)]

    def default_id(self) -> str:
        return f"lineage:{operand_text(self.tool)}.{self.argument}"

    def describe(self) -> str:
        sources = self._sources(operand_text)
        return f"{self.argument} of {operand_text(self.tool)} must come from one of: {sources}"

    def _sources(self, tools: Any) -> str:
        return ", ".join(s.words(tools) for s in self.from_)

    def requirement(self, say: Wording) -> str:
        norm = f", compared after {', '.join(self.normalize)}" if self.normalize else ""
        return (
            f"Each value of `{self.argument}` in every call (any status) to {say.words(self.tool)} must "
            f"appear earlier in: {self._sources(say.words)}{norm} (successful calls' outputs only). Not "
            "checked without such a call. Violation: `missing_prerequisite` at each call whose value has "
            "no source; if the engine could not read a source, judge from the trace."
        )

    def ordering(self) -> Ordering | None:
        return None  # it orders no tools against each other (a value's source is not a tool order)

    def compile(self, c: SelectorFactory) -> Evaluator:
        norm = normalizer(tuple(self.normalize))
        sources: list[Compiled] = []
        for s in self.from_:
            sel = c(s.output) if s.output is not None else None
            key = SourceKey(sel, s.path, norm) if sel is not None else None
            listed = frozenset(norm(t) for t in leaves(s.values)) if s.values is not None else None
            sources.append((s, sel, listed, key))
        return partial(lineage, self, c(self.tool), sources, self._sources(operand_text))


def _cut(value: str) -> str:
    return value if len(value) <= _VALUE_CHARS else value[: _VALUE_CHARS - 1] + "…"


class _Search:
    """Where one value was looked for before one call: found (``where``), unsure (``unsure``), and every
    place looked in (``looked``). Kept as parts and worded only when a message needs them: most values are
    found at the first source, and a lean report explains no pass."""

    __slots__ = ("where", "unsure", "looked")

    def __init__(self) -> None:
        self.where: tuple[Any, ...] | None = None
        self.unsure: list[tuple[Any, ...]] = []
        self.looked: list[tuple[Any, ...]] = []


def _where(part: tuple[Any, ...], names: list[str]) -> str:
    kind = part[0]
    if kind == "output":
        _, p, path = part
        return f"{names[p]} (call {p + 1})" + (f" at `{path}`" if path else "")
    if kind == "text":
        return f"the text of {names[part[1]]} (call {part[1] + 1})"
    if kind == "context":
        return f"the context at `{part[1]}`"
    return {"user": "a user message before it", "listed": "the rule's listed values"}[kind]


def _unsure(part: tuple[Any, ...], names: list[str]) -> str:
    if part[0] == "output":
        _, p, why = part
        return f"the output of {names[p]} (call {p + 1}) {why}"
    return "a user message of unknown position holds it"


def _looked(part: tuple[Any, ...]) -> str:
    kind = part[0]
    if kind == "outputs":
        _, seen, text, path = part
        return f"{seen} successful earlier {text} output(s)" + (f" at `{path}`" if path else "")
    if kind == "user":
        return f"{part[1]} user message(s) before it"
    if kind == "context":
        return f"the context at `{part[1]}`"
    return "the rule's listed values"


def _search(
    value: str,
    i: int,
    sources: list[Compiled],
    found: Sources,
    norm: Normalizer,
    v: View,
) -> _Search:
    s = _Search()
    steps = v.index.steps
    step = steps[i]
    for spec, sel, listed, key in sources:
        if sel is not None and key is not None:
            every, _ = v.positions(sel)
            src = found.index(key, every, v.index.ok, steps)
            p = src.first.get(value)
            if p is not None and steps[p] < step:
                s.where = ("output", p, spec.path)
                return s
            for p, text in src.texts:
                if steps[p] >= step:
                    break  # in call order, steps never decrease
                if word_pattern(value).search(text):
                    s.where = ("text", p)
                    return s
            for p, why in src.unsure:
                if steps[p] >= step:
                    break
                s.unsure.append(("output", p, why))
            s.looked.append(("outputs", bisect_left(src.steps, step), sel.text, spec.path))
        elif spec.user:
            n = 0
            for at_, text in found.user:
                if at_ is not None and at_ > i:
                    continue
                n += 1
                if word_pattern(value).search(found.user_text(text, norm)):
                    if at_ is None:
                        s.unsure.append(("message",))
                        continue
                    s.where = ("user",)
                    return s
            s.looked.append(("user", n))
        elif spec.context is not None:
            if value in found.context_values(spec.context, norm):
                s.where = ("context", spec.context)
                return s
            s.looked.append(("context", spec.context))
        elif listed is not None:
            if value in listed:
                s.where = ("listed",)
                return s
            s.looked.append(("listed",))
    return s


def lineage(rule: LineageRule, checked: Selector, sources: list[Compiled], words: str, v: View) -> Finding:
    calls, _ = v.positions(checked)
    arg = compile_path(rule.argument)
    norm = normalizer(tuple(rule.normalize))
    found = v.index.lineage_sources()
    names = v.index.names
    args = v.index.args
    explain = v.explain
    steps = v.index.steps
    ok = v.index.ok
    # The output sources' indexes, once per evaluation: most values are found in one of them at once, and
    # only the others take the full search (text, messages, the context, the words of a message).
    quick = [
        (found.index(key, v.positions(sel)[0], ok, steps), key.path)
        for _, sel, _, key in sources
        if sel is not None and key is not None
    ]
    flaws: list[Flaw] = []
    unsure: list[str] = []
    derived: list[str] = []
    involved: list[int] = []
    for i in calls:
        value = arg.search(args[i])
        raw = [value] if type(value) is str else list(dict.fromkeys(leaves(value)))
        if not raw:
            continue  # this call does not carry the argument
        involved.append(i)
        step = steps[i]
        for text in raw:
            value = norm(text)
            hit = None
            for src, path in quick:
                p = src.first.get(value)
                if p is not None and steps[p] < step:
                    hit = ("output", p, path)
                    break
            if hit is not None:
                if explain:
                    derived.append(
                        f"{rule.argument} {_cut(text)!r} of {_at(v, i)} came from {_where(hit, names)}"
                    )
                continue
            s = _search(value, i, sources, found, norm, v)
            if s.where is not None:
                if explain:
                    derived.append(
                        f"{rule.argument} {_cut(text)!r} of {_at(v, i)} came from {_where(s.where, names)}"
                    )
                continue
            at_i = _at(v, i)
            shown = _cut(text)
            if s.unsure:
                unsure.append(
                    f"{rule.argument} {shown!r} of {at_i}: found in no readable source, but "
                    + "; ".join(_unsure(u, names) for u in s.unsure)
                )
                continue
            where = "; ".join(_looked(part) for part in s.looked)
            flaws.append(
                Flaw(
                    "missing_prerequisite",
                    i,
                    f"{rule.argument} of {checked.text} from one of: {words}",
                    f"{at_i}: {rule.argument} {shown!r} has no source",
                    f"{at_i} used {rule.argument} {shown!r}, which appears in none of: {where}.",
                    f"Take {rule.argument} from one of ({words}) before {at_i}: "
                    "a value the agent was never given may be invented, or another record's.",
                    (words, checked.text, i, f"{checked.text} acted on a {rule.argument} of unknown origin"),
                )
            )
    if not involved:
        return Finding("not_exercised", f"{checked.text} is never called with `{rule.argument}`.")
    if flaws:
        return Finding("failed", " ".join(f.explanation for f in flaws), involved, flaws)
    if unsure:
        return Finding("deferred", "Undetermined: " + " ".join(u + "." for u in unsure), involved)
    if not v.explain:
        return BARE_PASS
    return Finding("passed", "; ".join(derived) + ".", involved)
