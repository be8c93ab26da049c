"""Where a value could have come from in one trace: the sources a ``lineage`` rule looks in, read once.

A ``lineage`` rule (``seqjudge.rules.types.lineage``) asks, for each call it checks, whether an argument's
value appeared earlier in the trace: in a successful call's output (at a JMESPath into it), in the user's
messages, in the trace's context, or in a literal set. This module holds what every such rule of a check
shares: the outputs parsed once per trace (``Sources``, kept on the trace's index, whatever the number of
rules), the values found at one path of one tool's outputs, and the text of the user's messages.

Values are compared as text after the rule's normalisers: a string as it is, any other scalar as its
compact JSON (``5``, ``true``), so the id ``"5"`` and the number ``5`` are the same value here, as they
are to a person reading the trace. ``None`` is no value. A list or object is the values of its leaves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from seqjudge.trace import PlainTrace, Trace

__all__ = [
    "NORMALIZERS",
    "SourceKey",
    "SourceIndex",
    "Sources",
    "compile_path",
    "leaves",
    "normalizer",
    "sources_of",
]

# What a rule may declare in ``normalize:``; applied in this order, to the checked value and every source.
NORMALIZERS: dict[str, Callable[[str], str]] = {
    "trim": str.strip,  # surrounding white space
    "lowercase": str.casefold,  # case
    "strip_hash": lambda s: s[1:] if s.startswith("#") else s,  # "#W123" and "W123" are one id
}
# Nested values deeper than this are not looked into (check_trace_data bounds a stored trace at 100).
_MAX_DEPTH = 100
# An output longer than this is not parsed: the value is then undetermined in it, never assumed absent.
MAX_OUTPUT_CHARS = 1_000_000


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Key:
    """A path that is one plain name, read as a dict lookup (JMESPath's meaning of it, without its
    interpreter: most ``argument:`` paths are one name, read once per checked call)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def search(self, data: Any) -> Any:
        return data.get(self.name) if isinstance(data, dict) else None


@lru_cache(maxsize=512)
def compile_path(path: str) -> Any:
    """A JMESPath expression, compiled once per distinct text (``ValueError`` with the parser's words)."""
    if _NAME.fullmatch(path) and path not in ("true", "false", "null"):
        return _Key(path)
    import jmespath  # here: only rule files with lineage rules pay for its import
    from jmespath.exceptions import JMESPathError

    try:
        return jmespath.compile(path)
    except JMESPathError as exc:
        raise ValueError(f"{path!r} is not a valid JMESPath expression ({exc})") from None


class Normalizer:
    """A rule's normalisers as one function; ``names`` (in the table's order) key what it produced."""

    __slots__ = ("names", "_fns")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = tuple(n for n in NORMALIZERS if n in names)  # the table's order, whatever the rule's
        self._fns = [NORMALIZERS[n] for n in self.names]

    def __call__(self, text: str) -> str:
        for fn in self._fns:
            text = fn(text)
        return text


@lru_cache(maxsize=64)
def normalizer(names: tuple[str, ...]) -> Normalizer:
    return Normalizer(names)


def _scalar_text(value: Any) -> str | None:
    """A scalar as its JSON text (a string as it is); None for null, lists and objects."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return str(value)  # (json.dumps of an int, without its encoder)
    if value is None or isinstance(value, dict | list):
        return None
    return json.dumps(value)


def leaves(value: Any, depth: int = 0, keys: bool = False) -> Iterator[str]:
    """The texts of the scalar values in ``value`` (itself, or its leaves), None left out; with ``keys``,
    the keys of its objects too (an output that lists records by id, ``{"variants": {"953...": {...}}}``,
    holds those ids as keys)."""
    text = _scalar_text(value)
    if text is not None:
        yield text
    elif depth < _MAX_DEPTH:
        if isinstance(value, dict):
            for key, item in value.items():
                if keys:
                    yield key
                yield from leaves(item, depth + 1, keys)
        elif isinstance(value, list):
            for item in value:
                yield from leaves(item, depth + 1, keys)


# Outputs as read: decoded JSON, or one of these for text.
_TEXT = object()  # plain text, whole: a value is in it as a word or not at all
_CUT = object()  # text that is not all there: JSON that does not parse, or text that ends in a cut mark
_CUT_MARKS = ("…", "...", "[truncated]", "(truncated)")


def _parsed(output: Any) -> Any:
    """An output as data: JSON text decoded, anything else as it is; ``_TEXT`` or ``_CUT`` for text."""
    if not isinstance(output, str):
        return output
    text = output.strip()
    if len(output) > MAX_OUTPUT_CHARS or text.endswith(_CUT_MARKS):
        return _CUT
    if not text or text[0] not in "[{":
        return _TEXT  # a bare number or word is text too: searched for the value as a word
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _CUT  # it starts as JSON and does not parse: cut, or not JSON after all


class SourceKey:
    """What a source index is built for: an operand's selector, a path and the normalisers. Made once per
    rule source (``compile``), with its hash computed once: looked up for every checked value."""

    __slots__ = ("sel", "path", "norm", "_hash")

    def __init__(self, sel: Any, path: str | None, norm: Normalizer) -> None:
        self.sel, self.path, self.norm = sel, path, norm
        self._hash = hash((sel, path, norm.names))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, SourceKey)
            and (self.sel, self.path, self.norm.names) == (other.sel, other.path, other.norm.names)
        )


@dataclass(slots=True)
class SourceIndex:
    """One source (the successful calls of one operand, read at one path, under one set of normalisers)
    over a whole trace, so that a lookup is a dict access and a bisection, never a walk of the calls:
    ``first`` maps each value to the earliest call whose output holds it; ``texts`` are the calls whose
    output is text to search for a word; ``unsure`` the calls whose output could not be read, with why;
    ``steps`` the step of each successful source call, in order (to count those before a call)."""

    first: dict[str, int]
    texts: list[tuple[int, str]]
    unsure: list[tuple[int, str]]
    steps: list[int]


@dataclass(slots=True)
class Sources:
    """One trace's sources, parsed at their first use and shared by every lineage rule of the check."""

    calls: list[Any]  # the trace's calls: Call models, or a plain record's call objects (``plain``)
    plain: bool
    user: list[tuple[int | None, str]]  # (calls made before it, text) of each user message
    context: dict[str, Any]
    _parsed: dict[int, Any] = field(default_factory=dict)
    _user_text: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)
    _indexes: dict[Any, SourceIndex] = field(default_factory=dict)

    def output(self, i: int) -> Any:
        """Call ``i``'s output as given (read only for the calls a lineage rule looks at)."""
        call = self.calls[i]
        if self.plain:
            return call.get("output") if isinstance(call, dict) else None
        return call.output

    def parsed(self, i: int) -> Any:
        """Call ``i``'s output decoded (``_TEXT``/``_CUT`` for text), once per trace for every rule."""
        parsed = self._parsed
        if i in parsed:
            return parsed[i]
        data = parsed[i] = _parsed(self.output(i))
        return data

    def index(
        self,
        key: SourceKey,
        positions: list[int],
        ok: list[bool],
        steps: list[int],
    ) -> SourceIndex:
        """The ``SourceIndex`` of the calls at ``positions`` (sorted) read at ``key.path`` under
        ``key.norm``: built once per trace and key, however many rules and calls ask."""
        hit = self._indexes.get(key)
        if hit is not None:
            return hit
        found = self._indexes[key] = SourceIndex({}, [], [], [])
        self._fill(found, key, positions, ok, steps)
        return found

    def _fill(
        self,
        found: SourceIndex,
        key: SourceKey,
        positions: Iterable[int],
        ok: Sequence[bool] | Mapping[int, bool],
        steps: Sequence[int] | Mapping[int, int],
    ) -> None:
        """Add the calls at ``positions`` (in order, after those ``found`` holds) to ``found``, the index of
        ``key``: the successful ones (``ok``), each in its step (``steps``). One loop for a whole trace, not
        a call per source call: a million-call trace builds its index here."""
        path, norm = key.path, key.norm
        search = compile_path(path).search if path is not None else None
        plain = not norm.names  # no normaliser: values are their own keys
        first, texts, unsure, ok_steps = found.first, found.texts, found.unsure, found.steps
        for p in positions:
            if not ok[p]:
                continue  # a failed call's output is an error, never a source
            ok_steps.append(steps[p])
            data = self.parsed(p)
            if data is _TEXT or data is _CUT:
                raw = self.output(p)
                if path is None:
                    texts.append((p, norm(raw)))
                if data is _CUT or path is not None:
                    why = (
                        "is cut or not valid JSON"
                        if data is _CUT
                        else f"is text, so `{path}` cannot be read in it"
                    )
                    unsure.append((p, why))
                continue
            # With no path, "anywhere in the output": keys included. A path selects values (JMESPath's
            # keys(@) selects keys where that is what is meant).
            at = search(data) if search is not None else data
            if type(at) is str:  # the common case: one id at a path
                value = at if plain else norm(at)
                if value not in first:
                    first[value] = p
                continue
            for text in leaves(at, keys=search is None):
                value = text if plain else norm(text)
                if value not in first:
                    first[value] = p

    def added(self, i: int, name: str, ok: bool, args: dict[str, Any], step: int) -> None:
        """Call ``i`` was appended to the trace (a guard session's, ``TraceIndex.append``): each source
        index built so far takes it in, as one built afresh would have it."""
        if not ok:
            return
        for key, found in self._indexes.items():
            if key.sel.hit(name, ok, args):
                self._fill(found, key, (i,), {i: ok}, {i: step})

    def removed(self, i: int, name: str, ok: bool, args: dict[str, Any]) -> None:
        """Call ``i``, the last, is about to leave the trace (``TraceIndex.pop``): ``added`` undone."""
        self._parsed.pop(i, None)
        if not ok:
            return
        for key, found in self._indexes.items():
            if not key.sel.hit(name, ok, args):
                continue
            found.steps.pop()
            if found.texts and found.texts[-1][0] == i:
                found.texts.pop()
            if found.unsure and found.unsure[-1][0] == i:
                found.unsure.pop()
            if i in found.first.values():
                found.first = {value: p for value, p in found.first.items() if p != i}

    def user_text(self, text: str, norm: Normalizer) -> str:
        """A user message's text, normalised (once per message and normalisers)."""
        key = (text, norm.names)
        hit = self._user_text.get(key)
        if hit is None:
            hit = self._user_text[key] = norm(text)
        return hit

    def context_values(self, path: str, norm: Normalizer) -> frozenset[str]:
        return frozenset(norm(t) for t in leaves(compile_path(path).search(self.context)))


def _message_text(content: Any) -> str:
    """A message's words: its text, or the text blocks of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_message_text(b.get("text") if isinstance(b, dict) else b) for b in content]
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        return _message_text(content.get("text"))
    return ""


def sources_of(trace: Trace | PlainTrace) -> Sources:
    """The sources of one trace (nothing parsed yet)."""
    if isinstance(trace, PlainTrace):
        # A plain record has no messages; its calls are the decoded objects (outputs kept as they came).
        return Sources(trace.raw_calls or [], True, [], trace.context)
    user = [(m.at, _message_text(m.content)) for m in trace.messages if m.role == "user"]
    return Sources(trace.calls, False, user, trace.context)


@lru_cache(maxsize=4096)
def word_pattern(value: str) -> Any:
    """``value`` as a whole word: not inside a longer run of letters, digits or underscores."""
    return re.compile(r"(?<![\w])" + re.escape(value) + r"(?![\w])")
