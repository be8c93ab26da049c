"""The lean report (issue 19, point 2): every rule's outcome, and explanations, call indices and details only
for the rules that did not pass; `--explain all` gives the full form.

The lean report is the full one with each passed rule's entry cut to its identity and outcome: nothing
else may differ (score, verdict, violations, summary), on random rules and traces. Its models dump back to
the same bytes with ``exclude_unset``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjudge.cli import run
from seqjudge.cli.options import Explain
from seqjudge.report import EXPLAIN_CHOICES, Report, report_line
from seqjudge.rules.engine import Engine

try:  # as tests/test_engine_property.py imports tests/reference.py
    from test_check_fast import ANY_TRACE, SOURCE, read
    from test_engine_property import ALIASES, ANY_RULE, PROFILE, build_ruleset
    from test_engine_seed_tables import REPORT_KEYS
except ImportError:  # pragma: no cover
    from tests.test_check_fast import ANY_TRACE, SOURCE, read
    from tests.test_engine_property import ALIASES, ANY_RULE, PROFILE, build_ruleset
    from tests.test_engine_seed_tables import REPORT_KEYS

from seqjudge.ingest.base import Options

SUITE = Path(__file__).resolve().parents[1] / "golden_traces" / "customer-support"
LEAN_KEYS = ["rule_id", "type", "severity", "outcome", "group"]


def trimmed(full: dict[str, Any]) -> dict[str, Any]:
    """What the lean report must be: the full one with every passed rule cut to LEAN_KEYS."""
    rules = [{k: r[k] for k in LEAN_KEYS} if r["outcome"] == "passed" else r for r in full["rules"]]
    return {**full, "rules": rules}


@settings(PROFILE, max_examples=150, deadline=None)
@given(
    rules=st.lists(ANY_RULE, min_size=1, max_size=8),
    aliases=ALIASES,
    records=st.lists(ANY_TRACE, min_size=1, max_size=5),
)
def test_the_lean_report_is_the_full_one_without_passed_rules_explanations(
    rules: list[dict[str, Any]], aliases: dict[str, list[str]], records: list[dict[str, Any]]
) -> None:
    engine = Engine(build_ruleset(rules, aliases))
    for record in records:
        for plain in (False, True):  # the model path and PlainTrace records alike
            trace = read(record, Options(plain=plain))
            if isinstance(trace, str):
                continue  # not a trace: tests/test_check_fast.py covers its error
            full = engine.check_data(trace, explain="all")
            lean = engine.check_data(trace, explain="not-passed")
            assert lean == trimmed(full)
            assert list(lean) == list(full)  # same keys, same order
            for entry in lean["rules"]:
                if entry["outcome"] != "passed":
                    assert entry["explanation"], entry  # a rule that did not pass says why
            # The lean JSON's models write it back byte for byte, as report_line writes it.
            model = Report.model_validate(lean)
            assert (model.model_dump_json(exclude_unset=True) + "\n").encode() == report_line(lean)
            assert engine.check(trace, explain="not-passed") == model
    assert SOURCE  # the records were read as line 3 of a JSONL file


def test_check_writes_the_lean_report_by_default_and_the_full_one_with_explain_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = SUITE / "rules.yaml", SUITE / "traces.jsonl"
    lean_out, full_out = tmp_path / "lean.jsonl", tmp_path / "full.jsonl"
    assert run(["check", str(rules), str(traces), "--format", "jsonl", "-o", str(lean_out)]) == 1
    assert (
        run(["check", str(rules), str(traces), "--format", "jsonl", "--explain", "all", "-o", str(full_out)])
        == 1
    )
    lean = [json.loads(line) for line in lean_out.read_text().splitlines()]
    full = [json.loads(line) for line in full_out.read_text().splitlines()]
    assert len(lean) == len(full) > 10
    assert lean == [trimmed(r) for r in full]
    outcomes = {r["outcome"] for report in lean for r in report["rules"]}
    assert {"passed", "failed"} <= outcomes  # the suite exercises both kinds of entry
    for report in full:  # the full form explains every rule
        assert all(r["explanation"] for r in report["rules"])
    assert lean_out.stat().st_size < full_out.stat().st_size
    # The report keeps every field of its full form, the seed's included.
    assert all(set(report) == REPORT_KEYS for report in lean)


def test_check_json_is_lean_too(tmp_path: Path) -> None:
    rules, traces = SUITE / "rules.yaml", SUITE / "traces.jsonl"
    out = tmp_path / "out.json"
    run(["check", str(rules), str(traces), "--format", "json", "-o", str(out)])
    reports = json.loads(out.read_text())["reports"]
    passed = [r for report in reports for r in report["rules"] if r["outcome"] == "passed"]
    assert passed and all(list(r) == LEAN_KEYS for r in passed)


def test_explain_rejects_an_unknown_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules, traces = SUITE / "rules.yaml", SUITE / "traces.jsonl"
    assert run(["check", str(rules), str(traces), "--explain", "some"]) == 2
    assert "--explain" in capsys.readouterr().err


def test_the_cli_choices_are_the_reports() -> None:
    assert tuple(e.value for e in Explain) == EXPLAIN_CHOICES
