"""`seqjudge check --format sarif`: a SARIF 2.1.0 log with one result per violation.

The structure is checked against what the SARIF 2.1.0 specification requires of each object used here
(sarifLog: version, runs; run: tool; tool: driver; toolComponent: name; reportingDescriptor: id; result:
message with text; level one of none/note/warning/error; artifactLocation: uri; region: startLine >= 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run

RULES = """
rules:
  - {id: verify_first, type: before, first: VerifyIdentity, then: DeleteCustomer}
  - {id: few_emails, type: max_calls, tool: SendEmail, max: 1, severity: warning}
  - {id: polite, type: judge, description: Apologise before refusing.}
"""
BAD = {
    "trace_id": "bad",
    "calls": [
        {"tool_name": "DeleteCustomer"},
        {"tool_name": "VerifyIdentity"},
        {"tool_name": "SendEmail"},
        {"tool_name": "SendEmail"},
    ],
}
GOOD = {"trace_id": "good", "calls": [{"tool_name": "VerifyIdentity"}, {"tool_name": "DeleteCustomer"}]}
NO_ID = {"calls": [{"tool_name": "DeleteCustomer"}]}  # its id becomes FILE:LINE


def _sarif(tmp_path: Path, capsys: pytest.CaptureFixture[str], *traces: dict[str, Any]) -> tuple[int, Any]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    file = tmp_path / "traces.jsonl"
    file.write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")
    code = run(["check", str(rules), str(file), "--format", "sarif"])
    return code, json.loads(capsys.readouterr().out)


def _assert_valid(log: dict[str, Any]) -> None:
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    assert isinstance(log["runs"], list) and len(log["runs"]) == 1
    (sarif_run,) = log["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "seqjudge"
    rule_ids = [r["id"] for r in driver["rules"]]
    assert len(rule_ids) == len(set(rule_ids))
    for rule in driver["rules"]:
        assert rule["defaultConfiguration"]["level"] in ("none", "note", "warning", "error")
        assert rule["shortDescription"]["text"]
    for result in sarif_run["results"]:
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        assert result["level"] in ("none", "note", "warning", "error")
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        for location in result["locations"]:
            physical = location.get("physicalLocation")
            if physical is not None:
                assert physical["artifactLocation"]["uri"]
                assert physical.get("region", {"startLine": 1})["startLine"] >= 1
            for logical in location["logicalLocations"]:
                assert logical["fullyQualifiedName"]
    for note in sarif_run["invocations"][0]["toolExecutionNotifications"]:
        assert note["message"]["text"] and note["level"] in ("none", "note", "warning", "error")


def test_one_result_per_violation_with_rule_level_and_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, log = _sarif(tmp_path, capsys, BAD, GOOD, NO_ID)
    assert code == 1
    _assert_valid(log)
    results = log["runs"][0]["results"]
    # bad: verify_first (critical) and few_emails (warning); NO_ID: verify_first. GOOD: none.
    assert [(r["properties"]["traceId"], r["ruleId"], r["level"]) for r in results] == [
        ("bad", "verify_first", "error"),
        ("bad", "few_emails", "warning"),
        ("traces.jsonl:3", "verify_first", "error"),
    ]
    first = results[0]["locations"][0]
    assert first["physicalLocation"]["artifactLocation"]["uri"].endswith("traces.jsonl")
    # A trace with its own id is located by the line its record starts on.
    assert first["physicalLocation"]["region"] == {"startLine": 1}
    assert first["logicalLocations"][0]["fullyQualifiedName"] == "bad/calls[0]"
    assert results[2]["locations"][0]["physicalLocation"]["region"] == {"startLine": 3}
    assert "Deleted" in results[0]["message"]["text"] or "DeleteCustomer" in results[0]["message"]["text"]


def test_what_the_engine_did_not_decide_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, log = _sarif(tmp_path, capsys, GOOD)
    _assert_valid(log)
    sarif_run = log["runs"][0]
    assert sarif_run["results"] == []
    # The judge rule is deferred without a model: counted in the summary and named in a notification.
    assert sarif_run["properties"]["summary"]["deferred_rules"] == {"polite": 1}
    notes = [n["message"]["text"] for n in sarif_run["invocations"][0]["toolExecutionNotifications"]]
    assert len(notes) == 1 and notes[0].startswith("1 judge-rule decision(s) deferred: run `seqjudge judge`")
    assert code == 0 and sarif_run["properties"]["summary"]["pass"] == 1  # as `check --format text` says


def test_an_unknown_format_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    assert run(["check", str(rules), "-", "--format", "xml"]) == 2
    assert "sarif" in capsys.readouterr().err  # the choices come from the registry


def test_a_folder_of_traces_locates_each_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps(GOOD) + "\n" + json.dumps(NO_ID) + "\n", encoding="utf-8")
    (folder / "b.jsonl").write_text(json.dumps(BAD) + "\n", encoding="utf-8")
    run(["check", str(rules), str(folder), "--format", "sarif"])
    log = json.loads(capsys.readouterr().out)
    _assert_valid(log)
    located = [
        (r["properties"]["traceId"], r["locations"][0].get("physicalLocation"))
        for r in log["runs"][0]["results"]
    ]
    # Every trace names its own file and the line its record starts on, with an id of its own or not.
    assert located[0] == (
        "a.jsonl:2",
        {"artifactLocation": {"uri": (folder / "a.jsonl").as_uri()}, "region": {"startLine": 2}},
    )
    b_file = {"artifactLocation": {"uri": (folder / "b.jsonl").as_uri()}, "region": {"startLine": 1}}
    assert located[1:] == [("bad", b_file), ("bad", b_file)]
