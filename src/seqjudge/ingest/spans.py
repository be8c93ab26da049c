"""Reading OpenTelemetry spans, whatever convention marks their tool calls: OTLP/JSON exports
(``resourceSpans[].scopeSpans[].spans[]``), flat span objects (one a line, or a list), as the OTLP exporter,
the Python ``ConsoleSpanExporter`` and most collectors write them.

A *convention* (``otel`` for the GenAI semantic conventions, ``openinference``, ``openllmetry``,
``vercel_ai``) says which spans are agent activity and which of those are tool calls, with the tool's name,
arguments, result and call id. Every span is offered to the conventions in order; the first that marks it
reads it. Calls carry their span's start and end times (epoch seconds), so the native trace orders them by
start time and overlapping calls share a step; a failed call is a span with status ERROR (OTLP code 2).

One trace per ``traceId``. Results never depend on the order spans arrive in: a trace is built only when the
input has ended (spans of one trace may come in any order, in any record), and its calls are sorted by (start,
end, span id). Until then the calls are held (``holding.Held``): in memory up to an estimated 8 MB, past that
pickled to a temporary file, so memory grows only by a small per-trace entry however large the export; records
are never kept.

A trace id whose spans no convention marks (a plain HTTP request in the same export) is not an agent run: it
yields no trace and its spans are counted as skipped. An agent trace with no tool span yields a trace with no
calls - unless its model spans asked for tool calls, which is an error (fail closed; ``--allow-empty``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from seqjudge.ingest.base import (
    MAYBE,
    NO,
    YES,
    Options,
    Record,
    Source,
    decode_arguments,
    kind_of,
    no_calls_error,
    text_of,
    validation_error,
)
from seqjudge.ingest.holding import Held
from seqjudge.trace import Trace, parse_time

_ERROR_CODES = {2, "2", "STATUS_CODE_ERROR", "ERROR", "StatusCode.ERROR"}
_EXPORT_KEYS = ("resourceSpans", "resource_spans")
NOT_AGENT = "spans no agent convention marks (HTTP, database, ...; their traces are not agent runs)"
NOT_TOOL = "agent spans that are not tool calls (model, agent, chain spans)"


@dataclass(slots=True)
class ToolSpan:
    """What a convention reads from a tool span. ``arguments``/``result`` as recorded (JSON text or value)."""

    name: Any
    arguments: Any = None
    result: Any = None
    call_id: Any = None


class Convention(Protocol):
    NAME: str
    SIGNATURE: str

    def marks(self, keys: Iterable[str], span_name: Any) -> bool:
        """Whether a span with these attribute keys (and name) belongs to this convention."""
        ...

    def tool(self, span: dict[str, Any], attributes: dict[str, Any]) -> ToolSpan | None:
        """The tool call a marked span records, or None when it is not a tool span."""
        ...


# --- detection --------------------------------------------------------------------------------------------


class SpanFormat:
    """A registry entry for one convention: detected by its marks, reading spans of every convention."""

    def __init__(self, own: Convention, conventions: Sequence[Convention]) -> None:
        self.NAME = own.NAME
        self.SIGNATURE = own.SIGNATURE
        self.own = own
        # Its own convention first, so a span two conventions mark is read the way the user asked for.
        self.conventions = (own, *(c for c in conventions if c is not own))

    def sniff(self, record: Any, options: Options | None = None) -> int:
        return level(record, self.own)

    def parse(self, records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
        return read(records, source, options, self.conventions)


def level(record: Any, own: Convention) -> int:
    """YES when a span of the record is ``own``'s, MAYBE for other spans (an export batch holding only HTTP
    spans, or another convention's: one reader reads them all), NO when the record holds no spans."""
    found = False
    for span, _ in _all_spans(record):
        if span is None:
            return NO
        found = True
        keys = _keys(span.get("attributes"))
        if own.marks(keys, span.get("name")):
            return YES
    return MAYBE if found else NO


def _all_spans(record: Any) -> Iterator[tuple[dict[str, Any] | None, Any]]:
    """Every span of a decoded record, without errors: (None, item) for an item that is not a span."""
    items = record if isinstance(record, list) else [record]
    for item in items:
        if isinstance(item, dict) and any(k in item for k in _EXPORT_KEYS):
            key = "resourceSpans" if "resourceSpans" in item else "resource_spans"
            for rs in item.get(key) or []:
                if not isinstance(rs, dict):
                    yield None, rs
                    continue
                scopes = rs.get("scopeSpans", rs.get("scope_spans", rs.get("instrumentationLibrarySpans")))
                for scope in scopes if isinstance(scopes, list) else []:
                    spans = scope.get("spans", []) if isinstance(scope, dict) else []
                    for span in spans if isinstance(spans, list) else []:
                        yield (span if isinstance(span, dict) else None), span
        elif looks_like_span(item):
            yield item, item
        else:
            yield None, item


def looks_like_span(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    context = item.get("context")
    return "spanId" in item or "span_id" in item or (isinstance(context, dict) and "span_id" in context)


def _keys(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        return value.keys()
    if isinstance(value, list):
        return [str(item.get("key")) for item in value if isinstance(item, dict)]
    return ()


# --- reading ----------------------------------------------------------------------------------------------


@dataclass
class _Open:
    """A trace whose spans are still arriving. Its calls are held apart (``holding.Held``), each as
    [start, end, span id, line, path, call]: the order they are given in, whatever the input's, where each
    was read (for messages), and the native call."""

    calls: int = 0
    resource: dict[str, Any] = field(default_factory=dict)
    agent: bool = False
    activity: int = 0  # model spans that asked for tool calls
    first_line: int | None = None
    first_path: str = ""


def read(
    records: Iterable[Record], source: Source, options: Options, conventions: Sequence[Convention]
) -> Iterator[Trace]:
    traces: dict[str, _Open] = {}
    held = Held()
    try:
        yield from _read(records, source, options, conventions, traces, held)
    finally:
        held.close()


def _read(
    records: Iterable[Record],
    source: Source,
    options: Options,
    conventions: Sequence[Convention],
    traces: dict[str, _Open],
    held: Held,
) -> Iterator[Trace]:
    for record in records:
        for path, span, resource in _spans(record):
            trace_id = _first(span, "traceId", "trace_id") or _context(span, "trace_id")
            if not trace_id:
                raise record.error(
                    "the span has no trace id",
                    path or None,
                    hint="Every OTLP span carries 'traceId' (hex); export the spans unchanged",
                )
            entry = traces.get(str(trace_id))
            if entry is None:
                entry = traces[str(trace_id)] = _Open(first_line=record.line, first_path=path)
            call = _add_span(entry, span, resource, record, path, options, conventions)
            if call is not None:
                entry.calls += 1
                held.add(str(trace_id), call, _size(call))
    for trace_id, entry in traces.items():
        if entry.agent:
            yield _build(trace_id, entry, held.take(trace_id), source, options)


def _spans(record: Record) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    value = record.value()
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        prefix = f"[{i}]" if isinstance(value, list) else ""
        if isinstance(item, dict) and any(k in item for k in _EXPORT_KEYS):
            yield from _export(record, item, prefix)
        elif looks_like_span(item):
            yield prefix, item, {}
        else:
            raise record.error(
                f"this is {kind_of(item)}, not a span or an OTLP export",
                prefix or None,
                hint="An OTLP/JSON export has 'resourceSpans'; a span has 'traceId', 'spanId', 'name' and "
                "times",
            )


def _export(
    record: Record, export: dict[str, Any], prefix: str
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    key = "resourceSpans" if "resourceSpans" in export else "resource_spans"
    for i, rs in enumerate(_list(record, export.get(key), f"{prefix}.{key}".lstrip("."))):
        rs_path = f"{prefix}.{key}[{i}]".lstrip(".")
        if not isinstance(rs, dict):
            raise record.error(f"this resource span is {kind_of(rs)}", rs_path)
        resource = attributes_of((rs.get("resource") or {}).get("attributes"))
        scopes_key = next(
            (k for k in ("scopeSpans", "scope_spans", "instrumentationLibrarySpans") if k in rs), "scopeSpans"
        )
        for j, scope in enumerate(_list(record, rs.get(scopes_key, []), f"{rs_path}.{scopes_key}")):
            scope_path = f"{rs_path}.{scopes_key}[{j}]"
            spans = scope.get("spans", []) if isinstance(scope, dict) else scope
            for k, span in enumerate(_list(record, spans, f"{scope_path}.spans")):
                if not isinstance(span, dict):
                    raise record.error(f"this span is {kind_of(span)}", f"{scope_path}.spans[{k}]")
                yield f"{scope_path}.spans[{k}]", span, resource


def _list(record: Record, value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise record.error(
            f"{path.rsplit('.', 1)[-1]} is {kind_of(value)}, not a list",
            path,
            hint="See the OTLP/JSON encoding of ExportTraceServiceRequest",
        )
    return value


def _add_span(
    entry: _Open,
    span: dict[str, Any],
    resource: dict[str, Any],
    record: Record,
    path: str,
    options: Options,
    conventions: Sequence[Convention],
) -> list[Any] | None:
    """The tool call a span records, as held (see _Open); None for any other span."""
    attributes = attributes_of(span.get("attributes"))
    span_name = span.get("name")
    # Conventions share spans (OpenLLMetry copies traceloop.* onto GenAI spans): the first that reads a tool.
    tool = convention = None
    marked = False
    keys = attributes.keys()
    for candidate in conventions:
        if candidate.marks(keys, span_name):
            marked = True
            tool = candidate.tool(span, attributes)
            if tool is not None:
                convention = candidate
                break
    if not marked:
        options.stats.skip(NOT_AGENT)
        return None
    entry.agent = True
    if tool is None or convention is None:
        options.stats.skip(NOT_TOOL)
        if any("tool_call" in k or "toolCall" in k for k in attributes):
            entry.activity += 1
        return None
    if not entry.resource and resource:
        entry.resource = resource
    if not isinstance(tool.name, str) or not tool.name:
        raise record.error(
            f"this {convention.NAME} tool span names no tool",
            path or None,
            hint="Tool spans carry the tool's name (gen_ai.tool.name, tool.name, traceloop.entity.name or "
            "ai.toolCall.name); export the spans unchanged",
        )
    start = _time(record, path, span, "startTimeUnixNano", "start_time_unix_nano", "start_time")
    if start is None:
        raise record.error(
            f"the tool span for {tool.name!r} has no start time",
            path or None,
            hint="Calls are ordered by their spans' startTimeUnixNano; export the spans unchanged",
        )
    end = _time(record, path, span, "endTimeUnixNano", "end_time_unix_nano", "end_time")
    span_id = str(_first(span, "spanId", "span_id") or _context(span, "span_id") or "")
    arguments, raw = decode_arguments(tool.arguments)
    call: dict[str, Any] = {
        "tool_name": tool.name,
        "arguments": arguments,
        "timestamp": start,
        "id": str(tool.call_id or span_id),
    }
    if end is not None:
        call["end_timestamp"] = end
    if raw is not None:
        call["raw_arguments"] = raw
    if tool.result is not None:
        call["output"] = tool.result
    error = _span_error(span, attributes)
    pattern = options.error_pattern
    if (
        error is None
        and tool.result is not None
        and pattern is not None
        and pattern.search(text_of(tool.result))
    ):
        error = text_of(tool.result)
    if error is not None:
        call["status"] = "error"
        call["error"] = error
    return [start, end if end is not None else start, span_id, record.line, path, call]


def _size(held: list[Any]) -> int:
    """A rough size of a held call, without serializing it: a fixed overhead plus its output text."""
    output = held[5].get("output")
    return 500 + (len(output) if isinstance(output, str) else 0)


def _span_error(span: dict[str, Any], attributes: dict[str, Any]) -> str | None:
    status = span.get("status")
    if not isinstance(status, dict):
        return None
    code = status.get("code", status.get("status_code"))
    if code not in _ERROR_CODES:
        return None
    for event in span.get("events") or []:
        if isinstance(event, dict) and event.get("name") == "exception":
            message = attributes_of(event.get("attributes")).get("exception.message")
            if message:
                return str(message)
    return str(status.get("message") or status.get("description") or attributes.get("error.type") or "ERROR")


def _build(trace_id: str, entry: _Open, calls: list[list[Any]], source: Source, options: Options) -> Trace:
    calls.sort(key=lambda c: (c[0], c[1], c[2]))  # start, end, span id
    where = Record(source, entry.first_line, b"")
    if not calls and entry.activity:
        activity = f"{entry.activity} model span(s) with tool-call attributes"
        if not options.allow_empty:
            raise no_calls_error(where, entry.first_path, f"trace {trace_id}: {activity}", options)
        options.stats.skip("traces with tool activity but no readable call (--allow-empty)")
    data: dict[str, Any] = {"trace_id": trace_id, "calls": [c[5] for c in calls]}
    if entry.resource:
        data["metadata"] = {"resource": entry.resource}
    try:
        return Trace.model_validate(data)
    except ValidationError as exc:
        loc = tuple(exc.errors(include_url=False)[0].get("loc", ()))
        index = loc[1] if len(loc) >= 2 and isinstance(loc[1], int) else 0
        if not calls:
            raise validation_error(exc, where, entry.first_path) from None
        _, _, _, line, path, _ = calls[min(index, len(calls) - 1)]
        raise validation_error(exc, Record(source, line, b""), path, drop=2) from None


# --- OTLP/JSON values -------------------------------------------------------------------------------------


def _first(span: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in span:
            return span[key]
    return None


def _context(span: dict[str, Any], key: str) -> Any:
    context = span.get("context")
    return context.get(key) if isinstance(context, dict) else None


def _time(record: Record, path: str, span: dict[str, Any], *keys: str) -> float | None:
    """Epoch seconds from OTLP nanoseconds (a string or number) or from ISO 8601 text."""
    value = _first(span, *keys)
    if value is None or value == "" or value == 0 or value == "0":
        return None
    try:
        if isinstance(value, str) and value.isdigit():
            return int(value) / 1e9
        if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) > 1e14:
            return value / 1e9  # nanoseconds as a JSON number
        return parse_time(value)
    except ValueError as exc:
        key = next(k for k in keys if k in span)
        raise record.error(
            f"{key} is {json.dumps(value)}: {exc}",
            f"{path}.{key}".lstrip("."),
            hint="OTLP times are integer nanoseconds since the epoch",
        ) from None


def attributes_of(value: Any) -> dict[str, Any]:
    """OTLP ``[{key, value: {stringValue | intValue | ...}}]`` or a plain object -> a dict of values."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, list):
        return {}
    decoded: dict[str, Any] = {}
    for item in value:
        if isinstance(item, dict) and "key" in item:
            decoded[str(item["key"])] = _any_value(item.get("value"))
    return decoded


def _any_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return attributes_of((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def events_of(span: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, attributes) of a span's events."""
    for event in span.get("events") or []:
        if isinstance(event, dict):
            yield str(event.get("name", "")), attributes_of(event.get("attributes"))
