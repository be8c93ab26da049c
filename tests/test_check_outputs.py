"""`seqjudge check`'s output formats (issue 19 point 1, issue 17 points 10 and 11): every format streams and
is rendered where the trace is checked; text on many traces (--failures-only, colour, the per-rule tally);
JUnit and markdown straight from `check`; advice and prose that name calls one way."""

from __future__ import annotations

import io
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import seqjudge.checkpool as checkpool
from seqjudge import RuleSet, Trace, check
from seqjudge.checkpool import Checker
from seqjudge.cli import run
from seqjudge.ingest import load_traces
from seqjudge.outputs.check import TextOutput
from seqjudge.outputs.check_ci import check_result
from seqjudge.outputs.ci_outputs import markdown_run
from seqjudge.outputs.registry import names, writer
from seqjudge.rules.base import Wording, operand_text
from seqjudge.rules.engine import Engine
from seqjudge.rules.load import load_rules

RULES = """
rules:
  - {id: verify_first, type: before, first: VerifyIdentity, then: DeleteCustomer}
  - {id: few_emails, type: max_calls, tool: SendEmail, max: 1, severity: warning}
  - {id: polite, type: judge, description: Apologise before refusing.}
"""
FORMATS = names("check")


def bad(n: int) -> dict[str, Any]:
    calls = [{"tool_name": "DeleteCustomer"}, {"tool_name": "VerifyIdentity"}]
    return {"trace_id": f"bad{n}", "calls": calls + [{"tool_name": "SendEmail"}] * (n // 3 % 3)}


def good(n: int) -> dict[str, Any]:
    return {
        "trace_id": f"good{n}",
        "calls": [{"tool_name": "VerifyIdentity"}, {"tool_name": "DeleteCustomer"}],
    }


def suite(tmp_path: Path, n: int = 12) -> tuple[Path, Path]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    records = [bad(k) if k % 3 == 0 else good(k) for k in range(n)]
    traces.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return rules, traces


def check_out(rules: Path, traces: Path, fmt: str, *extra: str) -> tuple[int, bytes]:
    out = traces.with_name(f"out.{fmt}")
    code = run(["check", str(rules), str(traces), "--format", fmt, "-o", str(out), *extra])
    return code, out.read_bytes()


# -- every format streams ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["json", "jsonl", "text", "sarif"])
def test_each_trace_is_written_as_it_comes_not_at_the_end(tmp_path: Path, fmt: str) -> None:
    rules_path, traces = suite(tmp_path, 6)
    ruleset = load_rules(rules_path)
    out = io.StringIO()
    shown = writer("check", fmt)(out, source=str(traces), ruleset=ruleset)
    checker = Checker(Engine(ruleset), 0.85, "medium", render=shown.render)
    shown.start()
    for trace in load_traces(str(traces)):
        checked = checker.checked(trace)
        shown.line(checked)
        if fmt != "sarif" or checked.line:  # SARIF has results (a part) only for violations
            assert str(trace.trace_id) in out.getvalue()  # written before the next trace is even read
    kept = [v for v in vars(shown).values() if isinstance(v, list | dict) and len(v) >= 6]
    assert not kept  # nothing per trace is kept


def test_the_json_document_keeps_its_shape(tmp_path: Path) -> None:
    rules, traces = suite(tmp_path)
    code, out = check_out(rules, traces, "json")
    doc = json.loads(out)
    assert code == 1 and set(doc) == {"summary", "reports"}
    assert [r["trace_id"] for r in doc["reports"]] == [
        f"{'bad' if k % 3 == 0 else 'good'}{k}" for k in range(12)
    ]
    assert doc["summary"]["traces"] == 12 and doc["summary"]["fail"] == 4
    jsonl = [json.loads(line) for line in check_out(rules, traces, "jsonl")[1].splitlines()]
    assert doc["reports"] == jsonl


@pytest.mark.parametrize("fmt", FORMATS)
def test_workers_write_the_same_bytes_in_every_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    rules, traces = suite(tmp_path, 40)
    monkeypatch.setattr(checkpool, "worker_count", lambda: 0)
    alone = check_out(rules, traces, fmt)
    monkeypatch.setattr(checkpool, "worker_count", lambda: 2)
    monkeypatch.setattr(checkpool, "INLINE", 2)
    monkeypatch.setattr(checkpool, "CHUNK", 3)
    assert check_out(rules, traces, fmt) == alone


def test_text_is_rendered_in_the_worker_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not checkpool.forkable():
        pytest.skip("workers are forked processes (Linux)")
    rules, traces = suite(tmp_path, 40)
    monkeypatch.setattr(checkpool, "worker_count", lambda: 2)
    monkeypatch.setattr(checkpool, "INLINE", 2)
    monkeypatch.setattr(checkpool, "CHUNK", 3)
    monkeypatch.setattr(
        TextOutput, "render", lambda self, trace, data, origin: f"pid {os.getpid()}\n".encode()
    )
    _, out = check_out(rules, traces, "text")
    pids = {int(p) for p in re.findall(rb"^pid (\d+)$", out, re.M)}
    # More records than are checked here: the workers check all of them, from the first.
    assert pids and os.getpid() not in pids
    monkeypatch.setattr(checkpool, "INLINE", 40)
    _, out = check_out(rules, traces, "text")
    assert set(re.findall(rb"^pid (\d+)$", out, re.M)) == {str(os.getpid()).encode()}  # a small file: here


# -- text on many traces ------------------------------------------------------------------------------------
def test_failures_only_leaves_out_the_passing_traces(tmp_path: Path) -> None:
    rules, traces = suite(tmp_path)
    _, full = check_out(rules, traces, "text")
    code, quiet = check_out(rules, traces, "text", "-q")
    assert code == 1
    assert b"PASS   good1" in full and b"PASS" not in quiet
    assert b"FAIL   bad0" in quiet and b"12 trace(s): 8 pass, 4 fail, 0 review" in quiet  # still counted
    _, doc = check_out(rules, traces, "json", "--failures-only")
    assert [r["trace_id"] for r in json.loads(doc)["reports"]] == ["bad0", "bad3", "bad6", "bad9"]


def test_the_closing_tally_names_each_failed_rule_its_count_and_first_traces(tmp_path: Path) -> None:
    rules, traces = suite(tmp_path)
    _, out = check_out(rules, traces, "text")
    text = out.decode()
    tally = text[text.index("failed rules (traces failed, first traces):") :].splitlines()
    assert re.fullmatch(r"\s+verify_first\s+4\s+bad0, bad3, bad6, …", tally[1])
    assert re.fullmatch(r"\s+few_emails\s+1\s+bad6", tally[2])  # SendEmail twice only in bad6
    assert tally[-1] == "12 trace(s): 8 pass, 4 fail, 0 review"


def test_colour_only_in_a_terminal_and_never_under_no_color(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = suite(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    run(["check", str(rules), str(traces)])
    assert "\x1b[" not in capsys.readouterr().out  # captured: not a terminal
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich's way to say "a terminal" here
    run(["check", str(rules), str(traces)])
    coloured = capsys.readouterr().out
    assert "\x1b[1;31m❌ FAIL\x1b[0m: bad0" in coloured and "\x1b[32mPASS  \x1b[0m good1" in coloured
    monkeypatch.setenv("NO_COLOR", "1")
    run(["check", str(rules), str(traces)])
    assert "\x1b[" not in capsys.readouterr().out


def test_trace_text_cannot_smuggle_escape_codes_into_colour_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, _ = suite(tmp_path)
    traces = tmp_path / "evil.jsonl"
    record = {
        "trace_id": "e\x1b[2J",
        "calls": [{"tool_name": "DeleteCustomer", "arguments": {"x": "\x1b]0;"}}],
    }
    traces.write_text(json.dumps(record) + "\n", encoding="utf-8")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    run(["check", str(rules), str(traces)])
    out = capsys.readouterr().out
    assert "\x1b[2J" not in out and "\x1b]0;" not in out and "e\\x1b[2J" in out


# -- advice and prose ----------------------------------------------------------------------------------------
def _report(
    rules: list[dict[str, Any]], calls: list[Any], aliases: dict[str, list[str]] | None = None
) -> Any:
    ruleset = RuleSet.model_validate({"rules": rules, "aliases": aliases or {}})
    steps = [c if isinstance(c, dict) else {"tool_name": c} for c in calls]
    return check(Trace.model_validate({"trace_id": "t", "calls": steps}), ruleset)


def test_advice_names_the_tools_an_alias_stands_for() -> None:
    aliases = {"Authenticate": ["Login", "SSOLogin"], "NeedsAuth": ["DeleteUser", "ResetPassword"]}
    rules = [
        {"id": "auth", "type": "before", "first": "Authenticate", "then": "NeedsAuth"},
        {"id": "login", "type": "require", "tool": "Authenticate"},
    ]
    report = _report(rules, ["GetUser", "ResetPassword"], aliases)
    advice = {v.rule_id: v.suggestion for v in report.violations}
    assert advice["auth"] == "Add a successful call to Login or SSOLogin before ResetPassword (call 2)."
    assert advice["login"] == "Add a successful call to Login or SSOLogin."
    assert not any("Authenticate" in s or "NeedsAuth" in s for s in advice.values())


@pytest.mark.parametrize(
    ("rule", "calls"),
    [
        ({"type": "before", "first": "A", "then": "B"}, ["X", "X", "B", "A"]),
        ({"type": "before", "first": "A", "then": "B"}, ["X", "X", "X", "B"]),
        ({"type": "never_after", "trigger": "A", "forbidden": "B"}, ["A", "X", "X", "B"]),
        ({"type": "blocklist", "pattern": "admin_"}, ["X", "X", "admin_x"]),
        ({"type": "max_calls", "tool": "B", "max": 2}, ["B", "X", "B", "B", "B"]),
        ({"type": "after", "trigger": "A", "then": "B", "within": 1}, ["X", "A", "X", "X"]),
    ],
)
def test_prose_says_call_n_of_the_call_the_index_points_at(rule: dict[str, Any], calls: list[str]) -> None:
    [v] = _report([rule], calls).violations
    n = v.offending_call_index + 1  # machine output counts from 0, prose from 1 (the numbered list)
    name = calls[v.offending_call_index]
    assert f"{name} (call {n})" in v.actual_order
    for text in (v.actual_order, v.explanation, v.suggestion):
        assert "position" not in text
        assert not re.search(r"call (\d+)", text) or all(
            calls[int(k) - 1] in text for k in re.findall(r"call (\d+)", text)
        )


def test_phrasings_fixed() -> None:
    parallel = Trace.model_validate(
        {"trace_id": "p", "calls": [{"tool_name": "B", "step": 0}, {"tool_name": "A", "step": 0}]}
    )
    [v] = check(
        parallel, RuleSet.model_validate({"rules": [{"type": "before", "first": "A", "then": "B"}]})
    ).violations
    assert v.actual_order == "B (call 1); A (call 2) came in the same step as it"
    exact = {"type": "trajectory", "expected": ["A", "B", "C"], "mode": "exact"}
    [t] = _report([exact], ["A", "C", "B"]).violations
    assert t.offending_call_index == 1 and t.explanation.endswith("expected trajectory at C (call 2).")
    [m] = _report([{"type": "max_calls", "tool": "B", "max": 3}], ["B"] * 4).violations
    assert m.actual_order == "B called 4 times, 3 allowed; first over: B (call 4)"
    # A selector that picks failed calls by status: the failed call is what it counts, not "every attempt".
    by_status = {"type": "max_calls", "tool": {"tool": "B", "status": "error"}, "max": 0}
    [f] = _report([by_status], [{"tool_name": "B", "status": "error"}]).violations
    assert "every attempt" not in f.explanation
    ruleset = RuleSet.model_validate({"rules": [by_status]})
    say = Wording(operand_text, operand_text)
    assert "attempt" not in ruleset.rules[0].requirement(say)
    assert "failed ones too" in RuleSet.model_validate(
        {"rules": [{"type": "max_calls", "tool": "B", "max": 2}]}
    ).rules[0].requirement(say)
    [plain] = _report(
        [{"type": "max_calls", "tool": "B", "max": 0}], [{"tool_name": "B", "status": "error"}]
    ).violations
    assert "every attempt counts" in plain.explanation  # without status: the failed call still counts


# -- JUnit and markdown straight from check ------------------------------------------------------------------
def test_junit_from_check_counts_and_blocks(tmp_path: Path) -> None:
    rules, traces = suite(tmp_path)
    code, out = check_out(rules, traces, "junit")
    root = ET.fromstring(out)
    [testsuite] = root
    cases = testsuite.findall("testcase")
    assert code == 1 and len(cases) == 12 == int(root.get("tests", "")) == int(testsuite.get("tests", ""))
    failed = [c.get("classname") for c in cases if c.find("failure") is not None]
    assert failed == ["bad0", "bad3", "bad6", "bad9"] and root.get("failures") == "4"
    failure = cases[0].find("failure")
    assert failure is not None and "❌ FAIL: bad0 · verify_first" in (failure.text or "")
    assert "deferred" in (testsuite.findtext("system-out") or "")  # the judge rule no case shows


def test_markdown_from_check_is_report_ci_markdown_of_the_same_results(tmp_path: Path) -> None:
    rules, traces = suite(tmp_path)
    code, out = check_out(rules, traces, "markdown")
    engine = Engine(load_rules(rules))
    pairs = []
    for trace in load_traces(str(traces)):
        pairs.append((trace, check_result(engine.check_data(trace), 0.85, "medium")))
    expected = markdown_run(pairs, name=f"seqjudge check {traces}")
    assert code == 1 and out.decode().startswith(expected)
    assert "| 12 | 8 | 4 | 0 |" in expected and "12 judge-rule decision(s) deferred" in out.decode()
