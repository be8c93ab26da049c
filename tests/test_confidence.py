"""Part 1 of issue 18: a confidence for every judged rule decision, from the reply's `rule_decisions`
(the model's stated confidence), carried through reconciliation and stored with the result."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from seqjudge.crosscheck import reconcile
from seqjudge.judge.judge import judge_trace
from seqjudge.judge.prompt import render
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.judge.schema import json_schema
from seqjudge.judge.validate import InvalidJudgeOutput, validate_reply
from seqjudge.rules.engine import Engine
from seqjudge.store import Store
from test_judge_harness import RULES, TRACE, VALID

DECISIONS = [
    {"rule_id": "read_first", "decision": "failed", "confidence": 0.97},
    {"rule_id": "one_refund", "decision": "passed", "confidence": 0.9},
    {"rule_id": "confirm", "decision": "failed", "confidence": 0.62},
]
WITH_CONFIDENCE: dict[str, Any] = {**VALID, "rule_decisions": DECISIONS}
SEVERITIES = {"read_first": "critical", "one_refund": "warning", "confirm": "critical"}


def test_schema_asks_for_a_confidence_per_rule_and_the_prompt_says_so() -> None:
    item = json_schema()["properties"]["rule_decisions"]["anyOf"][0]["items"]
    assert item["required"] == ["rule_id", "decision", "confidence"]
    prompt = render(TRACE, RULES)
    assert (
        '"rule_decisions": [{"rule_id": string, "decision": "passed" | "failed", "confidence": number}]'
        in (prompt.static)
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.pop(), "rule_decisions has no entry for rule(s) 'confirm'"),
        (
            lambda d: d[1].update(decision="failed"),
            "rule 'one_refund' has no violation, so it must be 'passed'",
        ),
        (
            lambda d: d[0].update(decision="passed"),
            "rule 'read_first' has a violation, so it must be 'failed'",
        ),
        (lambda d: d[2].update(confidence=1.5), "rule_decisions[2].confidence is 1.5"),
        (lambda d: d.append(dict(d[0])), "rule_decisions[3].rule_id 'read_first' is listed twice"),
        (lambda d: d[0].update(rule_id="nope"), "rule_decisions[0].rule_id 'nope' is not one of the given"),
    ],
)
def test_inconsistent_decisions_are_reasked_with_the_reason(change: Any, problem: str) -> None:
    data = copy.deepcopy(WITH_CONFIDENCE)
    change(data["rule_decisions"])
    with pytest.raises(InvalidJudgeOutput) as err:
        validate_reply(data, SEVERITIES, 2)
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_a_reply_without_rule_decisions_still_validates_and_has_no_confidence() -> None:
    out = validate_reply(VALID, SEVERITIES, 2)
    assert out.rule_decisions is None


async def test_stated_confidence_reaches_the_rule_decisions_and_the_store(tmp_path: Path) -> None:
    judged = await judge_trace(TRACE, RULES, ScriptedProvider([WITH_CONFIDENCE]))
    assert judged.rule_confidences() == {"read_first": 0.97, "one_refund": 0.9, "confirm": 0.62}
    report = Engine(RULES).check(TRACE)
    result = reconcile(report, judged)
    by_id = {d.rule_id: d for d in result.rules}
    assert by_id["confirm"].judge == "failed" and by_id["confirm"].confidence == 0.62
    assert by_id["one_refund"].confidence == 0.9
    with Store(tmp_path / "s.db") as db:
        run_id = db.create_run(config={}, fingerprint={})
        db.save_result(run_id, TRACE, result)
        stored = db.result(run_id, "t-1").result
    assert {d.rule_id: d.confidence for d in stored.rules} == {
        "read_first": 0.97,
        "one_refund": 0.9,
        "confirm": 0.62,
    }


async def test_no_judge_or_no_stated_confidence_leaves_none() -> None:
    report = Engine(RULES).check(TRACE)
    assert all(d.confidence is None for d in reconcile(report, None).rules)
    judged = await judge_trace(TRACE, RULES, ScriptedProvider([VALID]))
    assert all(d.confidence is None for d in reconcile(report, judged).rules)


def test_worked_examples_show_filled_rule_decisions_never_null() -> None:
    from seqjudge.judge.prompt import Example, example_view, load_examples

    static = render(TRACE, RULES).static  # exact rules: the worked examples are shown
    assert (
        '"rule_decisions": [{"rule_id": "verify_before_delete", "decision": "passed", "confidence": 0.98}'
        in (static)
    )
    assert '"rule_decisions": null' not in static
    # An examples file written before rule_decisions existed shows no such key at all.
    old = load_examples()[0]
    bare = Example.model_validate(
        {**old.model_dump(), "expected": old.expected.model_copy(update={"rule_decisions": None})}
    )
    assert "rule_decisions" not in example_view(bare)["expected"]
