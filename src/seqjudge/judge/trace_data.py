"""The trace as the judge sees it: JSON lines, capped, with nothing a shown rule needs cut.

The trace is untrusted: its strings are cut to a size cap, it is JSON-encoded one item per line with "<",
">" and line separators escaped, so nothing inside can close the delimiters around it (see the template).
What the rules shown to the judge depend on (``Evidence``) is never cut (messages, for a `judge` rule) or
cut less (the outputs of the calls a judge rule is about); everything else gives way first.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from seqjudge.rules.select import expand_name, operand_names
from seqjudge.trace import Trace
from seqjudge.trace import timeline as trace_timeline

MAX_FIELD_CHARS = 2_000
MAX_TRACE_CHARS = 60_000
# Strings of calls in the middle of an over-long trace are first cut to this before calls are elided.
SHORT_FIELD_CHARS = 100
# Outputs of calls that no rule shown to the judge depends on: enough to see what came back, no more.
# No exact rule reads an output, and a judge rule with `applies_to` keeps the outputs of its own calls.
SHORT_OUTPUT_CHARS = 300


# JSON never needs a raw "<" or ">" outside strings, and inside strings \u003c / \u003e mean the same; so
# escaped data holds no "<" at all and cannot spell a delimiter. Unicode line separators are escaped too, so
# every data line is exactly one item (json.dumps already escapes the ASCII control characters).
_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
    ("\x85", "\\u0085"),
)


# Encoders built once: json.dumps with options builds a new one per call, and a prompt makes dozens of calls.
_DATA_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def data_json(value: Any) -> str:
    """Compact JSON with the escapes above: safe to place between the delimiters. Keys keep their order
    (``cap`` sorts the trace's own dicts; the envelope of each item has a fixed order, kind first)."""
    text = _DATA_JSON.encode(value)
    for raw, escaped in _ESCAPES:  # str.replace is C-fast; str.translate with a dict is not
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def cut_marker(n: int) -> str:
    return f"…[cut {n} chars]"


def cap(value: Any, limit: int) -> Any:
    """Cut every string (and dict key) in ``value`` to ``limit`` characters, with a marker saying how much.
    Dicts come back with sorted keys, so the rendering does not depend on the order a source wrote them in."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + cut_marker(len(value) - limit)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        items = sorted(((str(k), v) for k, v in value.items()), key=lambda kv: kv[0])
        return {cap(k, limit): cap(v, limit) for k, v in items}
    if isinstance(value, list | tuple):
        return [cap(v, limit) for v in value]
    return cap(str(value), limit)


def cap_field(value: Any, limit: int) -> Any:
    """``cap``, and a structure whose JSON is still longer than ``limit`` becomes its JSON text, cut once (so
    the marker counts what was really left out)."""
    capped = cap(value, limit)
    if isinstance(capped, dict | list):
        text = _COMPACT_JSON.encode(capped)
        if len(text) > limit:
            # cap() with no limit only normalises: string keys, sorted, non-finite floats as text.
            whole = _COMPACT_JSON.encode(cap(value, sys.maxsize))
            return cap(whole, limit)
    return capped


@dataclass(frozen=True)
class Evidence:
    """What in a trace the rules shown to the judge depend on, so that truncation never cuts it.

    ``messages``: a shown `judge` rule reads the conversation, so messages are shown whole (never cut to
    the field cap, never shortened or elided to fit the trace budget; calls give way instead).
    ``outputs``: the tools whose calls keep their outputs at the field cap; every other call's output is
    cut to ``SHORT_OUTPUT_CHARS``. None keeps every output (a judge rule that names no tools may need any).
    """

    messages: bool = False
    outputs: frozenset[str] | None = None


EVERYTHING = Evidence(messages=False, outputs=None)


def evidence_of(rules: Sequence[Any], aliases: dict[str, list[str]]) -> Evidence:
    judged = [r for r in rules if r.type == "judge"]
    # A lineage rule reads its sources: the messages for a `user` source, and the outputs of the tools of
    # a source read anywhere in their output (no path). A source read at a path keeps the usual cut: the
    # value is at a known place, which the engine reads exactly, and keeping every such output whole
    # would double the prompt of a suite that reads each lookup's id.
    lineage = [r for r in rules if r.type == "lineage"]
    messages = bool(judged) or any(s.user for r in lineage for s in r.from_)
    if any(getattr(r, "applies_to", None) is None for r in judged):
        return Evidence(messages=messages, outputs=None)
    tools: set[str] = set()
    anywhere = [s.output for r in lineage for s in r.from_ if s.output is not None and s.path is None]
    for op in [r.applies_to for r in judged] + anywhere:
        for name in operand_names(op):
            tools.update(expand_name(name, aliases))
    return Evidence(messages=messages, outputs=frozenset(tools))


@dataclass(frozen=True)
class TraceData:
    """The trace as the template shows it."""

    data: str
    nonce: str
    n_calls: int
    n_steps: int
    n_messages: int
    notes: tuple[str, ...]


def _call_item(i: int, step: int, call: Any, limit: int, evidence: Evidence = EVERYTHING) -> dict[str, Any]:
    out_limit = limit
    if evidence.outputs is not None and call.tool_name not in evidence.outputs:
        out_limit = min(limit, SHORT_OUTPUT_CHARS)
    item: dict[str, Any] = {
        "kind": "call",
        "index": i,
        "step": step,
        "tool_name": cap(call.tool_name, limit),
        "status": call.status,
        # Each argument on its own: one huge argument must not hide the others.
        "arguments": {cap(k, limit): cap_field(v, limit) for k, v in sorted(call.arguments.items())},
    }
    if call.output is not None:
        item["output"] = cap_field(call.output, out_limit)
    if call.error is not None:
        item["error"] = cap_field(call.error, limit)
    return item


def _message_item(message: Any, limit: int) -> dict[str, Any]:
    return {
        "kind": "message",
        "at": message.at,
        "role": cap(str(message.role), limit),
        "content": cap_field(message.content, limit),
    }


def render_trace_data(
    trace: Trace,
    *,
    max_field_chars: int = MAX_FIELD_CHARS,
    max_trace_chars: int = MAX_TRACE_CHARS,
    nonce: bool = True,
    evidence: Evidence = EVERYTHING,
) -> TraceData:
    """The trace as JSON lines, capped: long strings cut, then the middle shortened, then elided. What
    ``evidence`` says the rules need is not cut (messages) or cut less (the outputs of their tools)."""
    steps = trace.steps
    timeline = trace_timeline(trace)

    def line(kind: str, i: int, obj: Any, limit: int) -> str:
        if kind == "call":
            return data_json(_call_item(i, steps[i], obj, limit, evidence))
        return data_json(_message_item(obj, sys.maxsize if evidence.messages else limit))

    head: list[str] = []
    if trace.context:
        head.append(data_json({"kind": "context", "context": cap_field(trace.context, max_field_chars)}))
    full = [line(k, i, o, max_field_chars) for k, i, o in timeline]
    notes: list[str] = []
    lines = full
    budget = max_trace_chars - sum(len(x) + 1 for x in head)
    if sum(len(x) + 1 for x in full) > budget:
        short_limit = min(SHORT_FIELD_CHARS, max_field_chars)
        short = [
            full[n] if k == "message" and evidence.messages else line(k, i, o, short_limit)
            for n, (k, i, o) in enumerate(timeline)
        ]
        lines, notes = _fit(timeline, full, short, budget, short_limit, evidence.messages)
    body = "\n".join(head + lines)
    # The token is derived from the escaped content, so it is reproducible, yet text inside the trace would
    # have to contain the hash of itself to predict it.
    token = hashlib.sha256(b"seqjudge-trace-data\0" + body.encode("utf-8")).hexdigest()[:24] if nonce else ""
    return TraceData(body, token, len(trace.calls), len(set(steps)), len(trace.messages), tuple(notes))


def _grow(extra: list[int], cost: int, budget: int) -> tuple[int, int]:
    """Alternately take lines from the head and the tail while their extra cost fits the budget."""
    n = len(extra)
    h = t = 0
    moved = True
    while moved:
        moved = False
        for from_head in (True, False):
            if h + t >= n:
                return h, t
            j = h if from_head else n - 1 - t
            if cost + extra[j] <= budget:
                cost += extra[j]
                h, t = (h + 1, t) if from_head else (h, t + 1)
                moved = True
    return h, t


def _fit(
    timeline: list[tuple[str, int, Any]],
    full: list[str],
    short: list[str],
    budget: int,
    short_limit: int,
    keep_messages: bool = False,
) -> tuple[list[str], list[str]]:
    """Keep the start and the end of an over-long trace in full; shorten, then elide, the middle. With
    ``keep_messages`` the messages are evidence: never shortened, never elided (calls give way alone)."""
    n = len(full)
    short_cost = [len(s) + 1 for s in short]
    what = "" if keep_messages else " and the messages"
    if sum(short_cost) <= budget:
        h, t = _grow([len(f) - len(s) for f, s in zip(full, short, strict=True)], sum(short_cost), budget)
        calls = [i for k, i, _ in timeline[h : n - t] if k == "call"]
        note = (
            f"To fit the size limit, the strings of {len(calls)} call(s){what} in the middle of the trace"
            + (f" (calls {calls[0]} to {calls[-1]})" if calls else "")
            + f" are cut to {short_limit} characters."
        )
        return full[:h] + short[h : n - t] + full[n - t :], [note]
    # Even shortened the trace is too long: keep shortened lines from both ends and elide the middle.
    kept_cost = sum(c for c, (k, _, _) in zip(short_cost, timeline, strict=True) if k == "message")
    extra = [
        0 if keep_messages and k == "message" else c
        for c, (k, _, _) in zip(short_cost, timeline, strict=True)
    ]
    # 200: room for the elision line.
    h, t = _grow(extra, 200 + (kept_cost if keep_messages else 0), budget)
    middle = timeline[h : n - t]
    calls = [i for k, i, _ in middle if k == "call"]
    kept = [short[h + j] for j, (k, _, _) in enumerate(middle) if keep_messages and k == "message"]
    messages = len(middle) - len(calls) - len(kept)
    marker: dict[str, Any] = {"kind": "elided", "calls_elided": len(calls), "messages_elided": messages}
    if calls:
        marker["first_index"], marker["last_index"] = calls[0], calls[-1]
    where = f" (indices {calls[0]} to {calls[-1]})" if calls else ""
    note = (
        f"The trace is too long to show in full: {len(calls)} call(s){where} and {messages} message(s) were "
        f"elided from its middle, and the strings of the calls shown are cut to {short_limit} characters. "
        "Judge only what is shown, and say in the summary that calls were elided."
    )
    return short[:h] + [data_json(marker)] + kept + short[n - t :], [note]
