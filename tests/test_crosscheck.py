"""Reconciliation of engine and judge, rule by rule; review routing; agreement and Cohen's kappa."""

from __future__ import annotations

from typing import Any

import pytest

from seqjudge import RuleSet, Trace, check
from seqjudge.crosscheck import agreement, cohen_kappa, reconcile
from seqjudge.judge.judge import Fingerprint, JudgeResult
from seqjudge.judge.schema import JudgeOutput

RULES = RuleSet.model_validate(
    {
        "rules": [
            {"id": "verify-first", "type": "before", "first": "Verify", "then": "Delete"},
            {"id": "no-admin", "type": "blocklist", "pattern": "admin_"},
            {"id": "confirm", "type": "judge", "description": "Confirm with the user before deleting."},
        ]
    }
)
FP = Fingerprint(provider="scripted", model="m", template_version="1", template_hash="h", prompt_hash="p")


def trace(*names: str) -> Trace:
    return Trace.model_validate({"trace_id": "t", "calls": [{"tool_name": n} for n in names]})


def judged(failed: dict[str, str], asked: list[str] | None = None, *, status: str = "scored") -> JudgeResult:
    """A judge result that failed the rules in ``failed`` (rule id -> severity)."""
    asked = asked if asked is not None else [r.rule_id for r in RULES.rules]
    if status == "unscored":
        return JudgeResult(status="unscored", reason="three bad replies", fingerprint=FP, rule_ids=asked)
    violations: list[dict[str, Any]] = [
        {
            "rule_id": rid,
            "rule_description": "",
            "violation_type": "out_of_order",
            "expected_order": "",
            "actual_order": "",
            "offending_call_index": 0,
            "severity": sev,
            "explanation": f"judge says {rid}",
        }
        for rid, sev in failed.items()
    ]
    passed = len(asked) - len(failed)
    critical = any(s == "critical" for s in failed.values())
    out = JudgeOutput.model_validate(
        {
            "sequence_correctness_score": 0.0 if critical else (passed / len(asked) if asked else 1.0),
            "total_rules_checked": len(asked),
            "rules_passed": passed,
            "rules_failed": len(failed),
            "violations": violations,
            "missing_prerequisites": [],
            "summary": "",
        }
    )
    return JudgeResult(status="scored", report=out, fingerprint=FP, rule_ids=asked)


def decision(result: Any, rule_id: str) -> Any:
    return next(d for d in result.rules if d.rule_id == rule_id)


def test_agree_pass() -> None:
    res = reconcile(check(trace("Verify", "Delete"), RULES), judged({}))
    d = decision(res, "verify-first")
    assert (d.engine, d.judge, d.final, d.agree) == ("passed", "passed", "passed", True)
    assert res.verdict == "pass" and res.review_reasons == [] and res.score == 1.0


def test_agree_fail() -> None:
    res = reconcile(check(trace("Delete"), RULES), judged({"verify-first": "critical"}))
    d = decision(res, "verify-first")
    assert (d.engine, d.judge, d.final, d.agree) == ("failed", "failed", "failed", True)
    assert res.verdict == "fail" and "judge_engine_disagreement" not in res.review_reasons
    # A critical fail that stands is no score doubt: not "below_threshold", and not queued by default.
    assert res.review_reasons == []
    queued = reconcile(check(trace("Delete"), RULES), judged({"verify-first": "critical"}), queue_fails=True)
    assert queued.verdict == "fail" and queued.review_reasons == ["engine_fail"]


def test_engine_fails_judge_passes_keeps_the_engine_outcome() -> None:
    res = reconcile(check(trace("Delete"), RULES), judged({}))
    d = decision(res, "verify-first")
    assert (d.engine, d.judge, d.final, d.agree) == ("failed", "passed", "failed", False)
    assert res.verdict == "fail"
    assert "judge_engine_disagreement" in res.review_reasons
    assert [x.rule_id for x in res.disagreements] == ["verify-first"]


def test_judge_fails_engine_passes_is_a_disagreement_not_a_failure() -> None:
    res = reconcile(check(trace("Verify", "Delete"), RULES), judged({"no-admin": "critical"}))
    d = decision(res, "no-admin")
    assert (d.engine, d.judge, d.final, d.agree) == ("passed", "failed", "passed", False)
    assert d.judge_explanation == "judge says no-admin"
    assert res.score == 1.0 and res.verdict == "review"
    assert res.review_reasons == ["judge_engine_disagreement"]


def test_judge_rule_takes_the_judge_outcome() -> None:
    res = reconcile(check(trace("Verify", "Delete"), RULES), judged({"confirm": "critical"}))
    d = decision(res, "confirm")
    assert (d.engine, d.judge, d.final, d.agree) == ("deferred", "failed", "failed", None)
    assert res.verdict == "fail" and res.score == 0.0
    res = reconcile(check(trace("Verify", "Delete"), RULES), judged({}))
    assert decision(res, "confirm").final == "passed" and res.verdict == "pass"


def test_unscored_goes_to_review_and_leaves_judge_rules_undecided() -> None:
    res = reconcile(check(trace("Verify", "Delete"), RULES), judged({}, status="unscored"))
    assert decision(res, "confirm").final == "deferred"
    assert decision(res, "verify-first").agree is None  # nothing to cross-check against
    assert res.review_reasons == ["unscored", "judge_rule_undecided"]
    assert res.verdict == "review"


def test_no_judge_defers_without_routing_and_keeps_the_engine_verdict() -> None:
    # Issue 17, point 6: with no judge at all, the verdict is check's and no review item is made for the
    # deferred judge rule (the run's summary names it instead).
    report = check(trace("Verify", "Delete"), RULES)
    res = reconcile(report, None, judge_skipped="no model configured")
    assert decision(res, "confirm").final == "deferred"
    assert res.review_reasons == [] and res.verdict == report.verdict == "pass"
    assert res.judge_skipped == "no model configured"
    # A judge that ran and could not score still routes the undecided rule (see the test above).


def test_contextual_mode_cross_checks_nothing() -> None:
    res = reconcile(check(trace("Delete"), RULES), judged({}, asked=["confirm"]))
    assert decision(res, "verify-first").judge is None and decision(res, "verify-first").agree is None
    assert decision(res, "confirm").final == "passed"
    assert "judge_engine_disagreement" not in res.review_reasons


def test_high_risk_routes_every_imperfect_score() -> None:
    rules = RuleSet.model_validate(
        {
            "rules": [
                {"id": "a", "type": "require", "tool": "A"},
                {"id": "w", "type": "max_calls", "tool": "E", "max": 1, "severity": "warning"},
                {"id": "b", "type": "require", "tool": "B"},
                {"id": "c", "type": "require", "tool": "C"},
                {"id": "d", "type": "require", "tool": "D"},
                {"id": "e", "type": "require", "tool": "E"},
                {"id": "f", "type": "require", "tool": "F"},
                {"id": "g", "type": "require", "tool": "G"},
            ]
        }
    )
    report = check(trace("A", "B", "C", "D", "E", "E", "F", "G"), rules, risk_level="high")
    res = reconcile(report, None, risk_level="high")
    assert res.score == pytest.approx(7 / 8)  # 0.875: above the 0.85 threshold
    assert res.review_reasons == ["high_risk_imperfect"] and res.verdict == "review"
    assert reconcile(report, None, risk_level="medium").verdict == "pass"


def test_kappa_against_a_hand_computed_example() -> None:
    # 10 decisions: both fail 3, both pass 4, engine-only fail 2, judge-only fail 1.
    pairs = [(True, True)] * 3 + [(False, False)] * 4 + [(True, False)] * 2 + [(False, True)]
    fig = cohen_kappa(pairs)
    # p_o = 0.7; engine fails 0.5, judge fails 0.4; p_e = 0.5*0.4 + 0.5*0.6 = 0.5; kappa = 0.2/0.5 = 0.4
    assert fig.rate == pytest.approx(0.7) and fig.kappa == pytest.approx(0.4)
    assert cohen_kappa([(True, True), (True, True)]).kappa is None  # undefined, not a made-up number
    assert cohen_kappa([]).rate is None


def test_agreement_by_type_and_rule() -> None:
    results = [
        reconcile(check(trace("Verify", "Delete"), RULES), judged({})),
        reconcile(check(trace("Delete"), RULES), judged({})),  # verify-first: engine fail, judge pass
        reconcile(check(trace("admin_x"), RULES), judged({"no-admin": "critical"})),
    ]
    fig = agreement(results)
    assert fig["overall"]["decisions"] == 6 and fig["overall"]["agreed"] == 5
    assert fig["by_type"]["before"]["agreed"] == 2 and fig["by_type"]["before"]["decisions"] == 3
    assert fig["by_rule"]["no-admin"]["rate"] == 1.0
    assert "judge" not in fig["by_type"]  # judge rules are decided, not cross-checked


class _Route:
    def __init__(self, route: str) -> None:
        self.route_to = route

    def route(self, rule_id: str, said: str, confidence: float | None) -> str:
        return self.route_to


def test_each_reason_says_what_put_the_trace_in_review() -> None:
    """Issue 37.8: a judge fail that stands is `judge_fail` (queued only when asked), an uncertified one
    `uncertified_judge_fail` (always: issue 32.1), never `below_threshold`."""
    engine = check(trace("Verify", "Delete"), RULES)
    fail = judged({"confirm": "critical"})
    stands = reconcile(engine, fail)
    assert stands.verdict == "fail" and stands.review_reasons == []
    assert reconcile(engine, fail, queue_fails=True).review_reasons == ["judge_fail"]
    advisory = reconcile(engine, fail, gate=_Route("advisory"))
    assert (advisory.verdict, advisory.score, advisory.review_reasons) == (
        "review",
        1.0,
        ["uncertified_judge_fail"],
    )
    assert decision(advisory, "confirm").final == "deferred"
    # An uncertified pass decides nothing and sends nothing.
    quiet = reconcile(engine, judged({}), gate=_Route("advisory"))
    assert (quiet.verdict, quiet.review_reasons) == ("pass", [])
    # Below a certified threshold: low_confidence.
    unsure = reconcile(engine, fail, gate=_Route("review"))
    assert (unsure.verdict, unsure.review_reasons) == ("review", ["low_confidence"])
