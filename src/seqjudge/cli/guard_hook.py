"""What ``seqjudge guard`` does, and its thin entry point: a hook runs before every tool call, so its command
line is read here without typer when it is exactly a hook's (``guard RULES --hook HOST [--config PATH]
[--fail-mode MODE] [--judge MODE] [--store PATH] [--shadow]``): typer and the other commands' options cost
as much to import as the guard itself (benchmarks/README.md). Any other command line, ``--help`` or a
mistake in this one goes to the typer command (``guard_cmd``), which parses the same options, calls the same
function and reports errors in the one place errors are reported (``seqjudge.cli.run``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from seqjudge.defaults import STORE_ENV

if TYPE_CHECKING:
    from seqjudge.guard.decision import FailMode, JudgeMode

HOOKS = ("claude-code",)
FAIL_MODES = ("deny", "allow")
JUDGE_MODES = ("skip", "ask", "model")
# The options of `seqjudge guard`: with a value, and flags (the typer command declares the same ones, which
# tests/test_guard_hook.py holds to these: an option added there and not here would send every hook call
# through typer).
OPTIONS = ("--hook", "--config", "--fail-mode", "--judge", "--store")
FLAGS: tuple[str, ...] = ("--shadow",)


def check_options(hook: str, fail_mode: str | None, judge: str) -> None:
    """The option values a hook can be given, checked (an ``InputError`` naming the option)."""
    from seqjudge.errors import InputError

    if hook not in HOOKS:
        raise InputError(f"unknown hook {hook!r}", where="--hook", hint=f"choose one of: {', '.join(HOOKS)}")
    if fail_mode is not None and fail_mode not in FAIL_MODES:
        raise InputError(f"fail mode {fail_mode!r}", where="--fail-mode", hint="choose deny or allow")
    if judge not in JUDGE_MODES:
        raise InputError(f"judge mode {judge!r}", where="--judge", hint="choose skip, ask or model")


def answer_hook(
    rules: Path,
    config: Path | None,
    fail_mode: str | None,
    judge: str,
    *,
    shadow: bool = False,
    store: str | Path | None = None,
) -> int:
    """Read the hook's input on stdin, decide, write the hook's answer on stdout; always exit 0 (a guard
    that cannot decide answers its fail mode's decision, in the protocol). With a ``store`` the decision is
    recorded with the session id; ``shadow``: only recorded (in ``store``, else the default store), and the
    call allowed."""
    from seqjudge.guard.claude_code import answer, run_hook
    from seqjudge.guard.core import Guard

    mode = _fail_mode(fail_mode, config)
    given: FailMode | None = mode if fail_mode else None  # (else the guard reads the config's)
    judged: JudgeMode = "ask" if judge == "ask" else "model" if judge == "model" else "skip"
    try:
        raw: str | None = sys.stdin.read()
    except (OSError, UnicodeDecodeError):
        raw = None  # (the fail mode's decision, said: parse_event)
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


def _fail_mode(given: str | None, config: Path | None) -> FailMode:
    """The fail mode before the guard is built (for a rule or config file that cannot be read): ``given``,
    else the config's; a config that cannot be read leaves the risk level unknown, so it denies."""
    from seqjudge.guard.core import fail_mode_of

    if given is not None or config is None:
        return fail_mode_of(given, None)
    from seqjudge.config import load_config
    from seqjudge.errors import SeqjudgeError

    try:
        return fail_mode_of(None, load_config(config))
    except SeqjudgeError:
        return "deny"


def fast(argv: list[str]) -> int | None:
    """Run a hook's command line without typer; None when ``argv`` is not exactly one (typer runs it)."""
    if len(argv) < 4 or argv[0] != "guard" or argv[1].startswith("-"):
        return None
    values: dict[str, str] = {}
    rest = argv[2:]
    k = 0
    while k < len(rest):
        option = rest[k]
        if option in values:
            return None
        if option in FLAGS:
            values[option] = ""
            k += 1
            continue
        if option not in OPTIONS or k + 1 == len(rest) or rest[k + 1].startswith("-"):
            return None
        values[option] = rest[k + 1]
        k += 2
    if "--hook" not in values:
        return None
    fail_mode, judge = values.get("--fail-mode"), values.get("--judge", "skip")
    from seqjudge.errors import InputError

    try:
        check_options(values["--hook"], fail_mode, judge)
    except InputError:
        return None  # (the typer command says what is wrong)
    config = values.get("--config")
    store = values.get("--store") or os.environ.get(STORE_ENV) or None  # as the typer option reads it
    return answer_hook(
        Path(argv[1]),
        None if config is None else Path(config),
        fail_mode,
        judge,
        shadow="--shadow" in values,
        store=store,  # a str: a Path would fold a URL's //
    )
