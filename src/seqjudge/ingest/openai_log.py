"""Logged OpenAI API traffic: Chat Completions ``chat.completion`` objects and Responses API ``response``
objects, alone or paired with the request that produced them (``{"request": {...}, "response": {...}}``).

An agent loop logs one pair per model call; the calls a response asks for are answered in a later request
(``tool`` messages, or ``function_call_output`` items). Pairs are therefore joined into conversations before
they become traces:

- a Chat request whose ``messages`` begin with an open conversation's messages continues it (the
  conversation becomes the request's messages plus the response's message);
- a Responses request (or a logged ``response``) whose ``previous_response_id`` is an open conversation's last
  response continues it (its ``input`` items and the response's ``output`` items are appended); one whose
  ``input`` list begins with a conversation's items continues it too;
- anything else starts a conversation.

Each conversation is then read exactly as the ``openai`` format reads a message list or Responses items
(parallel calls share a step, results match by id, a call no later request answers is failed "never
answered"). Conversations are held until the input ends, since any later pair may continue one; problems
are reported at the record of the pair that last extended the conversation, with the path inside it. The
trace id is the first response's ``id``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from seqjudge.ingest import openai
from seqjudge.ingest.base import NO, YES, Options, Record, Source, kind_of
from seqjudge.trace import Trace

NAME = "openai-log"
SIGNATURE = (
    "logged OpenAI responses: 'chat.completion' or 'response' objects, alone or as {request, response} pairs"
)
_RESPONSES = {"chat.completion", "response"}


def _response(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) and value.get("object") in _RESPONSES else None


def _pairs(value: Any) -> list[tuple[str, dict[str, Any] | None, dict[str, Any]]] | None:
    """(path, request or None, response) for each logged exchange in a record; None when it holds none."""
    items = value if isinstance(value, list) else [value]
    pairs: list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = []
    for i, item in enumerate(items):
        path = f"[{i}]" if isinstance(value, list) else ""
        if _response(item) is not None:
            pairs.append((path, None, item))
        elif isinstance(item, dict) and _response(item.get("response")) is not None:
            request = item.get("request")
            pairs.append((path, request if isinstance(request, dict) else None, item["response"]))
        else:
            return None
    return pairs or None


def sniff(record: Any, options: Options | None = None) -> int:
    return YES if _pairs(record) is not None else NO


@dataclass
class _Conversation:
    items: list[Any]
    trace_id: str
    record: Record
    sent: list[str] = field(default_factory=list)  # the last request's items as canonical JSON


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    conversations: list[_Conversation] = []
    by_response: dict[str, _Conversation] = {}
    for record in records:
        pairs = _pairs(record.value())
        if pairs is None:
            raise record.error(
                f"this is {kind_of(record.value())}, not a logged OpenAI response",
                hint="Each record is a 'chat.completion' or 'response' object, or {\"request\": ..., "
                '"response": ...}',
            )
        for _, request, response in pairs:
            conversation = _extend(conversations, by_response, record, request, response)
            conversation.record = record
            if isinstance(response.get("id"), str):
                by_response[response["id"]] = conversation
    for conversation in conversations:
        yield openai.conversation_trace(
            conversation.record, conversation.items, "", conversation.trace_id, options
        )


def _canonical(item: Any) -> str:
    return json.dumps(item, sort_keys=True, separators=(",", ":"))


def _extend(
    conversations: list[_Conversation],
    by_response: dict[str, _Conversation],
    record: Record,
    request: dict[str, Any] | None,
    response: dict[str, Any],
) -> _Conversation:
    if response.get("object") == "chat.completion":
        sent = request.get("messages") if request else None
        said = [c.get("message") for c in response.get("choices") or [] if isinstance(c, dict)][:1]
    else:
        given = request.get("input") if request else None
        sent = [{"role": "user", "content": given}] if isinstance(given, str) else given
        said = [item for item in response.get("output") or []]
    sent = sent if isinstance(sent, list) else []
    previous = (request or {}).get("previous_response_id") or response.get("previous_response_id")
    conversation = by_response.get(previous) if isinstance(previous, str) else None
    if conversation is not None:
        conversation.items.extend(sent + said)
        return conversation
    # A request that resends an earlier request's items and adds more (the model's reply, tool results)
    # continues that conversation; the reply itself is not compared, as clients resend it reshaped.
    keys = [_canonical(i) for i in sent]
    for candidate in reversed(conversations):
        n = len(candidate.sent)
        if n and len(keys) > n and keys[:n] == candidate.sent:
            candidate.items = sent + said
            candidate.sent = keys
            return candidate
    trace_id = str(response.get("id") or record.default_id())
    conversation = _Conversation(sent + said, trace_id, record, sent=keys)
    conversations.append(conversation)
    return conversation
