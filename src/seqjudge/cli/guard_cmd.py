"""``seqjudge guard``: the rules as a guard before each tool call, in an agent host's hook (docs/guard.md)."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import GuardStoreOpt

if TYPE_CHECKING:
    from seqjudge.guard.decision import FailMode, JudgeMode

HOOKS = ("claude-code",)


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
        typer.Option("--judge", help="judge rules: skip (reported skipped) or ask (the host asks a person)."),
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
    from seqjudge.errors import InputError

    if hook not in HOOKS:
        raise InputError(f"unknown hook {hook!r}", where="--hook", hint=f"choose one of: {', '.join(HOOKS)}")
    if fail_mode is not None and fail_mode not in ("deny", "allow"):
        raise InputError(f"fail mode {fail_mode!r}", where="--fail-mode", hint="choose deny or allow")
    if judge not in ("skip", "ask"):
        raise InputError(f"judge mode {judge!r}", where="--judge", hint="choose skip or ask")
    from seqjudge.guard.claude_code import answer, run_hook
    from seqjudge.guard.core import Guard

    mode = _fail_mode(fail_mode, config)
    given: FailMode | None = mode if fail_mode else None  # (else the guard reads the config's)
    judged: JudgeMode = "ask" if judge == "ask" else "skip"
    raw = sys.stdin.read()
    decision = run_hook(raw, lambda: Guard.from_files(rules, config, judge=judged, fail_mode=given), mode)
    if shadow or store is not None:
        from seqjudge.defaults import DEFAULT_STORE_PATH
        from seqjudge.guard.shadow import record_hook_decision
        from seqjudge.safetext import say

        trouble = record_hook_decision(raw, decision, store or DEFAULT_STORE_PATH, shadow=shadow)
        if trouble:
            say(trouble, err=True)  # never a non-zero exit: Claude Code reads exit 2 as "block the call"
        if shadow:
            return 0  # recorded, not enforced: silence is an allow
    out = answer(decision)
    if out:
        sys.stdout.write(out + "\n")
    return 0


def _fail_mode(given: str | None, config: Path | None) -> "FailMode":
    """The fail mode before the guard is built (for a rule or config file that cannot be read): ``given``,
    else the config's; a config that cannot be read leaves the risk level unknown, so it denies."""
    from seqjudge.config import load_config
    from seqjudge.errors import SeqjudgeError
    from seqjudge.guard.core import fail_mode_of

    if given is not None or config is None:
        return fail_mode_of(given, None)

    try:
        return fail_mode_of(None, load_config(config))
    except SeqjudgeError:
        return "deny"
