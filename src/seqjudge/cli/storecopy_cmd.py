"""`seqjudge store copy SRC DST`: move a store between backends (a SQLite file, a PostgreSQL database)."""

from typing import Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.safetext import say

store_app = typer.Typer(
    help="The store itself: copy it between a SQLite file and a PostgreSQL database.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(store_app, name="store")

StoreArg = "A SQLite file, or postgresql://USER@HOST:PORT/DATABASE (password in PGPASSWORD or ~/.pgpass)."


@store_app.command("copy")
def store_copy(
    source: Annotated[str, typer.Argument(help=f"The store to copy: {StoreArg}")],
    destination: Annotated[str, typer.Argument(help=f"An empty store to copy into: {StoreArg}")],
    force: Annotated[
        bool, typer.Option("--force", help="Replace everything the destination holds (its rows are deleted).")
    ] = False,
) -> int:
    """Copy every table of SOURCE into DESTINATION, then check each table's row count and content hash."""
    from seqjudge.store.copy import copy_store

    report = copy_store(source, destination, force=force)
    replaced = f"; the {report.replaced} rows it held were replaced (--force)" if report.replaced else ""
    say(f"copied {report.source} to {report.destination}{replaced}")
    width = max((len(t.name) for t in report.tables), default=0)
    for t in report.tables:
        say(f"  {t.name:<{width}}  {t.rows:>8} rows  sha256 {t.digest[:16]}")
    say(
        f"checked: all {len(report.tables)} tables have the same rows in both stores "
        "(counts and content hashes)"
    )
    return 0
