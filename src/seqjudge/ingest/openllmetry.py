"""OpenLLMetry (Traceloop) spans, read by ``ingest.spans``.

A tool call is a span with ``traceloop.span.kind = tool`` (what the ``@tool`` decorator and the framework
instrumentations write). Its tool is ``traceloop.entity.name`` (else the span name without its ``.tool``
suffix); its arguments ``traceloop.entity.input``, JSON text of the Python call - ``{"args": [...],
"kwargs": {...}}`` becomes the keyword arguments, with positional ones under ``args`` - and its result
``traceloop.entity.output``. Workflow, task and agent spans, and the LLM spans (which OpenLLMetry writes with
``gen_ai.*`` attributes), are agent activity but not calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from seqjudge.ingest import spans

NAME = "openllmetry"
SIGNATURE = (
    "OpenLLMetry/Traceloop spans: OpenTelemetry spans with 'traceloop.*' attributes (tool spans are calls)"
)


def marks(keys: Iterable[str], span_name: Any) -> bool:
    # OpenLLMetry sets these on its own spans; the scan covers the rest (association properties, ...)
    if "traceloop.span.kind" in keys or "traceloop.workflow.name" in keys:  # type: ignore[operator]
        return True
    return any(k.startswith("traceloop.") for k in keys)


def tool(span: dict[str, Any], attributes: dict[str, Any]) -> spans.ToolSpan | None:
    if attributes.get("traceloop.span.kind") != "tool":
        return None
    name = attributes.get("traceloop.entity.name")
    span_name = span.get("name")
    if not name and isinstance(span_name, str):
        name = span_name.removesuffix(".tool")
    return spans.ToolSpan(name, _arguments(attributes.get("traceloop.entity.input")), _output(attributes))


def _arguments(value: Any) -> Any:
    """The decorated function's {"args": [...], "kwargs": {...}} as one object of arguments."""
    decoded = value
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
    if isinstance(decoded, dict) and decoded.keys() <= {"args", "kwargs"} and decoded:
        kwargs = decoded.get("kwargs")
        arguments = dict(kwargs) if isinstance(kwargs, dict) else {}
        if decoded.get("args"):
            arguments["args"] = decoded["args"]
        return arguments
    return decoded


def _output(attributes: dict[str, Any]) -> Any:
    return attributes.get("traceloop.entity.output")
