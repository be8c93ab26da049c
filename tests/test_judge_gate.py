"""Issue 18 part 4: a run's `judge` rules gate by the matching certificate's confidence thresholds, are
advisory without one (never gating, their fails sent to review, said in the summary), and --strict makes
that an error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from calibrate_helpers import save_test_certificate
from seqjudge import load_rules
from seqjudge.certificate import (
    CertifiedRule,
)
from seqjudge.errors import InputError
from seqjudge.ingest import load_traces
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.runner import run_traces
from seqjudge.store import Store
from test_run import SUITE, human_labels, make_cfg, oracle_reply

JUDGE_RULE = "confirm-before-delete"


def suite_traces() -> list[Any]:
    """Ten traces the judge rule passes on and four it fails on (by the labels), in the file's order."""
    labels = human_labels()
    traces = list(load_traces(SUITE / "traces.jsonl"))
    fails = [t for t in traces if labels[t.trace_id].get(JUDGE_RULE) == "fail"][:4]
    passes = [t for t in traces if labels[t.trace_id].get(JUDGE_RULE) != "fail"][:10]
    return [t for t in traces if t in fails or t in passes]


def confident(i: int) -> float:
    return 0.95 if i % 2 == 0 else 0.5


def replies(ruleset: Any) -> list[dict[str, Any]]:
    asked = [r.rule_id for r in ruleset.rules]
    out = []
    for i, trace in enumerate(suite_traces()):
        reply = oracle_reply(trace, ruleset, asked)
        failed = {v["rule_id"] for v in reply["violations"]}
        reply["rule_decisions"] = [
            {
                "rule_id": rid,
                "decision": "failed" if rid in failed else "passed",
                "confidence": confident(i) if rid == JUDGE_RULE else 0.99,
            }
            for rid in asked
        ]
        out.append(reply)
    return out


def certify(tmp_path: Path, ruleset: Any, *, auto_fail: float | None = None, level: str = "medium") -> None:
    entry = CertifiedRule(
        rule_id=JUDGE_RULE, risk_level=level, auto_pass=0.9, auto_fail=auto_fail, alpha=0.05, delta=0.05
    )
    save_test_certificate(tmp_path / "s.db", ruleset, [entry], dataset="customer-support")


def judge_run(tmp_path: Path, **kw: Any) -> tuple[Any, list[Any]]:
    cfg = make_cfg(tmp_path, judge_mode="full")
    ruleset = load_rules(cfg.rules)
    provider = ScriptedProvider(replies(ruleset))
    with Store(cfg.store) as db:
        summary = asyncio.run(run_traces(cfg, ruleset, suite_traces(), db, provider=provider, **kw))
        stored = [s.result for s in db.results(summary.run_id)]
    return summary, stored


def judge_decision(result: Any) -> Any:
    return next(d for d in result.rules if d.rule_id == JUDGE_RULE)


def test_certified_passes_stand_above_the_threshold_and_go_to_review_below(tmp_path: Path) -> None:
    certify(tmp_path, load_rules(SUITE / "rules.yaml"))
    summary, stored = judge_run(tmp_path)
    labels = human_labels()
    order = {t.trace_id: i for i, t in enumerate(suite_traces())}
    seen = {"stand": 0, "review": 0, "fail": 0}
    for res in stored:
        d = judge_decision(res)
        conf = confident(order[res.trace_id])
        assert d.confidence == conf
        if labels[res.trace_id].get(JUDGE_RULE) == "fail":
            # No auto-fail threshold was certified: a judge fail stands, as it always did.
            assert (d.judge, d.final, d.route) == ("failed", "failed", None)
            seen["fail"] += 1
        elif conf >= 0.9:
            assert (d.judge, d.final, d.route) == ("passed", "passed", None)
            assert "low_confidence" not in res.review_reasons
            seen["stand"] += 1
        else:
            assert (d.judge, d.final, d.route) == ("passed", "deferred", "review")
            assert "low_confidence" in res.review_reasons and res.verdict in ("review", "fail")
            assert "judge_rule_undecided" not in res.review_reasons
            seen["review"] += 1
    assert all(seen.values()), seen  # every path is exercised by the slice
    # `runs show` shows the judge's word with its confidence and why it did not gate.
    from seqjudge.outputs.listings import result_lines

    routed = next(r for r in stored if judge_decision(r).route == "review")
    assert any(JUDGE_RULE in line and "passed (0.50, review)" in line for line in result_lines(routed))
    assert summary.reasons["low_confidence"] == seen["review"]
    assert not any("advisory" in note for note in summary.notes)


def test_a_certified_auto_fail_sends_unsure_fails_to_review(tmp_path: Path) -> None:
    certify(tmp_path, load_rules(SUITE / "rules.yaml"), auto_fail=0.9)
    _, stored = judge_run(tmp_path)
    order = {t.trace_id: i for i, t in enumerate(suite_traces())}
    unsure_fails = [
        judge_decision(r)
        for r in stored
        if judge_decision(r).judge == "failed" and confident(order[r.trace_id]) < 0.9
    ]
    assert unsure_fails and all((d.final, d.route) == ("deferred", "review") for d in unsure_fails)


@pytest.mark.parametrize("mismatch", ["no certificate", "other rules", "other level"])
def test_without_a_matching_certificate_judge_rules_are_advisory(tmp_path: Path, mismatch: str) -> None:
    ruleset = load_rules(SUITE / "rules.yaml")
    if mismatch == "other rules":
        certify(tmp_path, ruleset.model_copy(update={"rules": ruleset.rules[:-1]}))
    elif mismatch == "other level":
        certify(tmp_path, ruleset, level="high")
    summary, stored = judge_run(tmp_path)
    failed_by_judge = 0
    for res in stored:
        d = judge_decision(res)
        assert (d.final, d.route) == ("deferred", "advisory") and d.judge is not None
        assert "low_confidence" not in res.review_reasons and "judge_rule_undecided" not in res.review_reasons
        # Issue 32.1: advice never gates, but what the judge found is never dropped: a trace it failed is in
        # review, never `pass`.
        assert ("uncertified_judge_fail" in res.review_reasons) == (d.judge == "failed")
        if d.judge == "failed":
            assert res.verdict in ("review", "fail")
        failed_by_judge += d.judge == "failed"
    note = next(n for n in summary.notes if "advisory" in n)
    assert JUDGE_RULE in note and "never gate" in note and "uncertified_judge_fail" in note
    assert failed_by_judge and summary.advisory_fails[JUDGE_RULE] == failed_by_judge
    notes = " ".join(summary.notes)
    said = f"sent to review (uncertified_judge_fail), not to the verdict: {JUDGE_RULE} on {failed_by_judge}"
    assert said in notes
    with Store(tmp_path / "s.db") as db:
        assert len(db.review_items(reason="uncertified_judge_fail")) == failed_by_judge
    with pytest.raises(InputError) as err:
        judge_run(tmp_path / "strict", strict=True)
    assert "no calibration certificate" in str(err.value) and "--strict" in str(err.value)


class _Advisory:
    def route(self, rule_id: str, said: str, confidence: float | None) -> str:
        return "advisory"


def test_compare_leaves_advisory_judge_rules_out_and_says_so() -> None:
    from seqjudge.compare import compare
    from seqjudge.crosscheck import reconcile
    from test_compare import make_run

    def advisory(pairs: list[Any]) -> list[Any]:
        return [reconcile(r.engine, r.judge, gate=_Advisory()) for _, r in pairs]

    base = advisory(make_run(20))
    cand = advisory(make_run(20, judge_fail=range(10)))  # the judge fails half: advice, not a regression
    out = compare(base, cand)
    judge = next(d for d in out.decisions if d.rule == "judge_paired")
    assert not judge.fired and not out.regression
    assert judge.reason.startswith("judge rules advisory on 20 trace(s)") and "never gating" in judge.reason


def test_run_cli_says_advisory_and_strict_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json as _json

    from seqjudge.cli import run
    from seqjudge.judge.providers import ProviderProfile, registry

    ruleset = load_rules(SUITE / "rules.yaml")
    script = replies(ruleset)
    monkeypatch.setitem(
        registry._REGISTRY,
        "gatep",
        ProviderProfile(name="gatep", factory=lambda model, **o: ScriptedProvider(list(script), model=model)),
    )
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(_json.dumps(t.model_dump(mode="json")) + "\n" for t in suite_traces()))
    base = [
        "run",
        str(SUITE / "rules.yaml"),
        str(traces),
        "--model",
        "gatep:m",
        "--store",
        str(tmp_path / "s.db"),
    ]
    assert run([*base, "--strict"]) == 2
    err = capsys.readouterr().err
    assert "no calibration certificate" in err and "--strict" in err
    run([*base, "--no-cache"])
    out = capsys.readouterr().out
    assert f"judge rule(s) {JUDGE_RULE} are advisory" in out


def test_the_gate_is_kept_with_the_run_and_rebuilt_exactly(tmp_path: Path) -> None:
    from seqjudge.judge_gate import gate_data, gate_from_data, judge_gate

    ruleset = load_rules(SUITE / "rules.yaml")
    certify(tmp_path, ruleset, auto_fail=0.8)
    gate = judge_gate(
        "scripted:scripted", ruleset, store=tmp_path / "s.db", risk_level="medium", confidence_source="stated"
    )
    assert (
        gate.route(JUDGE_RULE, "passed", 0.95) == "gate" and gate.route(JUDGE_RULE, "failed", 0.7) == "review"
    )
    assert gate_from_data(gate_data(gate)) == gate and gate_from_data(None) is None
    summary, _ = judge_run(tmp_path)
    with Store(tmp_path / "s.db") as db:
        assert gate_from_data(db.run_info(summary.run_id).fingerprint["judge_gate"]) == gate


def test_a_resumed_run_routes_as_it_started(tmp_path: Path) -> None:
    from seqjudge.errors import ProviderError

    cfg = make_cfg(tmp_path, judge_mode="full")
    ruleset = load_rules(cfg.rules)
    script = replies(ruleset)
    traces = suite_traces()
    with Store(cfg.store) as db:
        # Four answers for fourteen traces: the script runs out, the run stops, resumable.
        with pytest.raises(ProviderError):
            asyncio.run(run_traces(cfg, ruleset, traces, db, provider=ScriptedProvider(script[:4])))
        run_id = db.list_runs()[0].id
        done = db.completed_trace_ids(run_id)
        certify(tmp_path, ruleset)  # a certificate appears before the resume
        rest = [s for t, s in zip(traces, script, strict=True) if t.trace_id not in done]
        asyncio.run(run_traces(cfg, ruleset, traces, db, provider=ScriptedProvider(rest), run_id=run_id))
        stored = [s.result for s in db.results(run_id)]
    assert len(stored) == len(traces)
    assert all(judge_decision(r).route == "advisory" for r in stored)
