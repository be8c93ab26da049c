"""`seqjudge guard RULES --hook claude-code`: a Claude Code PreToolUse hook, run as Claude Code runs it (a
process, the hook's JSON on stdin), over a transcript written as Claude Code writes one (one JSON line per
content block, tool results in user lines, the proposed call's own tool_use already written, unanswered)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import seqjudge
from seqjudge.guard.claude_code import read_transcript

SESSION = "3f1e6a2b-8c4d-4e5f-9a0b-1c2d3e4f5a6b"
# What the `seqjudge` console script runs (seqjudge.cli:main).
MAIN = "from seqjudge.cli import main; main()"
RULES = "rules:\n  - {type: before, first: Read, then: Edit, same: [file_path]}\n"


class Transcript:
    """A Claude Code session log being written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[dict[str, Any]] = []
        self.turns = 0
        self.user("Fix the failing checkout test.")

    def _line(self, kind: str, message: dict[str, Any]) -> None:
        n = len(self.lines) + 1
        self.lines.append(
            {
                "parentUuid": f"00000000-0000-4000-8000-{n - 1:012d}" if n > 1 else None,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/home/dev/shop",
                "sessionId": SESSION,
                "version": "1.0.72",
                "type": kind,
                "uuid": f"00000000-0000-4000-8000-{n:012d}",
                "timestamp": f"2025-08-01T10:00:{n:02d}.000Z",
                "message": message,
            }
        )
        self.path.write_text("".join(json.dumps(line) + "\n" for line in self.lines), encoding="utf-8")

    def user(self, text: str) -> None:
        self._line("user", {"role": "user", "content": text})

    def call(self, *calls: tuple[str, str, dict[str, Any]]) -> None:
        """One model turn issuing ``calls`` (id, tool, input), each block on its own line."""
        self.turns += 1
        for call_id, name, args in calls:
            block = {"type": "tool_use", "id": call_id, "name": name, "input": args}
            message = {
                "id": f"msg_{self.turns:02d}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-20250514",
                "content": [block],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
            self._line("assistant", message)

    def result(self, call_id: str, text: str, *, error: bool = False) -> None:
        block = {"tool_use_id": call_id, "type": "tool_result", "content": text, "is_error": error}
        self._line("user", {"role": "user", "content": [block]})


def hook(
    tmp_path: Path,
    transcript: Transcript,
    tool: str,
    args: dict[str, Any],
    *extra: str,
    rules: str = RULES,
    tool_use_id: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the hook on the proposed call ``tool(args)``, by default the transcript's last tool_use."""
    rules_file = tmp_path / "rules.yaml"
    if not rules_file.exists():
        rules_file.write_text(rules, encoding="utf-8")
    event = {
        "session_id": SESSION,
        "transcript_path": str(transcript.path),
        "cwd": "/home/dev/shop",
        "permission_mode": "default",  # a key the guard does not read: ignored
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": args,
        "tool_use_id": tool_use_id or transcript.lines[-1]["message"]["content"][0].get("id"),
    }
    src = str(Path(seqjudge.__file__).parents[1])
    return subprocess.run(
        [sys.executable, "-c", MAIN, "guard", str(rules_file), "--hook", "claude-code", *extra],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": src},
    )


def decision(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    return out


READ = "/home/dev/shop/shop/cart.py"
OTHER = "/home/dev/shop/shop/payment.py"


def test_edit_of_a_file_the_transcript_never_read_is_denied_and_of_one_it_read_allowed(
    tmp_path: Path,
) -> None:
    t = Transcript(tmp_path / f"{SESSION}.jsonl")
    t.call(("toolu_01", "Read", {"file_path": READ}))
    t.result("toolu_01", "def checkout(cart): ...")
    # The proposed Edit's tool_use is in the transcript, unanswered, when Claude Code runs the hook.
    t.call(("toolu_02", "Edit", {"file_path": OTHER, "old_string": "a", "new_string": "b"}))
    denied = decision(hook(tmp_path, t, "Edit", {"file_path": OTHER, "old_string": "a", "new_string": "b"}))
    assert denied["permissionDecision"] == "deny"
    reason = denied["permissionDecisionReason"]
    assert reason.startswith("before:Read->Edit: ")
    assert f'file_path="{OTHER}"' in reason and "Add a successful call to Read" in reason

    t.lines.pop()  # the model asks for an Edit of the file it did read instead
    t.call(("toolu_03", "Edit", {"file_path": READ, "old_string": "a", "new_string": "b"}))
    allowed = hook(tmp_path, t, "Edit", {"file_path": READ, "old_string": "a", "new_string": "b"})
    assert allowed.returncode == 0 and allowed.stdout == "" and allowed.stderr == ""


def test_a_read_that_failed_or_is_still_running_does_not_count(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "s.jsonl")
    t.call(("toolu_01", "Read", {"file_path": READ}))
    t.result("toolu_01", "File does not exist.", error=True)
    t.call(("toolu_02", "Edit", {"file_path": READ}))
    assert decision(hook(tmp_path, t, "Edit", {"file_path": READ}))["permissionDecision"] == "deny"


def test_a_read_in_the_same_turn_runs_in_parallel_and_is_no_prerequisite(tmp_path: Path) -> None:
    # One model turn issues Read and Edit together; the Read has completed, but it ran in the Edit's step
    # (as `seqjudge check` reads the transcript), so it does not precede the Edit.
    t = Transcript(tmp_path / "s.jsonl")
    t.call(("toolu_01", "Read", {"file_path": READ}), ("toolu_02", "Edit", {"file_path": READ}))
    t.result("toolu_01", "def checkout(cart): ...")
    history = read_transcript(str(t.path), SESSION, "toolu_02")
    assert [c.tool_name for c in history.calls] == ["Read"] and history.same_step
    done = hook(tmp_path, t, "Edit", {"file_path": READ}, tool_use_id="toolu_02")
    assert decision(done)["permissionDecision"] == "deny"
    # The next turn's Edit comes after it.
    t.call(("toolu_03", "Edit", {"file_path": READ}))
    assert hook(tmp_path, t, "Edit", {"file_path": READ}).stdout == ""


def test_ask_mode_hands_a_judge_rule_to_the_person(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "s.jsonl")
    t.call(("toolu_01", "Bash", {"command": "rm -rf build"}))
    rules = "rules:\n  - {type: judge, description: Deleting files needs a reason, applies_to: Bash}\n"
    asked = decision(hook(tmp_path, t, "Bash", {"command": "rm -rf build"}, "--judge", "ask", rules=rules))
    assert asked["permissionDecision"] == "ask"
    assert "Deleting files needs a reason" in asked["permissionDecisionReason"]


@pytest.mark.parametrize(
    ("config", "flag", "action"),
    [
        ("risk_level: high\n", (), "deny"),
        ("risk_level: medium\n", (), "allow"),
        ("risk_level: high\nguard: {fail_mode: allow}\n", (), "allow"),
        ("risk_level: medium\n", ("--fail-mode", "deny"), "deny"),
        (None, (), "allow"),
    ],
)
def test_an_unreadable_transcript_is_the_fail_modes_decision_and_says_so(
    tmp_path: Path, config: str | None, flag: tuple[str, ...], action: str
) -> None:
    t = Transcript(tmp_path / "s.jsonl")
    t.call(("toolu_01", "Edit", {"file_path": READ}))
    t.path.write_text("{not json\n" + t.path.read_text())  # a broken line, not the last one
    extra = list(flag)
    if config is not None:
        (tmp_path / "seqjudge.yaml").write_text("rules: rules.yaml\ntraces: t\n" + config)
        extra += ["--config", str(tmp_path / "seqjudge.yaml")]
    done = hook(tmp_path, t, "Edit", {"file_path": READ}, *extra)
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr
    if action == "deny":
        out = decision(done)
        assert out["permissionDecision"] == "deny"
        assert (
            "could not decide" in out["permissionDecisionReason"]
            and "s.jsonl" in out["permissionDecisionReason"]
        )
    else:
        assert done.stdout == ""
        assert "could not decide" in done.stderr and "fail mode allow" in done.stderr


def test_a_bad_rule_file_denies_under_fail_mode_deny_with_the_files_message(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "s.jsonl")
    t.call(("toolu_01", "Edit", {"file_path": READ}))
    bad = "rules:\n  - {type: before, first: Read}\n"
    out = decision(hook(tmp_path, t, "Edit", {"file_path": READ}, "--fail-mode", "deny", rules=bad))
    assert out["permissionDecision"] == "deny"
    assert "rules.yaml" in out["permissionDecisionReason"] and "then" in out["permissionDecisionReason"]


def test_a_line_still_being_written_is_not_read(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "s.jsonl")
    t.call(("toolu_01", "Read", {"file_path": READ}))
    t.result("toolu_01", "ok")
    with t.path.open("a", encoding="utf-8") as f:
        f.write('{"type": "assistant", "sessionId": "')  # cut mid-line
    history = read_transcript(str(t.path), SESSION, None)
    assert [c.tool_name for c in history.calls] == ["Read"]


PROBE = (
    "import sys; from seqjudge.cli import main\n"
    "try:\n    main()\n"
    "finally:\n    print('typer' in sys.modules, file=sys.stderr)\n"
)


def test_the_hooks_command_line_runs_without_typer_and_a_mistake_goes_to_the_typer_command(
    tmp_path: Path,
) -> None:
    t = Transcript(tmp_path / "s.jsonl")
    t.call(("toolu_01", "Edit", {"file_path": READ}))
    (tmp_path / "rules.yaml").write_text(RULES)
    event = {"session_id": SESSION, "transcript_path": str(t.path), "hook_event_name": "PreToolUse"}
    event |= {"tool_name": "Edit", "tool_input": {"file_path": READ}, "tool_use_id": "toolu_01"}
    env = {**os.environ, "PYTHONPATH": str(Path(seqjudge.__file__).parents[1])}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", PROBE, "guard", str(tmp_path / "rules.yaml"), *argv]
        return subprocess.run(command, input=json.dumps(event), capture_output=True, text=True, env=env)

    fast = run("--hook", "claude-code", "--fail-mode", "deny")
    assert fast.stderr.strip() == "False"  # no typer imported
    assert json.loads(fast.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    # The same command line with a mistake: the typer command reports it (exit 2: Claude Code blocks the
    # call and shows the message).
    wrong = run("--hook", "claude-code", "--fail-mode", "sometimes")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert "--fail-mode: fail mode 'sometimes'" in wrong.stderr and "choose deny or allow" in wrong.stderr
    assert run("--hook", "cursor").returncode == 2
    helped = run("--hook", "claude-code", "--help")
    assert helped.returncode == 0 and "PreToolUse" in helped.stdout


def test_the_fast_path_reads_every_option_the_guard_command_declares() -> None:
    import inspect

    from seqjudge.cli import register
    from seqjudge.cli.app import app
    from seqjudge.cli.guard_hook import FLAGS, OPTIONS

    register(["guard"])
    (command,) = [c for c in app.registered_commands if c.name == "guard"]

    declared = set()
    for parameter in inspect.signature(command.callback).parameters.values():
        info = parameter.annotation.__metadata__[0]
        # (typer keeps the first name given as the option's default, the others as its declarations)
        names = [info.default, *(info.param_decls or ())]
        declared |= {d for d in names if isinstance(d, str) and d.startswith("--")}
    assert declared == set(OPTIONS) | set(FLAGS)


def test_input_that_is_not_text_is_the_fail_modes_decision(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(RULES)
    env = {**os.environ, "PYTHONPATH": str(Path(seqjudge.__file__).parents[1])}
    argv = [sys.executable, "-c", MAIN, "guard", str(tmp_path / "rules.yaml"), "--hook", "claude-code"]
    done = subprocess.run([*argv, "--fail-mode", "deny"], input=b"\xff\xfe{", capture_output=True, env=env)
    assert done.returncode == 0 and b"Traceback" not in done.stdout + done.stderr
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    # (read as UTF-8 text strictly, or with the bytes escaped, as the locale has stdin: not JSON either way)
    reason = out["permissionDecisionReason"]
    assert "cannot be read as UTF-8" in reason or "input on stdin is not JSON" in reason
