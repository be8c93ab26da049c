"""`seqjudge check` and `seqjudge demo` end to end: outputs, exit codes, the actionable message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge import Report, RuleSet, Trace, check
from seqjudge.cli import run
from seqjudge.outputs.textview import trace_lines

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "golden_traces"

RULES = """
rules:
  - id: verify_before_delete
    type: before
    first: VerifyIdentity
    then: DeleteCustomer
  - type: max_calls
    tool: SendEmail
    max: 3
    severity: warning
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def traces_jsonl(*traces: dict) -> str:
    return "".join(json.dumps(t) + "\n" for t in traces)


def test_text_output_is_the_seed_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write(tmp_path, "rules.yaml", RULES)
    traces = write(
        tmp_path,
        "t.jsonl",
        traces_jsonl(
            {
                "trace_id": "bad",
                "calls": [
                    {"tool_name": "GetCustomer"},
                    {"tool_name": "DeleteCustomer"},
                    {"tool_name": "SendEmail"},
                ],
            },
            {"trace_id": "good", "calls": [{"tool_name": "VerifyIdentity"}, {"tool_name": "DeleteCustomer"}]},
        ),
    )
    code = run(["check", rules, traces])
    out = capsys.readouterr().out
    assert code == 1
    assert "❌ FAIL: bad · verify_before_delete" in out
    assert "Expected: VerifyIdentity before DeleteCustomer" in out
    assert "Actual: DeleteCustomer (call 2), but VerifyIdentity never called" in out
    assert "  2. DeleteCustomer  ← violation" in out
    assert "Suggestion: Add a successful call to VerifyIdentity before DeleteCustomer (call 2)." in out
    assert "FAIL   bad  score 0.00" in out
    assert "PASS   good  score 1.00" in out
    assert out.rstrip().endswith("2 trace(s): 1 pass, 1 fail, 0 review")


def test_exit_zero_when_every_trace_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write(tmp_path, "rules.yaml", RULES)
    traces = write(
        tmp_path,
        "t.jsonl",
        traces_jsonl(
            {"trace_id": "a", "calls": [{"tool_name": "VerifyIdentity"}, {"tool_name": "DeleteCustomer"}]}
        ),
    )
    assert run(["check", rules, traces]) == 0
    assert "1 trace(s): 1 pass, 0 fail, 0 review" in capsys.readouterr().out


def test_warning_only_failure_goes_to_review_not_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = write(tmp_path, "rules.yaml", RULES)
    calls = [{"tool_name": "SendEmail"}] * 4
    traces = write(tmp_path, "t.json", json.dumps({"trace_id": "w", "calls": calls}))
    code = run(["check", rules, traces, "--format", "jsonl"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    # The `before` rule is not exercised, so 0 of 1 checked rules passed: a warning lowers the score to
    # 0.0 but, not being critical, sends the trace to review instead of failing it.
    assert report["verdict"] == "review"
    assert report["sequence_correctness_score"] == 0.0
    assert report["total_rules_checked"] == 1
    assert report["violations"][0]["violation_type"] == "too_many_calls"
    assert report["violations"][0]["offending_call_index"] == 3


def test_json_and_jsonl_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write(tmp_path, "rules.yaml", RULES)
    traces = write(
        tmp_path,
        "t.jsonl",
        traces_jsonl(
            {"trace_id": "x", "calls": [{"tool_name": "DeleteCustomer"}]},
            {"trace_id": "y", "calls": []},
        ),
    )
    assert run(["check", rules, traces, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["traces"] == 2 and doc["summary"]["fail"] == 1 and doc["summary"]["pass"] == 1
    assert [r["trace_id"] for r in doc["reports"]] == ["x", "y"]
    assert run(["check", rules, traces, "--format", "jsonl"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    reports = [Report.model_validate_json(line) for line in lines]
    assert [r.trace_id for r in reports] == ["x", "y"]
    assert "no calls" in reports[1].summary.lower() and reports[1].sequence_correctness_score == 1.0


def test_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write(tmp_path, "rules.yaml", RULES)
    traces = write(tmp_path, "t.json", json.dumps(["VerifyIdentity", "DeleteCustomer"]))
    out = tmp_path / "out.jsonl"
    assert run(["check", rules, traces, "--format", "jsonl", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(out.read_text())["verdict"] == "pass"
    # not silent: one summary line on stderr, as linters print
    assert captured.err.splitlines()[0] == f"seqjudge: 1 trace(s): 1 pass, 0 fail, 0 review; written to {out}"


def test_report_json_has_exactly_the_documented_keys() -> None:
    rules = RuleSet.model_validate({"rules": [{"type": "before", "first": "A", "then": "B"}]})
    report = check(Trace.model_validate({"trace_id": "t", "calls": [{"tool_name": "B"}]}), rules)
    dumped = report.model_dump(mode="json")
    assert set(dumped) == {
        "trace_id",
        "verdict",
        "sequence_correctness_score",
        "total_rules_checked",
        "rules_passed",
        "rules_failed",
        "violations",
        "missing_prerequisites",
        "summary",
        "rules",
    }
    assert set(dumped["violations"][0]) >= {
        "rule_id",
        "rule_description",
        "violation_type",
        "expected_order",
        "actual_order",
        "offending_call_index",
        "severity",
        "explanation",
    }
    assert set(dumped["missing_prerequisites"][0]) == {
        "required_call",
        "dependent_call",
        "dependent_call_index",
        "impact",
    }
    assert set(dumped["rules"][0]) >= {
        "rule_id",
        "type",
        "severity",
        "outcome",
        "call_indices",
        "explanation",
    }


def test_long_trace_shows_a_window_around_the_violation() -> None:
    calls = [{"tool_name": f"step_{i}"} for i in range(40)]
    calls[25] = {"tool_name": "DeleteCustomer", "status": "error"}
    trace = Trace.model_validate({"trace_id": "long", "calls": calls})
    lines = trace_lines(trace, [25])
    text = "\n".join(lines)
    assert "26. DeleteCustomer [failed]  ← violation" in text
    assert "step_0" not in text and "step_39" not in text  # outside the window
    assert "22. step_21" in text and "30. step_29" in text
    assert "(40 calls in all)" in text


def test_parallel_calls_are_marked() -> None:
    trace = Trace.model_validate(
        {
            "trace_id": "p",
            "calls": [
                {"tool_name": "A", "step": 1},
                {"tool_name": "B", "step": 1},
                {"tool_name": "C", "step": 2},
            ],
        }
    )
    text = "\n".join(trace_lines(trace, [1]))
    assert "1. A [step 1, parallel]" in text and "2. B [step 1, parallel]  ← violation" in text
    assert "3. C\n" in text + "\n"


def test_unknown_tool_with_catalog_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write(tmp_path, "rules.yaml", "rules:\n  - {type: require, tool: get_ordr_details}\n")
    traces = write(tmp_path, "t.json", json.dumps(["get_order_details"]))
    catalog = str(GOLDEN / "tau-retail" / "catalog.json")
    assert run(["check", rules, traces, "--catalog", catalog]) == 2
    err = capsys.readouterr().err
    assert "get_ordr_details" in err and "rules.yaml" in err and "Traceback" not in err


def test_demo_runs_every_golden_suite_and_says_the_judge_was_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in ("SEQJUDGE_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    assert run(["demo", str(GOLDEN)]) == 0
    out = capsys.readouterr().out
    assert "LLM judge: skipped" in out
    for suite in ("customer-support", "tau-retail", "tau-airline"):
        assert f"== {suite}:" in out
    assert "most often failed:" in out and "← violation" in out and "Suggestion:" in out
    assert "deferred" in out


def test_a_cycle_is_reported_on_traces_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = write(
        tmp_path,
        "rules.yaml",
        "rules:\n"
        "  - {id: a-first, type: before, first: get_order_details, then: get_user_details}\n"
        "  - {id: u-first, type: before, first: get_user_details, then: get_order_details}\n",
    )
    traces = write(
        tmp_path,
        "t.jsonl",
        traces_jsonl(
            {
                "trace_id": "both",
                "calls": [{"tool_name": "get_user_details"}, {"tool_name": "get_order_details"}],
            },
            {"trace_id": "one", "calls": [{"tool_name": "get_user_details"}]},
        ),
    )
    catalog = str(GOLDEN / "tau-retail" / "catalog.json")
    assert run(["lint", rules, "--catalog", catalog]) == 2
    assert "get_order_details -> get_user_details -> get_order_details" in capsys.readouterr().out
    assert run(["check", rules, traces, "--catalog", catalog, "--format", "jsonl"]) == 1
    both, one = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    kinds = {(v["rule_id"], v["violation_type"]) for v in both["violations"]}
    assert ("a-first", "circular_dependency") in kinds and ("u-first", "circular_dependency") in kinds
    assert not any(v["violation_type"] == "circular_dependency" for v in one["violations"])


def test_totals_list_tied_rules_in_the_order_they_were_first_violated() -> None:
    # A set's order varies between runs (string hashing); the JSON summary must not.
    from seqjudge.outputs.textview import Totals

    totals = Totals()
    totals.count("fail", ["zeta", "alpha", "mid", "alpha"], [])
    totals.count("fail", ["mid", "zeta", "alpha"], ["judge-rule"])
    summary = totals.as_dict()
    assert list(summary["violations_by_rule"]) == ["zeta", "alpha", "mid"]
    assert summary["violations_by_rule"] == {"zeta": 2, "alpha": 2, "mid": 2}
    assert summary["deferred_rules"] == {"judge-rule": 1}
    assert (summary["traces"], summary["fail"]) == (2, 2)
