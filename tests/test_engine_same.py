"""`same:` rules on the grouped index: values grouped by their JSON text, groups no operand touches, sharing.

The brute-force comparison lives in test_engine_property.py; these pin what it does not compare (messages,
the order of violations) and the parts of the fast path that only pay off at scale (one grouping per trace).
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from seqjudge.rules import engine as engine_module
from seqjudge.rules import evaluate as ev
from seqjudge.rules import index as index_module
from seqjudge.rules.engine import Engine
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace


def trace(*calls: tuple[str, dict[str, Any]]) -> Trace:
    return Trace.model_validate({"calls": [{"tool_name": n, "arguments": a} for n, a in calls]})


def engine(*rules: dict[str, Any]) -> Engine:
    return Engine(RuleSet.model_validate({"rules": [{"id": f"r{k}", **r} for k, r in enumerate(rules)]}))


def test_values_python_equates_but_json_does_not_are_different_values() -> None:
    """0.0 and -0.0 (and 1, 1.0, True, "1") are different values; two equal objects are one value."""
    values: list[Any] = [0.0, -0.0, 0, False, 1, 1.0, True, "1", None, [1]]
    calls = [("x", {"v": v}) for v in values] + [
        ("x", {"v": {"a": 1, "b": 2}}),
        ("x", {"v": {"b": 2, "a": 1}}),
    ]
    report = engine({"type": "max_calls", "tool": "x", "max": 1, "same": ["v"]}).check(trace(*calls))
    result = report.rules[0]
    assert result.outcome == "failed"
    assert [v.offending_call_index for v in report.violations] == [len(values) + 1]
    assert result.explanation.startswith('Failed for v={"a":1,"b":2}: ')


def test_groups_no_operand_touches_still_count_as_values() -> None:
    calls = trace(
        ("x", {"key": "a"}), ("y", {"key": "b"}), ("z", {"key": "c"}), ("x", {}), ("y", {"key": "b"})
    )
    report = engine(
        {"type": "max_calls", "tool": "x", "max": 1, "same": ["key"]},
        {"type": "before", "first": "x", "then": "y", "same": ["key"]},
        {"type": "never_after", "trigger": "z", "forbidden": "x", "same": ["key"]},
    ).check(calls)
    max_calls, before, never_after = report.rules
    # b and c have no call to x: within them x is called 0 times, which holds.
    assert (max_calls.outcome, max_calls.explanation) == ("passed", "Held for each of 3 value(s) of key.")
    # b has y but no x before it; a and c have no y (not exercised there).
    assert before.outcome == "failed"
    assert before.explanation.startswith('Failed for key="b": ')
    assert [v.offending_call_index for v in report.violations] == [1]
    # only c has z, and nothing follows it; a and b are not exercised
    assert (never_after.outcome, never_after.explanation) == ("passed", "Held for each of 1 value(s) of key.")
    assert never_after.call_indices == [2]


def test_violations_come_in_the_order_the_values_first_appear() -> None:
    calls = trace(("x", {"v": [1]}), ("x", {"v": "a"}), ("x", {"v": {"k": 1}}), ("x", {"v": 2}))
    report = engine({"type": "max_calls", "tool": "x", "max": 0, "same": ["v"]}).check(calls)
    assert [v.offending_call_index for v in report.violations] == [0, 1, 2, 3]
    assert report.rules[0].explanation.startswith('Failed for v=[1]; v="a"; v={"k":1}; v=2: ')


def test_one_grouping_per_trace_serves_every_rule_with_those_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[tuple[str, ...]] = []
    original = index_module.Grouping.__init__

    def counting(self: Any, index: Any, keys: tuple[str, ...]) -> None:
        built.append(keys)
        original(self, index, keys)

    monkeypatch.setattr(index_module.Grouping, "__init__", counting)
    rules = engine(
        {"type": "max_calls", "tool": "x", "max": 5, "same": ["key"]},
        {"type": "before", "first": "x", "then": "y", "same": ["key"]},
        {"type": "never_after", "trigger": "y", "forbidden": "x", "same": ["key"]},
        {"type": "max_calls", "tool": "y", "max": 5, "same": ["key", "other"]},
    )
    calls = trace(("x", {"key": 1}), ("y", {"key": 1, "other": 2}), ("y", {"key": 2}))
    rules.check(calls)
    rules.check(calls)
    assert built == [("key",), ("key", "other")] * 2


def test_a_rule_failing_on_an_empty_trace_is_evaluated_on_every_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No rule type fails on an empty trace today; if one did, groups its operands miss must fail too."""
    rules = engine({"type": "max_calls", "tool": "x", "max": 0, "same": ["key"]})
    comp = rules.compiled[0]

    def never_holds(view: Any) -> ev.Finding:
        members = view.every_position()
        flaw = ev.Flaw("missing_call", None, "e", "a", f"{len(members)} call(s).", "s")
        return ev.Finding("failed", f"{len(members)} call(s).", list(members), [flaw])

    monkeypatch.setattr(comp, "evaluate", never_holds)
    monkeypatch.setattr(
        comp, "untouched", never_holds(engine_module.View(engine_module.TraceIndex([], [], [], [])))
    )
    report = rules.check(trace(("x", {"key": "a"}), ("y", {"key": "b"}), ("y", {"key": "b"}), ("y", {})))
    assert [v.explanation for v in report.violations] == [
        'For key="a": 1 call(s).',
        'For key="b": 2 call(s).',
    ]
    assert report.rules[0].call_indices == [0, 1, 2]


def test_failed_values_are_ordered_by_their_first_call_even_one_no_operand_selects() -> None:
    """b first appears at call 1 (a `y`, which the rule does not select), a at call 2: b is reported first."""
    calls = trace(("y", {"v": "b"}), ("x", {"v": "a"}), ("x", {"v": "b"}))
    report = engine({"type": "max_calls", "tool": "x", "max": 0, "same": ["v"]}).check(calls)
    assert [v.offending_call_index for v in report.violations] == [2, 1]
    assert report.rules[0].explanation.startswith('Failed for v="b"; v="a": ')


def test_a_lean_report_groups_only_the_calls_the_operands_select(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20: a group is evaluated on its share of the operands' positions; the other calls' values are
    read only when a report shows the number of values (the full report) or a rule walks a group's calls."""
    asked: list[str] = []
    original = index_module.Grouping.all_members

    def every_group(self: Any) -> Any:
        asked.append("all")
        return original(self)

    monkeypatch.setattr(index_module.Grouping, "all_members", every_group)
    rules = engine(
        {"type": "max_calls", "tool": "x", "max": 1, "same": ["key"]},
        {"type": "before", "first": "y", "then": "x", "same": ["key"]},
    )
    calls = trace(*[("z", {"key": k}) for k in range(30)], ("y", {"key": 1}), ("x", {"key": 1}))
    lean = rules.check_data(calls, explain="not-passed")
    assert [r["outcome"] for r in lean["rules"]] == ["passed", "passed"]
    assert asked == []
    full = rules.check_data(calls, explain="all")
    assert full["rules"][0]["explanation"] == "Held for each of 30 value(s) of key."
    assert asked == ["all"]  # once per trace, for both rules


def test_a_checked_trace_leaves_no_cycle_for_the_garbage_collector() -> None:
    """A trace's grouping refers to its index; were the index to keep the grouping, every trace checked
    against a `same:` rule would stay in memory until the cyclic collector ran (a cost on every trace)."""
    rules = engine(
        {"type": "max_calls", "tool": "x", "max": 1, "same": ["key"]},
        {"type": "before", "first": "x", "then": "y", "same": ["key"]},
        {"type": "sequence", "tools": ["x", "y"], "strict": True, "same": ["key"]},
    )
    calls = trace(("x", {"key": 1}), ("y", {"key": 1}), ("y", {"key": 2}), ("x", {}))
    gc.collect()
    gc.disable()
    try:
        for explain in ("not-passed", "all"):
            rules.check_data(calls, explain=explain)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_a_lean_report_settles_a_max_calls_within_its_limit_and_a_before_without_then_from_the_whole_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No group holds more calls than the trace, nor a `then` call the trace lacks: a lean report needs no
    group for those (the full report still counts the values), and says what the groups would have said."""
    grouped: list[str] = []
    original = index_module.Grouping.shares

    def shares(self: Any, sels: Any) -> Any:
        grouped.append("shares")
        return original(self, sels)

    monkeypatch.setattr(index_module.Grouping, "shares", shares)
    rules = engine(
        {"type": "max_calls", "tool": "x", "max": 2, "same": ["key"]},
        {"type": "before", "first": "x", "then": "y", "same": ["key"]},
        {"type": "before", "first": "x", "then": "y", "same": ["other"]},
    )
    calls = trace(("x", {"key": 1}), ("x", {"key": 2}), ("z", {}))
    lean = rules.check_data(calls, explain="not-passed")
    assert [(r["outcome"], r.get("explanation")) for r in lean["rules"]] == [
        ("passed", None),
        ("not_exercised", "Not exercised for any value of key."),
        ("not_exercised", "No call carries other."),
    ]
    assert grouped == []
    full = rules.check_data(calls, explain="all")
    assert [r["outcome"] for r in full["rules"]] == ["passed", "not_exercised", "not_exercised"]
    assert [r["explanation"] for r in full["rules"][1:]] == [r["explanation"] for r in lean["rules"][1:]]
    # Past the limit the groups decide: each holds two calls of x, within it.
    lean = rules.check_data(trace(*[("x", {"key": k % 2}) for k in range(4)]), explain="not-passed")
    assert lean["rules"][0]["outcome"] == "passed"
    assert grouped == ["shares"]
