"""The runtime guard's decisions (``seqjudge.guard``), per session: recorded before each tool call (in shadow
mode the guard decides and records but never blocks), listed per session, and joined to a run's traces of
the same id (trace id == session id) so that ``runs show`` puts them beside the offline verdict.

Secrets: a decision's rule messages and suggestions can quote the call's arguments, and a fail-mode note
can quote an exception. They are redacted with the names given (default ``DEFAULT_REDACT``) as text and as
key=value pairs, and every value loses the environment's secret values, like every other store write.
The session id is kept as given (it is the join key with the trace id), less environment secrets, as a
trace id is.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seqjudge.redact import DEFAULT_REDACT, redact_value
from seqjudge.store.codec import _iso, _jsonable, _now
from seqjudge.store.models import GuardDecisionRecord
from seqjudge.store.runs import RunsMixin

GUARD_ACTIONS = ("allow", "deny", "ask")
_SEQ_TRIES = 20  # two writers of one session at once: the second draws the next number


class GuardMixin(RunsMixin):
    """The ``guard_decisions`` table."""

    def record_guard_decision(
        self,
        session_id: str,
        *,
        tool: str,
        action: str,
        rules: Sequence[Mapping[str, Any]],
        shadow: bool,
        call_id: str | None = None,
        degraded: str | None = None,
        redact: Iterable[str] = DEFAULT_REDACT,
    ) -> int:
        """Store one decision of the session; returns its number in the session (1, 2, ...)."""
        if action not in GUARD_ACTIONS:
            raise ValueError(f"a guard action is one of {', '.join(GUARD_ACTIONS)}, not {action!r}")
        if not session_id:
            raise ValueError("a guard decision needs a session id")
        names = tuple(redact)
        session = self._clean(session_id)
        rules_text = self._text(redact_value(_jsonable([dict(r) for r in rules]), names))
        tool_text = self._clean(redact_value(tool, names, keys=False))
        call_text = None if call_id is None else self._clean(redact_value(call_id, names, keys=False))
        degraded_text = None if degraded is None else self._clean(redact_value(degraded, names, keys=False))
        for _ in range(_SEQ_TRIES):
            try:
                with self._tx() as conn:
                    seq = conn.execute(
                        "SELECT COALESCE(MAX(seq), 0) + 1 FROM guard_decisions WHERE session_id = ?",
                        (session,),
                    ).fetchone()[0]
                    conn.execute(
                        "INSERT INTO guard_decisions (session_id, seq, decided_at, tool, call_id, action, "
                        "rules, degraded, shadow) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            session,
                            seq,
                            _iso(_now()),
                            tool_text,
                            call_text,
                            action,
                            rules_text,
                            degraded_text,
                            int(shadow),
                        ),
                    )
            except sqlite3.IntegrityError:
                continue  # another writer took this number between our read and our insert
            return int(seq)
        raise RuntimeError(f"could not number a guard decision of session {session_id!r}")

    def guard_decisions(self, session_id: str | None = None) -> list[GuardDecisionRecord]:
        """The decisions of one session (or of every session), by session and in the order recorded."""
        if session_id is None:
            rows = self._read("SELECT * FROM guard_decisions ORDER BY session_id, seq")
        else:
            rows = self._read(
                "SELECT * FROM guard_decisions WHERE session_id = ? ORDER BY seq", (self._clean(session_id),)
            )
        return [_record(r) for r in rows]

    def run_guard_decisions(self, run_id: str) -> dict[str, list[GuardDecisionRecord]]:
        """The decisions of the sessions that are traces of this run (trace id == session id), by session in
        the run's order; sessions with no decision are left out."""
        rows = self._read(
            "SELECT g.* FROM guard_decisions g JOIN results r ON r.trace_id = g.session_id "
            "WHERE r.run_id = ? ORDER BY r.seq, g.seq",
            (run_id,),
        )
        found: dict[str, list[GuardDecisionRecord]] = {}
        for row in rows:
            record = _record(row)
            found.setdefault(record.session_id, []).append(record)
        return found


def _record(row: Any) -> GuardDecisionRecord:
    return GuardDecisionRecord(
        session_id=row["session_id"],
        seq=row["seq"],
        decided_at=row["decided_at"],
        tool=row["tool"],
        call_id=row["call_id"],
        action=row["action"],
        rules=json.loads(row["rules"]),
        degraded=row["degraded"],
        shadow=bool(row["shadow"]),
    )
