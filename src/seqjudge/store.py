"""The SQLite store: runs, results per trace and per rule, judge attempts, review items, baselines.

This is the only module that writes SQL. Design decisions:

- One transaction per trace (``save_result``): the result row, its rule decisions, its judge attempts and
  its review item are committed together or not at all, so a run killed at any moment (SIGKILL included)
  leaves every completed trace whole and nothing half-written. ``(run_id, trace_id)`` is unique: resume
  never stores (or judges) a trace twice.
- WAL journal, ``synchronous=NORMAL``: a commit survives the process being killed; only a power loss may
  drop the last commits (never corrupt the file), which ``--resume`` then redoes.
- The schema is versioned: ``schema_version`` holds one row per applied migration and ``MIGRATIONS`` is
  applied in order on open, each in its own transaction. A file written by a newer seqjudge is refused.
- Secrets: traces are redacted with the run's configured names (``config["redact"]``, default
  ``DEFAULT_REDACT``; a configured list replaces the default, an empty list turns key redaction off),
  strings in results and judge replies have ``key=value`` secrets redacted, run configs lose secret-named
  keys, and the values of secret-looking environment variables (API keys) are removed from every value
  written, whatever key they hide under.
- The full ``TraceResult.model_dump(mode="json")`` is stored beside the queryable columns, so that a
  result is rebuilt exactly (the judge as a ``JudgeResult``).
"""

from __future__ import annotations

import csv
import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, TextIO

from pydantic import BaseModel, Field, ValidationError

from seqjudge.crosscheck import RuleDecision, TraceResult
from seqjudge.errors import InputError
from seqjudge.redact import (
    DEFAULT_REDACT,
    ENV_SECRET_NAMES,
    redact_trace,
    redact_value,
    scrub_secrets,
    secret_env_values,
)
from seqjudge.trace import Trace

DEFAULT_STORE_PATH = Path(".seqjudge") / "seqjudge.db"
RUN_STATUSES = ("running", "completed", "stopped", "interrupted", "batch_pending")
FINAL_STATUSES = ("completed", "stopped", "interrupted")
LIST_RUNS_HINT = "`seqjudge runs list` shows the stored runs"


# -- schema ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]
    # A migration that rebuilds a table others reference runs with foreign keys off (dropping the old table
    # would otherwise cascade to its children) and checks them before it commits.
    rebuilds_tables: bool = False


_V1 = (
    """CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        label TEXT,
        status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'stopped', 'interrupted')),
        started_at TEXT NOT NULL,
        finished_at TEXT,
        config TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        totals TEXT
    )""",
    "CREATE INDEX runs_started ON runs (started_at)",
    """CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        trace_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        saved_at TEXT NOT NULL,
        verdict TEXT NOT NULL CHECK (verdict IN ('pass', 'fail', 'review')),
        score REAL NOT NULL,
        review_reasons TEXT NOT NULL,
        judge_status TEXT NOT NULL CHECK (judge_status IN ('scored', 'unscored', 'skipped')),
        judge_skipped TEXT,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        trace TEXT NOT NULL,
        result TEXT NOT NULL,
        PRIMARY KEY (run_id, trace_id)
    )""",
    "CREATE INDEX results_seq ON results (run_id, seq)",
    """CREATE TABLE rule_decisions (
        run_id TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        rule_id TEXT NOT NULL,
        type TEXT NOT NULL,
        severity TEXT NOT NULL,
        engine TEXT NOT NULL,
        judge TEXT,
        final TEXT NOT NULL,
        agree INTEGER,
        PRIMARY KEY (run_id, trace_id, position),
        FOREIGN KEY (run_id, trace_id) REFERENCES results (run_id, trace_id) ON DELETE CASCADE
    )""",
    "CREATE INDEX rule_decisions_rule ON rule_decisions (run_id, rule_id)",
    """CREATE TABLE judge_attempts (
        run_id TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        n INTEGER NOT NULL,
        request_hash TEXT NOT NULL,
        raw_reply TEXT NOT NULL,
        error TEXT,
        error_stage TEXT,
        usage TEXT NOT NULL,
        latency_s REAL NOT NULL,
        finish_reason TEXT NOT NULL,
        max_tokens INTEGER,
        reasked INTEGER NOT NULL DEFAULT 0,
        cached INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, trace_id, position),
        FOREIGN KEY (run_id, trace_id) REFERENCES results (run_id, trace_id) ON DELETE CASCADE
    )""",
    """CREATE TABLE review_items (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        reasons TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
        created_at TEXT NOT NULL,
        resolved_at TEXT,
        reviewer TEXT,
        resolution_verdict TEXT CHECK (resolution_verdict IN ('pass', 'fail')),
        resolution_rules TEXT,
        note TEXT,
        UNIQUE (run_id, trace_id),
        FOREIGN KEY (run_id, trace_id) REFERENCES results (run_id, trace_id) ON DELETE CASCADE
    )""",
    "CREATE INDEX review_items_status ON review_items (status, run_id)",
    """CREATE TABLE baselines (
        name TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        created_at TEXT NOT NULL
    )""",
)

# -- batch runs (seqjudge.batch) --
# Runs gain the status `batch_pending` (submitted to a provider's batch API, not yet collected). SQLite
# cannot alter a CHECK constraint, so `runs` is rebuilt, rowids kept (list_runs orders ties by rowid).
# batch_traces: what a batch run needs to finish a trace without the input files: the redacted trace, the
#   engine's report (the engine sees the unredacted trace, as online) and the rendered prompt's metadata.
# batches: one row per provider batch; state `submitted` until its results are recorded here.
# batch_requests: one row per request in a batch, joined to its trace by custom_id; `session` is the judge
#   call's state up to this request; outcome/result are recorded once from the provider's results, and
#   `handled` says the outcome was acted on (result stored, re-asked, or put in a follow-up batch).
# prompt_parts: the system and static prompt texts, once each (every request of a run repeats them).
_V2 = (
    """CREATE TABLE runs_v2 (
        id TEXT PRIMARY KEY,
        label TEXT,
        status TEXT NOT NULL CHECK (
            status IN ('running', 'completed', 'stopped', 'interrupted', 'batch_pending')
        ),
        started_at TEXT NOT NULL,
        finished_at TEXT,
        config TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        totals TEXT
    )""",
    "INSERT INTO runs_v2 (rowid, id, label, status, started_at, finished_at, config, fingerprint, totals) "
    "SELECT rowid, id, label, status, started_at, finished_at, config, fingerprint, totals FROM runs",
    "DROP TABLE runs",
    "ALTER TABLE runs_v2 RENAME TO runs",
    "CREATE INDEX runs_started ON runs (started_at)",
    """CREATE TABLE batch_traces (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        trace_id TEXT NOT NULL,
        custom_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        trace TEXT NOT NULL,
        engine TEXT NOT NULL,
        prompt TEXT NOT NULL,
        request TEXT NOT NULL,
        PRIMARY KEY (run_id, trace_id),
        UNIQUE (run_id, custom_id)
    )""",
    """CREATE TABLE batches (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        round INTEGER NOT NULL,
        purpose TEXT NOT NULL CHECK (purpose IN ('first', 'retry', 'reask', 'mixed')),
        input_file_id TEXT,
        wire TEXT NOT NULL,
        request_count INTEGER NOT NULL,
        status TEXT NOT NULL,
        counts TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'submitted' CHECK (state IN ('submitted', 'collected')),
        submitted_at TEXT NOT NULL,
        checked_at TEXT,
        collected_at TEXT
    )""",
    "CREATE INDEX batches_run ON batches (run_id, state)",
    """CREATE TABLE batch_requests (
        batch_id TEXT NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
        custom_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        purpose TEXT NOT NULL CHECK (purpose IN ('first', 'retry', 'reask')),
        attempt INTEGER NOT NULL,
        prompt_hash TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        session TEXT NOT NULL,
        outcome TEXT CHECK (outcome IN ('succeeded', 'errored', 'expired', 'canceled')),
        result TEXT,
        error TEXT,
        handled INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (batch_id, custom_id),
        FOREIGN KEY (run_id, trace_id) REFERENCES batch_traces (run_id, trace_id) ON DELETE CASCADE
    )""",
    "CREATE INDEX batch_requests_run ON batch_requests (run_id, handled, trace_id)",
    """CREATE TABLE prompt_parts (
        hash TEXT PRIMARY KEY,
        text TEXT NOT NULL
    )""",
)

# Applied in order; a new schema is a new entry at the end, never an edit of an applied one.
MIGRATIONS: list[Migration] = [
    Migration(1, "runs, results, rule decisions, judge attempts, review items, baselines", _V1),
    Migration(2, "batch runs: run status batch_pending, batches, batch requests", _V2, rebuilds_tables=True),
]


# -- models ------------------------------------------------------------------------------------------------
class RunInfo(BaseModel):
    id: str
    label: str | None = None
    status: Literal["running", "completed", "stopped", "interrupted", "batch_pending"]
    started_at: datetime
    finished_at: datetime | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    fingerprint: dict[str, Any] = Field(default_factory=dict)
    totals: dict[str, Any] | None = None
    counts: dict[str, int] = Field(default_factory=dict)  # traces, pass, fail, review; review_open/resolved


class StoredResult(BaseModel):
    run_id: str
    trace_id: str
    saved_at: datetime
    trace: Trace
    result: TraceResult


class AttemptRecord(BaseModel):
    """One stored judge attempt (``seqjudge.judge.judge.Attempt`` as written)."""

    n: int
    request_hash: str
    raw_reply: str
    error: str | None = None
    error_stage: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    latency_s: float = 0.0
    finish_reason: str
    max_tokens: int | None = None
    reasked: bool = False
    cached: bool = False


class Resolution(BaseModel):
    verdict: Literal["pass", "fail"]
    rules: dict[str, Literal["pass", "fail"]] = Field(default_factory=dict)
    note: str = ""
    reviewer: str
    resolved_at: datetime


class ReviewItem(BaseModel):
    id: int
    run_id: str
    trace_id: str
    reasons: list[str]
    status: Literal["open", "resolved"]
    created_at: datetime
    verdict: str  # the trace's reconciled verdict
    score: float
    resolution: Resolution | None = None


class ReviewDetail(ReviewItem):
    """A review item with everything a reviewer needs: the trace, both reports (``result.engine``,
    ``result.judge``), the rule decisions and the raw judge replies."""

    trace: Trace
    result: TraceResult
    attempts: list[AttemptRecord] = Field(default_factory=list)

    @property
    def disagreements(self) -> list[RuleDecision]:
        return self.result.disagreements


class BatchTrace(BaseModel):
    """A trace of a batch run as kept until its result is stored (see ``Store.put_batch_traces``)."""

    trace_id: str
    custom_id: str
    trace: Trace
    engine: dict[str, Any]
    prompt: dict[str, Any]
    request: dict[str, Any]


class BatchInfo(BaseModel):
    id: str
    run_id: str
    provider: str
    model: str
    round: int
    purpose: str
    input_file_id: str | None = None
    wire: dict[str, Any] = Field(default_factory=dict)
    request_count: int
    status: str  # the provider's own word, as last seen
    counts: dict[str, int] = Field(default_factory=dict)
    state: Literal["submitted", "collected"]
    submitted_at: datetime
    checked_at: datetime | None = None
    collected_at: datetime | None = None


class BatchRequest(BaseModel):
    batch_id: str
    custom_id: str
    trace_id: str
    purpose: Literal["first", "retry", "reask"]
    attempt: int  # the judge attempt this request is (1 = the first)
    prompt_hash: str
    request_hash: str
    session: dict[str, Any]
    outcome: Literal["succeeded", "errored", "expired", "canceled"] | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    handled: bool = False


class DuplicateTraceError(InputError):
    """A trace id already stored in the run: trace ids must be unique within a run."""


# -- helpers -----------------------------------------------------------------------------------------------
def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _jsonable(value: Any) -> Any:
    """Plain JSON values (a config may hold paths or enums): what will be stored, before it is redacted."""
    return json.loads(_dumps(value))


def new_run_id(moment: datetime | None = None) -> str:
    """``r20261130-033012-3f9a``: UTC start time (sortable, readable) and 16 random bits."""
    moment = moment or _now()
    return f"r{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def judge_data(judge: Any) -> dict[str, Any] | None:
    """``TraceResult.judge`` (a JudgeResult, its JSON dict, or None) as a JSON dict."""
    if judge is None:
        return None
    if isinstance(judge, BaseModel):
        return judge.model_dump(mode="json")
    if isinstance(judge, dict):
        return judge
    raise TypeError(f"TraceResult.judge must be a JudgeResult, a dict or None, not {type(judge).__name__}")


def _rebuild_judge(data: Any) -> Any:
    """A stored judge back as a ``JudgeResult`` (what ``reconcile`` was given); anything else as stored."""
    if not isinstance(data, dict):
        return data
    from seqjudge.judge.judge import JudgeResult

    try:
        return JudgeResult.model_validate(data)
    except ValidationError:
        return data


def rebuild_result(data: dict[str, Any]) -> TraceResult:
    """A ``TraceResult`` from its ``model_dump(mode="json")`` (the store's column, or an export line)."""
    judge = data.get("judge")
    result = TraceResult.model_validate({**data, "judge": None})
    result.judge = _rebuild_judge(judge)
    return result


def _judge_status(judge: dict[str, Any] | None) -> str:
    if judge is None:
        return "skipped"
    return "scored" if judge.get("status") == "scored" else "unscored"


def read_export(stream: TextIO) -> Iterator[tuple[RunInfo, StoredResult]]:
    """Read back a JSONL export (``Store.export(..., "jsonl")``) without the database."""
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            run = RunInfo.model_validate(row["run"])
            stored = StoredResult(
                run_id=run.id,
                trace_id=row["result"]["trace_id"],
                saved_at=row.get("saved_at") or run.started_at,
                trace=Trace.model_validate(row["trace"]),
                result=rebuild_result(row["result"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"not a seqjudge JSONL export line ({exc})",
                source=getattr(stream, "name", None),
                where=f"line {number}",
                hint="export runs with `seqjudge runs export RUN --format jsonl`",
            ) from None
        yield run, stored


# -- the store ---------------------------------------------------------------------------------------------
class Store:
    """``Store(path)``: open (creating it and its folders unless ``create=False``) and migrate."""

    def __init__(self, path: str | Path = DEFAULT_STORE_PATH, *, create: bool = True) -> None:
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise InputError(
                    "no seqjudge store here",
                    source=str(self.path),
                    hint="`seqjudge run` creates it; pass --store (or set SEQJUDGE_STORE) to use another one",
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # Several threads may share the store (an async runner using worker threads): one lock serialises
        # transactions, so two traces never interleave in one connection.
        self._lock = threading.RLock()
        self._redact_names: dict[str, tuple[str, ...]] = {}
        self._secrets = secret_env_values(ENV_SECRET_NAMES)
        try:
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=10.0, check_same_thread=False
            )
            self._conn.row_factory = sqlite3.Row
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except BaseException as exc:
            conn = getattr(self, "_conn", None)
            if conn is not None:
                conn.close()
            if not isinstance(exc, sqlite3.DatabaseError):
                raise
            raise InputError(
                f"cannot open the seqjudge store ({exc})",
                source=str(self.path),
                hint="pass --store with the path of a seqjudge database, or remove this file",
            ) from None
        self.journal_mode = str(mode).lower()

    # -- lifecycle --
    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front (IMMEDIATE) so that a concurrent writer waits, not fails."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise RuntimeError("the store is closed")
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _migrate(self) -> None:
        migrations = sorted(MIGRATIONS, key=lambda m: m.version)
        if [m.version for m in migrations] != list(range(1, len(migrations) + 1)):
            raise RuntimeError("store migrations must be numbered 1, 2, 3... without gaps")
        # Read first: a store that is up to date is opened without a write lock (a reader never waits for
        # a running writer, and a read-only copy can be read).
        current = self._version(self._conn)
        if current > len(migrations):
            raise InputError(
                f"the store has schema version {current}, newer than this seqjudge knows ({len(migrations)})",
                source=str(self.path),
                hint="upgrade seqjudge, or pass --store with another database",
            )
        if current == len(migrations):
            return
        with self._tx() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                "version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
        for migration in migrations:
            if migration.rebuilds_tables:
                self._conn.execute("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction: set it before
            try:
                with self._tx() as conn:
                    # Read inside the transaction: another process may have migrated meanwhile.
                    current = self._version(conn)
                    if current >= migration.version:
                        continue
                    for statement in migration.statements:
                        conn.execute(statement)
                    if migration.rebuilds_tables and conn.execute("PRAGMA foreign_key_check").fetchone():
                        raise RuntimeError(f"store migration {migration.version} broke a foreign key")
                    conn.execute(
                        "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                        (migration.version, migration.description, _iso(_now())),
                    )
            finally:
                if migration.rebuilds_tables:
                    self._conn.execute("PRAGMA foreign_keys=ON")

    @staticmethod
    def _version(conn: sqlite3.Connection) -> int:
        """The applied schema version; 0 for a new file."""
        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone():
            return 0
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    @property
    def schema_version(self) -> int:
        with self._lock:
            return self._version(self._conn)

    def _clean(self, value: Any) -> Any:
        """Remove environment secrets (API keys) from a JSON-like value before it is written."""
        return scrub_secrets(value, self._secrets)

    def _text(self, value: Any) -> str:
        return _dumps(self._clean(value))

    # -- runs --
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
            run_id = new_run_id(started)
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
            return run_id
        raise RuntimeError("could not draw a unique run id")

    def finish_run(self, run_id: str, *, totals: dict[str, Any], status: str = "completed") -> None:
        if status not in FINAL_STATUSES:
            raise ValueError(f"status must be one of {', '.join(FINAL_STATUSES)}, not {status!r}")
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = ?, finished_at = ?, totals = ? WHERE id = ?",
                (status, _iso(_now()), self._text(_jsonable(totals)), run_id),
            )
            if cur.rowcount == 0:
                raise InputError(
                    f"no run {run_id!r} in the store", source=str(self.path), hint=LIST_RUNS_HINT
                )

    def reopen_run(self, run_id: str) -> RunInfo:
        """Mark a stopped or interrupted run ``running`` again (``--resume``); returns it, config included."""
        with self._tx() as conn:
            pending = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if pending is not None and pending["status"] == "batch_pending":
                # Judging its traces online now would pay for them twice: once more in the batches.
                raise InputError(
                    f"run {run_id} is waiting for provider batches",
                    source=str(self.path),
                    hint=f"`seqjudge batch status {run_id}` shows them; `seqjudge batch collect {run_id}` "
                    "finishes the run",
                )
            cur = conn.execute(
                "UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?", (run_id,)
            )
            if cur.rowcount == 0:
                raise InputError(
                    f"no run {run_id!r} in the store", source=str(self.path), hint=LIST_RUNS_HINT
                )
        return self.run_info(run_id)

    def resolve_run(self, ref: str) -> str:
        """A run id, a unique prefix of one, or ``latest`` (the newest run) -> the run id."""
        ref = ref.strip()
        if ref == "latest":
            rows = self._read("SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1")
            if not rows:
                raise InputError(
                    "`latest` names no run: the store holds none yet",
                    source=str(self.path),
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
                    source=str(self.path),
                    hint="give more characters of the id",
                )
        raise InputError(
            f"no run {ref!r} in the store",
            source=str(self.path),
            hint=f"give a run id, a unique prefix of one, or `latest`; {LIST_RUNS_HINT}",
        )

    def run_info(self, run_id: str) -> RunInfo:
        rows = self._read("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise InputError(f"no run {run_id!r} in the store", source=str(self.path), hint=LIST_RUNS_HINT)
        return self._run_info(rows[0])

    def list_runs(self) -> list[RunInfo]:
        """Every run, newest first."""
        return [
            self._run_info(r) for r in self._read("SELECT * FROM runs ORDER BY started_at DESC, rowid DESC")
        ]

    def _run_info(self, row: sqlite3.Row) -> RunInfo:
        counts = {"traces": 0, "pass": 0, "fail": 0, "review": 0, "review_open": 0, "review_resolved": 0}
        for r in self._read(
            "SELECT verdict, COUNT(*) AS n FROM results WHERE run_id = ? GROUP BY verdict", (row["id"],)
        ):
            counts[r["verdict"]] = r["n"]
            counts["traces"] += r["n"]
        for r in self._read(
            "SELECT status, COUNT(*) AS n FROM review_items WHERE run_id = ? GROUP BY status", (row["id"],)
        ):
            counts[f"review_{r['status']}"] = r["n"]
        return RunInfo(
            id=row["id"],
            label=row["label"],
            status=row["status"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            config=json.loads(row["config"]),
            fingerprint=json.loads(row["fingerprint"]),
            totals=json.loads(row["totals"]) if row["totals"] is not None else None,
            counts=counts,
        )

    def _names_for(self, run_id: str) -> tuple[str, ...]:
        names = self._redact_names.get(run_id)
        if names is None:
            rows = self._read("SELECT config FROM runs WHERE id = ?", (run_id,))
            if not rows:
                raise InputError(
                    f"no run {run_id!r} in the store", source=str(self.path), hint=LIST_RUNS_HINT
                )
            configured = json.loads(rows[0]["config"]).get("redact")
            names = tuple(DEFAULT_REDACT if configured is None else configured)
            self._redact_names[run_id] = names
        return names

    # -- results --
    def completed_trace_ids(self, run_id: str) -> set[str]:
        return {r["trace_id"] for r in self._read("SELECT trace_id FROM results WHERE run_id = ?", (run_id,))}

    def save_result(self, run_id: str, trace: Trace, result: TraceResult) -> None:
        """Store one trace's result in one transaction: the redacted trace, the result, its rule decisions,
        its judge attempts and (when routed) its review item. Raises ``DuplicateTraceError`` when the run
        already holds this trace id."""
        if trace.trace_id is not None and trace.trace_id != result.trace_id:
            raise ValueError(f"the trace is {trace.trace_id!r} but the result is for {result.trace_id!r}")
        names = self._names_for(run_id)
        trace_data = redact_trace(trace, names).model_dump(mode="json")
        trace_data["trace_id"] = result.trace_id  # an id-less trace is known by the engine's id from now on
        trace_data = self._clean(trace_data)
        # Results hold explanations and raw judge replies: only secrets written as key=value are redacted
        # there, never keys (``input_tokens`` is a count, not a token).
        data = result.model_dump(mode="json")
        data["judge"] = judge_data(result.judge)
        data = self._clean(redact_value(data, names, keys=False))
        judge = data["judge"]
        usage = (judge or {}).get("usage") or {}
        now = _iso(_now())
        trace_id = result.trace_id
        try:
            with self._tx() as conn:
                seq = conn.execute(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM results WHERE run_id = ?", (run_id,)
                ).fetchone()[0]
                conn.execute(
                    "INSERT INTO results (run_id, trace_id, seq, saved_at, verdict, score, review_reasons, "
                    "judge_status, judge_skipped, tokens_in, tokens_out, trace, result) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        trace_id,
                        seq,
                        now,
                        data["verdict"],
                        data["score"],
                        _dumps(data["review_reasons"]),
                        _judge_status(judge),
                        data.get("judge_skipped"),
                        int(usage.get("input_tokens", 0)),
                        int(usage.get("output_tokens", 0)),
                        _dumps(trace_data),
                        _dumps(data),
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
        except sqlite3.IntegrityError as exc:
            if self._read("SELECT 1 FROM results WHERE run_id = ? AND trace_id = ?", (run_id, trace_id)):
                raise DuplicateTraceError(
                    f"trace {trace_id!r} is already stored in run {run_id}",
                    source=str(self.path),
                    hint="give every trace a distinct trace_id (ids must be unique within a run); a resumed "
                    "run skips the traces already stored",
                ) from None
            if not self._read("SELECT 1 FROM runs WHERE id = ?", (run_id,)):
                raise InputError(
                    f"no run {run_id!r} in the store", source=str(self.path), hint=LIST_RUNS_HINT
                ) from None
            raise exc

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
        return StoredResult(
            run_id=row["run_id"],
            trace_id=row["trace_id"],
            saved_at=row["saved_at"],
            trace=Trace.model_validate_json(row["trace"]),
            result=rebuild_result(json.loads(row["result"])),
        )

    def results(self, run_id: str) -> Iterator[StoredResult]:
        """Every stored result of the run, in the order they were saved."""
        # Read in batches: a large run's traces need not all be in memory at once.
        with self._lock:
            cursor = self._conn.execute(
                "SELECT run_id, trace_id, saved_at, trace, result FROM results WHERE run_id = ? ORDER BY seq",
                (run_id,),
            )
        while True:
            with self._lock:
                batch = cursor.fetchmany(200)
            if not batch:
                return
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
                source=str(self.path),
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

    def export(self, run_id: str, fmt: Literal["jsonl", "csv"], out: IO[str]) -> int:
        """Write the run's results; returns how many traces were written.

        jsonl: one self-contained line per trace, ``{run, trace, result, review, saved_at}``, enough to
        rebuild every report without the database (``read_export``). csv: one row per trace."""
        if fmt not in ("jsonl", "csv"):
            raise InputError(f"unknown export format {fmt!r}", where="--format", hint="use jsonl or csv")
        run = self.run_info(run_id)
        reviews = {item.trace_id: item for item in self.review_items(run=run_id, status=None)}
        count = 0
        if fmt == "jsonl":
            head = run.model_dump(mode="json")
            for stored in self.results(run_id):
                item = reviews.get(stored.trace_id)
                line = {
                    "run": head,
                    "trace": stored.trace.model_dump(mode="json"),
                    "result": stored.result.model_dump(mode="json"),
                    "review": None if item is None else item.model_dump(mode="json"),
                    "saved_at": stored.saved_at.isoformat(),
                }
                out.write(_dumps(line) + "\n")
                count += 1
            return count
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(
            [
                "trace_id",
                "verdict",
                "score",
                "review_reasons",
                "rules_failed",
                "disagreements",
                "judge_status",
                "tokens_in",
                "tokens_out",
                "review_item",
                "review_status",
            ]
        )
        rows = self._read(
            "SELECT trace_id, verdict, score, review_reasons, judge_status, tokens_in, tokens_out "
            "FROM results WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        failed: dict[str, list[str]] = {}
        split: dict[str, list[str]] = {}
        for r in self._read(
            "SELECT trace_id, rule_id, final, agree FROM rule_decisions WHERE run_id = ? "
            "ORDER BY trace_id, position",
            (run_id,),
        ):
            if r["final"] == "failed":
                failed.setdefault(r["trace_id"], []).append(r["rule_id"])
            if r["agree"] == 0:
                split.setdefault(r["trace_id"], []).append(r["rule_id"])
        for r in rows:
            item = reviews.get(r["trace_id"])
            writer.writerow(
                [
                    r["trace_id"],
                    r["verdict"],
                    f"{r['score']:.4f}",
                    ";".join(json.loads(r["review_reasons"])),
                    ";".join(failed.get(r["trace_id"], [])),
                    ";".join(split.get(r["trace_id"], [])),
                    r["judge_status"],
                    r["tokens_in"],
                    r["tokens_out"],
                    "" if item is None else item.id,
                    "" if item is None else item.status,
                ]
            )
            count += 1
        return count

    # -- review --
    _REVIEW_SELECT = (
        "SELECT i.*, r.verdict AS result_verdict, r.score AS result_score FROM review_items i "
        "JOIN results r ON r.run_id = i.run_id AND r.trace_id = i.trace_id"
    )

    def _review_item(self, row: sqlite3.Row) -> ReviewItem:
        return ReviewItem(**self._review_fields(row))

    @staticmethod
    def _review_fields(row: sqlite3.Row) -> dict[str, Any]:
        resolution = None
        if row["status"] == "resolved":
            resolution = Resolution(
                verdict=row["resolution_verdict"],
                rules=json.loads(row["resolution_rules"] or "{}"),
                note=row["note"] or "",
                reviewer=row["reviewer"] or "",
                resolved_at=row["resolved_at"],
            )
        return {
            "id": row["id"],
            "run_id": row["run_id"],
            "trace_id": row["trace_id"],
            "reasons": json.loads(row["reasons"]),
            "status": row["status"],
            "created_at": row["created_at"],
            "verdict": row["result_verdict"],
            "score": row["result_score"],
            "resolution": resolution,
        }

    def review_items(
        self, run: str | None = None, reason: str | None = None, status: str | None = "open"
    ) -> list[ReviewItem]:
        """Review items, oldest first. ``run`` is a run reference (id, prefix, ``latest``); ``status`` is
        ``open``, ``resolved``, or None / ``all`` for both; ``reason`` keeps items routed for that reason."""
        where: list[str] = []
        params: list[Any] = []
        if run is not None:
            where.append("i.run_id = ?")
            params.append(self.resolve_run(run))
        if status not in (None, "all"):
            if status not in ("open", "resolved"):
                raise InputError(
                    f"unknown review status {status!r}", where="--status", hint="use open, resolved or all"
                )
            where.append("i.status = ?")
            params.append(status)
        if reason is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(i.reasons) WHERE json_each.value = ?)")
            params.append(reason)
        sql = self._REVIEW_SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY i.id"
        return [self._review_item(r) for r in self._read(sql, tuple(params))]

    def review_item(self, item_id: int) -> ReviewDetail:
        rows = self._read(self._REVIEW_SELECT + " WHERE i.id = ?", (item_id,))
        if not rows:
            raise InputError(
                f"no review item {item_id}",
                source=str(self.path),
                hint="`seqjudge review list` shows the open items",
            )
        fields = self._review_fields(rows[0])
        stored = self.result(fields["run_id"], fields["trace_id"])
        return ReviewDetail(
            **fields,
            trace=stored.trace,
            result=stored.result,
            attempts=self.attempts(fields["run_id"], fields["trace_id"]),
        )

    def resolve_review(
        self,
        item_id: int,
        *,
        verdict: str,
        rules: dict[str, str] | None = None,
        note: str = "",
        reviewer: str,
    ) -> ReviewItem:
        """Record a person's decision. Resolving again replaces the earlier resolution (a correction)."""
        if verdict not in ("pass", "fail"):
            raise InputError(
                f"verdict {verdict!r} is not pass or fail",
                where="--verdict",
                hint="a reviewer says pass or fail",
            )
        rules = dict(rules or {})
        item = self.review_item(item_id)
        known = [d.rule_id for d in item.result.rules]
        for rule_id, outcome in rules.items():
            if rule_id not in known:
                raise InputError(
                    f"rule {rule_id!r} is not a rule of trace {item.trace_id}",
                    where="--rule",
                    hint=f"its rules are: {', '.join(known) or '(none)'}",
                )
            if outcome not in ("pass", "fail"):
                raise InputError(
                    f"rule {rule_id}: {outcome!r} is not pass or fail",
                    where="--rule",
                    hint="write --rule RULE=pass or --rule RULE=fail",
                )
        if not reviewer.strip():
            raise InputError("the reviewer is empty", where="--reviewer", hint="say who decided")
        with self._tx() as conn:
            conn.execute(
                "UPDATE review_items SET status = 'resolved', resolved_at = ?, reviewer = ?, "
                "resolution_verdict = ?, resolution_rules = ?, note = ? WHERE id = ?",
                (_iso(_now()), self._clean(reviewer), verdict, self._text(rules), self._clean(note), item_id),
            )
        return self._review_item(self._read(self._REVIEW_SELECT + " WHERE i.id = ?", (item_id,))[0])

    def export_labels(self, out: IO[str], *, run: str | None = None) -> int:
        """Write resolved items as golden-dataset label lines ``{trace_id, verdict, rules, labeler, note}``.

        One line per trace id: when the same trace was resolved in several runs, the latest resolution
        wins (a golden dataset labels each trace once). Returns the number of lines written."""
        latest: dict[str, ReviewItem] = {}
        for item in self.review_items(run=run, status="resolved"):
            assert item.resolution is not None
            seen = latest.get(item.trace_id)
            if seen is None or (
                seen.resolution and item.resolution.resolved_at >= seen.resolution.resolved_at
            ):
                latest[item.trace_id] = item
        for item in latest.values():
            res = item.resolution
            assert res is not None
            out.write(
                _dumps(
                    {
                        "trace_id": item.trace_id,
                        "verdict": res.verdict,
                        "rules": res.rules,
                        "labeler": res.reviewer,
                        "note": res.note,
                    }
                )
                + "\n"
            )
        return len(latest)

    # -- baselines (used by `seqjudge baseline` / `compare`) --
    def save_baseline(self, run_id: str, name: str) -> None:
        """Name a run as a baseline; saving an existing name moves it to this run."""
        run_id = self.resolve_run(run_id)
        if not name.strip():
            raise InputError("a baseline needs a name", where="--name")
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO baselines (name, run_id, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET run_id = excluded.run_id, "
                "created_at = excluded.created_at",
                (name, run_id, _iso(_now())),
            )

    def baseline(self, name: str) -> str:
        rows = self._read("SELECT run_id FROM baselines WHERE name = ?", (name,))
        if not rows:
            names = [r["name"] for r in self._read("SELECT name FROM baselines ORDER BY name")]
            raise InputError(
                f"no baseline named {name!r}",
                source=str(self.path),
                hint=("the baselines are: " + ", ".join(names))
                if names
                else "`seqjudge baseline save RUN --name NAME` makes one",
            )
        return str(rows[0]["run_id"])

    def baselines(self) -> dict[str, str]:
        return {
            r["name"]: r["run_id"] for r in self._read("SELECT name, run_id FROM baselines ORDER BY name")
        }

    # -- batch runs (seqjudge.batch) --
    def mark_batch_pending(self, run_id: str) -> None:
        """The run waits for provider batches: not running in any process, not finished either."""
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = 'batch_pending', finished_at = NULL WHERE id = ?", (run_id,)
            )
            if cur.rowcount == 0:
                raise InputError(
                    f"no run {run_id!r} in the store", source=str(self.path), hint=LIST_RUNS_HINT
                )

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
            "INSERT OR IGNORE INTO prompt_parts (hash, text) VALUES (?, ?)",
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
                raise InputError(f"no batch {batch_id!r} in the store", source=str(self.path))
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
