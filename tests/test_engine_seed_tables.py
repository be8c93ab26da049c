"""The engine against the spec's own examples: every row of seed 002's tables, seed 000's constraints, seed
003's example, the examples named in issue 2, the failed-call principle for every rule field, and the report
shape. Every example is also run through the brute-force reference (tests/reference.py), so the tables check
the reference too."""

from __future__ import annotations

import re
from typing import Any

import pytest

import seqjudge
from seqjudge.report import Report, RuleResult, Violation
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

try:  # pytest's default import mode puts tests/ on sys.path; `python -m pytest` also has the repo root
    from reference import RefCall, evaluate, score_and_verdict, steps_from_labels
except ImportError:  # pragma: no cover - when tests/ becomes a package
    from tests.reference import RefCall, evaluate, score_and_verdict, steps_from_labels

# --------------------------------------------------------------------------------------------------- helpers

CallSpec = str | dict[str, Any] | tuple[Any, ...]


def ok(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_name": name, "arguments": arguments}


def err(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_name": name, "arguments": arguments, "status": "error"}


def make_trace(calls: list[CallSpec], context: dict[str, Any] | None = None) -> Trace:
    """A name is a successful call; a dict is a call as written; a tuple is a group of parallel calls (one
    step). With any group present every call gets a step label, spaced by 10 (labels need not be
    consecutive)."""
    grouped = any(isinstance(c, tuple) for c in calls)
    items: list[dict[str, Any]] = []
    for n, entry in enumerate(calls):
        for c in entry if isinstance(entry, tuple) else (entry,):
            item = {"tool_name": c} if isinstance(c, str) else dict(c)
            if grouped:
                item["step"] = 10 * (n + 1)
            items.append(item)
    return Trace.model_validate({"trace_id": "t", "calls": items, "context": context or {}})


def ruleset(rules: list[dict[str, Any]], aliases: dict[str, list[str]] | None = None) -> RuleSet:
    return RuleSet.model_validate({"rules": rules, "aliases": aliases or {}})


def run(
    calls: list[CallSpec],
    rules: list[dict[str, Any]],
    *,
    aliases: dict[str, list[str]] | None = None,
    context: dict[str, Any] | None = None,
    **options: Any,
) -> Report:
    return seqjudge.check(make_trace(calls, context), ruleset(rules, aliases), **options)


def ref_calls(trace: Trace) -> list[RefCall]:
    steps = steps_from_labels([c.step for c in trace.calls])
    return [
        RefCall(c.tool_name, c.status == "ok", s, dict(c.arguments))
        for c, s in zip(trace.calls, steps, strict=True)
    ]


def result_of(report: Report, rule_id: str) -> RuleResult:
    found = [r for r in report.rules if r.rule_id == rule_id]
    assert len(found) == 1, f"expected one result for {rule_id}, got {[r.rule_id for r in report.rules]}"
    return found[0]


def violations_of(report: Report, rule_id: str) -> list[Violation]:
    return [v for v in report.violations if v.rule_id == rule_id]


def expect(
    calls: list[CallSpec],
    rule: dict[str, Any],
    outcome: str,
    vtype: str | None = None,
    index: int | None | str = "any",
    *,
    aliases: dict[str, list[str]] | None = None,
    context: dict[str, Any] | None = None,
) -> tuple[RuleResult, list[Violation]]:
    """Assert one rule's outcome (and, when failed, its violation type and offending index) on the engine and
    on the reference alike. ``index="any"`` leaves the offending index unchecked."""
    rule = {"id": "r", **rule}
    trace = make_trace(calls, context)
    rules = ruleset([rule], aliases)
    report = seqjudge.check(trace, rules)
    got = result_of(report, "r")
    found = violations_of(report, "r")
    ref = evaluate(ref_calls(trace), trace.context, rules.rules[0], rules.aliases)
    assert ref.outcome == outcome, f"reference: {ref}"
    assert got.outcome == outcome, f"engine: {got.outcome} ({got.explanation})"
    if outcome == "failed":
        assert vtype is not None
        assert found, "a failed rule has at least one violation"
        if vtype != "any":
            assert ref.types == {vtype}
            assert {v.violation_type for v in found} == {vtype}, [v.violation_type for v in found]
        if index != "any":
            assert ref.first_index == index
            assert found[0].offending_call_index == index
    else:
        assert found == [], "only failed rules are flagged"
    return got, found


# ------------------------------------------------------------------------------------- seed 002: the tables

REQUIRE = {"type": "require", "tool": "VerifyIdentity"}


@pytest.mark.parametrize(
    ("calls", "outcome"),
    [
        (["GetCustomer", "VerifyIdentity", "UpdateCustomer"], "passed"),
        (["GetCustomer", "UpdateCustomer"], "failed"),
    ],
)
def test_seed_require_table(calls: list[CallSpec], outcome: str) -> None:
    expect(calls, REQUIRE, outcome, "missing_call")


BEFORE = {"type": "before", "first": "GetCustomer", "then": "UpdateCustomer"}


@pytest.mark.parametrize(
    ("calls", "outcome", "vtype", "index"),
    [
        (["GetCustomer", "UpdateCustomer"], "passed", None, None),
        (["UpdateCustomer", "GetCustomer"], "failed", "out_of_order", 0),
        (["GetCustomer", "UpdateCustomer", "GetCustomer"], "passed", None, None),
        # "before checks that at least one call to first happens before the first call to then"
        (["UpdateCustomer", "GetCustomer", "UpdateCustomer"], "failed", "out_of_order", 0),
        (["Other", "UpdateCustomer"], "failed", "missing_prerequisite", 1),
        (["Other"], "not_exercised", None, None),
    ],
)
def test_seed_before_table(calls: list[CallSpec], outcome: str, vtype: str | None, index: int | None) -> None:
    expect(calls, BEFORE, outcome, vtype, index)


@pytest.mark.parametrize(
    ("pattern", "calls", "outcome", "index"),
    [
        ("admin_delete", ["GetCustomer", "UpdateCustomer"], "passed", None),
        ("admin_delete", ["GetCustomer", "admin_delete"], "failed", 1),
        # a prefix blocks every tool that starts with it (and, being a substring, any tool containing it)
        ("admin_", ["admin_delete"], "failed", 0),
        ("admin_", ["GetCustomer", "admin_reset_password", "admin_delete"], "failed", 1),
        ("admin_", ["superadmin_tool"], "failed", 0),
        ("admin_", ["Admin_delete", "admin", "adminX"], "passed", None),  # case-sensitive, plain substring
        # a * is matched literally, not as a wildcard
        ("admin_*", ["admin_delete"], "passed", None),
        ("admin_*", ["x", "admin_*"], "failed", 1),
        ("*", ["anything", "at_all"], "passed", None),
    ],
)
def test_seed_blocklist_table(pattern: str, calls: list[CallSpec], outcome: str, index: int | None) -> None:
    expect(calls, {"type": "blocklist", "pattern": pattern}, outcome, "forbidden_call", index)


def test_blocklist_flags_every_offender_in_call_indices() -> None:
    got, found = expect(
        ["admin_a", "ok", "admin_b"],
        {"type": "blocklist", "pattern": "admin_"},
        "failed",
        "forbidden_call",
        0,
    )
    assert {0, 2} <= set(got.call_indices)


MAX_CALLS = {"type": "max_calls", "tool": "SendEmail", "max": 3}


@pytest.mark.parametrize(
    ("calls", "outcome", "index"),
    [
        (["SendEmail", "SendEmail"], "passed", None),
        (["SendEmail"] * 3, "passed", None),
        (["SendEmail"] * 4, "failed", 3),  # at the first call over the limit
        (["SendEmail", "x", "SendEmail", "SendEmail", "y", "SendEmail", "SendEmail"], "failed", 5),
        ([], "passed", None),
    ],
)
def test_seed_max_calls_table(calls: list[CallSpec], outcome: str, index: int | None) -> None:
    expect(calls, MAX_CALLS, outcome, "too_many_calls", index)


EVENTUALLY = {"type": "eventually", "tool": "ValidateOutput", "within": 5}


@pytest.mark.parametrize(
    ("calls", "outcome", "vtype", "index"),
    [
        (["Step1", "Step2", "Step3", "Step4", "ValidateOutput"], "passed", None, None),
        ([f"Step{n}" for n in range(1, 11)], "failed", "missing_call", None),
        ([f"Step{n}" for n in range(1, 6)] + ["ValidateOutput"], "failed", "deadline_missed", "any"),
    ],
)
def test_seed_eventually_table(calls: list[CallSpec], outcome: str, vtype: str | None, index: Any) -> None:
    expect(calls, EVENTUALLY, outcome, vtype, index)


NEVER_AFTER = {"type": "never_after", "trigger": "CommitTransaction", "forbidden": "ModifyData"}


@pytest.mark.parametrize(
    ("calls", "outcome", "index"),
    [
        (["ModifyData", "CommitTransaction"], "passed", None),
        (["CommitTransaction", "ModifyData"], "failed", 1),
        (["ModifyData", "CommitTransaction", "Read", "ModifyData", "ModifyData"], "failed", 3),
        (["ModifyData"], "not_exercised", None),
    ],
)
def test_seed_never_after_table(calls: list[CallSpec], outcome: str, index: int | None) -> None:
    expect(calls, NEVER_AFTER, outcome, "forbidden_call", index)


AFTER = {"type": "after", "trigger": "OpenFile", "then": "CloseFile", "within": 10}


@pytest.mark.parametrize(
    ("calls", "outcome", "index"),
    [
        (["OpenFile", "Read", "CloseFile"], "passed", None),
        (["OpenFile"] + ["Read"] * 10, "failed", 0),  # the deadline runs past the end of the trace
        (["OpenFile"] + ["Read"] * 10 + ["CloseFile"], "failed", 0),  # 11 steps after: too late
        (["OpenFile"] + ["Read"] * 9 + ["CloseFile"], "passed", None),  # exactly 10 steps after
        (["Read", "CloseFile"], "not_exercised", None),
    ],
)
def test_seed_after_table(calls: list[CallSpec], outcome: str, index: int | None) -> None:
    expect(calls, AFTER, outcome, "deadline_missed", index)


SEQUENCE_TOOLS = ["Authenticate", "LoadRecord", "WriteRecord"]


@pytest.mark.parametrize(
    ("calls", "non_strict", "strict"),
    [
        (["Authenticate", "LoadRecord", "WriteRecord"], ("passed", None), ("passed", None)),
        (["Authenticate", "Audit", "LoadRecord", "WriteRecord"], ("passed", None), ("failed", 1)),
        (["LoadRecord", "Authenticate", "WriteRecord"], ("failed", 0), ("failed", 2)),
    ],
)
def test_seed_sequence_table(
    calls: list[CallSpec], non_strict: tuple[str, Any], strict: tuple[str, Any]
) -> None:
    for is_strict, (outcome, index) in ((False, non_strict), (True, strict)):
        rule = {"type": "sequence", "tools": SEQUENCE_TOOLS, "strict": is_strict}
        expect(calls, rule, outcome, "out_of_order", index)


@pytest.mark.parametrize("is_strict", [False, True])
def test_seed_sequence_not_exercised_and_incomplete(is_strict: bool) -> None:
    rule = {"type": "sequence", "tools": SEQUENCE_TOOLS, "strict": is_strict}
    # "A trace that never calls any named tool does not exercise this rule"
    expect(["Audit", "Other"], rule, "not_exercised")
    expect([], rule, "not_exercised")
    # "a trace that starts the sequence and ends part-way through fails it"
    expect(["Authenticate", "LoadRecord"], rule, "failed", "incomplete_sequence")
    expect(["Authenticate"], rule, "failed", "incomplete_sequence")


def test_sequence_strict_is_the_default_false() -> None:
    expect(
        ["Authenticate", "Audit", "LoadRecord", "WriteRecord"],
        {"type": "sequence", "tools": SEQUENCE_TOOLS},
        "passed",
    )


CUSTOMER_WORKFLOW = [
    {"id": "require_verify", "type": "require", "tool": "VerifyIdentity"},
    {"id": "verify_before_delete", "type": "before", "first": "VerifyIdentity", "then": "DeleteCustomer"},
    {"id": "no_admin", "type": "blocklist", "pattern": "admin_"},
    {"id": "api_limit", "type": "max_calls", "tool": "ExternalAPI", "max": 5},
]


def test_seed_combining_rules_is_and() -> None:
    good = run(["VerifyIdentity", "DeleteCustomer"] + ["ExternalAPI"] * 5, CUSTOMER_WORKFLOW)
    assert [r.outcome for r in good.rules] == ["passed"] * 4
    assert (good.verdict, good.sequence_correctness_score, good.violations) == ("pass", 1.0, [])
    # one failing rule is enough to fail the whole
    one_bad = run(["VerifyIdentity", "DeleteCustomer"] + ["ExternalAPI"] * 6, CUSTOMER_WORKFLOW)
    assert [r.outcome for r in one_bad.rules] == ["passed", "passed", "passed", "failed"]
    assert one_bad.verdict == "fail"
    assert [v.rule_id for v in one_bad.violations] == ["api_limit"]
    bad = run(["DeleteCustomer", "admin_purge"], CUSTOMER_WORKFLOW)
    assert {v.rule_id for v in bad.violations} == {"require_verify", "verify_before_delete", "no_admin"}
    assert (bad.verdict, bad.rules_failed, bad.rules_passed) == ("fail", 3, 1)


def test_seed_error_message_example() -> None:
    """Seed 002's "Error Messages": DeleteCustomer at position 2 (1-based in text), VerifyIdentity never
    called."""
    rule = {
        "id": "verify_before_delete",
        "type": "before",
        "first": "VerifyIdentity",
        "then": "DeleteCustomer",
    }
    report = run(["GetCustomer", "DeleteCustomer", "SendEmail"], [rule])
    [v] = report.violations
    assert v.violation_type == "missing_prerequisite"
    assert v.offending_call_index == 1  # 0-based in JSON
    text = f"{v.expected_order} {v.actual_order} {v.explanation}"
    assert "VerifyIdentity" in text and "DeleteCustomer" in text
    assert re.search(r"\b2\b", f"{v.actual_order} {v.explanation}"), "positions are 1-based in text"
    [mp] = report.missing_prerequisites
    assert (mp.required_call, mp.dependent_call, mp.dependent_call_index) == (
        "VerifyIdentity",
        "DeleteCustomer",
        1,
    )


def test_seed_real_world_payment_flow() -> None:
    rules = [
        {"id": "cart", "type": "before", "first": "ValidateCart", "then": "ProcessPayment"},
        {"id": "inventory", "type": "before", "first": "CheckInventory", "then": "ProcessPayment"},
        {"id": "refund_once", "type": "max_calls", "tool": "ProcessRefund", "max": 1},
    ]
    good = run(["ValidateCart", "CheckInventory", "ProcessPayment", "ProcessRefund"], rules)
    assert good.verdict == "pass" and good.rules_passed == 3
    bad = run(["ValidateCart", "ProcessPayment", "CheckInventory", "ProcessRefund", "ProcessRefund"], rules)
    assert {v.rule_id: v.violation_type for v in bad.violations} == {
        "inventory": "out_of_order",
        "refund_once": "too_many_calls",
    }


def test_seed_real_world_healthcare() -> None:
    rules = [
        {"id": "auth", "type": "require", "tool": "AuthenticateUser"},
        {"id": "auth_first", "type": "before", "first": "AuthenticateUser", "then": "GetPatientRecord"},
        {"id": "log", "type": "after", "trigger": "GetPatientRecord", "then": "LogAccess", "within": 1},
        {"id": "no_admin", "type": "blocklist", "pattern": "admin_"},
    ]
    good = run(["AuthenticateUser", "GetPatientRecord", "LogAccess", "GetPatientRecord", "LogAccess"], rules)
    assert good.verdict == "pass"
    late = run(
        ["AuthenticateUser", "GetPatientRecord", "LogAccess", "GetPatientRecord", "Other", "LogAccess"], rules
    )
    [v] = late.violations
    assert (v.rule_id, v.violation_type, v.offending_call_index) == ("log", "deadline_missed", 3)


def test_seed_real_world_agent_handoffs() -> None:
    rules = [
        {"id": "router", "type": "before", "first": "RouterAgent", "then": "SpecialistA"},
        {"id": "a_once", "type": "max_calls", "tool": "SpecialistA", "max": 1},
        {"id": "b_once", "type": "max_calls", "tool": "SpecialistB", "max": 1},
    ]
    assert run(["RouterAgent", "SpecialistA", "SpecialistB"], rules).verdict == "pass"
    bad = run(["RouterAgent", "SpecialistA", "SpecialistA"], rules)
    assert [(v.rule_id, v.offending_call_index) for v in bad.violations] == [("a_once", 2)]


def test_seed_conditional_rule_as_written_in_the_seed() -> None:
    """Seed 002's "Coming in v1.1" example, verbatim: `when: {context.user_role: "standard"}` on a trace whose
    context says user_role is standard. The issue adopts this example for `when:`."""
    rule = {
        "type": "before",
        "first": "VerifyIdentity",
        "then": "DeleteCustomer",
        "when": {"context.user_role": "standard"},
    }
    standard = run(["DeleteCustomer"], [rule], context={"user_role": "standard"})
    admin = run(["DeleteCustomer"], [rule], context={"user_role": "admin"})
    assert standard.rules[0].outcome == "failed"
    assert admin.rules[0].outcome == "not_applicable"


# ------------------------------------------------------------------------------ seed 000: the constraints


def test_critical_violation_scores_zero() -> None:
    rules = [{"id": f"req{n}", "type": "require", "tool": "A"} for n in range(9)]
    rules.append({"id": "order", "type": "before", "first": "A", "then": "B"})
    report = run(["B", "A"], rules)
    assert (report.rules_passed, report.rules_failed, report.total_rules_checked) == (9, 1, 10)
    assert report.sequence_correctness_score == 0.0
    assert report.verdict == "fail"
    [v] = report.violations
    assert v.severity == "critical"


def test_warnings_lower_the_score_but_do_not_fail() -> None:
    rules = [{"id": f"req{n}", "type": "require", "tool": "A"} for n in range(9)]
    rules.append({"id": "order", "type": "before", "first": "A", "then": "B", "severity": "warning"})
    report = run(["B", "A"], rules)
    assert report.sequence_correctness_score == pytest.approx(0.9)
    assert report.verdict == "pass"  # 0.9 >= 0.85 and no critical violation
    assert [v.severity for v in report.violations] == ["warning"]
    assert run(["B", "A"], rules, risk_level="high").verdict == "review"  # high risk: any score below 1.0
    assert run(["B", "A"], rules, threshold=0.95).verdict == "review"
    half = run(["B", "A"], rules[-2:])
    assert (half.sequence_correctness_score, half.verdict) == (0.5, "review")


def test_failed_prerequisite_is_a_missing_prerequisite_that_says_it_failed() -> None:
    report = run(
        [err("VerifyIdentity"), "DeleteCustomer"],
        [{"id": "r", "type": "before", "first": "VerifyIdentity", "then": "DeleteCustomer"}],
    )
    [v] = report.violations
    assert (v.violation_type, v.offending_call_index) == ("missing_prerequisite", 1)
    assert "fail" in v.explanation.lower()
    [mp] = report.missing_prerequisites
    assert (mp.required_call, mp.dependent_call, mp.dependent_call_index) == (
        "VerifyIdentity",
        "DeleteCustomer",
        1,
    )


def test_parallel_calls_that_satisfy_dependencies_are_not_penalised() -> None:
    rules = [
        {"id": "a_b", "type": "before", "first": "A", "then": "B"},
        {"id": "a_c", "type": "before", "first": "A", "then": "C"},
        {"id": "seq", "type": "sequence", "tools": ["A", "C"]},
    ]
    report = run(["A", ("B", "C")], rules)
    assert [r.outcome for r in report.rules] == ["passed"] * 3
    assert report.sequence_correctness_score == 1.0


def test_parallel_prerequisite_and_dependent_is_out_of_order() -> None:
    rule = {"type": "before", "first": "A", "then": "B"}
    expect([("A", "B")], rule, "failed", "out_of_order", 1)
    expect([("B", "A")], rule, "failed", "out_of_order", 0)
    expect([("X", "A"), "B"], rule, "passed")


def test_empty_trace_scores_one_with_an_explanation() -> None:
    rules = [
        {"id": "b", "type": "before", "first": "A", "then": "B"},
        {"id": "n", "type": "never_after", "trigger": "A", "forbidden": "B"},
        {"id": "a", "type": "after", "trigger": "A", "then": "B"},
        {"id": "s", "type": "sequence", "tools": ["A", "B"]},
        {"id": "j", "type": "judge", "description": "Ask before writing"},
    ]
    report = run([], rules)
    assert report.sequence_correctness_score == 1.0
    assert report.total_rules_checked == 0
    assert report.verdict == "pass"
    assert report.summary.strip()
    assert re.search(r"empty|no (tool )?calls?|0 calls|nothing", report.summary, re.I), report.summary


def test_empty_trace_still_fails_require_and_eventually() -> None:
    rules = [
        {"id": "req", "type": "require", "tool": "A"},
        {"id": "ev", "type": "eventually", "tool": "A", "within": 3},
        {"id": "b", "type": "before", "first": "A", "then": "B"},
    ]
    report = run([], rules)
    assert [r.outcome for r in report.rules] == ["failed", "failed", "not_exercised"]
    assert {v.violation_type for v in report.violations} == {"missing_call"}
    assert report.sequence_correctness_score == 0.0
    assert report.verdict == "fail"


def test_only_rules_that_exist_are_flagged() -> None:
    # A trace full of dubious behaviour that no rule mentions produces no violation at all.
    rules = [{"id": "only", "type": "before", "first": "A", "then": "B"}]
    report = run(["admin_delete", "Z", "Y", "A", "B", "B", "admin_delete"], rules)
    assert report.violations == [] and report.missing_prerequisites == []
    assert (report.sequence_correctness_score, report.verdict) == (1.0, "pass")
    bad = run(["B", "admin_delete", "A"], rules + [{"id": "other", "type": "require", "tool": "A"}])
    assert {v.rule_id for v in bad.violations} == {"only"}


# ----------------------------------------------------------------------------------- seed 003: set vs order

EXPECTED_003 = ["read_account", "check_policy", "issue_refund"]
ACTUAL_003 = ["read_account", "issue_refund", "check_policy"]


def _pairs(details: dict[str, Any]) -> list[frozenset[str]]:
    """The out-of-order pairs as unordered name pairs, whatever shape (list or object) each pair takes."""
    out = []
    for pair in details["out_of_order_pairs"]:
        values = pair.values() if isinstance(pair, dict) else pair
        out.append(frozenset(v for v in values if isinstance(v, str)))
    return out


@pytest.mark.parametrize(
    ("mode", "outcome"),
    [
        (None, "failed"),
        ("precedence", "failed"),
        ("in_order", "failed"),
        ("any_order", "passed"),
        ("exact", "failed"),
    ],
)
def test_seed_003_same_set_different_order(mode: str | None, outcome: str) -> None:
    rule: dict[str, Any] = {"id": "traj", "type": "trajectory", "expected": EXPECTED_003}
    if mode:
        rule["mode"] = mode
    trace = make_trace(list(ACTUAL_003))
    rules = ruleset([rule])
    report = seqjudge.check(trace, rules)
    got = result_of(report, "traj")
    assert got.outcome == outcome
    assert evaluate(ref_calls(trace), {}, rules.rules[0]).outcome == outcome
    # Whatever the mode, the set comparison and the order comparison are reported separately.
    details = got.details
    assert details is not None
    assert details["same_set"] is True
    assert details["same_order"] is False
    assert list(details["missing"]) == [] and list(details["extra"]) == []
    assert _pairs(details) == [frozenset({"check_policy", "issue_refund"})]


def test_trajectory_precedence_reports_the_out_of_order_call() -> None:
    report = run(list(ACTUAL_003), [{"id": "traj", "type": "trajectory", "expected": EXPECTED_003}])
    [v] = report.violations
    assert v.violation_type == "out_of_order"
    assert "check_policy" in v.explanation and "issue_refund" in v.explanation


@pytest.mark.parametrize(
    ("mode", "calls", "outcome"),
    [
        ("precedence", ["a", "x", "a", "b", "c", "b"], "passed"),  # extra calls and repeats allowed
        ("precedence", ["a", "b"], "failed"),  # c missing
        ("precedence", ["a", err("b"), "b", "c"], "passed"),
        ("precedence", ["a", ("b", "c")], "failed"),  # b and c in one step: b does not precede c
        ("precedence", [("a", "x"), "b", "c"], "passed"),
        ("in_order", ["a", "x", "b", "y", "c"], "passed"),
        ("in_order", ["a", "c", "b"], "failed"),
        ("in_order", ["a", err("b"), "c"], "failed"),
        # calls in one step never precede each other: parallel calls are not "in order" (issue 2)
        ("in_order", [("a", "b"), "c"], "failed"),
        ("in_order", ["a", ("b", "x"), ("c", "b")], "passed"),
        ("any_order", ["c", "b", "a", "a"], "passed"),
        ("any_order", ["c", "b"], "failed"),
        ("exact", ["a", "b", "c"], "passed"),
        ("exact", ["a", "b", "c", "c"], "failed"),
        ("exact", ["a", err("x"), "b", "c"], "passed"),  # exact compares the successful calls
    ],
)
def test_trajectory_modes(mode: str, calls: list[CallSpec], outcome: str) -> None:
    expect(calls, {"type": "trajectory", "expected": ["a", "b", "c"], "mode": mode}, outcome, vtype="any")


def test_trajectory_precedence_deduplicates_expected() -> None:
    """The README's rule semantics: in precedence mode "expected tools are taken in order of first
    appearance", each needing a successful call (a repeat asks for nothing more: "extras and repeats
    allowed")."""
    expect(["A"], {"type": "trajectory", "expected": ["A", "A"]}, "passed")
    expect(["A", "B"], {"type": "trajectory", "expected": ["A", "B", "A"]}, "passed")
    expect(["B", "A"], {"type": "trajectory", "expected": ["A", "B", "A"]}, "failed", "out_of_order", 0)


def test_trajectory_any_order_counts_repeats() -> None:
    rule = {"type": "trajectory", "expected": ["a", "a", "b"], "mode": "any_order"}
    expect(["a", "b"], rule, "failed", vtype="any")
    expect(["b", "a", "a"], rule, "passed")


# --------------------------------------------------------------------------------- issue 2: named examples


def test_issue_sequence_b_a_b() -> None:
    """`[B, A, B]` fails non-strict `[A, B]` and passes strict `[A, B]`."""
    expect(["B", "A", "B"], {"type": "sequence", "tools": ["A", "B"]}, "failed", "out_of_order", 0)
    expect(["B", "A", "B"], {"type": "sequence", "tools": ["A", "B"], "strict": True}, "passed")


def test_issue_sequence_b_alone() -> None:
    """`[B]` alone fails non-strict `[A, B, C]` and leaves strict `[A, B, C]` not exercised."""
    expect(["B"], {"type": "sequence", "tools": ["A", "B", "C"]}, "failed", "out_of_order", 0)
    expect(["B"], {"type": "sequence", "tools": ["A", "B", "C"], "strict": True}, "not_exercised")


def test_issue_non_strict_sequence_details() -> None:
    rule = {"type": "sequence", "tools": ["A", "B", "C"]}
    expect(["A", "X", "A", "B", "A", "B", "C"], rule, "passed")  # gaps and repeats of reached steps
    expect(["A", "C", "B"], rule, "failed", "out_of_order", 1)
    expect(["A", "B", "C", "A", "C", "B"], rule, "passed")  # completed: later calls ignored
    expect([("A", "B"), "C"], rule, "failed", "out_of_order", 1)  # same step is not "after"


def test_issue_strict_sequence_details() -> None:
    rule = {"type": "sequence", "tools": ["A", "B", "C"], "strict": True}
    expect(["X", "B", "A", "B", "C", "X"], rule, "passed")  # calls before the first ok A are ignored
    expect(["A", "B", "X", "C"], rule, "failed", "out_of_order", 2)
    expect(["A", "A", "B", "C"], rule, "failed", "out_of_order", 1)
    expect(["A", err("B"), err("B"), "B", "C"], rule, "passed")  # failed attempts of the awaited tool wait
    expect(["A", err("C")], rule, "failed", "out_of_order", 1)
    expect([("A", "B"), "C"], rule, "failed", "out_of_order", 1)


def test_issue_max_calls_zero_bans_a_tool() -> None:
    rule = {"type": "max_calls", "tool": "delete_user", "max": 0}
    expect(["read"], rule, "passed")
    expect(["read", err("delete_user")], rule, "failed", "too_many_calls", 1)


def test_issue_same_details_of_that_order_before_cancelling_that_order() -> None:
    rule = {"type": "before", "first": "get_order_details", "then": "cancel_order", "same": ["order_id"]}
    expect([ok("get_order_details", order_id="#W1"), ok("cancel_order", order_id="#W1")], rule, "passed")
    _, found = expect(
        [ok("get_order_details", order_id="#W1"), ok("cancel_order", order_id="#W2")],
        rule,
        "failed",
        "missing_prerequisite",
        1,
    )
    assert "#W2" in found[0].explanation, "violations name the value"
    expect(
        [
            ok("get_order_details", order_id="#W1"),
            ok("get_order_details", order_id="#W2"),
            ok("cancel_order", order_id="#W2"),
            ok("cancel_order", order_id="#W1"),
        ],
        rule,
        "passed",
    )
    # a call lacking the argument is in no sub-trace, so it does not satisfy the prerequisite
    expect(
        [ok("get_order_details"), ok("cancel_order", order_id="#W1")],
        rule,
        "failed",
        "missing_prerequisite",
        1,
    )
    # no sub-trace at all: not exercised
    expect([ok("get_order_details"), ok("cancel_order")], rule, "not_exercised")
    # passes on one value, not exercised on the other: passed
    expect(
        [
            ok("get_order_details", order_id="#W1"),
            ok("cancel_order", order_id="#W1"),
            ok("x", order_id="#W9"),
        ],
        rule,
        "passed",
    )


def test_issue_same_one_violation_per_failing_value() -> None:
    rule = {"id": "r", "type": "before", "first": "get", "then": "cancel", "same": ["order_id"]}
    calls: list[CallSpec] = [
        ok("cancel", order_id="#W1"),
        ok("get", order_id="#W1"),
        ok("cancel", order_id="#W2"),
        ok("get", order_id="#W3"),
        ok("cancel", order_id="#W3"),
    ]
    report = run(calls, [rule])
    assert result_of(report, "r").outcome == "failed"
    found = sorted((v.violation_type, v.offending_call_index) for v in report.violations)
    assert found == [("missing_prerequisite", 2), ("out_of_order", 0)]
    by_index = {v.offending_call_index: v for v in report.violations}
    assert "#W1" in by_index[0].explanation and "#W2" in by_index[2].explanation
    assert [mp.dependent_call_index for mp in report.missing_prerequisites] == [2]


def test_issue_same_at_most_once_per_order() -> None:
    rule = {"type": "max_calls", "tool": "modify_items", "max": 1, "same": ["order_id"]}
    expect([ok("modify_items", order_id=1), ok("modify_items", order_id=2)], rule, "passed")
    expect(
        [ok("modify_items", order_id=1), ok("x"), err("modify_items", order_id=1)],
        rule,
        "failed",
        "too_many_calls",
        2,
    )
    expect([ok("modify_items"), ok("modify_items")], rule, "passed")  # no sub-trace at all: max_calls passes
    expect([], rule, "passed")


def test_issue_same_keeps_whole_trace_steps() -> None:
    """Sub-traces keep their positions in the whole trace, so `within` counts the whole trace's steps."""
    calls: list[CallSpec] = [ok("open", fid=1), ok("other", fid=2), ok("close", fid=1)]
    expect(
        calls,
        {"type": "after", "trigger": "open", "then": "close", "same": ["fid"]},
        "failed",
        "deadline_missed",
        0,
    )
    expect(
        calls, {"type": "after", "trigger": "open", "then": "close", "within": 2, "same": ["fid"]}, "passed"
    )


def test_issue_same_on_several_arguments_and_json_values() -> None:
    rule = {"type": "never_after", "trigger": "commit", "forbidden": "write", "same": ["db", "table"]}
    expect([ok("commit", db="a", table="t"), ok("write", db="a", table="u")], rule, "passed")
    expect([ok("commit", db="a", table="t"), ok("write", db="a")], rule, "passed")
    expect(
        [ok("commit", db="a", table="t"), ok("write", db="a", table="t")], rule, "failed", "forbidden_call", 1
    )
    # values compare as JSON: 1 and "1" are different values
    rule2 = {"type": "never_after", "trigger": "commit", "forbidden": "write", "same": ["id"]}
    expect([ok("commit", id=1), ok("write", id="1")], rule2, "passed")
    expect(
        [ok("commit", id={"a": 1, "b": 2}), ok("write", id={"b": 2, "a": 1})],
        rule2,
        "failed",
        "forbidden_call",
        1,
    )


def test_issue_same_on_sequence_strict_sees_only_that_value() -> None:
    rule = {"type": "sequence", "tools": ["get", "cancel"], "strict": True, "same": ["order_id"]}
    calls: list[CallSpec] = [
        ok("get", order_id=1),
        ok("get", order_id=2),
        ok("cancel", order_id=1),
        ok("cancel", order_id=2),
    ]
    expect(calls, rule, "passed")
    expect(
        [ok("get", order_id=1), ok("log", order_id=1), ok("cancel", order_id=1)],
        rule,
        "failed",
        "out_of_order",
        1,
    )
    expect([ok("get", order_id=1), ok("log"), ok("cancel", order_id=1)], rule, "passed")


@pytest.mark.parametrize(
    ("when", "context", "outcome"),
    [
        ({"user_role": "standard"}, {"user_role": "standard"}, "failed"),
        ({"user_role": "standard"}, {"user_role": "admin"}, "not_applicable"),
        ({"user_role": "standard"}, {}, "not_applicable"),
        ({"user_role": ["standard", "guest"]}, {"user_role": "guest"}, "failed"),
        ({"user_role": ["standard", "guest"]}, {"user_role": "admin"}, "not_applicable"),
        ({"user.role": "standard"}, {"user": {"role": "standard"}}, "failed"),
        ({"user.role": "standard"}, {"user": "standard"}, "not_applicable"),
        ({"user.role": "standard", "env": "prod"}, {"user": {"role": "standard"}, "env": "prod"}, "failed"),
        (
            {"user.role": "standard", "env": "prod"},
            {"user": {"role": "standard"}, "env": "dev"},
            "not_applicable",
        ),
    ],
)
def test_issue_when(when: dict[str, Any], context: dict[str, Any], outcome: str) -> None:
    rule = {"type": "before", "first": "VerifyIdentity", "then": "DeleteCustomer", "when": when}
    expect(["DeleteCustomer"], rule, outcome, "missing_prerequisite", 0, context=context)


def test_not_applicable_rules_are_not_checked() -> None:
    rules = [
        {"id": "a", "type": "require", "tool": "X", "when": {"env": "prod"}},
        {"id": "b", "type": "require", "tool": "Y"},
    ]
    report = run(["Y"], rules, context={"env": "dev"})
    assert [r.outcome for r in report.rules] == ["not_applicable", "passed"]
    assert (report.total_rules_checked, report.sequence_correctness_score, report.violations) == (1, 1.0, [])


def test_judge_rules_are_deferred_and_not_checked() -> None:
    report = run(["A"], [{"id": "j", "type": "judge", "description": "Confirm with the user before writing"}])
    assert report.rules[0].outcome == "deferred"
    assert (report.total_rules_checked, report.sequence_correctness_score, report.verdict) == (0, 1.0, "pass")


# ------------------------------------------------------------------------------ aliases, args_match, steps


def test_alias_matches_its_members_not_itself() -> None:
    aliases = {"Write": ["cancel_order", "modify_order"], "Read": ["get_order"]}
    rule = {"type": "before", "first": "Read", "then": "Write"}
    expect(["get_order", "modify_order"], rule, "passed", aliases=aliases)
    expect(["modify_order", "get_order"], rule, "failed", "out_of_order", 0, aliases=aliases)
    expect(["Read", "Write", "cancel_order"], rule, "failed", "missing_prerequisite", 2, aliases=aliases)
    expect(["Read", "Write"], rule, "not_exercised", aliases=aliases)


def test_nested_alias_and_lists() -> None:
    aliases = {"Write": ["cancel_order", "Refund"], "Refund": ["refund_card"]}
    expect(
        ["refund_card"],
        {"type": "max_calls", "tool": "Write", "max": 0},
        "failed",
        "too_many_calls",
        0,
        aliases=aliases,
    )
    expect(["x", "b"], {"type": "require", "tool": ["a", "b"]}, "passed")
    expect(["x", "c"], {"type": "require", "tool": ["a", "b"]}, "failed", "missing_call")


def test_args_match() -> None:
    sel = {"tool": "pay", "args_match": {"method": "^card", "amount": "^[0-9]{1,3}$"}}
    rule = {"type": "require", "tool": sel}
    expect([ok("pay", method="card_visa", amount=120)], rule, "passed")  # non-strings as compact JSON
    expect([ok("pay", method="cash", amount=120)], rule, "failed", "missing_call")  # AND over keys
    expect([ok("pay", method="card", amount=1200)], rule, "failed", "missing_call")
    expect([ok("pay", method="card")], rule, "failed", "missing_call")  # missing argument does not match
    expect([ok("pay", method="my card", amount=5)], rule, "failed", "missing_call")  # anchored by the regex
    searched = {"type": "require", "tool": {"tool": "pay", "args_match": {"method": "card"}}}
    expect([ok("pay", method="my card")], searched, "passed")  # regex is searched, not full-matched
    as_json = {"type": "require", "tool": {"tool": "pay", "args_match": {"items": r'^\[1,"a"\]$'}}}
    expect([ok("pay", items=[1, "a"])], as_json, "passed")
    mixed = {
        "type": "max_calls",
        "tool": ["other", {"tool": "pay", "args_match": {"amount": "^9"}}],
        "max": 1,
    }
    expect([ok("pay", amount=5), ok("other"), ok("pay", amount=99)], mixed, "failed", "too_many_calls", 2)


def test_steps_count_not_calls() -> None:
    rule = {"type": "eventually", "tool": "V", "within": 2}
    expect([("a", "b", "c"), ("d", "V")], rule, "passed")
    expect([("a", "b"), "c", "V"], rule, "failed", "deadline_missed", "any")
    never = {"type": "never_after", "trigger": "T", "forbidden": "F"}
    expect([("T", "F")], never, "passed")  # the same step is not "after"
    expect([("F", "T"), "F"], never, "failed", "forbidden_call", 2)
    after = {"type": "after", "trigger": "T", "then": "B"}
    expect([("T", "B")], after, "failed", "deadline_missed", 0)
    expect(["T", ("x", "B")], after, "passed")
    expect(["T", "T", "B"], after, "failed", "deadline_missed", 0)
    expect([("T", "T"), "B"], after, "passed")  # one then meets several deadlines


def test_after_each_trigger_opens_its_own_deadline() -> None:
    rule = {"type": "after", "trigger": "T", "then": "B", "within": 2}
    expect(["T", "x", "B", "T", "x", "x", "B"], rule, "failed", "deadline_missed", 3)
    expect(["T", "x", "B", "T", "x", "B"], rule, "passed")


def test_never_after_is_anchored_at_the_first_trigger() -> None:
    rule = {"type": "never_after", "trigger": "T", "forbidden": "F"}
    expect([err("T"), "F"], rule, "failed", "forbidden_call", 1)
    expect(["F", "T", "x"], rule, "passed")


def test_before_examines_only_the_first_then() -> None:
    rule = {"type": "before", "first": "A", "then": "B"}
    expect(["A", "B", "B"], rule, "passed")
    expect(["B", "A", "B"], rule, "failed", "out_of_order", 0)


# ------------------------------------------------------------------------------ the failed-call principle


@pytest.mark.parametrize(
    ("rule", "calls", "outcome", "vtype", "index"),
    [
        # Obligations are met only by successful calls ...
        ({"type": "require", "tool": "A"}, [err("A")], "failed", "missing_call", "any"),
        ({"type": "before", "first": "A", "then": "B"}, [err("A"), "B"], "failed", "missing_prerequisite", 1),
        ({"type": "before", "first": "A", "then": "B"}, [err("A"), "B", "A"], "failed", "out_of_order", 1),
        ({"type": "eventually", "tool": "A", "within": 3}, [err("A")], "failed", "missing_call", None),
        (
            {"type": "eventually", "tool": "A", "within": 1},
            [err("A"), "A"],
            "failed",
            "deadline_missed",
            "any",
        ),
        ({"type": "after", "trigger": "T", "then": "B"}, ["T", err("B")], "failed", "deadline_missed", 0),
        ({"type": "sequence", "tools": ["A", "B"]}, [err("A"), "B"], "failed", "out_of_order", 1),
        ({"type": "sequence", "tools": ["A", "B"]}, ["A", err("B")], "failed", "incomplete_sequence", "any"),
        ({"type": "sequence", "tools": ["A", "B"]}, [err("A"), "A", "B"], "passed", None, None),
        # Non-strict is exercised once one of its tools is *called*: a failed first attempt starts it without
        # progress, so it ends incomplete. Strict needs a successful first tool to start.
        ({"type": "sequence", "tools": ["A", "B"]}, [err("A")], "failed", "incomplete_sequence", "any"),
        ({"type": "sequence", "tools": ["A", "B"], "strict": True}, [err("A")], "not_exercised", None, None),
        (
            {"type": "sequence", "tools": ["A", "B"], "strict": True},
            [err("A"), "B"],
            "not_exercised",
            None,
            None,
        ),
        (
            {"type": "sequence", "tools": ["A", "B"], "strict": True},
            ["A", err("B")],
            "failed",
            "incomplete_sequence",
            "any",
        ),
        # ... prohibitions and triggers count every attempt.
        ({"type": "before", "first": "A", "then": "B"}, [err("B")], "failed", "missing_prerequisite", 0),
        ({"type": "before", "first": "A", "then": "B"}, [err("B"), "A", "B"], "failed", "out_of_order", 0),
        ({"type": "blocklist", "pattern": "admin"}, [err("admin_x")], "failed", "forbidden_call", 0),
        ({"type": "max_calls", "tool": "A", "max": 1}, [err("A"), err("A")], "failed", "too_many_calls", 1),
        (
            {"type": "never_after", "trigger": "T", "forbidden": "F"},
            [err("T"), "F"],
            "failed",
            "forbidden_call",
            1,
        ),
        (
            {"type": "never_after", "trigger": "T", "forbidden": "F"},
            ["T", err("F")],
            "failed",
            "forbidden_call",
            1,
        ),
        ({"type": "after", "trigger": "T", "then": "B"}, [err("T")], "failed", "deadline_missed", 0),
        ({"type": "sequence", "tools": ["A", "B", "C"]}, ["A", err("C")], "failed", "out_of_order", 1),
        (
            {"type": "sequence", "tools": ["A", "B", "C"], "strict": True},
            ["A", err("C")],
            "failed",
            "out_of_order",
            1,
        ),
    ],
)
def test_failed_call_principle(
    rule: dict[str, Any], calls: list[CallSpec], outcome: str, vtype: str | None, index: Any
) -> None:
    expect(calls, rule, outcome, vtype, index)


def test_failed_require_says_it_failed() -> None:
    report = run([err("A")], [{"id": "r", "type": "require", "tool": "A"}])
    [v] = report.violations
    assert "fail" in v.explanation.lower()


# ----------------------------------------------------------------------------------------- report shape

REPORT_KEYS = {
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
VIOLATION_KEYS = {
    "rule_id",
    "rule_description",
    "violation_type",
    "expected_order",
    "actual_order",
    "offending_call_index",
    "severity",
    "explanation",
}
MISSING_KEYS = {"required_call", "dependent_call", "dependent_call_index", "impact"}
RULE_KEYS = {"rule_id", "type", "severity", "outcome", "call_indices", "explanation"}
# Beyond the issue's lists, report.py adds a suggestion (seed 002's "Suggestion:" line), the test group a rule
# came from (shape 2) and the trajectory details: allowed, nothing else.
EXTRA_VIOLATION_KEYS = {"suggestion"}
EXTRA_RULE_KEYS = {"group", "details"}


def test_report_shape() -> None:
    rules = [
        {"id": "b", "type": "before", "first": "A", "then": "B", "description": "A first"},
        {"id": "w", "type": "require", "tool": "Z", "severity": "warning"},
        {"id": "t", "type": "trajectory", "expected": ["A", "B"]},
        {"id": "j", "type": "judge", "description": "be nice"},
    ]
    dumped = run(["B", "A"], rules).model_dump(mode="json")
    assert set(dumped) == REPORT_KEYS
    assert dumped["trace_id"] == "t"
    assert dumped["verdict"] in {"pass", "fail", "review"}
    assert isinstance(dumped["sequence_correctness_score"], float)
    assert 0.0 <= dumped["sequence_correctness_score"] <= 1.0
    assert len(dumped["violations"]) >= 2
    for v in dumped["violations"]:
        assert VIOLATION_KEYS <= set(v) <= VIOLATION_KEYS | EXTRA_VIOLATION_KEYS
        assert all(isinstance(v[k], str) for k in VIOLATION_KEYS - {"offending_call_index"})
        assert v["severity"] in {"critical", "warning"}
    assert len(dumped["missing_prerequisites"]) == 0
    for r in dumped["rules"]:
        assert RULE_KEYS <= set(r) <= RULE_KEYS | EXTRA_RULE_KEYS
    assert [r["rule_id"] for r in dumped["rules"]] == ["b", "w", "t", "j"]
    assert [r["outcome"] for r in dumped["rules"]] == ["failed", "failed", "failed", "deferred"]
    assert [r["severity"] for r in dumped["rules"]] == ["critical", "warning", "critical", "critical"]
    by_rule = {v["rule_id"]: v for v in dumped["violations"]}
    assert by_rule["b"]["rule_description"] == "A first"
    assert by_rule["w"]["severity"] == "warning"
    mp = run(["B"], rules[:1]).model_dump(mode="json")["missing_prerequisites"]
    assert len(mp) == 1 and set(mp[0]) == MISSING_KEYS


def test_report_scores_match_the_reference_formula() -> None:
    rules = [
        {"id": "w1", "type": "require", "tool": "Z", "severity": "warning"},
        {"id": "w2", "type": "require", "tool": "A", "severity": "warning"},
        {"id": "w3", "type": "max_calls", "tool": "A", "max": 5, "severity": "warning"},
    ]
    report = run(["A"], rules)
    value, checked, passed, failed, decision = score_and_verdict(
        [(r.outcome, r.severity) for r in report.rules]
    )
    assert (report.sequence_correctness_score, report.total_rules_checked) == (pytest.approx(value), checked)
    assert (report.rules_passed, report.rules_failed, report.verdict) == (passed, failed, decision)
    assert (checked, passed, decision) == (3, 2, "review")
