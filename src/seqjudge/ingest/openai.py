"""OpenAI conversations: Chat Completions messages and Responses API items, in one walk.

Chat: ``assistant`` messages carry ``tool_calls[].function.{name, arguments}`` (arguments is a JSON string);
``tool`` messages answer them by ``tool_call_id``. The calls of one assistant message were issued together, so
they share a step. The legacy ``function_call`` / ``function`` pair is read too (answered in order, as it has
no ids).

Responses: ``function_call`` items (``call_id``, ``name``, ``arguments``) answered by ``function_call_output``
items; consecutive call items (reasoning items between them do not count) came from one model turn and share
a step. Hosted tools (``web_search_call`` and the like) carry their outcome inline; ``mcp_call`` carries
``output`` / ``error``.

Record shapes: a message list; an object holding it under ``messages`` (or ``--messages-key``); an object
with Responses ``input`` / ``output`` lists; or a list of such objects. JSONL holds one record a line.
System and developer messages are instructions, not conversation, and are not kept.

The trace id is the record's ``trace_id``, else ``FILE:LINE`` (``base.record_trace_id``); its ``id`` is not
used, only kept in metadata: a Responses object's ``id`` names one model response, not the conversation (the
``openai-log`` format joins responses into conversations), and a dataset's ``id`` need not be unique.
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
    conversation_traces,
    decode_arguments,
    kind_of,
    no_conversation,
    plain_content,
    record_metadata,
    record_trace_id,
    require_calls,
    split_records,
)
from seqjudge.trace import Trace

NAME = "openai"
SIGNATURE = (
    "OpenAI messages: chat messages with 'role' (assistant 'tool_calls', 'tool' results) or Responses API "
    "items ('function_call', 'function_call_output'), bare or under 'messages', 'input'/'output' or "
    "--messages-key"
)

_CALL_ITEMS = {"function_call", "custom_tool_call"}
_RESULT_ITEMS = {"function_call_output", "custom_tool_call_output"}
_SKIPPED_ITEMS = {"reasoning", "item_reference", "compaction"}
_RESPONSE_ITEMS = _CALL_ITEMS | _RESULT_ITEMS | _SKIPPED_ITEMS | {"message", "mcp_call"}
_INSTRUCTIONS = {"system", "developer"}
# Anthropic-only block types: a record of an OpenAI file without these reads as OpenAI (see detect).
FOREIGN_MARKS = (b'"tool_use"', b'"tool_result"', b"_tool_use", b"_tool_result", b'"thinking"')


def _is_message(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    return "role" in item or (isinstance(kind, str) and (kind in _RESPONSE_ITEMS or kind.endswith("_call")))


def _items(record: Any, options: Options) -> tuple[str, list[Any]] | None:
    """The conversation a record holds, as (JSON path of the list, items); None when it holds none."""
    if isinstance(record, list):
        return "", record
    if not isinstance(record, dict) or _is_message(record):
        return None
    if options.messages_key:
        inner = record.get(options.messages_key)
        return (options.messages_key, inner) if isinstance(inner, list) else None
    if isinstance(record.get("messages"), list):
        return "messages", record["messages"]
    if isinstance(record.get("input"), list | str) or isinstance(record.get("output"), list):
        return "", []  # Responses input + output; walked by _responses_items
    return None


def sniff(record: Any, options: Options | None = None) -> int:
    """YES for conversations with an OpenAI-only mark (tool_calls, tool messages, Responses items), MAYBE
    for text-only ones (they read the same as Anthropic), NO for anything else."""
    options = options or Options()
    levels = []
    for _, conversation in split_records(record, _is_message):
        found = _items(conversation, options)
        if found is None:
            levels.append(NO)
        elif not found[0] and isinstance(conversation, dict):
            items = [item for _, item in _walk_items(conversation, found)]
            levels.append(conversation_level(items, NAME) if items else NO)
        else:
            levels.append(conversation_level(found[1], NAME))
    return combine_levels(levels)


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    yield from conversation_traces(records, options, _is_message, conversation_trace)


def _walk_items(record: Any, found: tuple[str, list[Any]]) -> list[tuple[str, Any]]:
    key, items = found
    if key or isinstance(record, list):
        return [(f"{key}[{i}]", item) for i, item in enumerate(items)]
    walked: list[tuple[str, Any]] = []
    given = record.get("input")
    if isinstance(given, str):
        walked.append(("input", {"role": "user", "content": given}))
    elif isinstance(given, list):
        walked.extend((f"input[{i}]", item) for i, item in enumerate(given))
    if isinstance(record.get("output"), list):
        walked.extend((f"output[{i}]", item) for i, item in enumerate(record["output"]))
    return walked


def conversation_trace(
    record: Record, conversation: Any, prefix: str, default_id: str, options: Options
) -> Trace:
    """One conversation (a message/item list, or an object holding one) as a trace."""
    found = _items(conversation, options)
    if found is None:
        raise no_conversation(record, conversation, prefix, options)
    builder = TraceBuilder(record, prefix, options)
    ItemWalk(builder).run(_walk_items(conversation, found))
    skip = (found[0],) if found[0] else ("input", "output")
    trace = builder.build(record_trace_id(conversation, default_id), record_metadata(conversation, *skip))
    return require_calls(trace, found[1] or conversation, record, prefix, options)


class ItemWalk:
    """Reads chat messages and Responses items in order into a TraceBuilder (also for Codex rollouts)."""

    def __init__(self, builder: TraceBuilder) -> None:
        self.b = builder
        self.run_step: int | None = None  # step of the current run of Responses call items
        self.legacy: list[str] = []  # open legacy function_call ids, oldest first

    def run(self, items: list[tuple[str, Any]]) -> None:
        for path, item in items:
            if not isinstance(item, dict):
                raise self.b.record.error(
                    f"this item is {kind_of(item)}; a message is an object with 'role' (or a Responses item "
                    "with 'type')",
                    at(self.b.prefix, path),
                )
            kind = item.get("type")
            if kind in _CALL_ITEMS:
                self._response_call(path, item)
                continue
            if kind in _SKIPPED_ITEMS:
                self.b.options.stats.skip(f"'{kind}' items (not calls or conversation)")
                continue  # reasoning between calls does not end a parallel run
            self.run_step = None
            if kind in _RESULT_ITEMS or (isinstance(kind, str) and kind.endswith("_call_output")):
                self.b.add_result(item.get("call_id"), item.get("output"), f"{path}.call_id")
            elif kind == "mcp_call":
                arguments, raw = decode_arguments(item.get("arguments"))
                self._inline_call(path, item, item.get("name"), arguments, raw)
            elif isinstance(kind, str) and kind.endswith("_call"):
                self._hosted_call(path, item, kind)
            elif kind in (None, "message"):
                self._message(path, item)
            else:
                raise self.b.record.error(
                    f"unknown item type {kind!r}",
                    at(self.b.prefix, path) + ".type",
                    hint="The OpenAI importer reads chat messages and Responses message / function_call / "
                    "function_call_output items",
                )

    def _message(self, path: str, item: dict[str, Any]) -> None:
        role = item.get("role")
        if not isinstance(role, str):
            raise self.b.record.error(
                f"this message has no role (it is {kind_of(item)})",
                at(self.b.prefix, path),
                hint="Every chat message has a role: system, user, assistant or tool",
            )
        if role == "tool":
            if item.get("tool_call_id") is None:
                raise self.b.record.error(
                    "this tool message has no tool_call_id",
                    at(self.b.prefix, path),
                    hint="A tool message answers the assistant's tool call with the same id",
                )
            self.b.add_result(item["tool_call_id"], item.get("content"), f"{path}.tool_call_id")
            return
        if role == "function":
            self._legacy_result(path, item)
            return
        if role in _INSTRUCTIONS:
            self.b.options.stats.skip(f"{role} messages (instructions, not conversation)")
            return
        self.b.add_message(role, plain_content(item.get("content")))
        if role != "assistant":
            return
        tool_calls = item.get("tool_calls")
        if tool_calls:
            if not isinstance(tool_calls, list):
                raise self.b.record.error(
                    f"tool_calls is {kind_of(tool_calls)}, not a list",
                    at(self.b.prefix, path) + ".tool_calls",
                )
            step = self.b.new_step()
            for j, call in enumerate(tool_calls):
                call_path = f"{path}.tool_calls[{j}]"
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    raise self.b.record.error(
                        "this tool call has no 'function' object",
                        at(self.b.prefix, call_path),
                        hint='A chat tool call is {"id": ..., "type": "function", "function": '
                        '{"name": ..., "arguments": "{...}"}}',
                    )
                arguments, raw = decode_arguments(function.get("arguments"))
                self.b.add_call(
                    function.get("name"),
                    arguments,
                    call.get("id"),
                    call_path,
                    step=step,
                    name_field=".function.name",
                    raw_arguments=raw,
                )
        legacy = item.get("function_call")
        if isinstance(legacy, dict):
            arguments, raw = decode_arguments(legacy.get("arguments"))
            call_id = f"function_call@{at(self.b.prefix, path)}"
            self.b.add_call(
                legacy.get("name"),
                arguments,
                call_id,
                f"{path}.function_call",
                step=self.b.new_step(),
                raw_arguments=raw,
            )
            self.legacy.append(call_id)

    def _legacy_result(self, path: str, item: dict[str, Any]) -> None:
        if not self.legacy:
            raise self.b.record.error(
                f"this function result ({item.get('name')!r}) answers no earlier function_call",
                at(self.b.prefix, path),
                hint="A 'function' message must follow the assistant message whose function_call it answers",
            )
        self.b.add_result(self.legacy.pop(0), item.get("content"), path)

    def _response_call(self, path: str, item: dict[str, Any]) -> None:
        if self.run_step is None:
            self.run_step = self.b.new_step()
        if item.get("type") == "custom_tool_call":
            arguments, raw = {"input": item.get("input")}, None
        else:
            arguments, raw = decode_arguments(item.get("arguments"))
        self.b.add_call(
            item.get("name"),
            arguments,
            item.get("call_id") or item.get("id"),
            path,
            step=self.run_step,
            raw_arguments=raw,
        )

    def _inline_call(
        self, path: str, item: dict[str, Any], name: Any, arguments: dict[str, Any], raw: Any = None
    ) -> None:
        """A call whose item also holds its outcome (mcp_call, hosted tools)."""
        call = self.b.add_call(
            name, arguments, item.get("id"), path, step=self.b.new_step(), answered=True, raw_arguments=raw
        )
        failed = item.get("status") in ("failed", "incomplete")
        error = item.get("error") or (f"status {item.get('status')}" if failed else None)
        self.b.set_result(call, item.get("output"), is_error=failed, error=error)

    def _hosted_call(self, path: str, item: dict[str, Any], kind: str) -> None:
        """Built-in tools (web_search_call, file_search_call, computer_call, ...): the item is the call."""
        arguments = {k: v for k, v in item.items() if k in ("action", "queries", "code", "arguments")}
        name = kind.removesuffix("_call")
        if item.get("call_id") is not None:
            # computer_call / local_shell_call are answered by a separate *_call_output item.
            self.b.add_call(name, arguments, item["call_id"], path, step=self.b.new_step())
        else:
            self._inline_call(path, item, name, arguments)
