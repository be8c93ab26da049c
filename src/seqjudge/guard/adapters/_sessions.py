"""What every framework adapter does around a tool call, in one place: keep a guard session per agent session,
decide a proposed call, record (in a store, when given) each decision with its session id, say whether the
call is blocked (never in shadow mode), and advance the session when a call ran.

A proposed call is decided on the calls made before it. Deciding an allowed call does not advance the
session (it is recorded once it has run: a call the framework then fails to start never ran); a call the
adapter refuses is recorded at once as a failed attempt, as the host's own log shows it.

Turns. The calls the model asks for in one turn run in parallel, and the importers read them so (one step:
none precedes another), so a prerequisite called in the same turn is too late offline. The frameworks run
them concurrently, in no fixed order: an adapter passes each call's ``turn`` (any value equal for the calls
of one model turn), and a call of the turn of the last recorded call is decided and recorded in that call's
step, whichever finished first. Sessions are guarded by a lock because LangChain runs a turn's synchronous
tools on worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from seqjudge.guard import Decision, Guard, RuleDecision, Session
    from seqjudge.guard.shadow import DecisionLog

ContextOf = Callable[[str], Mapping[str, Any] | None]


@dataclass
class GuardedSessions:
    """A guard's sessions as an adapter keeps them.

    ``shadow``: decide and record, never block (the host's calls all run). ``log``: where decisions are
    recorded (``DecisionLog``, a store); shadow mode without one would decide for no one, so it is refused.
    ``context``: what a rule's ``when:`` reads, for every session (a mapping), or per session (a function of
    the session id)."""

    guard: Guard
    shadow: bool = False
    log: DecisionLog | None = None
    context: Mapping[str, Any] | ContextOf | None = None
    _sessions: dict[str, Session] = field(default_factory=dict, init=False, repr=False)
    # The turn of each session's last recorded call (see "Turns" above).
    _turns: dict[str, Hashable] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.shadow and self.log is None:
            raise ValueError(
                "shadow mode records decisions instead of enforcing them: give it a store "
                "(store=Store(path) or log=DecisionLog(store)), or drop shadow to enforce"
            )
        if self.log is not None and self.log.shadow != self.shadow:
            self.log.shadow = self.shadow  # one flag: what is stored says what was done

    def session(self, session_id: str) -> Session:
        with self._lock:
            found = self._sessions.get(session_id)
            if found is None:
                context = self.context(session_id) if callable(self.context) else self.context
                found = self.guard.session(session_id, context=dict(context or {}))
                self._sessions[session_id] = found
            return found

    def _same_turn(self, session_id: str, turn: Hashable | None) -> bool:
        return turn is not None and session_id in self._turns and self._turns[session_id] == turn

    def decide(
        self,
        session_id: str,
        tool: str,
        args: dict[str, Any],
        *,
        call_id: str | None = None,
        turn: Hashable | None = None,
    ) -> Decision:
        """The guard's decision on the proposed call, recorded in the log (when there is one). A call the
        adapter then refuses (``blocks``) joins the history as a failed attempt: the host logs it so (the
        model asked for it and was answered with an error), the offline engine reads it so, and rules that
        count every attempt (``max_calls``) count it."""
        with self._lock:
            same = self._same_turn(session_id, turn)
            decision = self.session(session_id).decide(tool, args, call_id=call_id, same_step=same)
            if self.blocks(decision):
                self.ran(
                    session_id,
                    tool,
                    args,
                    status="error",
                    output=blocked_message(decision),
                    call_id=call_id,
                    turn=turn,
                )
        if self.log is not None:
            self.log.record(session_id, tool, decision, call_id=call_id)
        return decision

    def blocks(self, decision: Decision) -> bool:
        """Whether the host must not run the call: a deny, or an ask (an adapter has no person to ask; the
        model is told the call needs approval), unless in shadow mode."""
        return not self.shadow and decision.action != "allow"

    def ran(
        self,
        session_id: str,
        tool: str,
        args: dict[str, Any],
        *,
        status: Literal["ok", "error"],
        output: Any = None,
        call_id: str | None = None,
        turn: Hashable | None = None,
    ) -> None:
        """The call ran (ok or failed): the session's history grows by it."""
        with self._lock:
            same = self._same_turn(session_id, turn)
            self.session(session_id).record(
                tool, args, output=output, status=status, call_id=call_id, same_step=same
            )
            if turn is None:
                self._turns.pop(session_id, None)
            else:
                self._turns[session_id] = turn

    def finish(self, session_id: str) -> list[RuleDecision]:
        """The rules only the session's end decides (``require``, ``eventually``, an unfinished
        ``sequence``); the session is then forgotten."""
        with self._lock:
            self._turns.pop(session_id, None)
            session = self._sessions.pop(session_id, None)
            if session is None:
                session = self.guard.session(session_id)
            return session.finish()


def blocked_message(decision: Decision) -> str:
    """What the model is told instead of the tool's result: the rule, its message and suggestion."""
    reason = decision.reason
    if decision.action == "ask":
        return f"seqjudge guard: this call needs a person's approval first. {reason}".strip()
    if reason.startswith("seqjudge guard"):  # a fail-mode decision says so itself
        return reason
    return f"seqjudge guard denied this call: {reason}".strip()
