"""Assay JSONL traces: events ``episode_start``, ``step``, ``tool_call``, ``episode_end`` grouped by
``episode_id`` (Assay's V2 trace schema), so Assay users can bring their traces along with their eval.yaml.

A ``tool_call`` event gives ``tool_name`` (or ``tool``), ``args`` (or ``arguments``), ``timestamp`` (V2:
integer milliseconds, made epoch seconds here; text is kept as ISO 8601), ``step_id`` and ``call_index``,
and may carry its ``result`` and ``error`` inline (a non-null ``error`` fails the call). Calls of one
``step_id`` were issued by one model step, so they share a step. The older documented shape, where
``tool_result`` events answer calls by ``id``, is read too; in an episode that uses them, a call no result
answers is kept as failed ("never answered"). With inline results a call without one is simply a call whose
result was not recorded.

The episode's prompt (``episode_start.input.prompt``) becomes a user message, the content of ``step`` events
and ``episode_end.final_output`` assistant messages; ``episode_start.meta`` and the outcome go to metadata.
Events without an ``episode_id`` form one trace named after the file.

Streaming: an episode is emitted at its ``episode_end`` (the rest at the end of the input), so memory holds
only episodes still open; an event for an episode that already ended starts it again, and the duplicate
episode id is an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from seqjudge.ingest.base import (
    NO,
    YES,
    Options,
    Record,
    Source,
    TraceBuilder,
    decode_arguments,
    items_of,
    kind_of,
)
from seqjudge.trace import Trace

NAME = "assay"
SIGNATURE = "Assay trace events: objects with 'type' episode_start / step / tool_call / episode_end"

# An episode id seen twice means events of an episode came after its episode_end (see above).
DUPLICATE_HINT = "Write every event of an episode before its episode_end, and give each episode its own id"
_EVENTS = {"episode_start", "step", "tool_call", "tool_result", "episode_end"}


def sniff(record: Any, options: Options | None = None) -> int:
    events = record if isinstance(record, list) else [record]
    if not events:
        return NO
    for event in events:
        if not isinstance(event, dict) or event.get("type") not in _EVENTS:
            return NO
        if "episode_id" not in event and event.get("type") not in ("tool_call", "tool_result"):
            return NO
    return YES


@dataclass
class _Episode:
    builder: TraceBuilder
    steps: dict[str, int] = field(default_factory=dict)  # step_id -> order of first appearance
    indexes: dict[str, Any] = field(default_factory=dict)  # step_id -> the step event's idx
    metadata: dict[str, Any] = field(default_factory=dict)
    separate_results: bool = False


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    episodes: dict[Any, _Episode] = {}
    for record in records:
        for path, event in items_of(record.value()):
            kind = event.get("type") if isinstance(event, dict) else None
            if kind not in _EVENTS:
                raise record.error(
                    f"this is {kind_of(event)}, not an Assay event" + (f" (type {kind!r})" if kind else ""),
                    path or None,
                    hint="Assay events have 'type' episode_start, step, tool_call, tool_result or "
                    "episode_end",
                )
            key = event.get("episode_id")
            episode = episodes.get(key)
            if episode is None:
                episode = episodes[key] = _Episode(TraceBuilder(record, "", options))
            episode.builder.record = record
            episode.builder.prefix = path
            _event(episode, kind, event)
            if kind == "episode_end":
                yield _finish(episodes.pop(key), key, source)
    for key, episode in episodes.items():
        yield _finish(episode, key, source)


def _event(episode: _Episode, kind: str, event: dict[str, Any]) -> None:
    b = episode.builder
    if kind == "episode_start":
        given = event.get("input")
        prompt = given.get("prompt") if isinstance(given, dict) else given
        b.add_message("user", prompt)
        if isinstance(event.get("meta"), dict):
            episode.metadata.update(event["meta"])
    elif kind == "step":
        b.add_message("assistant", event.get("content"), kind=event.get("kind"), name=event.get("name"))
        step_id = event.get("step_id")
        if step_id is not None:
            episode.steps.setdefault(str(step_id), len(episode.steps))
            if isinstance(event.get("idx"), int):
                episode.indexes[str(step_id)] = event["idx"]
    elif kind == "episode_end":
        final = event.get("final_output")
        last = b.messages[-1] if b.messages else None
        # Assay repeats the last step's text as final_output: the same words are one message, not two.
        if not (last and last["role"] == "assistant" and last["content"] == final):
            b.add_message("assistant", final)
        if event.get("outcome") is not None:
            episode.metadata.setdefault("outcome", event["outcome"])
    elif kind == "tool_result":
        episode.separate_results = True
        b.add_result(event.get("id"), event.get("result"), "id", error=event.get("error"))
    else:
        _tool_call(episode, event)


def _tool_call(episode: _Episode, event: dict[str, Any]) -> None:
    b = episode.builder
    step_id = event.get("step_id")
    step = None
    if step_id is not None:
        step = episode.steps.setdefault(str(step_id), len(episode.steps))
    arguments, raw = decode_arguments(event.get("args", event.get("arguments")))
    inline = "result" in event or "error" in event
    timestamp = event.get("timestamp")
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
        timestamp = timestamp / 1000  # Assay V2 writes milliseconds
    name = event.get("tool_name", event.get("tool"))
    call = b.add_call(
        name,
        arguments,
        event.get("id"),
        "",
        step=step,
        answered=inline,
        name_field=".tool_name" if "tool_name" in event or "tool" not in event else ".tool",
        timestamp=timestamp,
        raw_arguments=raw,
        call_index=event.get("call_index"),
    )
    if inline:
        b.set_result(call, event.get("result"), error=event.get("error"))


def _finish(episode: _Episode, key: Any, source: Source) -> Trace:
    b = episode.builder
    if not episode.separate_results:
        # inline results: a call without one was recorded without its result, not unanswered
        b.open.clear()
        b.unanswerable.clear()
    _order(episode)
    return b.build(source.label if key is None else key, episode.metadata)


def _order(episode: _Episode) -> None:
    """Put calls in Assay's own order - by their step (its ``idx``, else where the step first appeared), then
    ``call_index`` - rather than where their events were written (Assay's MCP importer writes unanswered calls
    last). When the timestamps say otherwise the step order wins, and they are kept as ``recorded_at``
    (a native ``timestamp`` would re-sort the calls)."""
    b = episode.builder
    calls = b.calls
    if not calls or any(c.get("step") is None for c in calls):
        return
    names = {order: step_id for step_id, order in episode.steps.items()}
    if len(names) != len(episode.steps):
        return

    def key(item: tuple[int, dict[str, Any]]) -> tuple[Any, ...]:
        position, call = item
        step_id = names[call["step"]]
        index = episode.indexes.get(step_id)
        step_key = (0, index, 0) if index is not None else (1, 0, call["step"])
        call_index = call.get("call_index")
        return (*step_key, call_index if isinstance(call_index, int) else position, position)

    ordered = sorted(enumerate(calls), key=key)
    if [p for p, _ in ordered] == list(range(len(calls))):
        return
    b.calls = [c for _, c in ordered]
    b.origins = [b.origins[p] for p, _ in ordered]
    moved = {old: new for new, (old, _) in enumerate(ordered)}
    b.open = {call_id: moved[index] for call_id, index in b.open.items()}
    # Renumber steps in their new order, and keep call positions of messages where they were.
    renumber: dict[int, int] = {}
    for call in b.calls:
        call["step"] = renumber.setdefault(call["step"], len(renumber))
    times = [c.get("timestamp") for c in b.calls]
    if all(isinstance(t, int | float) for t in times) and times != sorted(times):  # type: ignore[type-var]
        for call in b.calls:
            call["recorded_at"] = call.pop("timestamp")
