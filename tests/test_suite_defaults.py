"""Issue 37, points 5-7: the defaults of a suite that must not fight the user.

- the catalog beside the rule file is used by `check` and `run` (and every command that loads a suite);
  a catalog tool that no trace calls is coverage, not a typo;
- the seqjudge.yaml beside a named rule file applies (its `strict:` too), and --strict / --no-strict
  override it both ways;
- a call a rule names (a blocklist hit) is a violation (exit 1), never "outside the catalog" (exit 2).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from seqjudge.cli import run

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "golden_traces"
SUITES = sorted(p.name for p in GOLDEN.iterdir() if (p / "rules.yaml").is_file())

RULES = """\
rules:
  - id: read-first
    type: before
    first: get_order
    then: cancel_order
  - id: no-item-lookups-after-cancel
    type: never_after
    trigger: cancel_order
    forbidden: get_item
"""
CATALOG = {"tools": [{"name": n} for n in ("get_order", "cancel_order", "get_item")]}
# get_item, a catalog tool, is called by no trace: coverage, not a typo of get_order.
TRACES = [{"trace_id": "ok", "calls": [{"tool_name": "get_order"}, {"tool_name": "cancel_order"}]}]


def suite(tmp_path: Path, config: str | None = None, catalog: bool = True) -> tuple[str, str]:
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    if catalog:
        (tmp_path / "catalog.json").write_text(json.dumps(CATALOG), encoding="utf-8")
    (tmp_path / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TRACES), encoding="utf-8")
    if config is not None:
        (tmp_path / "seqjudge.yaml").write_text(config, encoding="utf-8")
    return str(tmp_path / "rules.yaml"), str(tmp_path / "traces.jsonl")


# -- 5. the catalog beside the rule file ---------------------------------------------------------------------
def test_check_reads_the_catalog_beside_the_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules, traces = suite(tmp_path)
    assert run(["check", rules, traces, "--strict"]) == 0
    err = capsys.readouterr()
    text = err.out + err.err
    assert "did you mean" not in text
    assert "note: tool 'get_item' (rule no-item-lookups-after-cancel) is in" in text
    assert "catalog.json but no trace calls it" in text


def test_without_a_catalog_the_uncalled_name_is_still_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = suite(tmp_path, catalog=False)
    assert run(["check", rules, traces, "--strict"]) == 2
    assert "referenced tool(s) called in no trace" in capsys.readouterr().err


def test_the_catalog_beside_the_rules_checks_tool_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = suite(tmp_path)
    Path(rules).write_text(RULES.replace("forbidden: get_item", "forbidden: get_itme"), encoding="utf-8")
    assert run(["check", rules, traces]) == 2
    assert "did you mean 'get_item'?" in capsys.readouterr().err


def test_catalog_tools_not_called_are_in_the_json_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = suite(tmp_path)
    assert run(["check", rules, traces, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    coverage = data["summary"]["coverage"] if "coverage" in data.get("summary", {}) else data["coverage"]
    assert coverage["catalog_tools_not_called"] == [
        {"tool": "get_item", "rules": ["no-item-lookups-after-cancel"]}
    ]
    assert coverage["unknown_tools"] == []


def test_run_reads_the_catalog_beside_the_rules_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = suite(tmp_path)
    Path(rules).write_text(RULES.replace("forbidden: get_item", "forbidden: get_itme"), encoding="utf-8")
    assert run(["run", rules, traces, "--store", str(tmp_path / "s.db")]) == 2
    assert "did you mean 'get_item'?" in capsys.readouterr().err


@pytest.mark.parametrize("name", SUITES)
def test_bundled_suites_pass_strict(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 1 is their labelled failing traces; 2 would be a suite --strict rejects."""
    folder = GOLDEN / name
    assert run(["check", str(folder / "rules.yaml"), str(folder), "--strict", "-q"]) == 1
    assert run(["check", str(folder), "--strict", "-q"]) == 1
    text = capsys.readouterr()
    assert "--strict:" not in text.err
    assert "did you mean" not in text.out + text.err


# -- 6. the config's settings whenever it is found; flags override both ways ------------------------------
STRICT_CONFIG = "rules: rules.yaml\ntraces: traces.jsonl\nstrict: true\n"


def test_config_beside_named_rules_applies_its_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = suite(tmp_path, STRICT_CONFIG, catalog=False)
    assert run(["check", rules, traces]) == 2  # strict: true of the config, files named
    assert "--strict:" in capsys.readouterr().err
    assert run(["check", rules, traces, "--no-strict"]) == 0
    assert run(["check", str(tmp_path)]) == 2
    assert run(["check", str(tmp_path), "--no-strict"]) == 0


def test_strict_flag_wins_over_a_config_without_it(tmp_path: Path) -> None:
    rules, traces = suite(tmp_path, "rules: rules.yaml\ntraces: traces.jsonl\n", catalog=False)
    assert run(["check", rules, traces]) == 0
    assert run(["check", rules, traces, "--strict"]) == 2
    assert run(["check", str(tmp_path), "--strict"]) == 2


def test_run_applies_the_config_beside_named_rules_and_no_strict_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = suite(tmp_path, STRICT_CONFIG + "store: s.db\n", catalog=False)
    assert run(["run", rules, traces]) == 2
    assert "--strict:" in capsys.readouterr().err
    assert run(["run", rules, traces, "--no-strict"]) == 0
    assert (tmp_path / "s.db").is_file()  # the config's store: its settings apply, not only strict


def test_folder_without_a_config_is_its_rules_over_its_traces_or_says_how_to_name_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite(tmp_path)
    assert run(["check", str(tmp_path), "--strict"]) == 0  # rules.yaml over the folder's traces
    (tmp_path / "rules.yaml").unlink()
    assert run(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no seqjudge.yaml in this folder" in err
    assert "RULES TRACES" in err


@pytest.mark.parametrize("command", ["check", "run", "compare"])
def test_every_strict_command_has_no_strict(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([command, "--help"]) == 0
    assert "--no-strict" in capsys.readouterr().out


def test_copied_golden_suite_finds_its_catalog_wherever_run_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(GOLDEN / "tau-retail", tmp_path / "retail")
    monkeypatch.chdir(tmp_path)
    assert run(["check", "retail/rules.yaml", "retail/traces.jsonl", "--strict", "-q"]) == 1


# -- 7. a call a rule names is never "outside the catalog" --------------------------------------------------
BLOCKLIST = RULES + "  - id: no-admin-tools\n    type: blocklist\n    pattern: admin_\n"


def blocklist_suite(tmp_path: Path, *calls: str) -> tuple[str, str]:
    rules, traces = suite(tmp_path)
    Path(rules).write_text(BLOCKLIST, encoding="utf-8")
    trace = {"trace_id": "t", "calls": [{"tool_name": n} for n in ("get_order", "cancel_order", *calls)]}
    Path(traces).write_text(json.dumps(trace) + "\n", encoding="utf-8")
    return rules, traces


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_blocklist_hit_is_a_violation_under_strict_not_bad_input(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = blocklist_suite(tmp_path, "admin_unlock")
    store = ["--store", str(tmp_path / "s.db")] if command == "run" else []
    catalog = ["--catalog", str(tmp_path / "catalog.json")]  # named: the finding is not the default's
    assert (
        run([command, rules, traces, "--strict", *catalog, *store]) == 1
    )  # `|| test $? -eq 1` lets it through
    captured = capsys.readouterr()
    assert "no-admin-tools" in captured.out
    assert "outside the catalog" not in captured.out + captured.err


def test_a_call_no_rule_names_is_still_outside_the_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = blocklist_suite(tmp_path, "admin_unlock", "book_flight")
    catalog = ["--catalog", str(tmp_path / "catalog.json")]
    assert run(["check", rules, traces, "--strict", "--format", "json", *catalog]) == 2
    captured = capsys.readouterr()
    assert "1 trace(s) calling tools outside the catalog" in captured.err
    coverage = json.loads(captured.out)["summary"]["coverage"]
    assert coverage["calls_outside_catalog"] == {"t": ["book_flight"]}
