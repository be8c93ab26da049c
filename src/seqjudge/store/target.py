"""What ``--store`` (``SEQJUDGE_STORE``, ``store:`` in seqjudge.yaml) names: a SQLite file or a PostgreSQL
URL.

- A path is a SQLite file (the default, ``.seqjudge/seqjudge.db``).
- ``postgresql://``, ``postgresql+psycopg://`` and ``postgres://`` (as libpq accepts it) name a PostgreSQL
  database. Whatever the URL leaves out (host, user, database, password, ``sslmode``...) libpq takes from
  ``PGHOST``/``PGUSER``/``PGDATABASE``/``PGPASSWORD``/``~/.pgpass``/``PGSSLMODE``, as every libpq client does;
  query options (``?sslmode=verify-full&sslrootcert=...``) pass through to libpq unchanged.
- Anything else that looks like a URL (``mysql://``, ``sqlite://``, ``postgresql:/x`` with one slash) is
  refused: as a path it would become a folder named after the URL, password included, and never reach a
  server.

``display`` is what messages, stored configs and logs show: the URL with its password replaced by ``***``.
The password itself is only in ``url`` (handed to the driver) and in ``secrets`` (removed from every value the
store writes, whatever it hides under).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from seqjudge.defaults import STORE_URL, mask_url, store_dir
from seqjudge.errors import InputError

POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg", "postgres")

_URL = STORE_URL


@dataclass(frozen=True)
class StoreTarget:
    kind: Literal["sqlite", "postgresql"]
    display: str  # safe to print and to store: no password
    path: Path | None = None  # the SQLite file
    url: str | None = None  # the SQLAlchemy URL (postgresql+psycopg://...), password included
    host: str = ""  # what a PostgreSQL error names: host and database (libpq defaults when left out)
    database: str = ""
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def local_dir(self) -> Path:
        """The folder of this machine's files beside the store: the response cache, the SQLite run locks.
        A SQLite store's own folder; for a server database, the default store's folder."""
        return store_dir(self.display if self.path is None else self.path)


def is_url(value: str | Path) -> bool:
    return isinstance(value, str) and bool(_URL.match(value))


def parse_target(value: str | Path) -> StoreTarget:
    """A ``--store`` value as a target; ``InputError`` (exit 2) for a URL that is not a PostgreSQL one."""
    if isinstance(value, Path) or not _URL.match(value):
        path = Path(value)
        return StoreTarget(kind="sqlite", display=str(path), path=path)
    match = _URL.match(value)
    assert match is not None
    scheme = match["scheme"].lower()
    shown = mask_url(value)
    if scheme not in POSTGRES_SCHEMES or not value[len(scheme) + 1 :].startswith("//"):
        hint = (
            "a PostgreSQL database is written postgresql://USER@HOST:PORT/DATABASE (the password in "
            "PGPASSWORD or ~/.pgpass); a SQLite store is a file path such as .seqjudge/seqjudge.db"
        )
        problem = (
            f"`{scheme}://` stores are not supported"
            if scheme not in POSTGRES_SCHEMES
            else f"URL `{scheme}:/...` needs `//` after `{scheme}:`"
        )
        raise InputError(f"the store {problem}", where="--store", hint=hint)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError as exc:
        raise InputError(
            f"the store URL {shown!r} cannot be read ({exc})",
            where="--store",
            hint="write postgresql://USER@HOST:PORT/DATABASE",
        ) from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    raw = [parts.password or ""] + [v for k, v in query if k == "password"]
    secrets = tuple(sorted({s for r in raw for s in (r, unquote(r)) if s}, key=len, reverse=True))
    rest = value[len(scheme) :]
    url = "postgresql+psycopg" + rest
    host = parts.hostname or "(libpq's default host)"
    if parts.port:
        host += f":{parts.port}"
    database = unquote(parts.path.lstrip("/")) or "(libpq's default database)"
    return StoreTarget(
        kind="postgresql", display=shown, url=url, host=host, database=database, secrets=secrets
    )
