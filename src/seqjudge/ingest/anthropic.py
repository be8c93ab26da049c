"""Anthropic Messages: ``assistant`` content blocks ``tool_use`` (``id``, ``name``, ``input``) answered by
``user`` blocks ``tool_result`` (``tool_use_id``, ``is_error``, ``content``).

The tool_use blocks of one assistant message were issued together and share a step - up to a result block
in the same message (a server tool's), after which the next call starts a new step. Text blocks become
messages (consecutive text blocks join into one); thinking, image and document blocks are not conversation
text and are not kept. Server tools (``server_tool_use`` answered by a ``*_tool_result`` block in the same
message) and MCP blocks (``mcp_tool_use`` / ``mcp_tool_result``) are calls like any other.

Record shapes as for OpenAI: a message list, an object holding it under ``messages`` (a request body) or
``--messages-key``, or a list of such objects; JSONL holds one a line. Request bodies (objects with a
``model``) that resend an earlier request's messages and add more, as a logging proxy writes an agent loop's
requests, are one trace: the longest (``ingest.grouping`` gives the grouping key).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from seqjudge.ingest.base import (
    NO,
    Options,
    Record,
    Source,
    TraceBuilder,
    at,
    combine_levels,
    conversation_level,
    decode_arguments,
    kind_of,
    message_list,
    message_list_trace,
    split_records,
    text_of,
)
from seqjudge.ingest.grouping import grouped_traces
from seqjudge.trace import Trace

NAME = "anthropic"
SIGNATURE = (
    "Anthropic messages: content blocks 'tool_use' / 'tool_result' (or 'thinking'), bare or under "
    "'messages' or --messages-key"
)

_CALL_BLOCKS = {"tool_use", "server_tool_use", "mcp_tool_use"}
# OpenAI-only marks: a record of an Anthropic file without these reads as Anthropic (see detect).
FOREIGN_MARKS = (b'"tool_calls"', b'"tool_call_id"', b'"function_call', b'"tool"', b'"developer"', b'_text"')


def _is_message(item: Any) -> bool:
    return isinstance(item, dict) and "role" in item


def sniff(record: Any, options: Options | None = None) -> int:
    """YES for conversations with an Anthropic-only block, MAYBE for text-only ones (they read the same as
    OpenAI chat), NO for anything else."""
    options = options or Options()
    levels = []
    for _, conversation in split_records(record, _is_message):
        found = message_list(conversation, options, _is_message)
        levels.append(NO if found is None else conversation_level(found[1], NAME))
    return combine_levels(levels)


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    yield from grouped_traces(records, options, _is_message, _trace)


def _trace(record: Record, conversation: Any, prefix: str, default_id: str, options: Options) -> Trace:
    return message_list_trace(record, conversation, prefix, default_id, options, _is_message, message_into)


def message_into(b: TraceBuilder, path: str, message: Any, step: int | None = None) -> int | None:
    """Read one message into ``b``; ``step`` continues a step begun by an earlier part of the same model turn
    (Claude Code writes each block of a turn on its own line). Returns the step its calls ended in."""
    if not _is_message(message):
        raise b.record.error(
            f"this message is {kind_of(message)}, with no role",
            at(b.prefix, path),
            hint="Every message is an object with 'role' (user or assistant) and 'content'",
        )
    role = str(message["role"])
    content = message.get("content")
    if isinstance(content, str) or content is None:
        if role != "system":
            b.add_message(role, content)
        else:
            b.options.stats.skip("system messages (instructions, not conversation)")
        return None
    if not isinstance(content, list):
        raise b.record.error(
            f"content is {kind_of(content)}; it is text or a list of content blocks",
            at(b.prefix, path) + ".content",
        )
    texts: list[str] = []

    def flush_text() -> None:
        if texts:
            b.add_message(role, "\n\n".join(texts))
            texts.clear()

    for j, block in enumerate(content):
        block_path = f"{path}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict) or not isinstance(kind, str):
            raise b.record.error(
                f"this content block is {kind_of(block)}, with no type",
                at(b.prefix, block_path),
                hint='Content blocks are objects such as {"type": "text", "text": ...}',
            )
        if kind == "text":
            texts.append(str(block.get("text", "")))
            continue
        flush_text()
        if kind in _CALL_BLOCKS:
            if step is None:
                step = b.new_step()
            arguments, raw = decode_arguments(block.get("input"))
            b.add_call(
                block.get("name"), arguments, block.get("id"), block_path, step=step, raw_arguments=raw
            )
        elif kind in ("tool_result", "mcp_tool_result") or kind.endswith("_tool_result"):
            # A server tool's result sits in the same message as its call: the next call came after it, in
            # a step of its own, not in parallel with the one already answered.
            step = None
            result = block.get("content")
            failed = bool(block.get("is_error")) or _server_error(result)
            b.add_result(
                block.get("tool_use_id"),
                result,
                f"{block_path}.tool_use_id",
                is_error=failed,
                error=text_of(result) if failed else None,
            )
        else:
            b.options.stats.skip(f"'{kind}' content blocks (not conversation text)")
    flush_text()
    return step


def _server_error(result: Any) -> bool:
    """Server tool results report failure as content {"type": "web_search_tool_result_error", ...}."""
    return isinstance(result, dict) and str(result.get("type", "")).endswith("_error")
