"""Every command that reads traces takes several paths and suite folders, and no input is not a pass
(issue 17.3 and 17.9)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.ingest import load_traces

RULES = "rules:\n  - {id: a-first, type: before, first: A, then: B}\n"


def _trace(trace_id: str) -> str:
    return json.dumps({"trace_id": trace_id, "calls": [{"tool_name": "A"}, {"tool_name": "B"}]}) + "\n"


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A suite folder as `golden_traces/NAME/` holds one: rules, catalog, labels, config, a README, traces."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "rules.yaml").write_text(RULES, encoding="utf-8")
    (folder / "catalog.json").write_text(json.dumps({"tools": [{"name": "A"}, {"name": "B"}]}), "utf-8")
    (folder / "labels.jsonl").write_text(json.dumps({"trace_id": "t1", "verdict": "pass"}) + "\n", "utf-8")
    (folder / "seqjudge.yaml").write_text("rules: rules.yaml\ntraces: .\n", encoding="utf-8")
    (folder / "README.md").write_text("# a suite\n", encoding="utf-8")
    (folder / "traces").mkdir()
    (folder / "traces" / "one.json").write_text(_trace("t1"), encoding="utf-8")
    (folder / "traces" / "two.json").write_text(_trace("t2"), encoding="utf-8")
    (folder / "more.jsonl").write_text(_trace("t3") + _trace("t4"), encoding="utf-8")
    return folder


def test_several_paths_are_read_in_order(suite: Path) -> None:
    paths = [suite / "traces" / "two.json", suite / "traces" / "one.json", suite / "more.jsonl"]
    assert [t.trace_id for t in load_traces(paths)] == ["t2", "t1", "t3", "t4"]


def test_check_takes_a_shell_glob(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in (suite / "traces").glob("*.json"))  # what `traces/*.json` expands to
    assert run(["check", "suite/rules.yaml", *files, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["traces"] == 2


def test_a_duplicate_id_across_paths_is_still_an_error(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = str(suite / "traces" / "one.json")
    assert run(["check", "suite/rules.yaml", one, one]) == 2
    assert "duplicate trace id 't1'" in capsys.readouterr().err


def test_a_suite_folder_skips_its_own_files_with_a_note(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["check", "suite/rules.yaml", "suite", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["summary"]["traces"] == 4
    note = captured.err
    for named in (
        "suite/catalog.json (tool catalog)",
        "suite/labels.jsonl (golden labels)",
        "suite/rules.yaml (rule file)",
        "suite/seqjudge.yaml (project config)",
        "1 not .json or .jsonl: suite/README.md",
    ):
        assert named in note


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "suite/rules.yaml", "suite"],
        ["check", "suite/rules.yaml", "suite", "--format", "jsonl"],
        ["prompt", "suite/rules.yaml", "suite", "--trace-id", "t4"],
        ["convert", "suite", "suite/traces/one.json", "-o", "out.jsonl"],
        ["run", "suite/rules.yaml", "suite", "--store", "s.db"],
        ["run", "suite/rules.yaml", "suite/traces", "suite/more.jsonl", "--store", "s.db"],
    ],
)
def test_every_trace_command_reads_a_suite_folder(
    argv: list[str], suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] == "convert":
        shutil.move(str(suite / "traces" / "one.json"), "one.json")  # so the two paths hold no duplicate
        argv = [*argv[:2], "one.json", *argv[3:]]
    assert run(argv) == 0, capsys.readouterr().err


def test_unknown_junk_in_a_folder_still_fails_closed(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (suite / "package.json").write_text(json.dumps({"name": "x", "version": "1"}), encoding="utf-8")
    assert run(["check", "suite/rules.yaml", "suite"]) == 2
    assert "package.json" in capsys.readouterr().err


# -- no input is not a pass ------------------------------------------------------------------------------


@pytest.fixture
def empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-empty-0000")
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "rules.yaml").write_text(RULES, encoding="utf-8")
    (tmp_path / "suite" / "labels.jsonl").write_text("", encoding="utf-8")
    return tmp_path


COMMANDS = [
    ["check", "rules.yaml"],
    ["check", "rules.yaml", "--format", "jsonl"],
    ["prompt", "rules.yaml"],
    ["judge", "rules.yaml", "--model", "openai:gpt-4o", "--base-url", "http://127.0.0.1:9/v1"],
    ["run", "rules.yaml", "--store", "s.db"],
    ["run", "rules.yaml", "--store", "s.db", "--dry-run"],
    ["convert", "-o", "out.jsonl"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:3]) for c in COMMANDS])
@pytest.mark.parametrize("given", ["empty.jsonl", "suite"])
def test_zero_traces_read_is_exit_2_in_every_command(
    command: list[str], given: str, empty: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The trace path goes after the rules (or first, for convert).
    argv = (
        [command[0], given, *command[1:]] if command[0] == "convert" else [*command[:2], given, *command[2:]]
    )
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert f"no traces in {given}" in err and "Traceback" not in err
    assert not (empty / "s.db").exists()  # `run` stores no run for an input without traces
    assert not (empty / "out.jsonl").exists()


def test_allow_empty_accepts_an_input_without_traces(empty: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["check", "rules.yaml", "suite", "--allow-empty"]) == 0
    assert "0 trace(s)" in capsys.readouterr().out


def test_the_progress_bar_count_does_not_repeat_the_note(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from seqjudge.cli.run_cmd import count_traces
    from seqjudge.config import RunConfig

    assert count_traces(RunConfig(rules="suite/rules.yaml", traces="suite")) == 4
    assert capsys.readouterr().err == ""
