"""The typer application object; command modules register themselves on it."""

from __future__ import annotations

import typer

from seqjudge.version import __version__

app = typer.Typer(
    name="seqjudge",
    help="Did the agent call its tools in an order that respects the rules?",
    no_args_is_help=True,
    # Plain help and usage errors: typer's rich rendering imports rich and markdown-it, which doubles the
    # time `seqjudge --help` takes. Every sub-command group (typer.Typer) sets this too.
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_enable=False,
    # -h as well as --help, on every command: what people type first.
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"seqjudge {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Did the agent call its tools in an order that respects the rules?"""
