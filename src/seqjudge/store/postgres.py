"""The PostgreSQL backend: the store's portable SQL (``?`` placeholders) through SQLAlchemy Core on psycopg 3.

The store's mixins talk to a connection the way they talk to ``sqlite3``: ``conn.execute(sql, params)`` and
``conn.executemany(sql, rows)`` return a cursor with ``fetchone``/``fetchall``/``rowcount``, rows are read
by column name or position. ``PgSession`` gives them exactly that over one SQLAlchemy connection:

- the connection is in autocommit mode and ``Connection._tx`` begins and commits itself, as it does on
  SQLite, so a read outside a transaction never leaves one open (an idle transaction would hold locks);
- a write transaction runs in psycopg's pipeline mode, on the driver connection SQLAlchemy holds: its
  statements go to the server without waiting for each answer, and the answers are read when the code asks
  for one (``fetchone``, ``rowcount``) or at the commit. A trace's transaction (its result, rule decisions,
  judge attempts, review item) is then one or two round trips to the server, not seven: on a busy machine
  each round trip waits for the scheduler, and that, not the server's work, is what storing costs;
- ``?`` becomes psycopg's ``%s`` (a literal ``%`` doubled) once per statement text;
- a violated constraint is ``PgIntegrityError``, a subclass of ``sqlite3.IntegrityError``, so the one
  ``except sqlite3.IntegrityError`` in each mixin catches it on both backends;
- an error of the machine (server unreachable or gone, disk full on the server, a lock held past
  ``lock_timeout``, too many connections) is ``StoreError`` (exit 3) naming the host and database, never the
  password; other errors (bad SQL) are bugs and stay what they are.

Durability: each session runs with ``synchronous_commit = off``, PostgreSQL's equivalent of SQLite's WAL with
``synchronous=NORMAL``: a commit survives the writing process being killed (the server has it); only a crash
of the server may drop the last commits (never corrupt the database), which ``--resume`` redoes.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any, Literal

import psycopg
from sqlalchemy import create_engine, exc
from sqlalchemy.engine import Connection as SAConnection
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from seqjudge.errors import StoreError
from seqjudge.redact import scrub_secrets
from seqjudge.store.target import StoreTarget, mask_url

SERVER_REMEDY = (
    "Check that the server is up and reachable from here, that the role and its password (PGPASSWORD, "
    "~/.pgpass) are right, and that the server has disk space"
)

# A lock wait this long is the machine's problem (another process holding a row), as SQLite's busy timeout.
LOCK_TIMEOUT = "30s"


class PgIntegrityError(sqlite3.IntegrityError):
    """A constraint PostgreSQL refused (see the module's docstring for why it is sqlite3's subclass)."""


class Row:
    """A row read by position or column name, like ``sqlite3.Row``."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        return self._values[key if isinstance(key, int) else self._index[key]]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._index)


class LazyCursor:
    """A statement's result inside a pipelined transaction: read (after a sync) when asked for."""

    def __init__(self, cursor: psycopg.Cursor[Any], session: PgSession) -> None:
        self._cursor = cursor
        self._session = session
        self._sent = session.sent
        self.lastrowid = None

    def _ready(self) -> psycopg.Cursor[Any]:
        self._session.sync(self._sent)
        return self._cursor

    @property
    def rowcount(self) -> int:
        return self._ready().rowcount

    def _rows(self, rows: list[Any]) -> list[Row]:
        index = {c.name: i for i, c in enumerate(self._cursor.description or [])}
        return [Row(tuple(r), index) for r in rows]

    def fetchone(self) -> Row | None:
        with self._session.errors():
            row = self._ready().fetchone()
        return None if row is None else self._rows([row])[0]

    def fetchmany(self, size: int) -> list[Row]:
        with self._session.errors():
            return self._rows(self._ready().fetchmany(size))

    def fetchall(self) -> list[Row]:
        with self._session.errors():
            return self._rows(self._ready().fetchall())


class Cursor:
    """The result of one statement, with the part of ``sqlite3.Cursor`` the store uses."""

    def __init__(self, result: Any) -> None:
        self.rowcount: int = result.rowcount
        self.lastrowid = None  # PostgreSQL has no rowid: a statement that needs its key says RETURNING id
        self._rows: list[Row] = []
        if result.returns_rows:
            index = {name: i for i, name in enumerate(result.keys())}
            self._rows = [Row(tuple(r), index) for r in result.fetchall()]
        self._at = 0

    def fetchone(self) -> Row | None:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchmany(self, size: int) -> list[Row]:
        rows = self._rows[self._at : self._at + size]
        self._at += len(rows)
        return rows

    def fetchall(self) -> list[Row]:
        rows = self._rows[self._at :]
        self._at = len(self._rows)
        return rows


@lru_cache(maxsize=512)
def to_format(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (and a literal ``%`` as ``%%``), outside quoted text."""
    out: list[str] = []
    for i, part in enumerate(re.split(r"('(?:[^']|'')*')", sql)):
        if i % 2:  # a quoted literal: only its % needs doubling
            out.append(part.replace("%", "%%"))
        else:
            out.append(part.replace("%", "%%").replace("?", "%s"))
    return "".join(out)


def advisory_key(name: str) -> int:
    """A signed 64-bit key for ``pg_try_advisory_lock``, from a name (a run id)."""
    return int.from_bytes(hashlib.sha256(f"seqjudge:{name}".encode()).digest()[:8], "big", signed=True)


# The key migrations serialise on (two processes opening a new database at once).
SCHEMA_LOCK = advisory_key("schema")


class PgSession:
    """One connection to the server, as the store's mixins use a ``sqlite3.Connection``."""

    def __init__(self, target: StoreTarget, engine: Engine | None = None) -> None:
        self.target = target
        self._owns_engine = engine is None
        self.engine = engine or make_engine(target)
        self._conn: SAConnection | None = None
        self.in_transaction = False
        self._pipeline: psycopg.Pipeline | None = None
        self._pipeline_block: contextlib.AbstractContextManager[psycopg.Pipeline] | None = None
        self.sent = 0  # statements sent in the pipelined transaction; synced up to ``_synced``
        self._synced = 0
        with self.errors():
            conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            self._conn = conn
            conn.exec_driver_sql(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
            conn.exec_driver_sql("SET synchronous_commit = off")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor | LazyCursor:
        if self._pipeline is not None:
            with self.errors():
                cursor = self._driver().cursor()
                cursor.execute(to_format(sql), tuple(params))
            self.sent += 1
            return LazyCursor(cursor, self)
        with self.errors():
            return Cursor(self._connection().exec_driver_sql(to_format(sql), tuple(params)))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Cursor | LazyCursor:
        rows = [tuple(r) for r in rows]
        if not rows:
            return Cursor(_Empty())
        if self._pipeline is not None:
            # One execute a row: psycopg's executemany syncs the pipeline when it ends (a round trip).
            statement = to_format(sql)
            with self.errors():
                cursor = self._driver().cursor()
                for row in rows:
                    cursor.execute(statement, row)
            self.sent += 1
            return LazyCursor(cursor, self)
        with self.errors():
            return Cursor(self._connection().exec_driver_sql(to_format(sql), rows))

    # -- the write transaction (Connection._tx), pipelined (see the module's docstring) --
    def begin(self) -> None:
        driver = self._driver()
        with self.errors():
            block = driver.pipeline()
            self._pipeline = block.__enter__()
            self._pipeline_block = block
            driver.execute("BEGIN")
        self.in_transaction = True
        self.sent = self._synced = 0

    def sync(self, upto: int) -> None:
        """Wait for the answers to the statements sent so far, if the one at ``upto`` is not answered yet."""
        if self._pipeline is not None and self._synced < upto:
            with self.errors():
                self._pipeline.sync()
            self._synced = self.sent

    def commit(self) -> None:
        block, self._pipeline_block, self._pipeline = self._pipeline_block, None, None
        try:
            with self.errors():
                self._driver().execute("COMMIT")
                if block is not None:
                    block.__exit__(None, None, None)  # every answer read: a failed statement raises here
        except BaseException:
            self._end(None)
            raise
        self.in_transaction = False

    def rollback(self) -> None:
        """End a failed transaction; a connection that is gone has nothing left to roll back."""
        block, self._pipeline_block, self._pipeline = self._pipeline_block, None, None
        self._end(block)

    def _end(self, block: contextlib.AbstractContextManager[psycopg.Pipeline] | None) -> None:
        self.in_transaction = False
        if self._conn is None:
            return
        driver = self._driver()
        if block is not None:
            with contextlib.suppress(psycopg.Error):
                block.__exit__(None, None, None)
        with contextlib.suppress(psycopg.Error):
            driver.execute("ROLLBACK")

    def _driver(self) -> psycopg.Connection[Any]:
        """The psycopg connection SQLAlchemy holds for this session."""
        driver = self._connection().connection.driver_connection
        assert isinstance(driver, psycopg.Connection)
        return driver

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(exc.DBAPIError):
                self._conn.close()
            self._conn = None
        if self._owns_engine:
            self.engine.dispose()

    def _connection(self) -> SAConnection:
        if self._conn is None:
            raise RuntimeError("the store is closed")
        return self._conn

    def errors(self) -> _Errors:
        return _Errors(self.target)


class _Errors:
    """Turns the driver's errors into the store's (see the module's docstring)."""

    def __init__(self, target: StoreTarget) -> None:
        self.target = target

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> Literal[False]:
        # SQLAlchemy's error (a statement it ran) wraps the driver's; a pipelined one is the driver's own.
        if isinstance(error, exc.DBAPIError):
            driver_error: BaseException = error.orig if error.orig is not None else error
            gone = error.connection_invalidated
        elif isinstance(error, psycopg.Error):
            driver_error, gone = error, error.__class__ is psycopg.OperationalError
        else:
            return False
        text = safe_message(str(driver_error), self.target)
        if isinstance(driver_error, psycopg.IntegrityError | exc.IntegrityError):
            raise PgIntegrityError(text) from None
        if gone or machine_error(driver_error):
            raise StoreError(text, path=where(self.target), remedy=SERVER_REMEDY) from None
        return False


def machine_error(error: BaseException) -> bool:
    """Whether the server, the network or the machine failed (not the statement)."""
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError | exc.OperationalError):
        return True
    state = getattr(error, "sqlstate", None) or ""
    # 08 connection, 53 insufficient resources (disk full, out of memory, too many connections), 55P03 lock
    # not available, 57 operator intervention (server shutting down), 58 system error (I/O).
    return state.startswith(("08", "53", "57", "58")) or state == "55P03"


def safe_message(text: str, target: StoreTarget) -> str:
    """A driver's message as the user sees it: its first lines, without the password."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    short = "; ".join(lines[:3])
    return str(scrub_secrets(mask_url(short), target.secrets))


def where(target: StoreTarget) -> str:
    """What a message names: the URL without its password, the host and the database."""
    return f"{target.display} (host {target.host}, database {target.database})"


def make_engine(target: StoreTarget) -> Engine:
    # NullPool: the store holds its connection for its whole life, and a run lock holds its own; a pool
    # would keep a closed store's connections open.
    assert target.url is not None
    return create_engine(
        target.url,
        poolclass=NullPool,
        connect_args={"application_name": "seqjudge"},
        # ``hide_parameters``: a statement's values never reach a message (they are redacted already, but a
        # failing connect needs no values either).
        hide_parameters=True,
    )


# ``INSERT INTO t (a, b) VALUES (?, 'x', ?)``: one row's VALUES without parentheses inside, nothing after.
_ONE_ROW = re.compile(
    r"^(?P<head>\s*INSERT\s+INTO\s+\w+\s*\([^()]*\)\s*VALUES\s*)(?P<row>\([^()]*\))\s*$", re.I | re.S
)
_MAX_PARAMS = 30_000  # of one statement (PostgreSQL's protocol allows 65,535)


class StatementBatch:
    """Statements collected (``execute``/``executemany``, as on a connection) and run in order, the
    consecutive INSERTs of one table in one statement of many rows: a group of deferred traces is then a
    few statements, not a few a trace."""

    def __init__(self) -> None:
        self._groups: dict[str, list[tuple[Any, ...]]] = {}  # in order of first appearance

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._groups.setdefault(sql, []).append(tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            self.execute(sql, row)

    def run(self, conn: Any) -> None:
        """Every statement, grouped by its text in the order each text first came (a parent table's INSERT
        comes before its children's, as in each write)."""
        for sql, rows in self._groups.items():
            match = _ONE_ROW.match(sql)
            if match is None or len(rows) == 1:
                conn.executemany(sql, rows)
                continue
            per = max(1, _MAX_PARAMS // max(1, len(rows[0])))
            for start in range(0, len(rows), per):
                chunk = rows[start : start + per]
                many = match["head"] + ", ".join([match["row"]] * len(chunk))
                conn.execute(many, [value for row in chunk for value in row])


class _Empty:
    rowcount = 0
    returns_rows = False


def try_advisory_lock(target: StoreTarget, engine: Engine, name: str) -> PgSession | None:
    """A new session holding the advisory lock of ``name``, or None when another session holds it. The lock
    lasts as long as that session: closed by ``release``, by the store's close, or by the server when the
    process dies (SIGKILL included), so a killed run can always be resumed."""
    session = PgSession(target, engine)
    row = session.execute("SELECT pg_try_advisory_lock(?) AS got", (advisory_key(name),)).fetchone()
    if row is None or not row["got"]:
        session.close()
        return None
    return session
