"""`seqjudge init [DIR]`: a starter suite that `seqjudge run` checks at once (seqjudge.starter writes it); and
`seqjudge schema rules|config`: the JSON Schemas its files name for YAML editors (seqjudge.schema)."""

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import OutputOpt


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
    traces.jsonl (one passing, one failing trace), so that `seqjudge run` works in DIR right away; and the
    JSON Schemas of rules.yaml and seqjudge.yaml, which those files name for YAML editors.

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


class SchemaKind(StrEnum):
    """``seqjudge.schema.SCHEMA_KINDS`` (declared here so that the CLI starts without pydantic)."""

    rules = "rules"
    config = "config"


@app.command()
def schema(
    kind: Annotated[
        SchemaKind,
        typer.Argument(
            metavar="rules|config", help="rules: a rule file (rules.yaml); config: seqjudge.yaml."
        ),
    ],
    output: OutputOpt = None,
) -> int:
    """Print the JSON Schema of a rule file or of seqjudge.yaml, generated from the models that load them.

    YAML editors (yaml-language-server: VS Code's YAML extension, ...) complete and check a file that starts
    with `# yaml-language-server: $schema=PATH`, as the files `seqjudge init` writes do (docs/editors.md).
    """
    from seqjudge.outputs.streams import open_output
    from seqjudge.schema import schema_text

    with open_output(output) as out:
        out.write(schema_text(kind.value))
    return 0
