"""The Claude Code hook in shadow mode (`seqjudge guard RULES --hook claude-code --shadow --store PATH`), run
as Claude Code runs it: it decides, records the decision with the session id, and never blocks."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import seqjudge
from seqjudge.store import Store
from test_guard_hook import OTHER, READ, SESSION, Transcript, decision, hook

EDIT_OTHER = {"file_path": OTHER, "old_string": "a", "new_string": "b"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`seqjudge ARGS` as a process of this checkout."""
    env = {"PYTHONPATH": str(Path(seqjudge.__file__).parents[1]), "PATH": "/usr/bin:/bin"}
    main = "from seqjudge.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", main, *args], capture_output=True, text=True, check=False, env=env
    )


def transcript(tmp_path: Path) -> Transcript:
    """A session that read one file and now proposes an Edit of another."""
    t = Transcript(tmp_path / f"{SESSION}.jsonl")
    t.call(("toolu_01", "Read", {"file_path": READ}))
    t.result("toolu_01", "def checkout(cart): ...")
    t.call(("toolu_02", "Edit", EDIT_OTHER))
    return t


@pytest.mark.parametrize("form", ["fast", "typer"])
def test_shadow_records_the_deny_and_allows_the_call(tmp_path: Path, form: str) -> None:
    # A hook's plain command line runs without typer (cli.guard_hook.fast); `--store=PATH` goes through the
    # typer command: both paths record.
    store = tmp_path / "seqjudge.db"
    flags = ["--shadow", "--store", str(store)] if form == "fast" else [f"--store={store}", "--shadow"]
    done = hook(tmp_path, transcript(tmp_path), "Edit", EDIT_OTHER, *flags)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")  # silence: Claude Code allows it
    with Store(store) as db:
        (stored,) = db.guard_decisions(SESSION)
    assert (stored.tool, stored.call_id, stored.action, stored.shadow) == ("Edit", "toolu_02", "deny", True)
    assert stored.denied_rules == ["before:Read->Edit"] and OTHER in stored.rules[0]["message"]


def test_a_store_without_shadow_records_the_enforced_decision(tmp_path: Path) -> None:
    store = tmp_path / "seqjudge.db"
    done = hook(tmp_path, transcript(tmp_path), "Edit", EDIT_OTHER, "--store", str(store))
    assert decision(done)["permissionDecision"] == "deny"  # still enforced
    with Store(store) as db:
        assert [(d.action, d.shadow) for d in db.guard_decisions(SESSION)] == [("deny", False)]


def test_a_store_that_cannot_be_opened_never_blocks_in_shadow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_text("this is not a database")
    done = hook(tmp_path, transcript(tmp_path), "Edit", EDIT_OTHER, "--shadow", "--store", str(broken))
    assert done.returncode == 0 and done.stdout == ""  # exit 2 would block the call in Claude Code
    assert "the decision was not recorded" in done.stderr and "Traceback" not in done.stderr


def test_shadow_decisions_are_shown_beside_the_offline_verdict_of_the_session(tmp_path: Path) -> None:
    # The same session, imported offline by the claude-code importer (trace id = session id), then shown.
    store = tmp_path / "seqjudge.db"
    t = transcript(tmp_path)
    hook(tmp_path, t, "Edit", EDIT_OTHER, "--shadow", "--store", str(store))
    t.result("toolu_02", "The file has been updated.")  # shadow: the Edit ran
    ran = cli("run", str(tmp_path / "rules.yaml"), str(t.path), "--store", str(store))
    assert ran.returncode == 1, ran.stderr  # the Edit of a file never read fails offline too
    shown = cli("runs", "show", "latest", "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    row = next(line.split() for line in shown.stdout.splitlines() if line.strip().startswith(SESSION))
    assert row[1:6] == ["1", "1", "shadow", "fail", "yes"]
    assert sqlite3.connect(store).execute("SELECT COUNT(*) FROM guard_decisions").fetchone() == (1,)


def test_an_enforced_deny_agrees_with_the_offline_failure_of_the_refused_attempt(tmp_path: Path) -> None:
    # Enforced: the Edit was refused; Claude Code logs it as a failed attempt, which the offline engine
    # fails under the same rule (a `before` rule counts attempts whatever their outcome).
    store = tmp_path / "seqjudge.db"
    t = transcript(tmp_path)
    assert (
        decision(hook(tmp_path, t, "Edit", EDIT_OTHER, "--store", str(store)))["permissionDecision"] == "deny"
    )
    t.result("toolu_02", "blocked by the PreToolUse hook", error=True)
    t.call(("toolu_03", "Edit", {"file_path": READ}))
    assert hook(tmp_path, t, "Edit", {"file_path": READ}, "--store", str(store)).stdout == ""
    t.result("toolu_03", "The file has been updated.")
    assert cli("run", str(tmp_path / "rules.yaml"), str(t.path), "--store", str(store)).returncode == 1
    shown = cli("runs", "show", "latest", "--store", str(store))
    row = next(line for line in shown.stdout.splitlines() if line.strip().startswith(SESSION))
    assert row.split()[1:6] == ["2", "1", "enforced", "fail", "yes"], row
