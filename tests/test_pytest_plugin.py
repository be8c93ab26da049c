"""`seqjudge.testing`: assert_sequence, and the pytest plugin used from a user's test file (pytester)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from seqjudge.rules.load import parse_rules
from seqjudge.testing import SeqjudgeHelper, assert_sequence, assert_sequences, check, to_trace
from seqjudge.trace import Trace

pytest_plugins = ["pytester"]

RULES_YAML = """\
tests:
  - id: identity
    metric: sequence_valid
    rules:
      - id: read-before-update
        type: before
        first: GetCustomer
        then: UpdateCustomer
  - id: messaging
    rules:
      - id: email-limit
        type: max_calls
        tool: SendEmail
        max: 1
        severity: warning
      - id: confirm-delete
        type: judge
        description: Confirm with the user before deleting a record.
"""
RULES = {
    "rules": [
        {"id": "read-before-update", "type": "before", "first": "GetCustomer", "then": "UpdateCustomer"},
        {"id": "email-limit", "type": "max_calls", "tool": "SendEmail", "max": 1, "severity": "warning"},
    ]
}
GOOD = ["GetCustomer", "UpdateCustomer", "SendEmail"]
BAD = ["UpdateCustomer", "GetCustomer"]


def plugin_args() -> list[str]:
    """Load the plugin by hand until the `pytest11` entry point is installed (then pytest loads it, and
    loading it twice would be an error). The inner runs are in-process, where seqjudge.testing is already
    imported: pytest's warning that it cannot rewrite its asserts is expected; pytest-asyncio stays out."""
    installed = any(ep.name == "seqjudge" for ep in importlib.metadata.entry_points(group="pytest11"))
    quiet = ["-W", "ignore::pytest.PytestAssertRewriteWarning", "-p", "no:asyncio", "-p", "no:cacheprovider"]
    return quiet + ([] if installed else ["-p", "seqjudge.testing"])


# -- assert_sequence -----------------------------------------------------------------------------------------
def test_assert_sequence_passes_and_returns_the_report() -> None:
    report = assert_sequence(GOOD, RULES)
    assert report.verdict == "pass" and report.rules_passed == 2


def test_assert_sequence_failure_is_the_actionable_block() -> None:
    with pytest.raises(AssertionError) as info:
        assert_sequence(BAD, RULES)
    message = str(info.value)
    assert message.startswith("❌ FAIL: trace · read-before-update")
    assert "1. UpdateCustomer  ← violation" in message
    assert "Suggestion: Move the GetCustomer call before UpdateCustomer (call 1)." in message
    assert "FAIL   trace  score 0.00" in message and message.endswith(
        "verdict fail: " + check(BAD, RULES).summary
    )


def test_every_violation_is_in_the_message() -> None:
    calls = ["UpdateCustomer", "GetCustomer", "SendEmail", "SendEmail"]
    with pytest.raises(AssertionError) as info:
        assert_sequence(calls, RULES)
    message = str(info.value)
    assert message.count("← violation") == 2
    assert "❌ FAIL: trace · read-before-update" in message and "⚠️  WARN: trace · email-limit" in message


def test_threshold_risk_level_and_strict() -> None:
    chatty = ["GetCustomer", "UpdateCustomer", "SendEmail", "SendEmail"]  # one warning: score 0.5
    with pytest.raises(AssertionError, match="REVIEW"):
        assert_sequence(chatty, RULES)
    assert assert_sequence(chatty, RULES, threshold=0.5).verdict == "pass"
    with pytest.raises(AssertionError, match="WARN"):
        assert_sequence(chatty, RULES, threshold=0.5, strict=True)
    with pytest.raises(AssertionError):
        assert_sequence(chatty, RULES, threshold=0.5, risk_level="high")


def test_every_trace_and_rules_form(tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(RULES_YAML)
    trace_file = tmp_path / "one.json"
    trace_file.write_text(json.dumps({"trace_id": "from-file", "calls": [{"tool_name": n} for n in GOOD]}))
    ruleset = parse_rules(RULES)
    forms: list[object] = [
        GOOD,
        [{"tool_name": n} for n in GOOD],
        {"trace_id": "d", "calls": [{"tool_name": n} for n in GOOD]},
        Trace.model_validate({"trace_id": "t", "calls": [{"tool_name": n} for n in GOOD]}),
        trace_file,
        str(trace_file),
    ]
    for form in forms:
        for rules in (RULES, ruleset, rules_file, str(rules_file)):
            assert assert_sequence(form, rules).verdict == "pass"  # type: ignore[arg-type]
    # The judge rule of the rule file is deferred: the engine cannot fail it.
    report = assert_sequence(GOOD, rules_file)
    assert {r.rule_id: r.outcome for r in report.rules}["confirm-delete"] == "deferred"
    assert to_trace(trace_file).trace_id == "from-file"


def test_a_file_of_several_traces(tmp_path: Path) -> None:
    many = tmp_path / "many.jsonl"
    lines = [
        {"trace_id": "ok", "calls": [{"tool_name": n} for n in GOOD]},
        {"trace_id": "bad", "calls": [{"tool_name": n} for n in BAD]},
    ]
    many.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(ValueError, match="holds 2 traces"):
        assert_sequence(many, RULES)
    with pytest.raises(AssertionError) as info:
        assert_sequences(many, RULES)
    assert str(info.value).startswith("1 of 2 trace(s) did not pass")
    assert "❌ FAIL: bad · read-before-update" in str(info.value)
    assert [r.trace_id for r in assert_sequences([to_trace(GOOD)], RULES)] == ["trace"]


def test_helper_needs_rules() -> None:
    with pytest.raises(ValueError, match=r"mark the test @pytest.mark.seqjudge"):
        SeqjudgeHelper().check(GOOD)
    assert SeqjudgeHelper(RULES).check(BAD).verdict == "fail"
    with pytest.raises(TypeError):
        assert_sequence(GOOD, 42)  # type: ignore[arg-type]


# -- the plugin, from a user's test file ---------------------------------------------------------------------
USER_TESTS = """
import pytest
from seqjudge.testing import assert_sequence

GOOD = ["GetCustomer", "UpdateCustomer", "SendEmail"]
BAD = ["UpdateCustomer", "GetCustomer"]


@pytest.mark.seqjudge(rules="rules.yaml")
def test_marker_rules_pass(seqjudge):
    report = seqjudge.assert_sequence(GOOD)
    assert report.verdict == "pass"


@pytest.mark.seqjudge(rules="rules.yaml")
def test_check_returns_the_report(seqjudge):
    report = seqjudge.check(BAD)
    assert report.verdict == "fail"
    assert [v.rule_id for v in report.violations] == ["read-before-update"]


@pytest.mark.seqjudge(rules="rules.yaml")
def test_agent_reads_before_it_writes(seqjudge):
    trace = {"trace_id": "agent-run-7", "calls": [{"tool_name": n} for n in BAD]}
    seqjudge.assert_sequence(trace)


@pytest.mark.seqjudge(rules="rules.yaml", threshold=0.4)
def test_marker_threshold(seqjudge):
    seqjudge.assert_sequence(["GetCustomer", "UpdateCustomer", "SendEmail", "SendEmail"])


def test_plain_import_fails_too():
    assert_sequence(BAD, {"rules": [{"id": "r", "type": "require", "tool": "VerifyIdentity"}]})


def test_fixture_without_rules(seqjudge):
    seqjudge.check(GOOD)
"""


def test_plugin_in_a_user_test_suite(pytester: pytest.Pytester) -> None:
    pytester.mkdir("agent_tests")
    (pytester.path / "agent_tests" / "rules.yaml").write_text(RULES_YAML)  # beside the test file
    (pytester.path / "agent_tests" / "test_agent.py").write_text(USER_TESTS)
    result = pytester.runpytest(*plugin_args(), "--strict-markers", "agent_tests")
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_agent_reads_before_it_writes*",
            "*❌ FAIL: agent-run-7 · read-before-update [[]identity]*",  # [[] is a literal [ to fnmatch
            "*1. UpdateCustomer  ← violation*",
            "*Suggestion: Move the GetCustomer call before UpdateCustomer (call 1).*",
        ]
    )
    result.stdout.fnmatch_lines(["*❌ FAIL: trace · r*", "*Rule: require (missing_call)*"])
    result.stdout.fnmatch_lines(["*ValueError: no rules: pass rules=*"])
    # The traceback points at the user's line, not inside seqjudge.
    section = result.stdout.str().split("_ test_agent_reads_before_it_writes _")[1].split("\n___")[0]
    assert "seqjudge.assert_sequence(trace)" in section and "seqjudge/testing.py" not in section


def test_plugin_registers_its_marker(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*plugin_args(), "--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.seqjudge(rules=PATH, threshold=0.85, risk_level='medium', strict=False, "
            "allow_unexercised=False)*"
        ]
    )


def test_marker_rejects_unknown_options(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.seqjudge(rule="rules.yaml")
        def test_typo(seqjudge):
            pass
        """
    )
    result = pytester.runpytest(*plugin_args())
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*takes rules, threshold, risk_level, strict and allow_unexercised, not rule*"]
    )


def test_marker_sets_strict_and_allow_unexercised(pytester: pytest.Pytester) -> None:
    # issue 37: an empty trace fails the fixture's assertion unless the marker (or the call) allows it
    pytester.makefile(".yaml", rules=RULES_YAML)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.seqjudge(rules="rules.yaml")
        def test_empty_fails(seqjudge):
            seqjudge.assert_sequence([])

        @pytest.mark.seqjudge(rules="rules.yaml", allow_unexercised=True)
        def test_empty_allowed(seqjudge):
            seqjudge.assert_sequence([])

        @pytest.mark.seqjudge(rules="rules.yaml", strict=True)
        def test_strict_from_the_marker(seqjudge):  # SendEmail, named by a rule, is never called
            seqjudge.assert_sequence(["GetCustomer", "UpdateCustomer"])
        """
    )
    result = pytester.runpytest(*plugin_args())
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*the trace has no call (an empty trace from a broken tracer?)*"])
    result.stdout.fnmatch_lines(["*--strict: 1 referenced tool(s) called in no trace*"])
