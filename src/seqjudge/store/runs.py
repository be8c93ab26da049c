"""Runs: create, finish, reopen (``--resume``), resolve a reference (id, prefix, ``latest``), list; and the
names each run redacts from its traces."""

from __future__ import annotations

import json
import secrets
import sqlite3
from datetime import datetime
from typing import Any

from seqjudge.errors import InputError
from seqjudge.redact import DEFAULT_REDACT, redact_value
from seqjudge.store.codec import _iso, _jsonable, _now
from seqjudge.store.connection import Connection
from seqjudge.store.models import RunInfo

RUN_STATUSES = ("running", "completed", "stopped", "interrupted", "batch_pending")
FINAL_STATUSES = ("completed", "stopped", "interrupted")
LIST_RUNS_HINT = "`seqjudge runs list` shows the stored runs"


def _no_counts() -> dict[str, int]:
    return {"traces": 0, "pass": 0, "fail": 0, "review": 0, "review_open": 0, "review_resolved": 0}


def new_run_id(moment: datetime | None = None) -> str:
    """``r20261130-033012-3f9a``: UTC start time (sortable, readable) and 16 random bits."""
    moment = moment or _now()
    return f"r{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


class RunsMixin(Connection):
    """The ``runs`` table, and the lock that lets one process at a time work on a run.

    A run is claimed when it is created or reopened (``--resume``) and released when it is finished or
    the store is closed; the operating system releases it when the process dies (SIGKILL included), so a
    killed run can always be resumed. Two resumes of one run at once would judge the same traces twice:
    the second is refused before it makes any call. The lock (``Connection._lock_run``) is an ``flock`` on
    a file in ``locks/`` beside a SQLite store, an advisory lock on a PostgreSQL server, so it holds across
    processes (and machines) and across store objects."""

    def claim_run(self, run_id: str) -> None:
        """Take the run's lock (no-op when this store already holds it); ``InputError`` when another
        process, or another store object, holds it."""
        locks = self._run_locks
        if run_id in locks:
            return
        holder = self._lock_run(run_id)
        if holder is None:
            raise InputError(
                f"run {run_id} is being run or resumed elsewhere (another seqjudge process holds it)",
                source=self.location,
                where="--resume",
                hint=f"wait for that process to finish (`seqjudge runs show {run_id}` shows its progress), "
                "then resume again if it stopped early",
            )
        locks[run_id] = holder

    def release_run(self, run_id: str) -> None:
        holder = self._run_locks.pop(run_id, None)
        if holder is not None:
            self._unlock_run(holder)

    def close(self) -> None:
        for run_id in list(self._run_locks):
            self.release_run(run_id)
        super().close()

    # How a run id is drawn; a test draws its own by replacing it on ``Store``.
    new_run_id = staticmethod(new_run_id)

    def create_run(
        self, *, config: dict[str, Any], fingerprint: dict[str, Any], label: str | None = None
    ) -> str:
        """Start a run (status ``running``) and return its id. ``config["redact"]`` (default
        ``DEFAULT_REDACT``) names the keys redacted from every trace saved in it."""
        names = config.get("redact")
        names = list(DEFAULT_REDACT) if names is None else [str(n) for n in names]
        stored_config = redact_value(_jsonable({k: v for k, v in config.items() if k != "redact"}), names)
        stored_config["redact"] = names
        config_text = self._text(stored_config)
        fingerprint_text = self._text(redact_value(_jsonable(fingerprint), names))
        label = self._clean(label)
        for _ in range(20):
            started = _now()
            run_id = self.new_run_id(started)
            try:
                with self._tx() as conn:
                    conn.execute(
                        "INSERT INTO runs (id, label, status, started_at, config, fingerprint) "
                        "VALUES (?, ?, 'running', ?, ?, ?)",
                        (run_id, label, _iso(started), config_text, fingerprint_text),
                    )
            except sqlite3.IntegrityError:
                continue  # the same second and the same 16 random bits: draw again
            self._redact_names[run_id] = tuple(names)
            self.claim_run(run_id)
            return run_id
        raise RuntimeError("could not draw a unique run id")

    def finish_run(self, run_id: str, *, totals: dict[str, Any], status: str = "completed") -> None:
        if status not in FINAL_STATUSES:
            raise ValueError(f"status must be one of {', '.join(FINAL_STATUSES)}, not {status!r}")
        self._stop_deferring()  # every trace written before the run is
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = ?, finished_at = ?, totals = ? WHERE id = ?",
                (status, _iso(_now()), self._text(_jsonable(totals)), run_id),
            )
            if cur.rowcount == 0:
                raise InputError(f"no run {run_id!r} in the store", source=self.location, hint=LIST_RUNS_HINT)
        self.release_run(run_id)

    def reopen_run(self, run_id: str) -> RunInfo:
        """Mark a stopped or interrupted run ``running`` again (``--resume``); returns it, config included.
        Claims the run first: a run another process is working on is refused before anything changes."""
        if self._read("SELECT 1 FROM runs WHERE id = ?", (run_id,)):
            self.claim_run(run_id)
        with self._tx() as conn:
            pending = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if pending is not None and pending["status"] == "batch_pending":
                # Judging its traces online now would pay for them twice: once more in the batches.
                raise InputError(
                    f"run {run_id} is waiting for provider batches",
                    source=self.location,
                    hint=f"`seqjudge batch status {run_id}` shows them; `seqjudge batch collect {run_id}` "
                    "finishes the run",
                )
            cur = conn.execute(
                "UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?", (run_id,)
            )
            if cur.rowcount == 0:
                raise InputError(f"no run {run_id!r} in the store", source=self.location, hint=LIST_RUNS_HINT)
        return self.run_info(run_id)

    def resolve_run(self, ref: str) -> str:
        """A baseline name, a run id, a unique prefix of one, or ``latest`` (the newest run) -> the run id.

        Every command that takes a RUN resolves it here, so what one accepts (`compare main`) the others do
        too (`runs export main`). A baseline name is looked up first, as `compare` always did."""
        ref = ref.strip()
        named = self._read("SELECT run_id FROM baselines WHERE name = ?", (ref,)) if ref else []
        if named:
            return str(named[0]["run_id"])
        if ref == "latest":
            rows = self._read("SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1")
            if not rows:
                raise InputError(
                    "`latest` names no run: the store holds none yet",
                    source=self.location,
                    hint="`seqjudge run` stores one",
                )
            return str(rows[0]["id"])
        if ref:
            if self._read("SELECT 1 FROM runs WHERE id = ?", (ref,)):
                return ref
            rows = self._read("SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY id", (len(ref), ref))
            if len(rows) == 1:
                return str(rows[0]["id"])
            if len(rows) > 1:
                listing = ", ".join(r["id"] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
                raise InputError(
                    f"run {ref!r} is ambiguous: it starts {len(rows)} run ids ({listing})",
                    source=self.location,
                    hint="give more characters of the id",
                )
        raise InputError(
            f"no run {ref!r} in the store",
            source=self.location,
            hint=f"give a run id, a unique prefix of one, a baseline name or `latest`; {LIST_RUNS_HINT}",
        )

    def run_info(self, run_id: str) -> RunInfo:
        rows = self._read("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise InputError(f"no run {run_id!r} in the store", source=self.location, hint=LIST_RUNS_HINT)
        return self._run_info(rows[0])

    def list_runs(self) -> list[RunInfo]:
        """Every run, newest first."""
        rows = self._read("SELECT * FROM runs ORDER BY started_at DESC, rowid DESC")
        # The counts of every run in two queries, not two a run: on a server each query is a round trip.
        counts = self._counts()
        return [self._run_info(r, counts.get(r["id"])) for r in rows]

    def _counts(self, run_id: str | None = None) -> dict[str, dict[str, int]]:
        """Traces by verdict and review items by status, of one run or of every run."""
        where, params = ("WHERE run_id = ? ", (run_id,)) if run_id is not None else ("", ())
        out: dict[str, dict[str, int]] = {}

        def of(run: str) -> dict[str, int]:
            return out.setdefault(run, _no_counts())

        for r in self._read(
            f"SELECT run_id, verdict, COUNT(*) AS n FROM results {where}GROUP BY run_id, verdict", params
        ):
            counts = of(r["run_id"])
            counts[r["verdict"]] = r["n"]
            counts["traces"] += r["n"]
        for r in self._read(
            f"SELECT run_id, status, COUNT(*) AS n FROM review_items {where}GROUP BY run_id, status", params
        ):
            of(r["run_id"])[f"review_{r['status']}"] = r["n"]
        return out

    def _run_info(self, row: sqlite3.Row, counts: dict[str, int] | None = None) -> RunInfo:
        if counts is None:
            counts = self._counts(row["id"]).get(row["id"])
        return RunInfo(
            id=row["id"],
            label=row["label"],
            status=row["status"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            config=json.loads(row["config"]),
            fingerprint=json.loads(row["fingerprint"]),
            totals=json.loads(row["totals"]) if row["totals"] is not None else None,
            counts=counts or _no_counts(),
        )

    def _names_for(self, run_id: str) -> tuple[str, ...]:
        names = self._redact_names.get(run_id)
        if names is None:
            rows = self._read("SELECT config FROM runs WHERE id = ?", (run_id,))
            if not rows:
                raise InputError(f"no run {run_id!r} in the store", source=self.location, hint=LIST_RUNS_HINT)
            configured = json.loads(rows[0]["config"]).get("redact")
            names = tuple(DEFAULT_REDACT if configured is None else configured)
            self._redact_names[run_id] = names
        return names
