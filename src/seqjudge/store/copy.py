"""``seqjudge store copy SRC DST``: every table of one store into another (SQLite -> PostgreSQL and back, or
between two of a kind), checked afterwards by per-table row counts and content hashes.

- Both stores are opened (and migrated) by this seqjudge, so they have the same tables; the tables are read
  from the source's catalog (SQLAlchemy's reflection, one API over both catalogs), so the tables other
  migrations add are copied too, parents before children.
- A destination holding any row is refused unless ``force``: then its rows are replaced (deleted, children
  first, in the same transaction as the copy).
- Rows are copied in the order they were written (SQLite's ``rowid``, PostgreSQL's ``rowid`` column where a
  table has one), so ties that the store orders by that (runs started in the same microsecond) stay in
  order; PostgreSQL's ``rowid`` identity is regenerated, not copied. Explicit keys (review item numbers) are
  copied as they are, and PostgreSQL's identity sequences are moved past them.
- The content hash of a table is the SHA-256 of its rows' hashes, sorted: independent of the order a
  backend returns rows in (and of its collation), equal when the rows are.
- The copy is one transaction on the destination: a failure leaves it as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import MetaData, Table, create_engine

from seqjudge.errors import InputError, StoreError
from seqjudge.store import Store

PAGE = 1000  # rows read and written at once
_SKIP = {"schema_version"}  # written by each store's own migrations, compared rather than copied
_GENERATED = "rowid"  # PostgreSQL's stand-in for SQLite's rowid: regenerated in the destination


@dataclass
class TableCopy:
    name: str
    rows: int
    digest: str


@dataclass
class CopyReport:
    source: str
    destination: str
    tables: list[TableCopy]
    replaced: int  # rows the destination held before (--force)


def copy_store(source: str, destination: str, *, force: bool = False) -> CopyReport:
    with Store(source, create=False) as src, Store(destination) as dst:
        if _same(src, dst):
            raise InputError(
                "the source and the destination are the same store",
                where="store copy",
                hint="give another DST",
            )
        src_meta, dst_meta = _metadata(src), _metadata(dst)
        tables = _tables(src_meta)
        missing = [t for t in tables if t not in dst_meta.tables]
        if missing:  # (both are migrated by this seqjudge: a table only the source has is not ours)
            raise InputError(
                f"the source store has tables this seqjudge does not know: {', '.join(missing)}",
                source=src.location,
                where="store copy",
                hint="copy with the seqjudge that wrote the source store",
            )
        held = {t: _count(dst, t) for t in _tables(dst_meta)}
        replaced = sum(held.values())
        if replaced and not force:
            busy = ", ".join(f"{t} ({n})" for t, n in held.items() if n)
            raise InputError(
                f"the destination store is not empty: it holds rows in {busy}",
                source=dst.location,
                where="store copy",
                hint="copy into an empty store, or pass --force to replace everything it holds",
            )
        with dst._tx() as conn:
            for table in reversed(_tables(dst_meta)):  # children first
                conn.execute(f"DELETE FROM {table}")
            for table in tables:
                _copy_table(src, src_meta.tables[table], dst, conn)
        report = CopyReport(src.location, dst.location, [], replaced)
        for table in tables:
            rows, digest = _digest(src, src_meta.tables[table])
            rows_dst, digest_dst = _digest(dst, dst_meta.tables[table])
            if (rows, digest) != (rows_dst, digest_dst):
                raise StoreError(
                    f"the copy of table {table} does not match: {rows} rows in the source, {rows_dst} in the "
                    f"destination (content hashes {digest[:12]} and {digest_dst[:12]})",
                    path=dst.location,
                )
            report.tables.append(TableCopy(table, rows, digest))
        return report


def _same(a: Store, b: Store) -> bool:
    if a.target.kind != b.target.kind:
        return False
    if a.target.path is not None and b.target.path is not None:
        return a.target.path.resolve() == b.target.path.resolve()
    return (a.target.host, a.target.database) == (b.target.host, b.target.database)


def _metadata(store: Store) -> MetaData:
    """The store's tables as its database's catalog describes them."""
    meta = MetaData()
    if store.target.path is not None:
        engine = create_engine(f"sqlite:///{store.target.path.resolve()}")
        try:
            meta.reflect(bind=engine)
        finally:
            engine.dispose()
    else:
        assert store._pg is not None
        meta.reflect(bind=store._pg.engine)
    return meta


def _tables(meta: MetaData) -> list[str]:
    """The tables, parents before children (without ``schema_version``)."""
    return [t.name for t in meta.sorted_tables if t.name not in _SKIP]


def _columns(table: Table) -> list[str]:
    return [c.name for c in table.columns if c.name != _GENERATED]


def _count(store: Store, table: str) -> int:
    return int(store._read(f"SELECT COUNT(*) AS n FROM {table}")[0]["n"])  # noqa: S608 (names from the catalog)


def _order(store: Store, table: Table) -> str:
    """The order rows were written in: SQLite's rowid, PostgreSQL's rowid column, else the primary key."""
    if store.target.kind == "sqlite" or _GENERATED in table.columns:
        return _GENERATED
    keys = [c.name for c in table.primary_key.columns] or _columns(table)
    return ", ".join(keys)


def _pages(store: Store, table: Table, columns: list[str]) -> Iterator[list[Any]]:
    """The table's rows, ``PAGE`` at a time, in the order they were written."""
    sql = f"SELECT {', '.join(columns)} FROM {table.name} ORDER BY {_order(store, table)} LIMIT ? OFFSET ?"
    offset = 0
    while True:
        page = store._read(sql, (PAGE, offset))
        if not page:
            return
        yield page
        offset += len(page)


def _copy_table(src: Store, table: Table, dst: Store, conn: Any) -> None:
    columns = _columns(table)
    insert = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    for page in _pages(src, table, columns):
        conn.executemany(insert, [tuple(row) for row in page])
    if dst.target.kind == "postgresql":
        # Explicit values in an identity column (review item numbers): new rows must be numbered after them.
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ? AND is_identity = 'YES'",
            (table.name,),
        ).fetchall():
            column = row["column_name"]
            if column in columns:
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', '{column}'), "
                    f"COALESCE((SELECT MAX({column}) FROM {table.name}), 0) + 1, false)"
                )


def _digest(store: Store, table: Table) -> tuple[int, str]:
    """(rows, content hash) of a table: see the module's docstring."""
    hashes: list[bytes] = []
    for page in _pages(store, table, sorted(_columns(table))):
        for row in page:
            text = json.dumps([_plain(v) for v in row], ensure_ascii=False, separators=(",", ":"))
            hashes.append(hashlib.sha256(text.encode()).digest())
    total = hashlib.sha256()
    for h in sorted(hashes):
        total.update(h)
    return len(hashes), total.hexdigest()


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    return value
