"""Requests a logging proxy wrote: each request of an agent loop resends the conversation so far, so the
requests of one conversation are one trace, not one trace per request.

The grouping key: a request body (an object with ``model`` and its message list, and no ``trace_id`` of its
own) whose messages begin with all the messages of an open conversation's latest request (or equal them: a
retried request) continues that conversation; the longest request read so far stands for it. Anything else
starts a conversation. Messages are compared whole (as canonical JSON), so two conversations that merely
begin alike stay apart as soon as one holds a message the other does not. Records that are not request
bodies (bare message lists, records with a ``trace_id``) are traces of their own, as before, and stream as
they are read; request bodies are held until the input ends (as ``openai-log`` holds its pairs), since any
later request may continue one, and come out in the order their conversations began.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from seqjudge.ingest.base import Options, Record, message_list, split_records
from seqjudge.trace import Trace

# (record, conversation, prefix, default id, options) -> trace, as ``base.conversation_traces`` takes it.
MakeTrace = Callable[[Record, Any, str, str, Options], Trace]


@dataclass(slots=True)
class _Open:
    record: Record  # the latest request's record, where its problems are reported
    conversation: Any
    prefix: str
    default_id: str  # the first request's: the conversation began there
    key: int  # the hash of the latest request's messages, as _prefix_keys makes it


def _prefix_keys(messages: list[Any]) -> list[int]:
    """The key of every prefix of ``messages`` (``[k1, ..., kn]`` for lengths 1..n), one pass: a running
    hash over each message's canonical JSON, so a request is matched against every open conversation at once
    without keeping the messages' text."""
    keys: list[int] = []
    running = 0
    for message in messages:
        running = hash((running, json.dumps(message, sort_keys=True, separators=(",", ":"))))
        keys.append(running)
    return keys


def is_request(conversation: Any) -> bool:
    """A request body as a proxy logs it: an object naming its ``model``, with no ``trace_id`` of its own."""
    return isinstance(conversation, dict) and "model" in conversation and "trace_id" not in conversation


def grouped_traces(
    records: Iterable[Record], options: Options, is_message: Callable[[Any], bool], trace: MakeTrace
) -> Iterator[Trace]:
    """``base.conversation_traces``, with successive requests of one conversation joined into one trace."""
    held: list[_Open] = []
    by_key: dict[int, _Open] = {}  # the key of each open conversation's latest request
    for record in records:
        for index, conversation in split_records(record.value(), is_message):
            prefix = "" if index is None else f"[{index}]"
            found = message_list(conversation, options, is_message) if is_request(conversation) else None
            if found is None or not found[1]:
                yield trace(record, conversation, prefix, record.default_id(index), options)
                continue
            keys = _prefix_keys(found[1])
            continued = next((by_key[k] for k in reversed(keys) if k in by_key), None)
            if continued is None:
                continued = _Open(record, conversation, prefix, record.default_id(index), keys[-1])
                held.append(continued)
            else:
                del by_key[continued.key]
                continued.record, continued.conversation, continued.prefix = record, conversation, prefix
                continued.key = keys[-1]
            by_key[keys[-1]] = continued
    for request in held:
        yield trace(request.record, request.conversation, request.prefix, request.default_id, options)
