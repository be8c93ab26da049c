"""Command-line entry point. Errors become exit codes and one-paragraph messages here, and only here.

typer is imported when a command line needs it, not with this package: a hook's command line (``main`` ->
``guard_hook.fast``) runs before every tool call of an agent and does without it. The typer application
is ``seqjudge.cli.app.app``.

Exit codes: 0 every trace passed (or the command succeeded), 1 some trace failed or needs review,
2 bad input, 3 infrastructure (a provider that cannot be reached, a store on a full disk), 4 an internal
error (any other exception: a bug, never a verdict; the traceback goes to a log file, ``seqjudge.crashlog``),
130 interrupted.
"""

from __future__ import annotations

import sys
from importlib import import_module

from seqjudge.errors import SeqjudgeError
from seqjudge.safetext import say

# Each command module registers its commands on `app` when imported, in this order (the order of --help).
MODULES = (
    "batch_cmd",
    "calibrate_cmd",
    "check_cmd",
    "compare_cmd",
    "convert_cmd",
    "demo_cmd",
    "golden_cmd",
    "guard_cmd",
    "init_cmd",
    "judge_cmd",
    "report_cmd",
    "rules_cmd",
    "run_cmd",
    "serve_cmd",
    "store_cmd",
    "storecopy_cmd",
    "team_cmd",
)
# The module of each top-level command or group. A command line naming one imports only that module: typer
# builds every registered command's options before it runs one, which cost more than checking a small trace.
# Anything else (--help, a typo, a command missing here) imports them all. tests/test_startup.py holds this
# table to what the modules register.
#
# The command modules do not use `from __future__ import annotations`: typer reads each command's parameters
# with inspect.signature(eval_str=True) and get_type_hints, twice, so every annotation written as a string was
# compiled and evaluated four times per start - a sixth of `seqjudge --help`. Evaluated once at import, they
# cost nothing more; a name imported only for type checking is written in quotes there.
COMMAND_MODULES = {
    "batch": "batch_cmd",
    "calibrate": "calibrate_cmd",
    "check": "check_cmd",
    "baseline": "compare_cmd",
    "compare": "compare_cmd",
    "report-ci": "compare_cmd",
    "convert": "convert_cmd",
    "demo": "demo_cmd",
    "golden": "golden_cmd",
    "guard": "guard_cmd",
    "init": "init_cmd",
    "judge": "judge_cmd",
    "prompt": "judge_cmd",
    "report": "report_cmd",
    "lint": "rules_cmd",
    "migrate": "rules_cmd",
    "run": "run_cmd",
    "schema": "init_cmd",
    "serve": "serve_cmd",
    "review": "store_cmd",
    "runs": "store_cmd",
    "store": "storecopy_cmd",
    "reviewers": "team_cmd",
}


def register(argv: list[str]) -> None:
    """Import the command module(s) this command line needs (all of them unless it names a known command)."""
    name = next((arg for arg in argv if not arg.startswith("-")), None)
    wanted = COMMAND_MODULES.get(name or "")
    for module in (wanted,) if wanted else MODULES:
        import_module(f"seqjudge.cli.{module}")


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this; ``main`` exits with it)."""
    import typer

    from seqjudge.cli.app import app

    register(sys.argv[1:] if argv is None else argv)
    try:
        result = app(args=argv, standalone_mode=False, prog_name="seqjudge")
    except SeqjudgeError as exc:
        say(f"error: {exc}", err=True)
        return exc.exit_code
    except typer.Abort:
        say("aborted", err=True)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # usage errors: typer's own message, exit 2
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            say(f"error: {exc}", err=True)
        return 2
    except KeyboardInterrupt:
        say("interrupted", err=True)
        return 130
    except Exception as exc:  # a bug: never 0 or 1, which CI reads as a verdict
        from seqjudge import crashlog

        args = sys.argv[1:] if argv is None else argv
        print(crashlog.message(exc, crashlog.write_log(exc, args), args), file=sys.stderr)
        return crashlog.INTERNAL_ERROR
    return result if isinstance(result, int) else 0


def main() -> None:
    from seqjudge.cli.guard_hook import fast

    code = fast(sys.argv[1:])  # a hook's command line, without typer (seqjudge.cli.guard_hook)
    sys.exit(run() if code is None else code)
