"""benchmarks/judge_replay.py on a tiny labelled suite: render writes what `seqjudge prompt` prints, score
replays hand-written answers through `seqjudge run` against the loopback fake server and counts correctly."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from seqjudge.cli import run

ROOT = Path(__file__).resolve().parents[1]
RULES = """
aliases:
  Writes: [Refund]
rules:
  - {id: read_first, type: before, first: GetOrder, then: Writes}
  - id: confirm
    type: judge
    description: Get the user's yes before a refund.
    applies_to: Writes
    criteria:
      pass: ["The agent stated the refund and the user said yes before the call."]
      fail: ["No yes before the call."]
"""


def trace(tid: str, *, yes: bool) -> dict:
    return {
        "trace_id": tid,
        "calls": [
            {"tool_name": "GetOrder", "arguments": {"id": tid}, "output": "an order"},
            {"tool_name": "Refund", "arguments": {"id": tid}, "output": "refunded"},
        ],
        "messages": [
            {"role": "user", "content": f"Refund {tid}.", "at": 0},
            {"role": "assistant", "content": f"Refund {tid} to your card?", "at": 1},
            {"role": "user", "content": "yes" if yes else "what?", "at": 1},
        ],
    }


# t1 confirmed (label pass), t2 and t3 not (label fail), t4 confirmed; t5 calls no write (not labelled).
LABELS = {"t1": "pass", "t2": "fail", "t3": "fail", "t4": "pass"}


def answer(failed: bool) -> str:
    out = {
        "sequence_correctness_score": 0.0 if failed else 1.0,
        "total_rules_checked": 1,
        "rules_passed": 0 if failed else 1,
        "rules_failed": 1 if failed else 0,
        "violations": [
            {
                "rule_id": "confirm",
                "rule_description": "yes before a refund",
                "violation_type": "criteria_not_met",
                "expected_order": "a yes before the refund",
                "actual_order": "refund at call 1 without a yes",
                "offending_call_index": 1,
                "severity": "critical",
                "explanation": "No yes.",
            }
        ]
        if failed
        else [],
        "missing_prerequisites": [],
        "summary": "s",
    }
    return json.dumps(out)


@pytest.fixture
def replay():
    spec = importlib.util.spec_from_file_location("judge_replay", ROOT / "benchmarks" / "judge_replay.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["judge_replay"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("judge_replay", None)


@pytest.fixture
def suite(tmp_path) -> Path:
    d = tmp_path / "tiny"
    d.mkdir()
    (d / "rules.yaml").write_text(RULES, encoding="utf-8")
    traces = [trace(t, yes=LABELS[t] == "pass") for t in LABELS]
    traces.append({"trace_id": "t5", "calls": [{"tool_name": "GetOrder"}]})
    (d / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")
    labels = [
        {"trace_id": t, "verdict": v, "rules": {"read_first": "pass", "confirm": v}}
        for t, v in LABELS.items()
    ]
    labels.append({"trace_id": "t5", "verdict": "pass", "rules": {}})
    (d / "labels.jsonl").write_text("".join(json.dumps(lb) + "\n" for lb in labels), encoding="utf-8")
    return d


def test_render_then_score_counts_agreement_misses_false_flags_and_unscored(replay, suite, tmp_path, capsys):
    ids = tmp_path / "ids.txt"
    ids.write_text("# eval\nt1\nt2\n\nt3\nt4\nt5\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["render", "--suite", str(suite), "--trace-ids", str(ids), "--out", str(out)]
    assert replay.main([*argv, "--judge-mode", "contextual"]) == 0
    index = [line.split("\t") for line in (out / "index.tsv").read_text().splitlines()]
    assert [(k, s, t) for k, s, t in index] == [(f"t0{i}", str(suite), f"t{i}") for i in range(1, 6)]
    capsys.readouterr()
    # Each prompt is exactly what `seqjudge prompt` prints.
    prompt = ["prompt", str(suite / "rules.yaml"), str(suite / "traces.jsonl"), "--trace-id", "t2"]
    assert run([*prompt, "--risk-level", "high", "--judge-mode", "contextual"]) == 0
    assert (out / "prompts" / "t02.txt").read_text() == capsys.readouterr().out
    # Rendering again reuses the keys: nothing is appended twice.
    assert replay.main([*argv, "--judge-mode", "contextual"]) == 0
    assert len((out / "index.tsv").read_text().splitlines()) == 5

    answers = out / "answers"
    answers.mkdir()
    (answers / "t01.json").write_text(answer(failed=False))  # label pass, judge pass
    (answers / "t02.json").write_text("```json\n" + answer(failed=True) + "\n```")  # fail, fail (fenced)
    (answers / "t03.json").write_text(answer(failed=False))  # label fail, judge pass: a miss
    (answers / "t05.json").write_text(answer(failed=False))  # no write: not labelled, not counted
    # t04 has no answer: unscored, and named.
    capsys.readouterr()
    assert replay.main(["score", "--answers", str(out), "--judge-mode", "contextual", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    figures = report["overall"]["confirm"]
    assert figures["n"] == 4 and figures["scored"] == 3 and figures["unscored"] == 1
    assert figures["agreement"] == pytest.approx(2 / 3)
    # Cohen's kappa of (label fail, judge fail) over (F,F), (T,T), (T,F): p_o 2/3, p_e 4/9 -> 0.4.
    assert figures["kappa"] == pytest.approx(0.4)
    assert (figures["misses"], figures["false_flags"]) == (1, 0)
    assert figures["disagreeing"] == ["t3"] and figures["unscored_ids"] == ["t4"]
    assert report["suites"]["tiny"]["confirm"] == figures
    assert report["no_answer"] == ["t04 (t4)"] and report["unmatched_requests"] == 0
    assert set(report["overall"]) == {"confirm"}  # the exact rule is the engine's, not counted


def test_full_mode_replays_answers_about_every_rule_and_counts_the_judge_rule(
    replay, suite, tmp_path, capsys
):
    ids = tmp_path / "ids.txt"
    ids.write_text("t1\nt2\n", encoding="utf-8")
    out = tmp_path / "out"
    replay.main(["render", "--suite", str(suite), "--trace-ids", str(ids), "--out", str(out)])
    assert "## Rule `read_first`" in (out / "prompts" / "t01.txt").read_text()  # full: every rule
    (out / "answers").mkdir()
    # t1 (label pass): the judge fails confirm, passes read_first -> a false flag.
    flagged = json.loads(answer(failed=True)) | {"total_rules_checked": 2, "rules_passed": 1}
    (out / "answers" / "t01.json").write_text(json.dumps(flagged))
    # t2 (label fail): the judge passes both -> a miss.
    passed = json.loads(answer(failed=False)) | {"total_rules_checked": 2, "rules_passed": 2}
    (out / "answers" / "t02.json").write_text(json.dumps(passed))
    capsys.readouterr()
    assert replay.main(["score", "--answers", str(out), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)["overall"]["confirm"]
    assert (figures["n"], figures["scored"], figures["misses"], figures["false_flags"]) == (2, 2, 1, 1)
    assert figures["disagreeing"] == ["t1", "t2"] and figures["kappa"] == pytest.approx(-1.0)


def test_score_replays_through_another_revision(replay, tmp_path, capsys):
    # `--rev` runs that revision's own pipeline, rules and template: HEAD here, whose tau-retail has the
    # same judge rule, so both replays must count the same.
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: nothing to export")
    out = tmp_path / "out"
    (out / "answers").mkdir(parents=True)
    suite = "golden_traces/tau-retail"
    (out / "index.tsv").write_text(f"r01\t{suite}\tretail/gpt-4.1/task40/trial0\n", encoding="utf-8")
    passed = json.loads(answer(failed=False)) | {"total_rules_checked": 3, "rules_passed": 3}
    (out / "answers" / "r01.json").write_text(json.dumps(passed))
    figures = []
    for extra in ([], ["--rev", "HEAD"]):
        capsys.readouterr()
        assert replay.main(["score", "--answers", str(out), "--json", *extra]) == 0
        report = json.loads(capsys.readouterr().out)
        figures.append(report["overall"]["confirm-before-write"])
    assert figures[0] == figures[1] and figures[0]["scored"] == 1 and figures[0]["unscored"] == 0
