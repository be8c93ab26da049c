"""`seqjudge init [DIR]`: a starter suite that `seqjudge run` checks at once (seqjudge.starter writes it)."""

from pathlib import Path
from typing import Annotated

import typer

from seqjudge.cli.app import app


@app.command()
def init(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="Where to write the suite (created if missing).")
    ] = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the starter files if they exist.")
    ] = False,
) -> int:
    """Write a starter suite: seqjudge.yaml, rules.yaml (one rule of each common type), catalog.json and
    traces.jsonl (one passing, one failing trace), so that `seqjudge run` works in DIR right away.

    Existing files are never overwritten without --force (exit 2, nothing written).
    """
    from seqjudge.starter import write_starter

    written = write_starter(folder, force=force)
    for path in written:
        print(f"wrote {path}")
    here = folder.resolve() == Path.cwd().resolve()
    go = "" if here else f"cd {folder} && "
    print(
        f"Next: `{go}seqjudge run` (engine verdicts; one sample trace fails on purpose), or "
        f"`{go}seqjudge check rules.yaml traces.jsonl` for the engine's full explanations. "
        "Then replace traces.jsonl with your agent's traces and edit rules.yaml and catalog.json."
    )
    return 0
