"""A rule that checks nothing is reported, and calls outside the catalog are named per trace (issue 17.1,
17.3): after `check` and `run`, in text, JSON and on stderr beside JSONL; `--strict` (or `strict: true`)
makes any of it exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import seqjudge.checkpool as checkpool
import seqjudge.rules.coverage as coverage_module
from seqjudge.cli import run

try:  # as tests/test_check_fast_pool.py imports its sibling modules
    from test_ingest_native import tau_dir
except ImportError:  # pragma: no cover
    from tests.test_ingest_native import tau_dir

TAU = tau_dir()
TRACES = str(TAU / "traces.jsonl")
RETAIL = Path(__file__).resolve().parents[1] / "golden_traces" / "tau-retail"

TYPO = """rules:
  - id: details-before-cancel
    type: before
    first: get_order_details
    then: cancel_pending_ordr
  - id: auth-first
    type: before
    first: [find_user_id_by_email, find_user_id_by_name_zip]
    then: get_order_details
"""


@pytest.fixture
def typo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    path = tmp_path / "rules.yaml"
    path.write_text(TYPO, encoding="utf-8")
    return path


def test_a_misspelt_tool_is_reported_with_a_did_you_mean(
    typo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(["check", str(typo), TRACES])
    out = capsys.readouterr().out
    assert code == 1  # auth-first fails on some traces; the typo rule would have passed all of them
    tail = out[out.index("484 trace(s)") :]
    assert (
        "warning: 1 rule(s) exercised on no trace of 484 (they checked nothing): details-before-cancel"
        in tail
    )
    assert (
        "warning: tool 'cancel_pending_ordr' (rule details-before-cancel): no trace calls it; "
        "did you mean 'cancel_pending_order'?" in tail
    )
    assert "--strict makes these an error" in tail
    assert "auth-first" not in tail.split("exercised on no trace")[1].splitlines()[0]  # it was exercised


def test_strict_makes_it_exit_2(typo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["check", str(typo), TRACES, "--strict", "--format", "jsonl"]) == 2
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 484  # every report was still written
    assert "error: --strict: 1 rule(s) exercised on no trace, 1 referenced tool(s) called in no trace" in (
        captured.err
    )


def test_json_carries_the_findings_and_jsonl_says_them_on_stderr(
    typo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["check", str(typo), TRACES, "--format", "json"])
    coverage = json.loads(capsys.readouterr().out)["summary"]["coverage"]
    assert coverage == {
        "rules_not_exercised": ["details-before-cancel"],
        "unknown_tools": [
            {
                "tool": "cancel_pending_ordr",
                "rules": ["details-before-cancel"],
                "did_you_mean": "cancel_pending_order",
            }
        ],
        "catalog": None,
        "calls_outside_catalog": {},
        "traces_outside_catalog": 0,
        "catalog_tools_not_called": [],
    }
    run(["check", str(typo), TRACES, "--format", "jsonl"])
    captured = capsys.readouterr()
    assert all(json.loads(line)["trace_id"] for line in captured.out.splitlines())  # reports only
    assert "rule(s) exercised on no trace of 484" in captured.err
    assert "did you mean 'cancel_pending_order'?" in captured.err


def test_worker_processes_count_the_same(
    typo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(checkpool, "worker_count", lambda: 2)
    monkeypatch.setattr(checkpool, "INLINE", 10)
    monkeypatch.setattr(checkpool, "CHUNK", 50)
    run(["check", str(typo), TRACES, "--format", "jsonl"])
    pooled = capsys.readouterr().err
    monkeypatch.setattr(checkpool, "worker_count", lambda: 0)
    run(["check", str(typo), TRACES, "--format", "jsonl"])
    assert pooled == capsys.readouterr().err
    assert "did you mean 'cancel_pending_order'?" in pooled


def test_nothing_is_said_when_every_rule_and_tool_was_exercised(
    typo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo.write_text(TYPO.replace("cancel_pending_ordr", "cancel_pending_order"), encoding="utf-8")
    assert run(["check", str(typo), TRACES, "--strict"]) == 1
    captured = capsys.readouterr()
    assert "warning" not in captured.out and "warning" not in captured.err


def test_a_rule_whose_when_matches_no_trace_is_reported(
    typo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo.write_text(
        "rules:\n  - {id: retail-only, type: require, tool: think, when: {domain: retail}}\n",
        encoding="utf-8",
    )
    run(["check", str(typo), TRACES])  # tau traces carry the domain in metadata, not in context
    assert "(they checked nothing): retail-only" in capsys.readouterr().out


# -- calls outside the catalog, per trace ------------------------------------------------------------------


def test_traces_of_another_domain_are_named_per_trace(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["check", str(RETAIL / "rules.yaml"), TRACES, "--catalog", str(RETAIL / "catalog.json")]
    run([*argv, "--format", "json"])
    coverage = json.loads(capsys.readouterr().out)["summary"]["coverage"]
    outside = coverage["calls_outside_catalog"]
    assert coverage["catalog"] == str(RETAIL / "catalog.json")
    assert len(outside) == coverage["traces_outside_catalog"] == 264
    assert all(trace_id.startswith("airline/") for trace_id in outside)
    assert outside["airline/gpt-4o/task0/trial0"] == [
        "book_reservation",
        "search_direct_flight",
        "search_onestop_flight",
    ]
    run(argv)
    out = capsys.readouterr().out
    assert "warning: trace 'airline/gpt-4o/task0/trial0' calls tools that" in out
    assert "and 259 more trace(s) calling tools outside the catalog" in out
    assert run([*argv, "--strict"]) == 2
    assert "264 trace(s) calling tools outside the catalog" in capsys.readouterr().err


# -- run ------------------------------------------------------------------------------------------------


def test_run_says_the_same_and_strict_in_the_config_fails(
    typo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["run", str(typo), TRACES, "--store", "s.db"]) == 1
    out = capsys.readouterr().out
    assert "rule(s) exercised on no trace of 484 (they checked nothing): details-before-cancel" in out
    assert "did you mean 'cancel_pending_order'?" in out
    config = Path("seqjudge.yaml")
    config.write_text(f"rules: {typo}\ntraces: {TRACES}\nstore: s.db\nstrict: true\n", encoding="utf-8")
    assert run(["run", str(config), "--format", "json"]) == 2
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["coverage"]["rules_not_exercised"] == ["details-before-cancel"]
    assert "error: --strict: 1 rule(s) exercised on no trace" in captured.err
    # A resumed run counts the traces it had stored before, too.
    assert run(["run", "--resume", summary["run_id"], "--store", "s.db", "--format", "json"]) == 2
    resumed = json.loads(capsys.readouterr().out)["coverage"]
    assert resumed == summary["coverage"]


def test_traces_outside_the_catalog_are_all_counted_and_the_first_ones_listed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(coverage_module, "LISTED", 3)  # memory stays bounded on a huge mixed input
    argv = ["check", str(RETAIL / "rules.yaml"), TRACES, "--catalog", str(RETAIL / "catalog.json")]
    run([*argv, "--format", "json"])
    coverage = json.loads(capsys.readouterr().out)["summary"]["coverage"]
    assert len(coverage["calls_outside_catalog"]) == 3 and coverage["traces_outside_catalog"] == 264
