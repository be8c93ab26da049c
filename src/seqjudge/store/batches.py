"""Batch runs (seqjudge.batch): what a run waiting for provider batches keeps, the batches and their requests,
and the prompt texts the requests share."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from seqjudge.errors import InputError
from seqjudge.redact import redact_trace, redact_value
from seqjudge.store.codec import _dumps, _iso, _now
from seqjudge.store.models import BatchInfo, BatchRequest, BatchTrace
from seqjudge.store.runs import LIST_RUNS_HINT, RunsMixin
from seqjudge.trace import Trace


class BatchesMixin(RunsMixin):
    """The ``batch_traces``, ``batches``, ``batch_requests`` and ``prompt_parts`` tables, and the run status
    ``batch_pending``."""

    def mark_batch_pending(self, run_id: str) -> None:
        """The run waits for provider batches: not running in any process, not finished either."""
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = 'batch_pending', finished_at = NULL WHERE id = ?", (run_id,)
            )
            if cur.rowcount == 0:
                raise InputError(f"no run {run_id!r} in the store", source=self.location, hint=LIST_RUNS_HINT)

    def put_batch_traces(self, run_id: str, rows: list[dict[str, Any]], parts: dict[str, str]) -> None:
        """Keep, in one transaction, what finishing each trace needs: ``rows`` of {trace_id, custom_id,
        trace, engine, prompt, request} (``trace`` redacted here like a stored trace, ``engine`` like a
        stored result) and the prompt texts the requests refer to by hash."""
        names = self._names_for(run_id)
        with self._tx() as conn:
            self._put_parts(conn, parts)
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM batch_traces WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            conn.executemany(
                "INSERT INTO batch_traces (run_id, trace_id, custom_id, seq, trace, engine, prompt, request) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        run_id,
                        row["trace_id"],
                        row["custom_id"],
                        seq + i + 1,
                        _dumps(self._clean(redact_trace(row["trace"], names).model_dump(mode="json"))),
                        self._text(redact_value(row["engine"], names, keys=False)),
                        self._text(row["prompt"]),
                        self._text(row["request"]),
                    )
                    for i, row in enumerate(rows)
                ],
            )

    def _put_parts(self, conn: sqlite3.Connection, parts: dict[str, str]) -> None:
        conn.executemany(
            "INSERT INTO prompt_parts (hash, text) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING",
            [(h, self._clean(text)) for h, text in parts.items()],
        )

    def prompt_parts(self, hashes: set[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        wanted = sorted(hashes)
        for start in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for r in self._read(f"SELECT hash, text FROM prompt_parts WHERE hash IN ({marks})", tuple(chunk)):
                out[r["hash"]] = r["text"]
        return out

    def batch_traces(self, run_id: str) -> dict[str, BatchTrace]:
        """The run's batch traces by trace id, in submission order."""
        rows = self._read("SELECT * FROM batch_traces WHERE run_id = ? ORDER BY seq", (run_id,))
        return {
            r["trace_id"]: BatchTrace(
                trace_id=r["trace_id"],
                custom_id=r["custom_id"],
                trace=Trace.model_validate_json(r["trace"]),
                engine=json.loads(r["engine"]),
                prompt=json.loads(r["prompt"]),
                request=json.loads(r["request"]),
            )
            for r in rows
        }

    def add_batch(
        self,
        run_id: str,
        batch: dict[str, Any],
        requests: list[dict[str, Any]],
        *,
        parts: dict[str, str] | None = None,
        handled: list[tuple[str, str]] | None = None,
    ) -> None:
        """Record a submitted batch and its requests in one transaction, and mark the requests it follows
        up as ``handled`` (``(batch_id, custom_id)`` pairs). ``batch``: {id, provider, model, round, purpose,
        input_file_id, wire, status, counts}; each request: {custom_id, trace_id, purpose, attempt,
        prompt_hash, request_hash, session}."""
        with self._tx() as conn:
            self._put_parts(conn, parts or {})
            conn.execute(
                "INSERT INTO batches (id, run_id, provider, model, round, purpose, input_file_id, wire, "
                "request_count, status, counts, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    batch["id"],
                    run_id,
                    batch["provider"],
                    batch["model"],
                    batch["round"],
                    batch["purpose"],
                    batch.get("input_file_id"),
                    _dumps(batch.get("wire") or {}),
                    len(requests),
                    batch["status"],
                    _dumps(batch.get("counts") or {}),
                    _iso(_now()),
                ),
            )
            conn.executemany(
                "INSERT INTO batch_requests (batch_id, custom_id, run_id, trace_id, purpose, attempt, "
                "prompt_hash, request_hash, session) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        batch["id"],
                        r["custom_id"],
                        run_id,
                        r["trace_id"],
                        r["purpose"],
                        r["attempt"],
                        r["prompt_hash"],
                        r["request_hash"],
                        self._text(r["session"]),
                    )
                    for r in requests
                ],
            )
            conn.executemany(
                "UPDATE batch_requests SET handled = 1 WHERE batch_id = ? AND custom_id = ?", handled or []
            )

    def batches(self, run_id: str) -> list[BatchInfo]:
        """The run's batches, oldest first."""
        return [
            BatchInfo(
                id=r["id"],
                run_id=r["run_id"],
                provider=r["provider"],
                model=r["model"],
                round=r["round"],
                purpose=r["purpose"],
                input_file_id=r["input_file_id"],
                wire=json.loads(r["wire"]),
                request_count=r["request_count"],
                status=r["status"],
                counts=json.loads(r["counts"]),
                state=r["state"],
                submitted_at=r["submitted_at"],
                checked_at=r["checked_at"],
                collected_at=r["collected_at"],
            )
            for r in self._read(
                "SELECT * FROM batches WHERE run_id = ? ORDER BY submitted_at, rowid", (run_id,)
            )
        ]

    def update_batch(self, batch_id: str, *, status: str, counts: dict[str, int]) -> None:
        """What the provider said on the latest poll."""
        with self._tx() as conn:
            conn.execute(
                "UPDATE batches SET status = ?, counts = ?, checked_at = ? WHERE id = ?",
                (status, _dumps(counts), _iso(_now()), batch_id),
            )

    def record_batch_results(
        self, batch_id: str, outcomes: list[dict[str, Any]], *, status: str, counts: dict[str, int]
    ) -> int:
        """Record an ended batch's results ({custom_id, outcome, result, error}) and mark it collected, in
        one transaction. A result is written once: recording the same batch again changes nothing.
        Returns how many requests got an outcome now."""
        with self._tx() as conn:
            state = conn.execute("SELECT state FROM batches WHERE id = ?", (batch_id,)).fetchone()
            if state is None:
                raise InputError(f"no batch {batch_id!r} in the store", source=self.location)
            if state["state"] == "collected":
                return 0
            written = 0
            for o in outcomes:
                cur = conn.execute(
                    "UPDATE batch_requests SET outcome = ?, result = ?, error = ? "
                    "WHERE batch_id = ? AND custom_id = ? AND outcome IS NULL",
                    (
                        o["outcome"],
                        None if o.get("result") is None else self._text(o["result"]),
                        self._clean(o.get("error")),
                        batch_id,
                        o["custom_id"],
                    ),
                )
                written += cur.rowcount
            now = _iso(_now())
            conn.execute(
                "UPDATE batches SET status = ?, counts = ?, state = 'collected', checked_at = ?, "
                "collected_at = ? WHERE id = ?",
                (status, _dumps(counts), now, now, batch_id),
            )
        return written

    def batch_requests(self, run_id: str, *, handled: bool | None = False) -> list[BatchRequest]:
        """The run's batch requests (by default those whose outcome is not acted on yet), oldest first."""
        sql = "SELECT q.* FROM batch_requests q JOIN batches b ON b.id = q.batch_id WHERE q.run_id = ?"
        params: tuple[Any, ...] = (run_id,)
        if handled is not None:
            sql += " AND q.handled = ?"
            params += (int(handled),)
        rows = self._read(sql + " ORDER BY b.submitted_at, b.rowid, q.rowid", params)
        return [
            BatchRequest(
                batch_id=r["batch_id"],
                custom_id=r["custom_id"],
                trace_id=r["trace_id"],
                purpose=r["purpose"],
                attempt=r["attempt"],
                prompt_hash=r["prompt_hash"],
                request_hash=r["request_hash"],
                session=json.loads(r["session"]),
                outcome=r["outcome"],
                result=None if r["result"] is None else json.loads(r["result"]),
                error=r["error"],
                handled=bool(r["handled"]),
            )
            for r in rows
        ]

    def mark_handled(self, keys: list[tuple[str, str]]) -> None:
        """Batch requests (``(batch_id, custom_id)``) whose outcome has been acted on."""
        with self._tx() as conn:
            conn.executemany(
                "UPDATE batch_requests SET handled = 1 WHERE batch_id = ? AND custom_id = ?", keys
            )
