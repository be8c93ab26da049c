"""Shadow mode: the guard decides and records, never blocks; and the recorded decisions set beside the
offline verdict of the same session once it has been run as a trace (trace id == session id).

``DecisionLog`` is the one place that turns a guard ``Decision`` into a stored row (the adapters and the
Claude Code hook all record through it). ``compare_run`` is what ``seqjudge runs show`` puts in its table.

Agreement, per session. ``denied``: the rules the guard denied at some call. ``failed``: the rules the offline
engine failed on the finished trace (judge rules left out: the guard skips them unless asked). A rule the
guard only ever reported ``pending`` (``require``, ``eventually``, an unfinished ``sequence``) is decided at
the end of the session, not before a call, so an offline failure of it is expected and named (``at end``),
not a disagreement. The two agree when every other failed rule was denied and every denied rule failed.
A decision the guard could not take (``degraded``: the fail mode decided) is counted: such a session's
agreement says so rather than reading as a check.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqjudge.redact import DEFAULT_REDACT

log = logging.getLogger("seqjudge.guard")

if TYPE_CHECKING:
    from seqjudge.crosscheck import TraceResult
    from seqjudge.guard.decision import Decision
    from seqjudge.store import GuardDecisionRecord, Store


def rule_rows(decision: Decision) -> list[dict[str, Any]]:
    """A decision's per-rule outcomes as the plain rows stored (rule_id, outcome, message, suggestion)."""
    return [
        {"rule_id": r.rule_id, "outcome": r.outcome, "message": r.message, "suggestion": r.suggestion}
        for r in decision.rules
    ]


@dataclass
class DecisionLog:
    """Records a guard's decisions in a store, each with its session id. ``shadow``: the decisions were
    only recorded, not enforced (the adapters and the hook then allow every call).

    A store that cannot be written (a full disk, a lock held too long, a read-only file) must not stop the
    agent: recording is beside the call, never in its way. Such a decision is not lost silently: it is
    logged as a warning (logger ``seqjudge.guard``) and counted in ``unrecorded``, with the last error in
    ``last_error``, for the host to report."""

    store: Store
    shadow: bool = True
    redact: tuple[str, ...] = DEFAULT_REDACT
    unrecorded: int = 0
    last_error: str | None = None
    warn: bool = True  # log each unrecorded decision (False: the host reports ``last_error`` itself)

    def record(
        self, session_id: str, tool: str, decision: Decision, *, call_id: str | None = None
    ) -> int | None:
        """Store the decision; its number in the session, or None when the store could not be written."""
        from seqjudge.errors import SeqjudgeError

        try:
            return self.store.record_guard_decision(
                session_id,
                tool=tool,
                action=decision.action,
                rules=rule_rows(decision),
                shadow=self.shadow,
                call_id=call_id,
                degraded=decision.degraded,
                redact=self.redact,
            )
        except SeqjudgeError as exc:
            self.unrecorded += 1
            self.last_error = str(exc)
            if not self.warn:
                return None
            log.warning(
                "seqjudge guard: a decision of session %r was not recorded in %s (%s); %d unrecorded so far",
                session_id,
                self.store.location,
                exc,
                self.unrecorded,
            )
            return None


def record_hook_decision(
    raw_event: str | None, decision: Decision, store_path: str | Path, *, shadow: bool
) -> str | None:
    """Record a host hook's decision (the Claude Code hook: ``seqjudge guard ... --store``, ``--shadow``) with
    the session id and tool of its input ``raw_event``. Never raises: what kept it from being recorded (an
    input with no session, a store that cannot be opened or written) is returned as a warning for stderr."""
    from seqjudge.errors import GuardError, SeqjudgeError
    from seqjudge.guard.claude_code import parse_event
    from seqjudge.store import Store
    from seqjudge.store.target import mask_url

    shown = mask_url(str(store_path))  # (a URL's password is never shown)
    try:
        event = parse_event(raw_event)
    except GuardError as exc:
        return f"seqjudge guard: the decision was not recorded: no session to record it under ({exc})"
    try:
        with Store(store_path) as store:
            log = DecisionLog(store, shadow=shadow, warn=False)
            log.record(event.session_id, event.tool_name, decision, call_id=event.tool_use_id)
    except SeqjudgeError as exc:
        return f"seqjudge guard: the decision was not recorded in {shown}: {exc}"
    if log.unrecorded:
        return f"seqjudge guard: the decision was not recorded in {shown}: {log.last_error}"
    return None


@dataclass
class ShadowRow:
    """One session's guard decisions beside its trace's offline verdict."""

    session_id: str
    decisions: int
    denied_calls: int  # decisions that denied the call (shadow: the call ran anyway; enforced: it did not)
    mode: str  # shadow, enforced, or mixed (some decisions of each)
    verdict: str  # the offline verdict of the trace: pass, fail, review
    denied: list[str]  # rules the guard denied, in first-denied order
    failed: list[str]  # rules the offline engine failed (not judge rules)
    at_end: list[str] = field(default_factory=list)  # failed offline, only ever pending in the guard
    degraded: int = 0

    @property
    def guard_only(self) -> list[str]:
        return [r for r in self.denied if r not in self.failed]

    @property
    def offline_only(self) -> list[str]:
        return [r for r in self.failed if r not in self.denied and r not in self.at_end]

    @property
    def agree(self) -> bool:
        return not self.guard_only and not self.offline_only and not self.degraded


def compare_session(
    session_id: str, decisions: Sequence[GuardDecisionRecord], result: TraceResult
) -> ShadowRow:
    """Enforced denials count as shadow ones: a host logs a refused call as a failed attempt (Claude Code's
    transcript, the SDK's and LangChain's messages), and the guard denies only when the violation is certain
    whatever the call's outcome, so the offline engine fails the same rule on that attempt."""
    denied: list[str] = []
    seen: dict[str, set[str]] = {}
    for d in decisions:
        for rule in d.rules:
            rule_id = str(rule.get("rule_id"))
            outcome = str(rule.get("outcome"))
            seen.setdefault(rule_id, set()).add(outcome)
            if outcome == "deny" and rule_id not in denied:
                denied.append(rule_id)
    failed = [r.rule_id for r in result.rules if r.type != "judge" and r.engine == "failed"]
    at_end = [r for r in failed if r not in denied and seen.get(r, set()) and seen[r] <= {"pending"}]
    modes = {d.shadow for d in decisions}
    return ShadowRow(
        session_id=session_id,
        decisions=len(decisions),
        denied_calls=sum(1 for d in decisions if d.action == "deny"),
        mode="mixed" if len(modes) > 1 else ("shadow" if True in modes else "enforced"),
        verdict=result.verdict,
        denied=denied,
        failed=failed,
        at_end=at_end,
        degraded=sum(1 for d in decisions if d.degraded),
    )


def compare_run(
    decisions: Mapping[str, Sequence[GuardDecisionRecord]], results: Iterable[TraceResult]
) -> list[ShadowRow]:
    """A row per trace of the run that has guard decisions (its session), in the run's order."""
    return [compare_session(r.trace_id, decisions[r.trace_id], r) for r in results if r.trace_id in decisions]


def shadow_lines(rows: Sequence[ShadowRow], traces: int) -> list[str]:
    """The compact table ``runs show`` prints: session, decisions, calls denied, offline verdict, agree."""
    from seqjudge.safetext import terminal

    lines = [
        f"  guard decisions: {len(rows)} of {traces} trace(s) are guarded sessions (trace id = session id)"
    ]
    if not rows:
        return lines
    names = [terminal(r.session_id) for r in rows]
    width = max([len(n) for n in names] + [7])
    lines.append(f"    {'SESSION':<{width}}  DECISIONS  DENIED  MODE      OFFLINE  AGREE  WHY")
    for name, row in zip(names, rows, strict=True):
        why: list[str] = []
        if row.guard_only:
            why.append("guard only: " + ", ".join(row.guard_only))
        if row.offline_only:
            why.append("offline only: " + ", ".join(row.offline_only))
        if row.at_end:
            why.append("at end: " + ", ".join(row.at_end))
        if row.degraded:
            why.append(f"{row.degraded} degraded decision(s)")
        lines.append(
            f"    {name:<{width}}  {row.decisions:>9}  {row.denied_calls:>6}  {row.mode:<8}  "
            f"{row.verdict:<7}  {'yes' if row.agree else 'no':<5}  {terminal('; '.join(why))}".rstrip()
        )
    lines.append("    (`seqjudge runs show RUN --guard` lists every decision)")
    return lines


def decision_lines(decisions: Mapping[str, Sequence[GuardDecisionRecord]]) -> list[str]:
    """Every decision of the run's sessions, a line each (``runs show RUN --guard``)."""
    from seqjudge.safetext import terminal

    if not decisions:
        return ["no guard decisions recorded for this run's traces (trace id = session id)"]
    lines: list[str] = []
    for session_id, records in decisions.items():
        lines.append(f"session {terminal(session_id)}")
        for d in records:
            mode = "shadow" if d.shadow else "enforced"
            denied = [r for r in d.rules if r.get("outcome") in ("deny", "ask")]  # what decided it
            detail = "; ".join(
                f"{r.get('rule_id')}: {r.get('message') or ''}".rstrip(": ")
                + (f" ({r['suggestion']})" if r.get("suggestion") else "")
                for r in denied
            )
            degraded = f" [degraded: {d.degraded}]" if d.degraded else ""
            call = f" {d.call_id}" if d.call_id else ""
            lines.append(
                terminal(
                    f"  {d.seq:>3}. {d.decided_at:%Y-%m-%d %H:%M:%S} {d.tool}{call}: {d.action} ({mode})"
                    f"{' - ' + detail if detail else ''}{degraded}"
                )
            )
    return lines
