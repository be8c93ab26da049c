"""The open database: a SQLite file (its connection and pragmas) or a PostgreSQL database
(``store.postgres``), the lock and the transactions every write goes through, the schema migrated on open,
the run locks, and secrets scrubbed from every value written.

Both backends run the same SQL: portable statements with ``?`` placeholders, through ``self._read(sql,
params)`` and ``with self._tx() as conn: conn.execute(sql, params)``. Where SQLite and PostgreSQL spell a
thing differently (a JSON field, an array's elements), the store asks ``self._json_*`` for the fragment.
SQLite keeps its own driver connection (``sqlite3``): its guarantees below are the driver's (the pragmas,
the read-only and immutable opens, the error codes), and going through SQLAlchemy would add a layer per
statement without changing one of them. PostgreSQL goes through SQLAlchemy Core on psycopg 3.

- WAL journal, ``synchronous=NORMAL``: a commit survives the process being killed; only a power loss may
  drop the last commits (never corrupt the file), which ``--resume`` then redoes.
- ``schema_version`` holds one row per applied migration; a file written by a newer seqjudge is refused.
- A store this process may not write (a read-only file or folder, a read-only mount) is opened read-only
  when it exists and is up to date: it can be listed, shown, reported and exported; a write is then an
  ``InputError`` saying the store is read-only, never "remove this file".
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast
from urllib.parse import quote

from seqjudge.defaults import DEFAULT_STORE_PATH
from seqjudge.errors import InputError, StoreError
from seqjudge.redact import ENV_SECRET_NAMES, scrub_secrets, secret_env_values
from seqjudge.store.codec import _dumps, _iso, _now
from seqjudge.store.schema import MIGRATIONS, Migration, postgres_statements
from seqjudge.store.target import StoreTarget, parse_target

if TYPE_CHECKING:
    from seqjudge.store.postgres import PgSession

# A constraint violated, on either backend (PostgreSQL's ``PgIntegrityError`` is a subclass).
IntegrityError = sqlite3.IntegrityError


class Connection:
    """The database every part of ``Store`` works through (``Store`` is this and one mixin per concern)."""

    # The schema this store migrates to on open, in order. A class attribute, so that a test can play an
    # older or a newer seqjudge by replacing it on ``Store``: monkeypatch.setattr(Store, "migrations", ...).
    migrations: ClassVar[Sequence[Migration]] = MIGRATIONS

    def __init__(self, path: str | Path = DEFAULT_STORE_PATH, *, create: bool = True) -> None:
        self.target: StoreTarget = parse_target(path)
        # What messages name: the file, or the URL without its password.
        self.location = self.target.display
        # Several threads may share the store (an async runner using worker threads): one lock serialises
        # transactions, so two traces never interleave in one connection.
        self._lock = threading.RLock()
        self._redact_names: dict[str, tuple[str, ...]] = {}
        self._run_locks: dict[str, Any] = {}  # run id -> what holds its lock (see claim_run)
        # The store URL's password is a secret like an API key: removed from every value written.
        self._secrets = sorted(
            set(secret_env_values(ENV_SECRET_NAMES)) | set(self.target.secrets), key=len, reverse=True
        )
        self.read_only = False
        self._pg: PgSession | None = None
        # Writes deferred by ``defer_writes`` (PostgreSQL only), each a function of the transaction's
        # connection; written together by ``_flush``.
        self._deferred: list[Callable[[Any], None]] = []
        self._defer: tuple[int, float] | None = None  # (at most so many writes, so many seconds old)
        self._deferred_since = 0.0
        self._saved_ids: dict[str, set[str]] = {}  # while deferring: each run's stored and waiting trace ids
        self._seqs: dict[str, int] = {}  # and each run's last result number
        if self.target.kind == "postgresql":
            self._open_postgres(create)
            return
        if not self.path.exists():
            if not create:
                raise InputError(
                    "no seqjudge store here",
                    source=self.location,
                    hint="`seqjudge run` creates it; pass --store (or set SEQJUDGE_STORE) to use another one",
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = self._open()
        except sqlite3.OperationalError as exc:
            if not (self.path.is_file() and _not_writable(exc)):
                raise self._unopenable(exc) from None
            self.read_only = True  # (a file that exists: a new store must be written)
            try:
                mode = self._open()
            except sqlite3.DatabaseError as again:
                raise self._unopenable(again) from None
        except sqlite3.DatabaseError as exc:
            raise self._unopenable(exc) from None
        self.journal_mode = str(mode).lower()

    @property
    def path(self) -> Path:
        """The SQLite file. A PostgreSQL store has none: code that needs a local folder asks ``local_dir``."""
        if self.target.path is None:
            raise RuntimeError(f"the store {self.location} is a PostgreSQL database, not a file")
        return self.target.path

    @property
    def local_dir(self) -> Path:
        """This machine's folder for the files beside the store (the response cache)."""
        return self.target.local_dir

    @property
    def backend(self) -> str:
        return self.target.kind

    def _open_postgres(self, create: bool) -> None:
        try:
            from seqjudge.store.postgres import PgSession
        except ImportError as exc:  # psycopg is the `postgres` extra
            raise InputError(
                f"a PostgreSQL store needs the PostgreSQL driver, which is not installed ({exc})",
                source=self.location,
                hint="pip install 'seqjudge[postgres]' (psycopg 3), or pass --store with a SQLite file path",
            ) from None

        self.journal_mode = "postgresql"
        session = PgSession(self.target)
        self._pg = session
        # Typed as sqlite3's: the mixins use the part of it PgSession has (see store.postgres).
        self._conn = cast(sqlite3.Connection, session)
        try:
            if not create and self._version(session) == 0:
                raise InputError(
                    "no seqjudge store in this database",
                    source=self.location,
                    hint="`seqjudge run --store URL` creates it; pass --store (or set SEQJUDGE_STORE) to use "
                    "another one",
                )
            self._migrate()
        except BaseException:
            session.close()
            self._conn = None  # type: ignore[assignment]
            self._pg = None
            raise

    def _open(self) -> str:
        """Connect, set the pragmas and migrate; the journal mode. Read-only: the file's own journal mode,
        and the schema must be up to date already (a migration is a write)."""
        if self.read_only:
            # immutable: a WAL file in a folder we may not write has no -shm to share, and none can be made.
            uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            conn = _connect(uri)
            try:
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            except sqlite3.OperationalError:
                conn.close()
                conn = _connect(uri + "&immutable=1")
        else:
            conn = _connect(self.location, uri=False)
        self._conn = conn
        try:
            if self.read_only:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            else:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException:
            conn.close()
            self._conn = None  # type: ignore[assignment]
            raise
        return str(mode)

    def _unopenable(self, exc: sqlite3.DatabaseError) -> InputError:
        if _not_writable(exc):
            return InputError(
                f"cannot open the seqjudge store: it cannot be written here ({exc})",
                source=self.location,
                hint="Make the file and its folder writable, or pass --store with a writable path",
            )
        if getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            # Another process holds the file: removing it (the hint below) would lose that process's work.
            return InputError(
                f"cannot open the seqjudge store: another process holds it locked ({exc})",
                source=self.location,
                hint="end the process holding the store (a `seqjudge run` migrating or writing it), or wait "
                "for it, then run the command again",
            )
        return InputError(
            f"cannot open the seqjudge store ({exc})",
            source=self.location,
            hint="pass --store with the path of a seqjudge database, or remove this file",
        )

    # -- deferred writes: a run's traces committed in groups on a server --
    def defer_writes(self, *, max_writes: int = 64, max_seconds: float = 1.0) -> None:
        """From now on, commit ``_write_later`` writes (``save_result``'s) in groups: when ``max_writes`` are
        waiting or the oldest is ``max_seconds`` old, and before anything else this store reads or writes
        (so it always reads what it wrote) or closes. PostgreSQL only: there each commit is a round trip to
        the server, and a 20,000-trace run spent most of its time waiting for them; a SQLite commit is a call
        in this process and stays one a trace.

        Each trace is still whole or absent. A process killed meanwhile loses the writes still waiting (at
        most ``max_writes``, at most ``max_seconds`` old): ``--resume`` decides those traces again, their
        judge answers read from the response cache. ``finish_run`` writes them and ends deferring."""
        if self._pg is not None:
            self._defer = (max_writes, max_seconds)

    def _write_later(self, write: Callable[[Any], None]) -> bool:
        """Defer ``write`` (called with the connection, in a transaction) if deferring; False otherwise."""
        if self._defer is None:
            return False
        with self._lock:
            if not self._deferred:
                self._deferred_since = time.monotonic()
            self._deferred.append(write)
            most, seconds = self._defer
            if len(self._deferred) >= most or time.monotonic() - self._deferred_since >= seconds:
                self._flush()
        return True

    def _flush(self) -> None:
        """Write the deferred writes, in one transaction: their INSERTs of one table as one statement
        (``StatementBatch``; a deferred write only writes, it never reads what a statement returns)."""
        with self._lock:
            writes, self._deferred = self._deferred, []
            if writes:
                # Imported only with writes waiting, which only a PostgreSQL store defers: a SQLite store
                # must work without the postgres extra (psycopg) installed.
                from seqjudge.store.postgres import StatementBatch

                batch = StatementBatch()
                for write in writes:
                    write(batch)
                with self._tx() as conn:
                    batch.run(conn)

    def _stop_deferring(self) -> None:
        self._flush()
        self._defer = None
        self._saved_ids.clear()
        self._seqs.clear()

    # -- lifecycle --
    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._deferred:
                self._flush()
            if self._conn is not None:
                self._conn.close()
                self._conn = None  # type: ignore[assignment]
                self._pg = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:  # (on PostgreSQL a PgSession, used alike)
        """One write transaction, taken up front (IMMEDIATE) so that a concurrent writer waits, not fails.

        An error of the machine, not of the statement (a full disk, an I/O error, a read-only file, a lock
        held past the timeout: ``_machine_error``) becomes ``StoreError`` (exit 3). Other errors (a
        constraint, a bad statement) are bugs and stay what they are."""
        with self._lock:
            if self._deferred:
                self._flush()  # (empties the list first: the flush's own transaction comes back here)
            conn = self._conn
            if conn is None:
                raise RuntimeError("the store is closed")
            if self.read_only:
                raise InputError(
                    "the store is read-only here: it can be listed, shown and reported, not written",
                    source=self.location,
                    hint="Make the file and its folder writable, or pass --store with a writable path",
                )
            if self._pg is not None:
                # Errors of the machine are StoreError already (store.postgres).
                self._pg.begin()
                try:
                    yield cast(sqlite3.Connection, self._pg)
                except BaseException:
                    self._pg.rollback()
                    raise
                self._pg.commit()
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:  # SQLite may have rolled back already (SQLITE_FULL does)
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if not _machine_error(exc):
                    raise
                raise StoreError(str(exc), path=self.location) from exc

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            if self._deferred:
                self._flush()
            if self._conn is None:
                raise RuntimeError("the store is closed")
            try:
                rows: list[sqlite3.Row] = self._conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                # A read can meet the machine too (another process holding the file locked past the
                # timeout, an I/O error): exit 3 with the store named, as a write does, never a crash.
                if not _machine_error(exc):
                    raise
                raise StoreError(str(exc), path=self.location) from exc
            return rows

    # -- what SQLite and PostgreSQL spell differently (the SQL around them is the same) --
    def _json_number(self, column: str, key: str) -> str:
        """The number under ``key`` of the JSON object in the TEXT ``column`` (NULL when absent)."""
        if self._pg is not None:
            return f"CAST(CAST({column} AS json) ->> '{key}' AS double precision)"
        return f"json_extract({column}, '$.{key}')"

    def _json_array_holds(self, column: str) -> str:
        """A condition: the JSON array of strings in the TEXT ``column`` holds the value of the next ``?``."""
        if self._pg is not None:
            elements = f"json_array_elements_text(CAST({column} AS json))"
            return f"EXISTS (SELECT 1 FROM {elements} AS e (v) WHERE e.v = ?)"
        return f"EXISTS (SELECT 1 FROM json_each({column}) WHERE json_each.value = ?)"

    # -- run locks: one process at a time works on a run (store.runs) --
    def _lock_run(self, run_id: str) -> Any:
        """Take the run's lock for this store object; None when another process (or store object) holds it.

        SQLite: an ``flock`` on a file in ``locks/`` beside the store. PostgreSQL: an advisory lock on a
        hash of the run id, held by a session of its own (so it does not end with a transaction). Either is
        released by ``_unlock_run``, by closing the store, or by the operating system / the server when the
        process dies."""
        if self._pg is not None:
            from seqjudge.store.postgres import try_advisory_lock

            return try_advisory_lock(self.target, self._pg.engine, f"run {run_id}")
        folder = self.path.parent / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / f"{self.path.name}.{run_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd

    @staticmethod
    def _unlock_run(holder: Any) -> None:
        if isinstance(holder, int):
            os.close(holder)  # closing the descriptor drops the flock
        else:
            holder.close()  # the session ends, and its advisory lock with it

    def _migrate(self) -> None:
        migrations = sorted(self.migrations, key=lambda m: m.version)
        if [m.version for m in migrations] != list(range(1, len(migrations) + 1)):
            raise RuntimeError("store migrations must be numbered 1, 2, 3... without gaps")
        # Read first: a store that is up to date is opened without a write lock (a reader never waits for
        # a running writer, and a read-only copy can be read).
        current = self._version(self._conn)
        if current > len(migrations):
            raise InputError(
                f"the store has schema version {current}, newer than this seqjudge knows ({len(migrations)})",
                source=self.location,
                hint="upgrade seqjudge, or pass --store with another database",
            )
        if current == len(migrations):
            return
        if self.read_only:
            raise InputError(
                f"the store has schema version {current}, older than this seqjudge's "
                f"({len(migrations)}), and it is read-only here, so it cannot be upgraded",
                source=self.location,
                hint="Run a seqjudge command that writes it once where it is writable, or use an older "
                "seqjudge to read it",
            )
        with self._tx() as conn:
            self._lock_schema(conn)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                "version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
        if self._pg is not None:
            self._migrate_postgres(migrations)
            return
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

    def _migrate_postgres(self, migrations: list[Migration]) -> None:
        """Each migration in its own transaction, its statements in PostgreSQL's words (schema.py)."""
        for migration in migrations:
            with self._tx() as conn:
                self._lock_schema(conn)
                if self._version(conn) >= migration.version:
                    continue  # another process migrated meanwhile
                for statement in postgres_statements(migration):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.description, _iso(_now())),
                )

    def _lock_schema(self, conn: Any) -> None:
        """Serialise migrations between processes: SQLite's BEGIN IMMEDIATE does; PostgreSQL needs a lock
        (two processes opening a new database at once would both create its tables)."""
        if self._pg is not None:
            from seqjudge.store.postgres import SCHEMA_LOCK

            conn.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))

    def _version(self, conn: Any) -> int:
        """The applied schema version; 0 for a new database."""
        if self._pg is not None:
            found = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL AS found").fetchone()
            if not found["found"]:
                return 0
        elif not conn.execute(
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


# SQLite's result codes (and their extended forms, FULL, IOERR_WRITE, ...) that the machine causes: the disk,
# the file's permissions, another process's lock. Python names them on the exception (3.11+).
_MACHINE_CODES: tuple[str, ...] = (
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_READONLY",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_CANTOPEN",
    "SQLITE_PERM",
    "SQLITE_NOLFS",
    "SQLITE_PROTOCOL",
)


def _machine_error(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", None) or ""
    return name.startswith(_MACHINE_CODES)


def _connect(target: str, *, uri: bool = True) -> sqlite3.Connection:
    conn = sqlite3.connect(target, isolation_level=None, timeout=10.0, check_same_thread=False, uri=uri)
    conn.row_factory = sqlite3.Row
    return conn


def _not_writable(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite failed because the file or its folder may not be written (it then reads on)."""
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open database file" in text
