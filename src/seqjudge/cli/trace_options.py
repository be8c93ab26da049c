"""Options every command that reads TRACES shares (check, judge, run, convert), defined once.

Use them as parameter annotations, then pass ``load_options(...)`` to ``seqjudge.ingest.load_traces``::

    def check(..., trace_format: TraceFormat = None, messages_key: MessagesKey = None,
              error_pattern: ErrorPattern = None, verbose: Verbose = False) -> int:
        traces = load_traces(path, **load_options(trace_format, messages_key, error_pattern, verbose))
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from seqjudge.defaults import TRACE_FORMATS

TraceFormat = Annotated[
    str | None,
    typer.Option(
        "--trace-format",
        metavar="FORMAT",
        help=f"Read TRACES as this format instead of detecting it: {', '.join(TRACE_FORMATS)}.",
        show_default=False,
    ),
]
MessagesKey = Annotated[
    str | None,
    typer.Option(
        "--messages-key",
        metavar="KEY",
        help="The key under which each record holds its conversation (e.g. 'traj' in tau-bench results).",
        show_default=False,
    ),
]
ErrorPattern = Annotated[
    str | None,
    typer.Option(
        "--error-pattern",
        metavar="REGEX",
        help="Mark a call failed when its result text matches this regular expression (e.g. '^Error').",
        show_default=False,
    ),
]
Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Say on stderr which trace format was chosen for each file and why."
    ),
]


AllowEmpty = Annotated[
    bool,
    typer.Option(
        "--allow-empty",
        help="Accept an input that yields no trace, and traces without calls where the input holds tool "
        "activity (otherwise exit 2).",
    ),
]


def load_options(
    trace_format: str | None,
    messages_key: str | None,
    error_pattern: str | None,
    verbose: bool,
    allow_empty: bool = False,
) -> dict[str, Any]:
    """The keyword arguments of ``load_traces`` for the shared options."""
    return {
        "format": trace_format,
        "messages_key": messages_key,
        "error_pattern": error_pattern,
        "verbose": verbose,
        "allow_empty": allow_empty,
    }
