"""Results per trace: saved in one transaction each (the result row, its rule decisions, its judge attempts
and its review item are committed together or not at all, so a run killed at any moment leaves every
completed trace whole), and read back exactly.

``(run_id, trace_id)`` is unique: resume never stores (or judges) a trace twice. The full
``TraceResult.model_dump(mode="json")`` is stored beside the queryable columns, so that a result is rebuilt
exactly (the judge as a ``JudgeResult``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from seqjudge.crosscheck import TraceResult
from seqjudge.errors import InputError
from seqjudge.redact import json_holds_secret, json_needs_value_redaction, redact_trace, redact_value
from seqjudge.store.codec import _dumps, _iso, _now, judge_data, rebuild_result
from seqjudge.store.models import AttemptRecord, DuplicateTraceError, StoredResult
from seqjudge.store.runs import LIST_RUNS_HINT, RunsMixin
from seqjudge.trace import Trace


def _judge_status(judge: dict[str, Any] | None) -> str:
    if judge is None:
        return "skipped"
    return "scored" if judge.get("status") == "scored" else "unscored"


class ResultsMixin(RunsMixin):
    """The ``results``, ``rule_decisions`` and ``judge_attempts`` tables (and a result's review item)."""

    def completed_trace_ids(self, run_id: str) -> set[str]:
        return {r["trace_id"] for r in self._read("SELECT trace_id FROM results WHERE run_id = ?", (run_id,))}

    def save_result(
        self, run_id: str, trace: Trace, result: TraceResult, *, redacted_with: Sequence[str] | None = None
    ) -> None:
        """Store one trace's result in one transaction: the redacted trace, the result, its rule decisions,
        its judge attempts and (when routed) its review item. Raises ``DuplicateTraceError`` when the run
        already holds this trace id.

        ``redacted_with``: the names the caller already redacted ``trace`` with. When they are the run's
        names the trace is stored as given; otherwise it is redacted here (redaction is the costliest step of
        storing a trace, and the runner has always just done it)."""
        if trace.trace_id is not None and trace.trace_id != result.trace_id:
            raise ValueError(f"the trace is {trace.trace_id!r} but the result is for {result.trace_id!r}")
        names = self._names_for(run_id)
        if redacted_with is None or tuple(redacted_with) != tuple(names):
            trace = redact_trace(trace, names)
        trace_data = trace.model_dump(mode="json")
        trace_data["trace_id"] = result.trace_id  # an id-less trace is known by the engine's id from now on
        trace_data = self._clean(trace_data)
        # Results hold explanations and raw judge replies: only secrets written as key=value are redacted
        # there, never keys (``input_tokens`` is a count, not a token).
        data = result.model_dump(mode="json")
        data["judge"] = judge_data(result.judge)
        text = _dumps(data)
        # The value-by-value walk only when the text says it could change something (see
        # json_needs_value_redaction): it cost more than the rest of storing a result.
        if json_needs_value_redaction(text, names) or json_holds_secret(text, self._secrets):
            data = self._clean(redact_value(data, names, keys=False))
            text = _dumps(data)
        judge = data["judge"]
        if judge and judge.get("attempts"):
            # Each raw reply is stored once, in judge_attempts; the result's copy is filled back on read.
            bare = [{**a, "raw_text": None} for a in judge["attempts"]]
            text = _dumps({**data, "judge": {**judge, "attempts": bare}})
        usage = (judge or {}).get("usage") or {}
        now = _iso(_now())
        trace_id = result.trace_id
        required = self._required_reviews(run_id) if data["review_reasons"] else 1

        seq: int | None = None  # the run's next number, computed in the INSERT unless deferring knows it

        def write(conn: sqlite3.Connection) -> None:
            # The run's next number in the INSERT itself: no answer to wait for first (store.postgres).
            number = (
                "(SELECT COALESCE(MAX(seq), 0) + 1 FROM results WHERE run_id = ?)" if seq is None else "?"
            )
            conn.execute(
                "INSERT INTO results (run_id, trace_id, seq, saved_at, verdict, score, review_reasons, "
                "judge_status, judge_skipped, tokens_in, tokens_out, trace, result) "
                f"VALUES (?, ?, {number}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    trace_id,
                    run_id if seq is None else seq,
                    now,
                    data["verdict"],
                    data["score"],
                    _dumps(data["review_reasons"]),
                    _judge_status(judge),
                    data.get("judge_skipped"),
                    int(usage.get("input_tokens", 0)),
                    int(usage.get("output_tokens", 0)),
                    _dumps(trace_data),
                    text,
                ),
            )
            self._insert_decisions(conn, run_id, trace_id, data["rules"])
            self._insert_attempts(conn, run_id, trace_id, (judge or {}).get("attempts") or [])
            if data["review_reasons"]:
                conn.execute(
                    "INSERT INTO review_items (run_id, trace_id, reasons, status, created_at) "
                    "VALUES (?, ?, ?, 'open', ?)",
                    (run_id, trace_id, _dumps(data["review_reasons"]), now),
                )
                if required != 1:  # the column's default (store.team): written when the run asks more
                    conn.execute(
                        "UPDATE review_items SET required_reviews = ? WHERE run_id = ? AND trace_id = ?",
                        (required, run_id, trace_id),
                    )

        # Writes deferred (Connection.defer_writes): a duplicate is refused now, not at the commit, and the
        # run's numbers are counted here (one process works on a run: its lock), so that the deferred INSERTs
        # of a group can be one statement.
        if self._defer is not None:
            saved = self._saved_ids.get(run_id)
            if saved is None:
                saved = self._saved_ids[run_id] = self.completed_trace_ids(run_id)
                rows = self._read(
                    "SELECT COALESCE(MAX(seq), 0) AS n FROM results WHERE run_id = ?", (run_id,)
                )
                self._seqs[run_id] = int(rows[0]["n"])
            if trace_id in saved:
                raise self._duplicate(run_id, trace_id)
            saved.add(trace_id)
            seq = self._seqs[run_id] = self._seqs[run_id] + 1
            if self._write_later(write):
                return
            seq = None
        try:
            with self._tx() as conn:
                write(conn)
        except sqlite3.IntegrityError as exc:
            if self._read("SELECT 1 FROM results WHERE run_id = ? AND trace_id = ?", (run_id, trace_id)):
                raise self._duplicate(run_id, trace_id) from None
            if not self._read("SELECT 1 FROM runs WHERE id = ?", (run_id,)):
                raise InputError(
                    f"no run {run_id!r} in the store", source=self.location, hint=LIST_RUNS_HINT
                ) from None
            raise exc

    def _duplicate(self, run_id: str, trace_id: str) -> DuplicateTraceError:
        return DuplicateTraceError(
            f"trace {trace_id!r} is already stored in run {run_id}",
            source=self.location,
            hint="give every trace a distinct trace_id (ids must be unique within a run); a resumed "
            "run skips the traces already stored",
        )

    def _required_reviews(self, run_id: str) -> int:
        """The independent reviews the run's items need (``review.reviews_per_item`` at its risk level),
        read once per run from its stored config; a run stored before the option existed needs one."""
        cache: dict[str, int] = self.__dict__.setdefault("_required_by_run", {})
        if run_id not in cache:
            from seqjudge.config import ReviewOptions

            rows = self._read("SELECT config FROM runs WHERE id = ?", (run_id,))
            config = json.loads(rows[0]["config"]) if rows else {}
            options = ReviewOptions.model_validate(config.get("review") or {})
            cache[run_id] = options.required_reviews(str(config.get("risk_level") or "medium"))
        return cache[run_id]

    def _insert_decisions(
        self, conn: sqlite3.Connection, run_id: str, trace_id: str, rules: list[dict[str, Any]]
    ) -> None:
        conn.executemany(
            "INSERT INTO rule_decisions (run_id, trace_id, position, rule_id, type, severity, engine, judge, "
            "final, agree) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    trace_id,
                    i,
                    d["rule_id"],
                    d["type"],
                    d["severity"],
                    d["engine"],
                    d["judge"],
                    d["final"],
                    None if d["agree"] is None else int(d["agree"]),
                )
                for i, d in enumerate(rules)
            ],
        )

    def _insert_attempts(
        self, conn: sqlite3.Connection, run_id: str, trace_id: str, attempts: list[dict[str, Any]]
    ) -> None:
        conn.executemany(
            "INSERT INTO judge_attempts (run_id, trace_id, position, n, request_hash, raw_reply, error, "
            "error_stage, usage, latency_s, finish_reason, max_tokens, reasked, cached) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    trace_id,
                    i,
                    a.get("n", i + 1),
                    a.get("request_hash", ""),
                    a.get("raw_text", ""),
                    a.get("error"),
                    a.get("error_stage"),
                    _dumps(a.get("usage") or {}),
                    float(a.get("latency_s", 0.0)),
                    a.get("finish_reason", ""),
                    a.get("max_tokens"),
                    int(bool(a.get("reasked"))),
                    int(bool(a.get("cached"))),
                )
                for i, a in enumerate(attempts)
            ],
        )

    def _stored(self, row: sqlite3.Row) -> StoredResult:
        data = json.loads(row["result"])
        attempts = (data.get("judge") or {}).get("attempts") if isinstance(data.get("judge"), dict) else None
        if attempts and any(a.get("raw_text") is None for a in attempts):
            raw = {
                r["position"]: r["raw_reply"]
                for r in self._read(
                    "SELECT position, raw_reply FROM judge_attempts WHERE run_id = ? AND trace_id = ?",
                    (row["run_id"], row["trace_id"]),
                )
            }
            for i, a in enumerate(attempts):
                if a.get("raw_text") is None:
                    a["raw_text"] = raw.get(i, "")
        return StoredResult(
            run_id=row["run_id"],
            trace_id=row["trace_id"],
            saved_at=row["saved_at"],
            trace=Trace.model_validate_json(row["trace"]),
            result=rebuild_result(data),
        )

    def results(self, run_id: str) -> Iterator[StoredResult]:
        """Every stored result of the run, in the order they were saved."""
        # Read in pages of the saved order: a large run's traces need not all be in memory at once (and no
        # cursor stays open between pages: a writer may share the connection meanwhile).
        after = 0
        while True:
            batch = self._read(
                "SELECT run_id, trace_id, seq, saved_at, trace, result FROM results "
                "WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT 200",
                (run_id, after),
            )
            if not batch:
                return
            after = batch[-1]["seq"]
            for row in batch:
                yield self._stored(row)

    def result(self, run_id: str, trace_id: str) -> StoredResult:
        rows = self._read(
            "SELECT run_id, trace_id, saved_at, trace, result FROM results WHERE run_id = ? AND trace_id = ?",
            (run_id, trace_id),
        )
        if not rows:
            raise InputError(
                f"no trace {trace_id!r} in run {run_id}",
                source=self.location,
                hint=f"`seqjudge runs export {run_id} --format csv` lists the run's traces",
            )
        return self._stored(rows[0])

    def attempts(self, run_id: str, trace_id: str) -> list[AttemptRecord]:
        rows = self._read(
            "SELECT * FROM judge_attempts WHERE run_id = ? AND trace_id = ? ORDER BY position",
            (run_id, trace_id),
        )
        return [
            AttemptRecord(
                n=r["n"],
                request_hash=r["request_hash"],
                raw_reply=r["raw_reply"],
                error=r["error"],
                error_stage=r["error_stage"],
                usage=json.loads(r["usage"]),
                latency_s=r["latency_s"],
                finish_reason=r["finish_reason"],
                max_tokens=r["max_tokens"],
                reasked=bool(r["reasked"]),
                cached=bool(r["cached"]),
            )
            for r in rows
        ]
