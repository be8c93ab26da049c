"""OpenTelemetry GenAI spans (the semantic conventions' ``gen_ai.*`` attributes), read by ``ingest.spans``.

A tool execution is a span with ``gen_ai.operation.name = execute_tool`` (or, as pydantic-ai's older spans,
no operation but ``gen_ai.tool.name``); its tool is ``gen_ai.tool.name`` (else the span name
``execute_tool NAME``), its id ``gen_ai.tool.call.id`` (else the span id). Its arguments and result are read
from, in order: ``gen_ai.tool.call.arguments`` / ``.result`` (also the older ``gen_ai.tool.args`` /
``.result``), pydantic-ai's ``tool_arguments`` / ``tool_response``, and span events - ``gen_ai.tool.message``
(``content``, as Strands Agents and the older conventions write the call) and ``gen_ai.choice``
(``message``, the result).

Like every span format, this one reads all span conventions seqjudge knows (OpenInference, OpenLLMetry, Vercel
AI SDK too: see ``spans.SpanFormat``), so an export mixing them loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from seqjudge.ingest import spans

NAME = "otel"
SIGNATURE = "OpenTelemetry spans: an OTLP/JSON export with 'resourceSpans', or spans with a span id"


def marks(keys: Iterable[str], span_name: Any) -> bool:
    return any(k.startswith("gen_ai.") for k in keys)


def tool(span: dict[str, Any], attributes: dict[str, Any]) -> spans.ToolSpan | None:
    operation = attributes.get("gen_ai.operation.name")
    if operation != "execute_tool" and (operation is not None or "gen_ai.tool.name" not in attributes):
        return None
    name = attributes.get("gen_ai.tool.name")
    span_name = span.get("name")
    if not name and isinstance(span_name, str) and span_name.startswith("execute_tool "):
        name = span_name.removeprefix("execute_tool ").strip()
    arguments = _first(attributes, "gen_ai.tool.call.arguments", "gen_ai.tool.args", "tool_arguments")
    result = _first(attributes, "gen_ai.tool.call.result", "gen_ai.tool.result", "tool_response")
    for event, values in spans.events_of(span):
        if arguments is None and event == "gen_ai.tool.message":
            arguments = _first(values, "content", "gen_ai.tool.call.arguments", "message")
        elif result is None and event == "gen_ai.choice":
            result = _first(values, "message", "gen_ai.tool.call.result", "content")
    return spans.ToolSpan(name, arguments, result, attributes.get("gen_ai.tool.call.id"))


def _first(values: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if values.get(key) is not None:
            return values[key]
    return None
