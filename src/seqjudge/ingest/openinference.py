"""OpenInference spans (Arize Phoenix and its instrumentations of OpenAI Agents, LangChain, LlamaIndex,
CrewAI, ...), read by ``ingest.spans``.

A tool call is a span with ``openinference.span.kind = TOOL``. Its tool is ``tool.name`` (else
``tool_call.function.name``, else the span name); its arguments ``tool_call.function.arguments``, else
``input.value`` (JSON text; text that is not a JSON object is kept as ``raw_arguments``); its result
``output.value``; its id ``tool_call.id``. LLM, CHAIN, AGENT, RETRIEVER and other kinds are agent activity
but not calls; an LLM span whose output lists tool calls (``llm.output_messages.*.tool_calls.*``) counts as
tool activity, so a trace of those with no TOOL span fails closed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from seqjudge.ingest import spans

NAME = "openinference"
SIGNATURE = "OpenInference spans: OpenTelemetry spans with 'openinference.span.kind' (TOOL spans are calls)"


def marks(keys: Iterable[str], span_name: Any) -> bool:
    return "openinference.span.kind" in keys


def tool(span: dict[str, Any], attributes: dict[str, Any]) -> spans.ToolSpan | None:
    if str(attributes.get("openinference.span.kind", "")).upper() != "TOOL":
        return None
    name = attributes.get("tool.name") or attributes.get("tool_call.function.name") or span.get("name")
    arguments = attributes.get("tool_call.function.arguments")
    if arguments is None:
        arguments = attributes.get("input.value")
    return spans.ToolSpan(name, arguments, attributes.get("output.value"), attributes.get("tool_call.id"))
