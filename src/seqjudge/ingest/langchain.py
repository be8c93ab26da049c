"""LangChain / LangGraph messages, as ``message.model_dump()``, ``messages_to_dict`` (``{"type", "data"}``)
or ``dumpd`` (``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``) write them.

``ai`` messages carry ``tool_calls`` (``{name, args, id}``, args an object), issued together and so one step;
``tool`` messages answer them by ``tool_call_id`` and failed when ``status`` is ``"error"``.
``invalid_tool_calls`` (the model's malformed calls, never run) are kept as failed calls with the parse
error. ``human`` and ``ai`` text become messages; ``system`` messages are instructions and are counted as
skipped. Record shapes: a message list, an object holding one under ``messages`` (a LangGraph state) or
``--messages-key``, or a list of such objects; JSONL holds one a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from seqjudge.ingest.base import (
    NO,
    YES,
    Options,
    Record,
    Source,
    TraceBuilder,
    at,
    conversation_traces,
    decode_arguments,
    kind_of,
    message_list,
    message_list_trace,
    plain_content,
    split_records,
)
from seqjudge.trace import Trace

NAME = "langchain"
SIGNATURE = "LangChain messages: 'type' human / ai / tool (or their dumpd / messages_to_dict forms)"
_TYPES = {"human", "ai", "tool", "system", "function", "chat", "remove"}
_CLASSES = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "ToolMessage": "tool",
    "SystemMessage": "system",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
    "HumanMessageChunk": "human",
    "AIMessageChunk": "ai",
    "ToolMessageChunk": "tool",
}


def _fields(item: Any) -> tuple[str, dict[str, Any]] | None:
    """(type, fields) of a message in any of the three serialized forms; None when it is not one."""
    if not isinstance(item, dict):
        return None
    if item.get("lc") == 1 and isinstance(item.get("id"), list) and item["id"]:
        kind = _CLASSES.get(str(item["id"][-1]))
        kwargs = item.get("kwargs")
        return (kind, kwargs) if kind and isinstance(kwargs, dict) else None
    kind = item.get("type")
    if kind not in _TYPES or "role" in item:
        return None
    data = item.get("data")
    if isinstance(data, dict) and "content" in data:
        return kind, data
    return (kind, item) if "content" in item else None


def _is_message(item: Any) -> bool:
    return _fields(item) is not None


def sniff(record: Any, options: Options | None = None) -> int:
    options = options or Options()
    found_any = False
    for _, conversation in split_records(record, _is_message):
        found = message_list(conversation, options, _is_message)
        if found is None or not all(_is_message(m) for m in found[1]):
            return NO
        found_any = found_any or bool(found[1])
    return YES if found_any else NO


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    yield from conversation_traces(records, options, _is_message, _trace)


def _trace(record: Record, conversation: Any, prefix: str, default_id: str, options: Options) -> Trace:
    return message_list_trace(record, conversation, prefix, default_id, options, _is_message, _message)


def _message(b: TraceBuilder, path: str, item: Any) -> None:
    fields = _fields(item)
    if fields is None:
        raise b.record.error(
            f"this message is {kind_of(item)}, not a LangChain message",
            at(b.prefix, path),
            hint="LangChain messages have 'type' (human, ai, tool, system) and 'content'",
        )
    kind, data = fields
    if kind == "tool":
        failed = data.get("status") == "error"
        b.add_result(data.get("tool_call_id"), data.get("content"), f"{path}.tool_call_id", is_error=failed)
        return
    if kind in ("system", "remove"):
        b.options.stats.skip(f"{kind} messages (not conversation)")
        return
    role = {"human": "user", "ai": "assistant"}.get(kind, kind)
    b.add_message(role, plain_content(data.get("content")))
    if kind != "ai":
        return
    step = None
    for j, call in enumerate(data.get("tool_calls") or []):
        if step is None:
            step = b.new_step()
        call = call if isinstance(call, dict) else {}
        arguments, raw = decode_arguments(call.get("args"))
        b.add_call(
            call.get("name"),
            arguments,
            call.get("id"),
            f"{path}.tool_calls[{j}]",
            step=step,
            raw_arguments=raw,
        )
    for j, call in enumerate(data.get("invalid_tool_calls") or []):
        call = call if isinstance(call, dict) else {}
        arguments, raw = decode_arguments(call.get("args"))
        added = b.add_call(
            call.get("name") or "<invalid tool call>",
            arguments,
            call.get("id"),
            f"{path}.invalid_tool_calls[{j}]",
            step=b.new_step(),
            answered=True,
            raw_arguments=raw,
        )
        b.set_result(added, None, error=f"invalid tool call, never run: {call.get('error') or 'unparsable'}")
