"""`when:` reads the trace's metadata as well as its context (issue 17.4), so one rule file checks the
mixed tau data, split by `metadata.domain`, in one command (examples/tau-mixed/)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import seqjudge
from seqjudge.cli import run
from seqjudge.rules.load import parse_rules
from seqjudge.trace import Trace

try:  # as tests/test_check_fast_pool.py imports its sibling modules
    from test_ingest_native import tau_dir
except ImportError:  # pragma: no cover
    from tests.test_ingest_native import tau_dir

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tau-mixed" / "rules.yaml"

RULES = parse_rules(
    {"rules": [{"id": "retail", "type": "require", "tool": "auth", "when": {"metadata.domain": "retail"}}]}
)


def outcome(calls: list[str], **rest: object) -> str:
    trace = Trace.model_validate({"calls": [{"tool_name": name} for name in calls], **rest})
    (rule,) = seqjudge.check(trace, RULES).rules
    return rule.outcome


def test_a_metadata_path_reads_the_metadata() -> None:
    assert outcome(["x"], metadata={"domain": "retail"}) == "failed"
    assert outcome(["auth"], metadata={"domain": "retail"}) == "passed"
    assert outcome(["x"], metadata={"domain": "airline"}) == "not_applicable"
    assert outcome(["x"]) == "not_applicable"
    # A context that has the path itself keeps its meaning (as with `context.` paths).
    given = {"context": {"metadata": {"domain": "airline"}}, "metadata": {"domain": "retail"}}
    assert outcome(["x"], **given) == "not_applicable"


def test_plain_jsonl_records_read_the_metadata_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Records without messages take check's fast path (PlainTrace), which must carry the metadata.
    (tmp_path / "rules.yaml").write_text(
        "rules:\n  - {id: retail, type: require, tool: auth, when: {metadata.domain: retail}}\n",
        encoding="utf-8",
    )
    lines = [
        {"trace_id": "r", "calls": [{"tool_name": "x"}], "metadata": {"domain": "retail"}},
        {"trace_id": "a", "calls": [{"tool_name": "x"}], "metadata": {"domain": "airline"}},
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert run(["check", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl"), "--format", "jsonl"]) == 1
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["rules"][0]["outcome"] for r in reports] == ["failed", "not_applicable"]


def test_the_example_checks_the_mixed_tau_data_in_one_command(capsys: pytest.CaptureFixture[str]) -> None:
    traces = str(tau_dir() / "traces.jsonl")
    code = run(["check", str(EXAMPLE), traces, "--strict", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1  # some traces fail; nothing is left unchecked, or --strict would make it 2
    assert data["summary"]["traces"] == 484
    assert data["summary"]["coverage"]["rules_not_exercised"] == []
    outcomes: Counter[tuple[str, str, str]] = Counter()
    for report in data["reports"]:
        domain = report["trace_id"].split("/")[0]
        for rule in report["rules"]:
            scope = rule["rule_id"].split("-")[0]
            outcomes[(domain, scope, rule["outcome"])] += 1
    # Each domain's rules apply to its own traces only; the shared rule to all of them.
    assert {k for k in outcomes if k[2] == "not_applicable"} == {
        ("retail", "airline", "not_applicable"),
        ("airline", "retail", "not_applicable"),
    }
    assert outcomes[("airline", "retail", "not_applicable")] == 290 * 3
    assert outcomes[("retail", "airline", "not_applicable")] == 194 * 3
    assert outcomes[("retail", "transfer", "passed")] + outcomes[("airline", "transfer", "passed")] == 484
    assert data["summary"]["violations_by_rule"] == {
        "retail-auth-before-order-tools": 6,
        "airline-reservation-details-before-cancel": 4,
    }
