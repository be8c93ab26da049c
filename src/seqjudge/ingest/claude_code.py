"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``): one JSON object a line with
``type`` (``user``, ``assistant``, ``summary``, ``system``, ...), ``uuid`` / ``parentUuid``, ``sessionId``,
``timestamp`` and, for user and assistant lines, an Anthropic ``message``.

One trace per ``sessionId``, in the order the lines were written. Claude Code writes each content block of one
model turn on its own ``assistant`` line, all with the same ``message.id``: the ``tool_use`` blocks of one
turn are one step, however many lines they span. ``tool_result`` blocks in ``user`` lines answer them by id
(``is_error`` marks a failure); a call no line answers is failed "never answered" (a session cut off mid-
tool). Text blocks become messages. Lines of a sub-agent (``isSidechain: true``) and lines with no message
(summaries, snapshots, system notes) are counted as skipped. Sessions are built when the input ends.

Claude Code adds line types as it evolves: a line with a ``sessionId`` and a ``uuid`` whose string ``type``
this importer does not know is counted as skipped, by type, not refused. It fits a file already read as a
session (MAYBE) but alone does not decide the format.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from seqjudge.ingest import anthropic
from seqjudge.ingest.base import MAYBE, NO, YES, Options, Record, Source, TraceBuilder, kind_of
from seqjudge.trace import Trace

NAME = "claude-code"
SIGNATURE = "Claude Code session lines: 'type', 'uuid', 'sessionId' and an Anthropic 'message'"
_LINE_TYPES = {"user", "assistant", "summary", "system", "file-history-snapshot", "queue-operation"}


def sniff(record: Any, options: Options | None = None) -> int:
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return NO
    if record["type"] not in _LINE_TYPES:
        # a line type newer than this importer: it fits a session file, it does not make one
        return MAYBE if "sessionId" in record and "uuid" in record else NO
    if "sessionId" in record and ("uuid" in record or "message" in record):
        return YES
    # summaries and snapshots carry no session id but belong in a session file
    return YES if record.get("type") in ("summary", "file-history-snapshot") else NO


@dataclass
class _Session:
    builder: TraceBuilder
    turn: str | None = None  # message.id of the assistant turn being read
    step: int | None = None


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    sessions: dict[str, _Session] = {}
    for record in records:
        line = record.value()
        if not isinstance(line, dict) or (line.get("type") not in _LINE_TYPES and sniff(line) == NO):
            raise record.error(
                f"this is {kind_of(line)}, not a Claude Code session line",
                hint="Session lines have 'type' user / assistant / summary / system and a 'sessionId'",
            )
        message = line.get("message")
        if line["type"] not in _LINE_TYPES:
            options.stats.skip(f"'{line['type']}' lines (a line type this importer does not know)")
            continue
        if line.get("isSidechain"):
            options.stats.skip("sub-agent (sidechain) lines")
            continue
        if line["type"] not in ("user", "assistant") or not isinstance(message, dict):
            options.stats.skip(f"'{line['type']}' lines (no conversation message)")
            continue
        key = str(line.get("sessionId") or source.label)
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = _Session(TraceBuilder(record, "", options))
        b = session.builder
        b.record = record
        turn = message.get("id") if line["type"] == "assistant" else None
        same_turn = turn is not None and turn == session.turn
        step = anthropic.message_into(b, "message", message, session.step if same_turn else None)
        if line["type"] == "assistant":
            session.turn = turn
            session.step = step if step is not None else (session.step if same_turn else None)
    # Every tool_use block becomes a call (or an error), so a session without calls had no tool activity
    # here; a sub-agent's, skipped above, is counted.
    for key, session in sessions.items():
        yield session.builder.build(key)
