"""OpenTelemetry GenAI spans: OTLP/JSON exports (``resourceSpans[].scopeSpans[].spans[]``) or flat spans.

A tool execution is a span with ``gen_ai.operation.name = execute_tool``; its tool is ``gen_ai.tool.name``
(else the span name ``execute_tool NAME``), its arguments ``gen_ai.tool.call.arguments``, its output
``gen_ai.tool.call.result``, its id ``gen_ai.tool.call.id`` (else the span id), and it failed when the span
status is ERROR (OTLP code 2). Calls carry start and end times in epoch seconds, so the native trace orders
them by start time and overlapping spans share a step.

One trace per ``traceId``. A trace id whose spans include no GenAI span at all (a plain HTTP request in the
same export) is not an agent run and yields no trace; one with GenAI spans but no tool span yields a trace
with no calls.

Streaming: spans of one trace may spread over several lines of an export. A trace is complete, and emitted,
after the record that holds its root span (the span without a parent); traces without a root are emitted at
the end. Memory therefore holds only the traces still open, as compact calls. A span arriving for a trace
already emitted starts that trace again, and the duplicate trace id is an error rather than a silently
split trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from seqjudge.ingest.base import Options, Record, Source, decode_arguments, kind_of, text_of, validation_error
from seqjudge.trace import Trace, parse_time

NAME = "otel"
SIGNATURE = "OpenTelemetry spans: an OTLP/JSON export with 'resourceSpans', or spans with a span id"

# A trace id seen twice means spans of one trace arrived after its root had completed it (see above).
DUPLICATE_HINT = (
    "Spans of this trace arrived after its root span had completed it: keep every span of a trace before or "
    "in the record holding its root span (sort the export by trace), or convert a single JSON document"
)
_ERROR_CODES = {2, "2", "STATUS_CODE_ERROR", "ERROR", "StatusCode.ERROR"}


def _looks_like_span(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    context = item.get("context")
    return "spanId" in item or "span_id" in item or (isinstance(context, dict) and "span_id" in context)


def sniff(first_record: Any, options: Options | None = None) -> bool:
    if isinstance(first_record, list):
        first_record = first_record[0] if first_record else None
    if isinstance(first_record, dict):
        return (
            "resourceSpans" in first_record
            or "resource_spans" in first_record
            or _looks_like_span(first_record)
        )
    return False


@dataclass
class _Open:
    """A trace whose spans are still arriving: only what becomes calls is kept."""

    calls: list[tuple[dict[str, Any], Record, str]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    genai: bool = False
    root: bool = False


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    open_traces: dict[str, _Open] = {}
    for record in records:
        for path, span, resource in _spans(record):
            trace_id = _first(span, "traceId", "trace_id") or _context(span, "trace_id")
            if not trace_id:
                raise record.error(
                    "the span has no trace id",
                    path or None,
                    hint="Every OTLP span carries 'traceId' (hex); export the spans unchanged",
                )
            trace_id = str(trace_id)
            entry = open_traces.setdefault(trace_id, _Open())
            _add_span(entry, span, resource, record, path, options)
        for trace_id in [t for t, e in open_traces.items() if e.root]:
            entry = open_traces.pop(trace_id)
            if entry.genai:
                yield _build(trace_id, entry)
    for trace_id, entry in open_traces.items():
        if entry.genai:
            yield _build(trace_id, entry)


def _spans(record: Record) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    value = record.value()
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        prefix = f"[{i}]" if isinstance(value, list) else ""
        if isinstance(item, dict) and ("resourceSpans" in item or "resource_spans" in item):
            yield from _export(record, item, prefix)
        elif _looks_like_span(item):
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
        resource = _attributes((rs.get("resource") or {}).get("attributes")) if isinstance(rs, dict) else {}
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
    entry: _Open, span: dict[str, Any], resource: dict[str, Any], record: Record, path: str, options: Options
) -> None:
    parent = _first(span, "parentSpanId", "parent_span_id", "parent_id")
    if isinstance(parent, dict):  # the Python console exporter nests it
        parent = parent.get("span_id")
    if not parent:
        entry.root = True
    attributes = _attributes(span.get("attributes"))
    operation = attributes.get("gen_ai.operation.name")
    if operation is None and not any(k.startswith("gen_ai.") for k in attributes):
        return
    entry.genai = True
    if operation != "execute_tool":
        return
    if not entry.resource and resource:
        entry.resource = resource
    name = attributes.get("gen_ai.tool.name")
    span_name = span.get("name")
    if not name and isinstance(span_name, str) and span_name.startswith("execute_tool "):
        name = span_name.removeprefix("execute_tool ").strip()
    if not isinstance(name, str) or not name:
        raise record.error(
            "this execute_tool span names no tool",
            path or None,
            hint="Set the attribute gen_ai.tool.name on tool execution spans",
        )
    start = _time(record, path, span, "startTimeUnixNano", "start_time_unix_nano", "start_time")
    if start is None:
        raise record.error(
            f"the execute_tool span for {name!r} has no start time",
            path or None,
            hint="Calls are ordered by their spans' startTimeUnixNano; export the spans unchanged",
        )
    end = _time(record, path, span, "endTimeUnixNano", "end_time_unix_nano", "end_time")
    arguments, raw = decode_arguments(
        attributes.get("gen_ai.tool.call.arguments", attributes.get("gen_ai.tool.args"))
    )
    result = attributes.get("gen_ai.tool.call.result", attributes.get("gen_ai.tool.result"))
    call: dict[str, Any] = {
        "tool_name": name,
        "arguments": arguments,
        "timestamp": start,
        "id": str(
            attributes.get("gen_ai.tool.call.id")
            or _first(span, "spanId", "span_id")
            or _context(span, "span_id")
        ),
    }
    if end is not None:
        call["end_timestamp"] = end
    if raw is not None:
        call["raw_arguments"] = raw
    if result is not None:
        call["output"] = result
    error = _span_error(span, attributes)
    pattern = options.error_pattern
    if error is None and result is not None and pattern is not None and pattern.search(text_of(result)):
        error = text_of(result)
    if error is not None:
        call["status"] = "error"
        call["error"] = error
    entry.calls.append((call, record, path))


def _span_error(span: dict[str, Any], attributes: dict[str, Any]) -> str | None:
    status = span.get("status")
    if not isinstance(status, dict):
        return None
    code = status.get("code", status.get("status_code"))
    if code not in _ERROR_CODES:
        return None
    for event in span.get("events") or []:
        if isinstance(event, dict) and event.get("name") == "exception":
            message = _attributes(event.get("attributes")).get("exception.message")
            if message:
                return str(message)
    return str(status.get("message") or status.get("description") or attributes.get("error.type") or "ERROR")


def _build(trace_id: str, entry: _Open) -> Trace:
    data: dict[str, Any] = {"trace_id": trace_id, "calls": [c for c, _, _ in entry.calls]}
    if entry.resource:
        data["metadata"] = {"resource": entry.resource}
    try:
        return Trace.model_validate(data)
    except ValidationError as exc:
        loc = tuple(exc.errors(include_url=False)[0].get("loc", ()))
        index = loc[1] if len(loc) >= 2 and isinstance(loc[1], int) else 0
        _, record, path = entry.calls[min(index, len(entry.calls) - 1)]
        raise validation_error(exc, record, path) from None


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


def _attributes(value: Any) -> dict[str, Any]:
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
        return _attributes((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None
