"""Vercel AI SDK spans (``experimental_telemetry``), read by ``ingest.spans``.

A tool call is an ``ai.toolCall`` span (its name, or ``ai.operationId`` / ``operation.name``). Its tool is
``ai.toolCall.name``, its id ``ai.toolCall.id``, its arguments ``ai.toolCall.args`` (``ai.toolCall.input`` in
newer releases) and its result ``ai.toolCall.result`` (``ai.toolCall.output``); a tool that threw is a span
with status ERROR and an ``exception`` event. ``ai.generateText`` / ``ai.streamText`` and their
``.doGenerate`` / ``.doStream`` spans are agent activity but not calls; one whose response lists tool calls
(``ai.response.toolCalls``) counts as tool activity.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from seqjudge.ingest import spans

NAME = "vercel-ai"
SIGNATURE = "Vercel AI SDK spans: OpenTelemetry spans named 'ai.*' with 'ai.operationId' (ai.toolCall: calls)"
_TOOL = "ai.toolCall"


def marks(keys: Iterable[str], span_name: Any) -> bool:
    return "ai.operationId" in keys or (isinstance(span_name, str) and span_name.startswith("ai."))


def tool(span: dict[str, Any], attributes: dict[str, Any]) -> spans.ToolSpan | None:
    operation = attributes.get("ai.operationId") or attributes.get("operation.name") or span.get("name")
    if not (isinstance(operation, str) and operation.startswith(_TOOL)):
        return None
    arguments = attributes.get("ai.toolCall.args", attributes.get("ai.toolCall.input"))
    result = attributes.get("ai.toolCall.result", attributes.get("ai.toolCall.output"))
    return spans.ToolSpan(
        attributes.get("ai.toolCall.name"), arguments, result, attributes.get("ai.toolCall.id")
    )
