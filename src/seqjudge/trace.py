"""The native trace: an ordered list of tool calls, optional messages, context and metadata.

Positions are 0-based indices into ``Trace.calls`` in execution order. Steps group calls that ran in
parallel: calls in one step never precede each other, so parallel calls that satisfy a rule are not
penalised.
"""

from __future__ import annotations

import gc
import math
import re
from collections.abc import Iterator
from datetime import datetime
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from seqjudge.errors import InputError


def parse_time(value: Any) -> float:
    """ISO 8601 text or epoch seconds (number or numeric text) -> epoch seconds."""
    if isinstance(value, bool):
        raise ValueError("a timestamp must be ISO 8601 text or epoch seconds, not a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError("a timestamp must be finite")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{value!r} is neither ISO 8601 (2024-05-20T10:00:00Z) nor epoch seconds"
            ) from None
        if moment.tzinfo is None:
            # Naive times are taken as UTC so that one trace never mixes two clocks.
            from datetime import UTC

            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    raise ValueError("a timestamp must be ISO 8601 text or epoch seconds")


# The models' validators are built on first use (defer_build), not at import: `seqjudge check` of plain
# native traces reads them as PlainTrace and never validates one, and building the three cost a tenth of
# checking a small trace from a fresh process (issue 17, point 15).
_CONFIG = ConfigDict(extra="allow", defer_build=True)


class Call(BaseModel):
    """One tool call. Unknown keys are kept (traces come from many sources) and echoed back. ``status``
    defaults to ``"ok"``, or to ``"error"`` when the call has an ``error`` (set by ``Trace``)."""

    model_config = _CONFIG

    tool_name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "error"] = "ok"
    timestamp: float | int | str | None = None
    end_timestamp: float | int | str | None = None
    step: int | None = None
    output: Any = None
    error: Any = None
    id: str | None = None

    @field_validator("timestamp", "end_timestamp")
    @classmethod
    def _check_time(cls, value: Any) -> Any:
        if value is not None:
            parse_time(value)
        return value

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Message(BaseModel):
    """A user or assistant message; context for the judge, never a call. ``at`` = calls made before it."""

    model_config = _CONFIG

    role: str
    content: Any = None
    at: int | None = Field(default=None, ge=0)


class Trace(BaseModel):
    model_config = _CONFIG

    trace_id: str | None = None
    calls: list[Call]
    messages: list[Message] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _order_calls(self) -> Trace:
        calls = self.calls
        for call in calls:
            # An error with no status: the call failed (a default "ok" would let it satisfy a prerequisite).
            # Only where the input left status out: a stored trace always has one, and reads back as it was.
            if call.error is not None and call.status == "ok" and "status" not in call.model_fields_set:
                call.status = "error"
        if calls and all(c.timestamp is not None for c in calls):
            keyed = [(parse_time(c.timestamp), i) for i, c in enumerate(calls)]
            if any(keyed[i][0] > keyed[i + 1][0] for i in range(len(keyed) - 1)):
                # Stable: calls with equal timestamps keep their list order.
                self.calls = [calls[i] for _, i in sorted(keyed)]
        _ = self.steps  # validate step labels now, where the error can still name the input
        return self

    @cached_property
    def steps(self) -> list[int]:
        """Step ordinal of every call (non-decreasing), computed once."""
        return assign_steps(self.calls)


def timeline(trace: Trace) -> list[tuple[str, int, Any]]:
    """Calls and messages in the order they happened: a message with ``at = k`` came after k calls (one
    without ``at``, or past the last call, comes last). Items are ``("call", i, call)`` and
    ``("message", k, message)``; the judge's prompt and `seqjudge review show` both read the trace so."""
    n = len(trace.calls)
    placed: dict[int, list[Any]] = {}
    for m in trace.messages:
        placed.setdefault(n if m.at is None or m.at > n else m.at, []).append(m)
    out: list[tuple[str, int, Any]] = []
    for i, call in enumerate(trace.calls):
        out.extend(("message", i, m) for m in placed.get(i, []))
        out.append(("call", i, call))
    out.extend(("message", n, m) for m in placed.get(n, []))
    return out


def assign_steps(calls: list[Call]) -> list[int]:
    """Group calls into steps.

    Explicit ``step`` labels win; calls sharing a label ran in parallel and must be adjacent. Otherwise,
    when every call has ``timestamp`` and ``end_timestamp``, a call that starts before the running group
    ended joins it. Otherwise every call is its own step.
    """
    n = len(calls)
    if any(c.step is not None for c in calls):
        steps: list[int] = []
        seen: dict[int, int] = {}
        ordinal = -1
        previous: int | None = None
        for i, c in enumerate(calls):
            if c.step is None or c.step != previous:
                if c.step is not None and c.step in seen:
                    raise ValueError(
                        f"calls[{i}] has step {c.step}, but step {c.step} ended at calls[{seen[c.step]}]: "
                        "calls of one step must be adjacent in execution order"
                    )
                ordinal += 1
            if c.step is not None:
                seen[c.step] = i
            previous = c.step
            steps.append(ordinal)
        return steps
    if n and all(c.timestamp is not None and c.end_timestamp is not None for c in calls):
        steps = []
        ordinal = -1
        group_end = -math.inf
        for c in calls:
            start = parse_time(c.timestamp)
            end = parse_time(c.end_timestamp)
            if start < group_end:
                group_end = max(group_end, end)
            else:
                ordinal += 1
                group_end = end
            steps.append(ordinal)
        return steps
    return list(range(n))


_LARGE_YOUNG = 200_000  # young objects past which a pause's end hands them to the oldest generation


class gc_paused:  # noqa: N801 - used as a function: `with gc_paused():`
    """Pause the cyclic garbage collector while building traces.

    Building a million calls allocates millions of containers, and the collector's repeated full passes
    over a growing heap cost more than the parse itself (measured: 1.8 s -> 0.7 s for json.loads of a
    1M-call trace). Traces are trees, so reference counting frees them without the collector.

    A class rather than a generator-based context manager: the engine enters it once per trace, and on
    small traces the generator's set-up was a measurable share of the check.
    """

    __slots__ = ("was_enabled",)

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            if gc.get_count()[0] > _LARGE_YOUNG:
                # Millions of new containers (a huge trace) would be scanned by the next young collection,
                # again by the middle one, at a cost near the parse's: hand them to the oldest generation
                # instead (freeze, then unfreeze, moves every tracked object there in O(1)), which only a
                # full collection scans. They are trees, freed by reference counting when dropped.
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class PlainTrace:
    """A JSONL record already known to be a plain native trace, held as the columns the engine reads.

    ``seqjudge.ingest.plain`` builds one only for a record that ``Trace`` would accept with every value as
    given (no timestamps, steps or messages), so checking it gives exactly the report of the validated
    ``Trace``: building a pydantic model per call cost more than checking the record. Only the engine reads
    these (``seqjudge check`` in its JSON formats); ``load_traces`` always yields ``Trace``.
    """

    __slots__ = ("trace_id", "context", "names", "ok", "args", "metadata", "raw_calls")

    def __init__(
        self,
        trace_id: str | None,
        context: dict[str, Any],
        names: list[str],
        ok: list[bool],
        args: list[dict[str, Any]],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.context = context
        self.metadata = metadata if metadata is not None else {}  # read by `when: {metadata.x: ...}`
        self.names = names
        self.ok = ok
        self.args = args
        # The record's calls as decoded, for the rules that read outputs (lineage); nothing copied.
        self.raw_calls: list[Any] | None = None

    @property
    def steps(self) -> list[int]:
        return list(range(len(self.names)))  # no step labels or timestamps: every call is its own step


# -- what a trace may hold to be judged and stored -------------------------------------------------------
# The engine reads a trace however deep its arguments are nested and whatever its strings hold, but the
# judge's prompt, the store (SQLite wants UTF-8) and every JSON writer do not: pydantic stops serialising at
# 255 levels, Python's recursion limit ends a deeper walk, and a lone surrogate ("\udcff", valid JSON) has
# no UTF-8 encoding. A trace is checked against these limits before it is judged, stored or converted, so
# one bad trace ends in a message naming it, never in a traceback halfway through a run.
MAX_NESTING = 100  # levels of lists and objects inside one value (arguments, output, context, ...)
# The one message for a value nested too deep, whichever path meets it: this bound on a trace's values, or
# Python's recursion limit (far above it) while a record is decoded or an importer walks it.
TOO_DEEP = f"a value is nested more than {MAX_NESTING} levels deep"
TOO_DEEP_HINT = "Flatten it, or store the deep part as a JSON string"
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_trace_data(trace: Trace, source: str | None = None) -> None:
    """Raise ``InputError`` when a value of ``trace`` nests deeper than ``MAX_NESTING`` levels or a string
    (or key) holds a lone surrogate, naming the trace and the JSON path of the first such value."""
    if _clean_trace(trace):
        return
    label = f"trace {trace.trace_id!r}" if trace.trace_id is not None else "a trace without trace_id"
    for path, value in _trace_values(trace):
        found = _first_problem(value, path)
        if found is not None:
            where, problem, hint = found
            raise InputError(f"{label}: {problem}", source=source, where=where, hint=hint)


def check_nesting(trace: Trace | dict[str, Any], source: str | None = None, where: str | None = None) -> None:
    """Raise ``InputError`` when a value of ``trace`` (a Trace, or the decoded record of a PlainTrace) nests
    deeper than ``MAX_NESTING`` levels, naming the record (``where``) and the value's JSON path. Every
    importer's traces pass this as they are read, in every format of `check` alike (its outputs and the
    store walk values recursively); only ``check_trace_data`` also refuses lone surrogates."""
    if isinstance(trace, Trace):
        values, trace_id = _trace_values(trace), trace.trace_id
    else:
        values, trace_id = _record_values(trace), trace.get("trace_id")
    for path, value in values:
        kind = type(value)
        if (kind is dict or kind is list) and _too_deep(value, 0):
            found = _first_problem(value, path, surrogates=False)
            assert found is not None  # the same walk, with paths
            at, problem, hint = found
            label = f"trace {trace_id!r}" if trace_id is not None else "a trace without trace_id"
            place = f"{where}, {at}" if where and at else where or at
            raise InputError(f"{label}: {problem}", source=source, where=place, hint=hint)


def _too_deep(value: dict[Any, Any] | list[Any], depth: int) -> bool:
    # Recursive, but never past MAX_NESTING frames, as _clean.
    if depth >= MAX_NESTING:
        return True
    for child in value.values() if type(value) is dict else value:
        kind = type(child)
        if (kind is dict or kind is list) and _too_deep(child, depth + 1):
            return True
    return False


def _clean_trace(trace: Trace) -> bool:
    """The fast pass: True when nothing in the trace is too deep or holds a lone surrogate. A run checks
    every call of a million-call trace, so this builds no paths (``_first_problem`` does, on failure)."""
    if not (_clean(trace.trace_id, 0) and _clean(trace.context, 0) and _clean(trace.metadata, 0)):
        return False
    if trace.__pydantic_extra__ and not _clean(trace.__pydantic_extra__, 0):
        return False
    for call in trace.calls:
        name = call.tool_name
        if not name.isascii() and _SURROGATE.search(name):
            return False
        if not _clean(call.arguments, 0):
            return False
        if call.output is not None and not _clean(call.output, 0):
            return False
        if call.error is not None and not _clean(call.error, 0):
            return False
        if type(call.id) is str and not _clean(call.id, 0):
            return False
        if call.__pydantic_extra__ and not _clean(call.__pydantic_extra__, 0):
            return False
    for message in trace.messages:
        if not _clean(message.role, 0) or not _clean(message.content, 0):
            return False
        if message.__pydantic_extra__ and not _clean(message.__pydantic_extra__, 0):
            return False
    return True


def _clean(value: Any, depth: int) -> bool:
    # Recursive, but never past MAX_NESTING frames: deeper is already the answer.
    kind = type(value)
    if kind is str:
        return value.isascii() or not _SURROGATE.search(value)
    if kind is dict:
        if depth >= MAX_NESTING:
            return False
        for key, child in value.items():
            if type(key) is str and not key.isascii() and _SURROGATE.search(key):
                return False
            ckind = type(child)
            if ckind is str:
                if not child.isascii() and _SURROGATE.search(child):
                    return False
            elif (ckind is dict or ckind is list) and not _clean(child, depth + 1):
                return False
        return True
    if kind is list:
        if depth >= MAX_NESTING:
            return False
        return all(_clean(child, depth + 1) for child in value)
    return True


def _trace_values(trace: Trace) -> Iterator[tuple[str, Any]]:
    yield "trace_id", trace.trace_id
    yield "context", trace.context
    yield "metadata", trace.metadata
    if trace.__pydantic_extra__:
        yield "", trace.__pydantic_extra__
    for i, call in enumerate(trace.calls):
        yield f"calls[{i}].tool_name", call.tool_name
        yield f"calls[{i}].arguments", call.arguments
        if call.output is not None:
            yield f"calls[{i}].output", call.output
        if call.error is not None:
            yield f"calls[{i}].error", call.error
        if type(call.id) is str or type(call.timestamp) is str or type(call.end_timestamp) is str:
            yield f"calls[{i}]", {"id": call.id, "timestamp": call.timestamp, "end": call.end_timestamp}
        if call.__pydantic_extra__:
            yield f"calls[{i}]", call.__pydantic_extra__
    for i, message in enumerate(trace.messages):
        yield f"messages[{i}]", {"role": message.role, "content": message.content}
        if message.__pydantic_extra__:
            yield f"messages[{i}]", message.__pydantic_extra__


def _record_values(record: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The values of a plain native record (``ingest.plain``: known keys, calls that are objects)."""
    for key, value in record.items():
        if key != "calls":
            yield key, value
    for i, call in enumerate(record["calls"]):
        for key, value in call.items():
            yield f"calls[{i}].{key}", value


def _first_problem(value: Any, path: str, *, surrogates: bool = True) -> tuple[str, str, str] | None:
    """(JSON path, problem, hint) of the first value too deep or (``surrogates``) holding a lone surrogate;
    None if none."""
    kind = type(value)
    if kind is str:
        bad = surrogates and not value.isascii() and _SURROGATE.search(value)
        return _surrogate_at(path) if bad else None
    if kind is not dict and kind is not list:
        return None
    # Iterative, depth-first: a recursive walk would itself hit the recursion limit it guards against.
    stack: list[tuple[Any, str, int]] = [(value, path, 1)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_NESTING:
            shown = where if len(where) <= 80 else where[:60] + f"... ({depth} levels down)"
            return shown, TOO_DEEP, TOO_DEEP_HINT
        children = item.items() if type(item) is dict else enumerate(item)
        for key, child in children:
            if surrogates and type(key) is str and not key.isascii() and _SURROGATE.search(key):
                return _surrogate_at(f"{where}.{key.encode('utf-8', 'backslashreplace').decode()}")
            sub = (f"{where}.{key}" if where else str(key)) if type(key) is str else f"{where}[{key}]"
            ckind = type(child)
            if ckind is str:
                if surrogates and not child.isascii() and _SURROGATE.search(child):
                    return _surrogate_at(sub)
            elif ckind is dict or ckind is list:
                stack.append((child, sub, depth + 1))
    return None


def _surrogate_at(where: str) -> tuple[str, str, str]:
    return (
        where.encode("utf-8", "backslashreplace").decode(),
        "a string holds a lone surrogate (such as \\udcff), which has no UTF-8 encoding and cannot be stored "
        "or sent to a model",
        "write the text as valid UTF-8 (a lone surrogate is often a byte that was not decoded: replace it "
        "with U+FFFD or decode the source with its real encoding)",
    )
