"""``seqjudge guard``: the rules as a guard before each tool call, in an agent host's hook (docs/guard.md).

A hook's own command line does not come here: ``seqjudge.cli.guard_hook.fast`` runs it without typer. This
command serves ``--help`` and reports a command line's mistakes; both call ``guard_hook.answer_hook``."""

from pathlib import Path
from typing import Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import GuardStoreOpt


@app.command("guard")
def guard_command(
    rules: Annotated[Path, typer.Argument(help="Rule file (YAML or JSON).", show_default=False)],
    hook: Annotated[
        str,
        typer.Option(
            "--hook", help="The host whose hook protocol to answer: claude-code.", show_default=False
        ),
    ],
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Config file: its risk_level and guard.fail_mode set the fail mode."),
    ] = None,
    fail_mode: Annotated[
        str | None,
        typer.Option(
            "--fail-mode",
            help="deny or allow when the guard cannot decide (default: the config's guard.fail_mode, else "
            "deny at risk_level high, else allow with a warning).",
        ),
    ] = None,
    judge: Annotated[
        str,
        typer.Option(
            "--judge",
            help="judge rules about the call: skip (reported skipped), ask (the host asks a person) or model "
            "(the config's model decides; a model call per such call).",
        ),
    ] = "skip",
    shadow: Annotated[
        bool,
        typer.Option(
            "--shadow",
            help="Decide and record in the store, never block: every call is allowed "
            "(docs/guard-adapters.md).",
        ),
    ] = False,
    store: GuardStoreOpt = None,
) -> int:
    """Decide one proposed tool call, as an agent host's hook: read the hook's input on stdin, the session's
    history from its transcript, and answer in the host's protocol (exit 0; a deny or an ask on stdout).

    Claude Code: register `seqjudge guard RULES --hook claude-code` as a PreToolUse command hook in
    settings.json (docs/guard.md). With --store each decision is recorded with the session id; with --shadow
    it is only recorded, and every call is allowed.
    """
    from seqjudge.cli.guard_hook import answer_hook, check_options

    check_options(hook, fail_mode, judge)
    return answer_hook(rules, config, fail_mode, judge, shadow=shadow, store=store)
