"""Issue 15.4 and 15.10: an args_match pattern cannot hang `check` (a search that runs out of time is an
error naming the rule), `lint` warns on nested quantifiers, and a rule set of `judge` rules alone is
flagged by `lint` and by the run summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from seqjudge import load_rules
from seqjudge.cli import run
from seqjudge.rules.engine import Engine
from seqjudge.rules.lint import lint
from seqjudge.rules.load import parse_rules
from seqjudge.trace import Trace

SLOW = "rules:\n  - {id: slow-q, type: require, tool: {tool: search, args_match: {q: '(a+)+$'}}}\n"


def parsed(rules: str) -> Any:
    return parse_rules(yaml.safe_load(rules), source="rules.yaml")


def codes(rules: str) -> list[str]:
    return [p.code for p in lint(parsed(rules))]


def test_check_stops_a_catastrophic_search_and_names_the_rule(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(SLOW, encoding="utf-8")
    trace = {"trace_id": "t", "calls": [{"tool_name": "search", "arguments": {"q": "a" * 5000 + "!"}}]}
    (tmp_path / "t.jsonl").write_text(json.dumps(trace) + "\n", encoding="utf-8")
    # In a child process with a generous deadline: before the fix this search never ends.
    code = "import sys; from seqjudge.cli import run; sys.exit(run(['check', 'rules.yaml', 't.jsonl']))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "rule slow-q" in done.stderr and "(a+)+$" in done.stderr and "Traceback" not in done.stderr


def test_patterns_keep_re_semantics_look_aheads_included() -> None:
    rules = parsed(
        "rules:\n  - {id: r, type: require, tool: {tool: cancel, args_match: "
        "{reason: '^(?!(no longer needed|ordered by mistake)$)'}}}\n",
    )
    engine = Engine(rules)

    def outcome(reason: str) -> str:
        trace = Trace(calls=[{"tool_name": "cancel", "arguments": {"reason": reason}}])
        return engine.check(trace).rules[0].outcome

    assert outcome("no longer needed") == "failed"
    assert outcome("other") == "passed"


def test_lint_warns_on_nested_quantifiers_only() -> None:
    assert "slow_pattern" in codes(SLOW)
    fine = "rules:\n  - {id: ok, type: require, tool: {tool: s, args_match: {q: '^(?!(a|b)$)#W\\d+'}}}\n"
    assert "slow_pattern" not in codes(fine)


def test_judge_only_rule_sets_are_flagged_by_lint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only = "rules:\n  - {id: j, type: judge, description: confirm first}\n"
    assert "judge_only" in codes(only)
    assert "judge_only" not in codes(only + "  - {id: d, type: require, tool: A}\n")
    (tmp_path / "rules.yaml").write_text(only, encoding="utf-8")
    assert run(["lint", str(tmp_path / "rules.yaml")]) == 0
    out = capsys.readouterr()
    assert "cross-checks the model" in out.out + out.err and "audit" in out.out + out.err


def test_the_run_summary_says_a_judge_only_suite_has_no_cross_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    (tmp_path / "rules.yaml").write_text("rules:\n  - {id: j, type: judge, description: be nice}\n")
    (tmp_path / "t.jsonl").write_text(json.dumps({"trace_id": "t", "calls": [{"tool_name": "A"}]}) + "\n")
    run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"])
    assert "note: every rule is a `judge` rule" in capsys.readouterr().out
    run(["run", "rules.yaml", "t.jsonl", "--store", "s.db", "--format", "json"])
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert len(notes) == 1 and "audit a sample" in notes[0]
    assert load_rules(tmp_path / "rules.yaml").rules[0].type == "judge"
