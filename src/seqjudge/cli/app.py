"""The typer application object; command modules register themselves on it."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="seqjudge",
    help="Did the agent call its tools in an order that respects the rules?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
