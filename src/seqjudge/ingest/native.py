"""The native trace format: one trace object, a JSON list of traces, JSONL (one trace a line), a bare list of
calls, or a bare list of tool-name strings.

Speed matters here (a million calls, a hundred thousand traces): every line or document goes to pydantic-
core as raw bytes first (``Trace.model_validate_json``), which parses and validates in one pass. Only when
that fails is the text decoded with ``json`` - for the shorthands, and to name the line, column or JSON path
of a problem. For callers that only run the engine (``Options.plain``), a JSONL line (with pydantic-core's
``from_json``) or a whole document (with ``json``) is first decoded and, when it is plainly valid
(``ingest.plain``), handed over without models at all: for a million-call document that also keeps the
peak memory near ``json.load``'s, since its calls are kept as columns and the decoded call objects are
dropped once the columns hold them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic_core import from_json

from seqjudge.ingest.base import (
    NO,
    YES,
    Options,
    Record,
    Source,
    apply_error_pattern,
    kind_of,
    validation_error,
)
from seqjudge.ingest.plain import plain_trace
from seqjudge.trace import MAX_NESTING, PlainTrace, Trace, check_nesting, gc_paused

NAME = "native"
SIGNATURE = (
    "a native trace: an object with 'calls', a list of such objects, a bare list of calls (objects with "
    "'tool_name') or a bare list of tool names"
)

_TRACE_LIST = TypeAdapter(list[Trace], config=ConfigDict(defer_build=True))  # built on first use, as Trace
# Event types of other formats whose records also carry a 'tool_name' (Assay).
_FOREIGN_EVENTS = {"tool_call", "tool_result", "episode_start", "episode_end", "step"}


def _is_call(item: Any) -> bool:
    return isinstance(item, dict) and "tool_name" in item and item.get("type") not in _FOREIGN_EVENTS


def sniff(record: Any, options: Options | None = None) -> int:
    if isinstance(record, dict):
        return YES if "calls" in record else NO
    if isinstance(record, list):
        if not record:
            return YES
        head = record[0]
        native = isinstance(head, str) or _is_call(head) or (isinstance(head, dict) and "calls" in head)
        return YES if native else NO
    return NO


def fast_document(record: Record, options: Options) -> list[Trace] | list[PlainTrace] | None:
    """Validate a whole document as native trace(s) straight from its bytes; None when it is not one.

    The registry uses this before decoding a document for format detection, so a large native file is
    parsed once rather than twice. With ``options.plain``, a plainly valid document comes as PlainTrace(s).
    """
    head = record.raw.lstrip()[:1]
    if options.plain and head in (b"{", b"[") and not _NOT_PLAIN.search(record.raw):
        plain = _plain_document(record, options, head == b"{")
        if plain is not None:
            return plain
    try:
        with gc_paused():  # a large document builds millions of objects; see trace.gc_paused
            if head == b"{":
                traces = [Trace.model_validate_json(record.raw)]
                single = True
            elif head == b"[":
                traces = _TRACE_LIST.validate_json(record.raw)
                single = False
            else:
                return None
    except ValidationError:
        return None
    for index, trace in enumerate(traces):
        if trace.trace_id is None:
            trace.trace_id = record.default_id(None if single else index)
        check_outcomes(trace, record, "" if single else f"[{index}]")
        apply_error_pattern(trace, options.error_pattern)
    return traces


# Keys that only the model path reads (steps and times, messages): a document naming any is not plain, so it
# is not decoded twice. A mere mention (inside a string) only sends a plain document down the model path.
_NOT_PLAIN = re.compile(rb'"(?:timestamp|end_timestamp|step|messages)"')


def _plain_document(record: Record, options: Options, single: bool) -> list[PlainTrace] | None:
    """The document's traces as PlainTrace when every one is plainly valid (see ``_plain``), else None."""
    try:
        with gc_paused():  # a large document builds millions of objects; see trace.gc_paused
            value = json.loads(record.raw)
    except Exception:  # bad JSON and the like: the model path says what, as it always has
        return None
    items = [value] if single else value
    if type(items) is not list:
        return None
    traces: list[PlainTrace] = []
    for item in items:
        trace = plain_trace(item, options.error_pattern)
        if trace is None:
            return None
        traces.append(trace)
    del value, items  # the call objects: the columns hold what the engine reads
    for index, trace in enumerate(traces):
        if trace.trace_id is None:
            trace.trace_id = record.default_id(None if single else index)
    return traces


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace | PlainTrace]:
    """The traces of the records; with ``options.plain``, a plain JSONL record is a PlainTrace instead."""
    for record in records:
        if record.line is None:
            yield from _document(record, options)
            continue
        yield parse_line(record, options)


_UNDECODABLE: Any = object()  # a line pydantic-core's parser refused


def parse_line(record: Record, options: Options) -> Trace | PlainTrace:
    """The trace of one JSONL record (``line`` set); with ``options.plain``, a PlainTrace when it is plainly
    valid (``plain_trace``), else the model's ``Trace``.

    For a PlainTrace the line is decoded by pydantic-core's JSON parser (``from_json``), the one the model
    path validates with, so both read the same values from it (and in about two thirds of json.loads's
    time); when it fails or the record is not plain, the model path runs exactly as without this step (and
    raises its own error). (One function, not two: `check` calls it once a trace.)
    """
    if options.plain:
        undecoded = record.is_undecoded
        value: Any
        if undecoded:
            try:
                value = from_json(record.raw)
            except Exception:  # bad JSON, bad UTF-8, too deep: the model path says which, as it always has
                value = _UNDECODABLE
        else:
            value = record.value()  # the reader decoded the first line already
        if value is not _UNDECODABLE:
            plain = plain_trace(value, options.error_pattern)
            if plain is not None:
                if _may_nest_deep(record.raw):
                    check_nesting(value, record.source.name, record.where)
                if plain.trace_id is None:
                    plain.trace_id = record.default_id()
                return plain
            if undecoded:
                record.set_value(value)  # spare the model path's fallback a second decode
    try:
        trace = Trace.model_validate_json(record.raw)
    except ValidationError:
        trace = _from_value(record, record.value(), "", record.default_id(), options)
    else:
        if trace.trace_id is None:
            trace.trace_id = record.default_id()
    if _may_nest_deep(record.raw):
        check_nesting(trace, record.source.name, record.where)
    return apply_error_pattern(check_outcomes(trace, record, ""), options.error_pattern)


def _may_nest_deep(raw: bytes) -> bool:
    """False when the record has too few brackets to nest past MAX_NESTING: most skip the walk."""
    return raw.count(b"[") + raw.count(b"{") > MAX_NESTING


def _document(record: Record, options: Options) -> Iterator[Trace | PlainTrace]:
    traces = fast_document(record, options) if record.is_undecoded else None
    if traces is not None:
        for trace in traces:
            if type(trace) is Trace:
                check_nesting(trace, record.source.name)
            yield trace
        return
    value = record.value()
    if isinstance(value, list) and value and isinstance(value[0], dict) and "calls" in value[0]:
        for index, item in enumerate(value):
            if not isinstance(item, dict) or "calls" not in item:
                raise record.error(
                    f"this item is {kind_of(item)}, but item 0 is a trace (an object with 'calls')",
                    f"[{index}]",
                    hint="A JSON list of traces holds trace objects only",
                )
            trace = _from_value(record, item, f"[{index}]", record.default_id(index), options)
            check_nesting(trace, record.source.name, f"[{index}]")
            yield apply_error_pattern(check_outcomes(trace, record, f"[{index}]"), options.error_pattern)
        return
    if value == []:
        return  # an empty list of traces
    trace = _from_value(record, value, "", record.default_id(), options)
    check_nesting(trace, record.source.name)
    yield apply_error_pattern(check_outcomes(trace, record, ""), options.error_pattern)


def check_outcomes(trace: Trace, record: Record, prefix: str) -> Trace:
    """``trace``, unless a call says both ``"status": "ok"`` and holds an ``error``: then an InputError naming
    the call's JSON path. Which of the two is true cannot be told, and taking "ok" would let a call that may
    have failed satisfy a prerequisite; taking "error" would hide a mistake in the exporter. (An error with
    no status is a failure: ``Trace`` reads it so.) The error's text is not quoted: it may hold a secret."""
    for call in trace.calls:
        if call.error is not None and call.status == "ok":
            break
    else:
        return trace
    raise record.error(
        'this call has "status": "ok" and also an error, so whether it succeeded cannot be told',
        _contradiction_path(record.value(), prefix),
        hint='If the call failed, write "status": "error" (or leave status out: an error alone means the '
        "call failed); if it succeeded, drop the error or make it null",
    )


def _contradiction_path(value: Any, prefix: str) -> str | None:
    """The JSON path of the first call of ``value`` (at ``prefix``, "" or "[i]") with status ok and an error:
    the input's, since ``Trace`` may have reordered its calls by time."""
    if prefix:
        value = value[int(prefix[1:-1])]
    calls, base = (value.get("calls"), f"{prefix}.calls") if isinstance(value, dict) else (value, prefix)
    for index, call in enumerate(calls if isinstance(calls, list) else []):
        if isinstance(call, dict) and call.get("status") == "ok" and call.get("error") is not None:
            return f"{base}[{index}]"
    return prefix or None  # pragma: no cover - the trace was validated from this very value


def _from_value(record: Record, value: Any, prefix: str, default_id: str, options: Options) -> Trace:
    """Validate decoded JSON as one trace (object) or one shorthand trace (list), naming a problem's path."""
    if isinstance(value, list):
        trace = _shorthand(record, value, prefix)
    elif isinstance(value, dict):
        if "calls" not in value:
            raise record.error(
                f"this record is not a native trace: it is {kind_of(value)}, with no 'calls'"
                + options.describe(value),
                prefix or None,
                hint="A trace is an object with a 'calls' list; a file holds traces of one format (the "
                "format is chosen from its records, or with --trace-format)",
            )
        try:
            trace = Trace.model_validate(value)
        except ValidationError as exc:
            raise validation_error(exc, record, prefix) from None
    else:
        raise record.error(
            f"this record is {kind_of(value)}, not a trace",
            prefix or None,
            hint="A trace is an object with a 'calls' list (or a bare list of calls or tool names)",
        )
    if trace.trace_id is None:
        trace.trace_id = default_id
    return trace


def _shorthand(record: Record, items: list[Any], prefix: str) -> Trace:
    calls: list[Any] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            if not item:
                raise record.error(
                    "the tool name is empty",
                    f"{prefix}[{index}]",
                    hint="A bare list of tool names holds non-empty strings",
                )
            calls.append({"tool_name": item})
        elif isinstance(item, dict):
            calls.append(item)
        else:
            raise record.error(
                f"this item is {kind_of(item)}; a bare list holds calls (objects with tool_name) or "
                "tool names",
                f"{prefix}[{index}]",
                hint='Write each call as {"tool_name": ...} or as the tool\'s name',
            )
    try:
        return Trace.model_validate({"calls": calls})
    except ValidationError as exc:
        raise validation_error(exc, record, prefix, drop=1) from None
