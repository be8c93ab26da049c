"""The store's schema: its tables, as the ordered list of migrations that builds them.

``Connection._migrate`` (connection.py) applies ``MIGRATIONS`` on open, in order, each in its own transaction;
a migration with ``rebuilds_tables`` runs with foreign keys off and checks them before it commits.

One list for both backends. A migration's ``statements`` are what SQLite runs (files written by older
seqjudge migrate exactly as they always did). PostgreSQL runs ``postgres_statements(migration)``: the same
statements with SQLite's column types in PostgreSQL's words (``INTEGER`` is 64-bit ``BIGINT``, ``REAL`` is
``DOUBLE PRECISION`` as in SQLite, ``INTEGER PRIMARY KEY AUTOINCREMENT`` an identity column), or, for the
two first migrations, which rebuild a table through SQLite's ``rowid``, the statements in ``postgresql``.
A new migration is written in portable SQL (TEXT/INTEGER/REAL columns, text or composite keys) and needs
no ``postgresql``.

PostgreSQL has no ``rowid``: the tables whose queries order ties by it (``runs``, ``batches``,
``batch_requests``) get a ``rowid`` identity column there, so the same ``ORDER BY ... rowid`` runs on both.

(Alembic's ``Operations`` was not used: the statements are short DDL strings others write in the same
shape, SQLite's table rebuild is already written out, and three type words are the only difference left;
restating every migration as Python operations would be a second copy of the schema.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]
    # A migration that rebuilds a table others reference runs with foreign keys off (dropping the old table
    # would otherwise cascade to its children) and checks them before it commits.
    rebuilds_tables: bool = False
    # PostgreSQL's statements when ``statements`` are not portable (see the module's docstring).
    postgresql: tuple[str, ...] | None = None


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

_ROWID = "BIGINT GENERATED BY DEFAULT AS IDENTITY"

_PG_V1 = (*_V1, f"ALTER TABLE runs ADD COLUMN rowid {_ROWID}")
_PG_V2 = (
    "ALTER TABLE runs DROP CONSTRAINT runs_status_check",
    "ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK ("
    "status IN ('running', 'completed', 'stopped', 'interrupted', 'batch_pending'))",
    *_V2[5:],  # the batch tables, as SQLite's
    f"ALTER TABLE batches ADD COLUMN rowid {_ROWID}",
    f"ALTER TABLE batch_requests ADD COLUMN rowid {_ROWID}",
)

# -- the review workbench's team layer (store.team) --
# reviewers: people who may sign in; only the SHA-256 of a token is kept (store.team says why a plain hash).
# web_sessions: a signed-in browser; only the hash of the session id is kept, the CSRF token is per session.
# review_decisions: every decision on an item, append-only (a changed mind is a new row; a reviewer's current
#   decision is their latest by seq). seq numbers an item's decisions in order: timestamps can tie.
# review_claims: who is on an item (a soft claim: it shows, it never blocks).
# review_items gains required_reviews (independent reviews an item needs, from the run's config) and
#   team_state, a copy of the state its decisions give an open item (open, in_review, disputed), written in
#   the transaction that appends the decision, so that the queue filters on a column, not on a derivation.
_V3 = (
    """CREATE TABLE reviewers (
        name TEXT PRIMARY KEY,
        token_hash TEXT UNIQUE NOT NULL,
        admin INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        disabled_at TEXT
    )""",
    """CREATE TABLE web_sessions (
        id_hash TEXT PRIMARY KEY,
        reviewer TEXT NOT NULL REFERENCES reviewers (name) ON DELETE CASCADE,
        csrf_token TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
    )""",
    "CREATE INDEX web_sessions_reviewer ON web_sessions (reviewer)",
    """CREATE TABLE review_decisions (
        id TEXT PRIMARY KEY,
        item_id INTEGER NOT NULL REFERENCES review_items (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        reviewer TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('review', 'adjudication')),
        verdict TEXT NOT NULL CHECK (verdict IN ('pass', 'fail')),
        rules TEXT NOT NULL,
        note TEXT NOT NULL,
        decided_at TEXT NOT NULL,
        UNIQUE (item_id, seq)
    )""",
    "CREATE INDEX review_decisions_reviewer ON review_decisions (reviewer, item_id)",
    """CREATE TABLE review_claims (
        item_id INTEGER PRIMARY KEY REFERENCES review_items (id) ON DELETE CASCADE,
        reviewer TEXT NOT NULL,
        claimed_at TEXT NOT NULL
    )""",
    "CREATE INDEX review_claims_reviewer ON review_claims (reviewer, claimed_at)",
    "ALTER TABLE review_items ADD COLUMN required_reviews INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE review_items ADD COLUMN team_state TEXT NOT NULL DEFAULT 'open'",
    "CREATE INDEX review_items_queue ON review_items (status, team_state, id)",
    "CREATE INDEX review_items_run_queue ON review_items (run_id, status, team_state, id)",
    # The queue's rule filter looks up one trace's rule: without this SQLite takes (run_id, rule_id) and
    # scans the run's decisions of that rule for every item (57 s for 10,000 items; under 0.1 s with it).
    "CREATE INDEX rule_decisions_trace_rule ON rule_decisions (run_id, trace_id, rule_id)",
)

# -- the guard's decisions (seqjudge.guard, store/guard.py) --
# guard_decisions: one row per decision the runtime guard took before a tool call (shadow mode: decided and
#   recorded, never enforced), keyed by the agent's session id and the decision's number in that session.
#   A session that is later run offline as a trace of the same id is shown beside its verdict by
#   `runs show`. rules: the per-rule outcomes as JSON text (read in Python); degraded: the fail-mode note
#   when the guard could not decide. Portable SQL only (SQLite and PostgreSQL): no rowid, no JSON functions.
_V4 = (
    """CREATE TABLE guard_decisions (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        decided_at TEXT NOT NULL,
        tool TEXT NOT NULL,
        call_id TEXT,
        action TEXT NOT NULL CHECK (action IN ('allow', 'deny', 'ask')),
        rules TEXT NOT NULL,
        degraded TEXT,
        shadow INTEGER NOT NULL CHECK (shadow IN (0, 1)),
        PRIMARY KEY (session_id, seq)
    )""",
)

# Applied in order; a new schema is a new entry at the end, never an edit of an applied one.
MIGRATIONS: list[Migration] = [
    Migration(
        1, "runs, results, rule decisions, judge attempts, review items, baselines", _V1, postgresql=_PG_V1
    ),
    Migration(
        2,
        "batch runs: run status batch_pending, batches, batch requests",
        _V2,
        rebuilds_tables=True,
        postgresql=_PG_V2,
    ),
    Migration(3, "team review: reviewers, web sessions, review decisions, claims, required reviews", _V3),
    Migration(4, "guard decisions: the runtime guard's decisions per session (shadow mode)", _V4),
]

_PG_TYPES = (
    (re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", re.IGNORECASE), f"{_ROWID} PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b", re.IGNORECASE), "BIGINT"),
    (re.compile(r"\bREAL\b", re.IGNORECASE), "DOUBLE PRECISION"),
)
_DDL = re.compile(r"^\s*(CREATE\s+TABLE|ALTER\s+TABLE)\b", re.IGNORECASE)


def postgres_statements(migration: Migration) -> tuple[str, ...]:
    """What PostgreSQL runs for ``migration`` (see the module's docstring)."""
    statements = migration.postgresql if migration.postgresql is not None else migration.statements
    return tuple(to_postgres(statement) for statement in statements)


def to_postgres(statement: str) -> str:
    """A portable DDL statement with SQLite's column types as PostgreSQL's; any other statement as given."""
    if not _DDL.match(statement):
        return statement
    for pattern, replacement in _PG_TYPES:
        statement = pattern.sub(replacement, statement)
    return statement
