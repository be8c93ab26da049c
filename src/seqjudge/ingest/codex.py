"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``): one JSON object a
line, ``{"timestamp", "type", "payload"}``, where ``response_item`` payloads are OpenAI Responses API items.

One trace per file (its id the ``session_meta`` payload's ``id``, else the file's name). The response items
are read exactly as the ``openai`` format reads Responses items: ``function_call`` (the ``shell`` tool and the
rest) and ``custom_tool_call`` (``apply_patch``) answered by ``*_output`` items with the same ``call_id``,
consecutive calls one step, a call never answered failed. A shell call whose output reports a non-zero exit
code (``{"metadata": {"exit_code": N}}``, or text beginning ``Exit code: N``) failed. ``event_msg`` lines (the
UI's view of the same turn), ``turn_context`` and ``session_meta`` lines are counted as skipped; the
``session_meta`` payload's ``cwd`` and ``cli_version`` go to metadata.

Codex adds line types as it evolves. A line in the rollout envelope (exactly ``timestamp``, a string ``type``
and an object ``payload``) whose type this importer does not know is counted as skipped, by type, not
refused: it fits a file already read as a rollout (MAYBE), but alone it does not decide the format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from seqjudge.ingest import openai
from seqjudge.ingest.base import MAYBE, NO, YES, Options, Record, Source, TraceBuilder, kind_of
from seqjudge.trace import Trace

NAME = "codex"
SIGNATURE = "Codex CLI rollout lines: {timestamp, type, payload} with Responses items as 'response_item'"
_LINE_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_EXIT = re.compile(r"^Exit code: (-?\d+)")


_ENVELOPE = {"timestamp", "type", "payload"}


def sniff(record: Any, options: Options | None = None) -> int:
    if not isinstance(record, dict) or not isinstance(record.get("payload"), dict):
        return NO
    if record.get("type") in _LINE_TYPES:
        return YES
    # A line type newer than this importer, in the same envelope: it fits a rollout, it does not make one.
    return MAYBE if record.keys() == _ENVELOPE and isinstance(record["type"], str) else NO


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    builder: TraceBuilder | None = None
    walk: Any = None
    trace_id: str = source.label
    metadata: dict[str, Any] = {}
    for record in records:
        line = record.value()
        if sniff(line) == NO:
            raise record.error(
                f"this is {kind_of(line)}, not a Codex rollout line",
                hint='Rollout lines are {"timestamp", "type", "payload"}',
            )
        payload = line["payload"]
        if builder is None:
            builder = TraceBuilder(record, "", options)
            walk = openai.ItemWalk(builder)
        if line["type"] == "session_meta":
            trace_id = str(payload.get("id") or trace_id)
            metadata.update({k: payload[k] for k in ("cwd", "cli_version") if payload.get(k) is not None})
        if line["type"] not in _LINE_TYPES:
            options.stats.skip(f"'{line['type']}' lines (a line type this importer does not know)")
            continue
        if line["type"] != "response_item":
            options.stats.skip(f"'{line['type']}' lines (not response items)")
            continue
        builder.record = record
        walk.run([("payload", payload)])
    if builder is None:
        return
    for call in builder.calls:
        code = _exit_code(call.get("output"))
        if code not in (None, 0) and call.get("status") != "error":
            call["status"], call["error"] = "error", f"exit code {code}"
    yield builder.build(trace_id, metadata)


def _exit_code(output: Any) -> int | None:
    if not isinstance(output, str):
        return None
    match = _EXIT.match(output)
    if match:
        return int(match.group(1))
    if output.startswith("{"):
        try:
            decoded = json.loads(output)
        except ValueError:
            return None
        metadata = decoded.get("metadata") if isinstance(decoded, dict) else None
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        return code if isinstance(code, int) else None
    return None
