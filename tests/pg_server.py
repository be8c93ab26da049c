"""A real PostgreSQL server for the store's tests, started by the tests themselves.

``PgServer.start()`` runs Debian's ``initdb`` into a new temporary folder and starts ``postgres`` on a free
loopback port (its socket in that folder too), with durability off (a test server's data is thrown away).
As root it runs them as the ``postgres`` user (``runuser -u postgres --``; the folder is made theirs): the
server refuses to run as root. ``stop()`` ends the server by the pid in its ``postmaster.pid`` and removes
the folder.

Roles: ``postgres`` (the superuser, trusted on loopback: the tests' own admin connection and the stores of
the parametrised suite) and ``PASSWORD_ROLE`` with ``PASSWORD`` (password authentication only, for the
credentials tests).

Where the programs cannot be found or the server cannot start, ``PgUnavailable`` says why: the tests skip
with that reason, unless ``SEQJUDGE_REQUIRE_POSTGRES=1`` (``make test`` sets it), where they fail.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

PASSWORD_ROLE = "seqjudge_pw"
PASSWORD = "Tr0ub4dor-3-seqjudge-pw"  # a secret the credentials tests look for everywhere


class PgUnavailable(RuntimeError):
    """PostgreSQL cannot be run here; the message says why."""


def _bin_dir() -> Path:
    candidates = [os.environ.get("SEQJUDGE_PG_BIN", "")]
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True
    )
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "postgres").is_file():
            return Path(folder)
    raise PgUnavailable(
        "no PostgreSQL server programs (initdb, postgres): install Debian's postgresql package "
        "(scripts/ensure-postgres.sh does) or set SEQJUDGE_PG_BIN"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """``durable``: PostgreSQL's default durability (fsync on), for figures (benchmarks/store_backends.py);
    off for the tests, whose data is thrown away."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        self.bin = _bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="seqjudge-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.host = "127.0.0.1"
        self._as_user: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None

    # -- lifecycle --
    def start(self) -> PgServer:
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise PgUnavailable(
                    "running as root and there is no `postgres` user to run the server as"
                ) from None
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        log = self.root / "initdb.log"
        done = subprocess.run(
            [
                *self._as_user,
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            log.write_text(done.stdout + done.stderr)
            raise PgUnavailable(f"initdb failed: {done.stderr.strip()[-500:]}")
        # Loopback only; the superuser trusted, every other role by password.
        (self.data / "pg_hba.conf").write_text(
            "local all postgres trust\n"
            "host all postgres 127.0.0.1/32 trust\n"
            "local all all scram-sha-256\n"
            "host all all 127.0.0.1/32 scram-sha-256\n"
        )
        server_log = open(self.root / "server.log", "wb")  # noqa: SIM115 (the server writes it until stop)
        self._proc = subprocess.Popen(
            [
                *self._as_user,
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-k",
                str(self.root),
                "-c",
                f"listen_addresses={self.host}",
                "-c",
                "max_connections=200",
                *([] if self.durable else ["-c", "fsync=off", "-c", "full_page_writes=off"]),
            ],
            stdout=server_log,
            stderr=subprocess.STDOUT,
        )
        server_log.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                with self.admin() as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError as exc:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    text = (self.root / "server.log").read_text(errors="replace")[-800:]
                    self.stop()
                    raise PgUnavailable(f"the server did not start ({exc}): {text}") from None
                time.sleep(0.1)
        pid_file = self.data / "postmaster.pid"
        self._pid = int(pid_file.read_text().split()[0])
        with self.admin() as conn:
            conn.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN CREATEDB PASSWORD '{PASSWORD}'")
        return self

    def stop(self) -> None:
        pid = self._pid
        if pid is None and (self.data / "postmaster.pid").is_file():
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)  # the postmaster's "fast shutdown"
        if self._proc is not None:
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                if pid is not None:
                    os.kill(pid, signal.SIGQUIT)  # immediate shutdown
                self._proc.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- connections and databases --
    def url(self, database: str = "postgres", *, user: str = "postgres", password: str | None = None) -> str:
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql://{auth}@{self.host}:{self.port}/{database}"

    def admin(self, database: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=self.host,
            port=self.port,
            user="postgres",
            dbname=database,
            autocommit=True,
            connect_timeout=5,
        )

    @contextmanager
    def database(self, *, owner: str = "postgres") -> Iterator[str]:
        """A new empty database for one test, dropped afterwards; its name."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name} OWNER {owner}")
        try:
            yield name
        finally:
            with self.admin() as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def is_pg(target: Any) -> bool:
    return str(target).startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


def libpq_url(target: Any) -> str:
    """A store's URL as libpq takes it (SQLAlchemy's ``+psycopg`` dropped)."""
    return str(target).replace("postgresql+psycopg://", "postgresql://", 1)


def raw_rows(target: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows read by a connection of their own (not the store's): what is committed, as tuples. ``target`` is
    a SQLite path or a PostgreSQL URL (SQL with ``?`` placeholders, as the store's)."""
    text = str(target)
    if is_pg(text):
        with psycopg.connect(libpq_url(text)) as conn:
            return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), params).fetchall()]  # type: ignore[arg-type]
    import sqlite3

    conn2 = sqlite3.connect(text)
    try:
        return conn2.execute(sql, params).fetchall()
    finally:
        conn2.close()


def stored_bytes(target: Any, folder: Path | None = None) -> bytes:
    """Everything a store holds, as bytes to search for a secret: a SQLite store's files (database, WAL, run
    locks: everything under ``folder``, default the file's folder); every row of every table of a PostgreSQL
    database."""
    text = str(target)
    if is_pg(text):
        out: list[str] = []
        with psycopg.connect(libpq_url(text)) as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
                )
            ]
            for table in tables:
                out += [repr(tuple(r)) for r in conn.execute(f'SELECT * FROM "{table}"')]  # type: ignore[arg-type]
        return "\n".join(out).encode()
    root = folder or Path(text).parent
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
