"""The guard as a Claude Code ``PreToolUse`` hook (``seqjudge guard RULES --hook claude-code``).

Claude Code runs the hook before each tool call with a JSON object on stdin (``tool_name``, ``tool_input``,
``tool_use_id``, ``transcript_path``, ``session_id``, ``hook_event_name``, ``cwd``, and keys it adds as it
evolves, which are ignored: a hook that refused them would turn every call after an update into its fail
mode's decision). The history is the session's transcript read by the claude-code importer, with only the
calls that completed: the calls of the transcript's last turn that no result answers yet are in flight
(the proposed call among them), while an unanswered call of an earlier turn was interrupted and stays a
failed call, as ``seqjudge check`` reads it. The proposed call joins its turn's step when calls of that
turn already completed (the importer's steps: calls of one model turn ran in parallel).

The answer is the hook protocol's: a deny or an ask is a JSON object on stdout
(``hookSpecificOutput.permissionDecision`` with the rules' reasons), exit 0; an allow is silence, exit 0.
A guard that cannot decide answers as its fail mode says (``seqjudge.guard.core.degraded``), never with a
traceback: stdout carries only the protocol's JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqjudge.errors import GuardError, SeqjudgeError
from seqjudge.guard.core import Guard, degraded
from seqjudge.guard.decision import Decision, FailMode
from seqjudge.trace import Call, Message, Trace

EVENT = "PreToolUse"
_NEVER_ANSWERED = "never answered"  # the importer's error of a call no result answers (ingest.base)


@dataclass(frozen=True, slots=True)
class HookEvent:
    tool_name: str
    tool_input: dict[str, Any]
    transcript_path: str
    session_id: str
    tool_use_id: str | None


def parse_event(raw: str | None) -> HookEvent:
    """The hook's input, checked: what is missing or of the wrong type is a ``GuardError`` naming it.
    ``raw`` None: stdin could not be read as text."""
    if raw is None:
        raise GuardError("the hook's input on stdin cannot be read as UTF-8 text")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise GuardError(f"the hook's input on stdin is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise GuardError("the hook's input on stdin is not a JSON object")
    event = data.get("hook_event_name")
    if event is not None and event != EVENT:
        raise GuardError(
            f"the hook was run for {event!r}; it answers {EVENT} events: register it under "
            f'"hooks": {{"{EVENT}": [...]}} in settings.json'
        )
    kinds = {"tool_name": str, "tool_input": dict, "transcript_path": str, "session_id": str}
    for key, kind in kinds.items():
        if not isinstance(data.get(key), kind):
            got = "missing" if key not in data else f"a {type(data[key]).__name__}"
            want = "an object" if kind is dict else "a string"
            raise GuardError(f"the hook's input: {key} is {got}, expected {want}")
    tool_use_id = data.get("tool_use_id")
    return HookEvent(
        data["tool_name"],
        data["tool_input"],
        data["transcript_path"],
        data["session_id"],
        tool_use_id if isinstance(tool_use_id, str) else None,
    )


@dataclass(frozen=True, slots=True)
class History:
    """What the transcript says before the proposed call: completed calls, messages, and whether the call
    runs in the step of the last completed one."""

    calls: list[Call]
    messages: list[Message]
    same_step: bool


def read_transcript(path: str, session_id: str, tool_use_id: str | None) -> History:
    """The session's completed calls in the transcript at ``path`` (see the module's docstring)."""
    from seqjudge.ingest import claude_code
    from seqjudge.ingest.base import Options, Record, Source

    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise GuardError(f"{path}: cannot read the transcript ({exc.strerror or exc})") from None
    source = Source(str(p), p.stem)
    lines = raw.split(b"\n")
    records = [Record(source, n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if records and not raw.endswith(b"\n"):
        try:
            records[-1].value()
        except SeqjudgeError:
            records.pop()  # a line Claude Code is still writing
    try:
        traces = list(claude_code.parse(records, source, Options(format=claude_code.NAME)))
    except SeqjudgeError as exc:
        raise GuardError(f"cannot read the transcript: {exc}", cause=exc) from None
    trace = _session(traces, session_id)
    if trace is None:
        return History([], [], False)
    steps = trace.steps
    last = steps[-1] if steps else None
    calls: list[Call] = []
    call_steps: list[int] = []
    proposed_step: int | None = None
    for call, step in zip(trace.calls, steps, strict=True):
        in_flight = step == last and isinstance(call.error, str) and call.error.startswith(_NEVER_ANSWERED)
        if in_flight:
            if tool_use_id is not None and call.id == tool_use_id:
                proposed_step = step
            continue
        calls.append(call)
        call_steps.append(step)
    for call, step in zip(calls, call_steps, strict=True):
        call.step = step  # the importer's steps, as labels the session reads
    same_step = proposed_step is not None and bool(call_steps) and call_steps[-1] == proposed_step
    return History(calls, trace.messages, same_step)


def _session(traces: list[Trace], session_id: str) -> Trace | None:
    """The transcript's trace of this session; a transcript holding other sessions' lines only (a resumed
    session's file starts with its predecessor's) is read as one history, in file order."""
    for trace in traces:
        if trace.trace_id == session_id:
            return trace
    if not traces:
        return None
    if len(traces) == 1:
        return traces[0]
    calls: list[Call] = []
    messages: list[Message] = []
    for t in traces:
        # Each trace's steps after the previous one's, and its messages placed after its own calls.
        offset = calls[-1].step + 1 if calls and calls[-1].step is not None else 0
        for m in t.messages:
            at = None if m.at is None else m.at + len(calls)
            messages.append(m.model_copy(update={"at": at}))
        calls += [c.model_copy(update={"step": offset + s}) for c, s in zip(t.calls, t.steps, strict=True)]
    return Trace(trace_id=session_id, calls=calls, messages=messages)


def answer(decision: Decision) -> str:
    """The hook's stdout for a decision: the protocol's JSON for a deny or an ask, nothing for an allow."""
    if decision.action == "allow":
        return ""
    out = {
        "hookSpecificOutput": {
            "hookEventName": EVENT,
            "permissionDecision": decision.action,
            "permissionDecisionReason": decision.reason,
        }
    }
    return json.dumps(out, ensure_ascii=False)


def run_hook(raw: str | None, build: Callable[[], Guard], fail_mode: FailMode) -> Decision:
    """Decide the call the hook's input ``raw`` proposes with the guard ``build`` makes; whatever goes
    wrong is ``fail_mode``'s decision, saying why (``degraded``)."""
    try:
        event = parse_event(raw)
        guard = build()
        fail_mode = guard.fail_mode
        history = read_transcript(event.transcript_path, event.session_id, event.tool_use_id)
        session = guard.session(event.session_id, history=history.calls, messages=history.messages)
        return session.decide(
            event.tool_name, event.tool_input, call_id=event.tool_use_id, same_step=history.same_step
        )
    except GuardError as exc:
        return degraded(fail_mode, str(exc))
    except Exception as exc:  # a bug: the host still gets a decision, and no traceback reaches stdout
        return degraded(fail_mode, f"internal error: {type(exc).__name__}")
