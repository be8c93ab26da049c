"""Command-line entry point. Errors become exit codes and one-paragraph messages here, and only here.

Exit codes: 0 every trace passed (or the command succeeded), 1 some trace failed or needs review,
2 bad input, 3 infrastructure (a provider that cannot be reached).
"""

from __future__ import annotations

import sys

import typer

# Each command module registers its commands on `app` when imported.
from seqjudge.cli import (  # noqa: F401
    batch_cmd,
    calibrate_cmd,
    check_cmd,
    compare_cmd,
    convert_cmd,
    demo_cmd,
    golden_cmd,
    init_cmd,
    judge_cmd,
    report_cmd,
    rules_cmd,
    run_cmd,
    store_cmd,
)
from seqjudge.cli.app import app
from seqjudge.errors import SeqjudgeError


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this; ``main`` exits with it)."""
    try:
        result = app(args=argv, standalone_mode=False, prog_name="seqjudge")
    except SeqjudgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # usage errors: typer's own message, exit 2
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return result if isinstance(result, int) else 0


def main() -> None:
    sys.exit(run())
