"""`run_traces` and `seqjudge run`: engine + judge + reconciliation + routing + storage, both judge modes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from seqjudge import load_rules, load_traces
from seqjudge.cli import run
from seqjudge.config import RunConfig
from seqjudge.crosscheck import agreement
from seqjudge.errors import ProviderError
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.rules.engine import Engine
from seqjudge.runner import run_traces
from seqjudge.store import Store

SUITE = Path(__file__).resolve().parents[1] / "golden_traces" / "customer-support"
N = 14  # a slice of the suite keeps the test fast and still holds passing, failing and judge cases


def suite_traces() -> list[Any]:
    return list(load_traces(SUITE / "traces.jsonl"))[:N]


def human_labels() -> dict[str, dict[str, str]]:
    out = {}
    for line in (SUITE / "labels.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out[rec["trace_id"]] = rec.get("rules") or {}
    return out


def oracle_reply(trace: Any, ruleset: Any, asked: list[str], flip: set[str] = frozenset()) -> dict[str, Any]:
    """A judge reply that agrees with the engine on deterministic rules (except rule ids in ``flip``, which
    it reports passed) and with the human labels on `judge` rules."""
    report = Engine(ruleset).check(trace)
    labels = human_labels().get(trace.trace_id, {})
    by_id = {r.rule_id: r for r in ruleset.rules}
    violations = []
    for rid in asked:
        rule = by_id[rid]
        if rule.type == "judge":
            failed = labels.get(rid) == "fail"
            v = {
                "violation_type": "missing_prerequisite",
                "offending_call_index": None,
                "explanation": "no explicit confirmation",
            }
            if failed:
                v["offending_call_index"] = 0 if trace.calls else None
                v["violation_type"] = "missing_call" if not trace.calls else "missing_prerequisite"
        else:
            engine_v = next((x for x in report.violations if x.rule_id == rid), None)
            failed = engine_v is not None and rid not in flip
            if failed:
                v = {
                    "violation_type": engine_v.violation_type,
                    "offending_call_index": engine_v.offending_call_index,
                    "explanation": "as the engine",
                }
        if failed:
            violations.append(
                {
                    "rule_id": rid,
                    "rule_description": "",
                    "expected_order": "",
                    "actual_order": "",
                    "severity": rule.severity,
                    **v,
                }
            )
    failed_ids = {v["rule_id"] for v in violations}
    checked = len(asked)
    passed = checked - len(failed_ids)
    critical = any(v["severity"] == "critical" for v in violations)
    return {
        "sequence_correctness_score": 0.0 if critical else passed / checked,
        "total_rules_checked": checked,
        "rules_passed": passed,
        "rules_failed": len(failed_ids),
        "violations": violations,
        "missing_prerequisites": [],
        "summary": "oracle",
    }


def make_cfg(tmp_path: Path, **kw: Any) -> RunConfig:
    return RunConfig(
        rules=str(SUITE / "rules.yaml"),
        traces=str(SUITE / "traces.jsonl"),
        store=str(tmp_path / "s.db"),
        concurrency=1,
        cache=False,
        **kw,
    )


def run_suite(tmp_path: Path, provider: Any, **kw: Any) -> tuple[Any, list[Any]]:
    cfg = make_cfg(tmp_path, **kw)
    ruleset = load_rules(cfg.rules)
    with Store(cfg.store) as db:
        summary = asyncio.run(run_traces(cfg, ruleset, suite_traces(), db, provider=provider))
        stored = [s.result for s in db.results(summary.run_id)]
    return summary, stored


def test_no_model_runs_the_engine_and_names_the_deferred_judge_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    summary, stored = run_suite(tmp_path, None)
    assert summary.judge_skipped and "no model configured" in summary.judge_skipped
    assert len(stored) == N and summary.traces == N
    ruleset = load_rules(SUITE / "rules.yaml")
    judge_rules = [r.rule_id for r in ruleset.rules if r.type == "judge"]
    assert judge_rules and summary.deferred_rules == judge_rules  # named once, for the summary
    engine = Engine(ruleset)
    by_id = {t.trace_id: t for t in suite_traces()}
    for res in stored:
        assert "judge_rule_undecided" not in res.review_reasons
        assert next(d for d in res.rules if d.type == "judge").final == "deferred"
        assert res.verdict == engine.check(by_id[res.trace_id]).verdict  # check's verdict


def test_full_mode_cross_checks_every_rule_and_takes_the_judge_on_judge_rules(tmp_path: Path) -> None:
    ruleset = load_rules(SUITE / "rules.yaml")
    asked = [r.rule_id for r in ruleset.rules]
    provider = ScriptedProvider([oracle_reply(t, ruleset, asked) for t in suite_traces()])
    summary, stored = run_suite(tmp_path, provider, judge_mode="full")
    assert len(provider.requests) == N
    overall = summary.agreement["overall"]
    assert overall["decisions"] == N * (len(asked) - 1) and overall["agreed"] == overall["decisions"]
    labels = human_labels()
    for res in stored:
        judge_rule = next(d for d in res.rules if d.type == "judge")
        want = labels[res.trace_id].get(judge_rule.rule_id, "pass")
        # No calibration certificate: the judge's decision is reported, never gating (issue 18).
        assert judge_rule.judge == ("failed" if want == "fail" else "passed")
        assert (judge_rule.final, judge_rule.route) == ("deferred", "advisory")
        assert "judge_engine_disagreement" not in res.review_reasons
        assert "judge_rule_undecided" not in res.review_reasons
        assert res.judge.fingerprint.attempts_used == 1


def test_the_run_summary_counts_agreement_without_keeping_a_decision_per_trace(tmp_path: Path) -> None:
    """Issue 19.1: a run's summary is accumulated, not its results (it held every cross-checked decision)."""
    ruleset = load_rules(SUITE / "rules.yaml")
    asked = [r.rule_id for r in ruleset.rules]
    provider = ScriptedProvider([oracle_reply(t, ruleset, asked, flip={asked[0]}) for t in suite_traces()])
    summary, stored = run_suite(tmp_path, provider, judge_mode="full")
    assert summary.agreement == agreement(stored)  # the same figures as over the stored results
    assert summary.agreement["overall"]["decisions"] == N * (len(asked) - 1)
    per_trace = [k for k, v in vars(summary).items() if isinstance(v, list | tuple) and len(v) >= N]
    assert not per_trace


def test_contextual_mode_asks_only_judge_rules_and_uses_fewer_tokens(tmp_path: Path) -> None:
    ruleset = load_rules(SUITE / "rules.yaml")
    everything = [r.rule_id for r in ruleset.rules]
    only_judge = [r.rule_id for r in ruleset.rules if r.type == "judge"]
    full = ScriptedProvider([oracle_reply(t, ruleset, everything) for t in suite_traces()])
    ctx = ScriptedProvider([oracle_reply(t, ruleset, only_judge) for t in suite_traces()])
    s_full, _ = run_suite(tmp_path / "a", full, judge_mode="full")
    s_ctx, stored = run_suite(tmp_path / "b", ctx, judge_mode="contextual")
    prompt = ctx.requests[0].static_prompt
    assert only_judge[0] in prompt and "verify-before-delete" not in prompt
    assert s_ctx.agreement["overall"]["decisions"] == 0  # nothing cross-checked in contextual mode
    assert s_ctx.tokens["input"] < s_full.tokens["input"]
    assert all(d.judge is None for res in stored for d in res.rules if d.type != "judge")


def test_a_disagreement_routes_to_review_without_changing_the_engine_outcome(tmp_path: Path) -> None:
    ruleset = load_rules(SUITE / "rules.yaml")
    asked = [r.rule_id for r in ruleset.rules]
    traces = suite_traces()
    engine = Engine(ruleset)
    failing = next(t for t in traces if any(v.severity == "critical" for v in engine.check(t).violations))
    rule_id = next(v.rule_id for v in engine.check(failing).violations if v.severity == "critical")
    replies = [oracle_reply(t, ruleset, asked, flip={rule_id} if t is failing else set()) for t in traces]
    _, stored = run_suite(tmp_path, ScriptedProvider(replies))
    res = next(r for r in stored if r.trace_id == failing.trace_id)
    d = next(d for d in res.rules if d.rule_id == rule_id)
    assert (d.engine, d.judge, d.final, d.agree) == ("failed", "passed", "failed", False)
    assert "judge_engine_disagreement" in res.review_reasons and res.verdict == "fail"


def test_a_fatal_provider_error_stops_and_resume_finishes_without_rejudging(tmp_path: Path) -> None:
    ruleset = load_rules(SUITE / "rules.yaml")
    asked = [r.rule_id for r in ruleset.rules]
    traces = suite_traces()
    replies: list[Any] = [oracle_reply(t, ruleset, asked) for t in traces[:5]]
    replies.append(ProviderError("bad key", kind="auth", provider="scripted"))
    cfg = make_cfg(tmp_path)
    with Store(cfg.store) as db:
        with pytest.raises(ProviderError):
            asyncio.run(run_traces(cfg, ruleset, traces, db, provider=ScriptedProvider(replies)))
        run_id = db.resolve_run("latest")
        assert db.completed_trace_ids(run_id) == {t.trace_id for t in traces[:5]}
        assert db.run_info(run_id).status == "interrupted"
        rest = ScriptedProvider([oracle_reply(t, ruleset, asked) for t in traces[5:]])
        summary = asyncio.run(run_traces(cfg, ruleset, traces, db, provider=rest, run_id=run_id))
        assert len(rest.requests) == N - 5 and summary.skipped_stored == 5
        assert db.completed_trace_ids(run_id) == {t.trace_id for t in traces}
        assert db.run_info(run_id).status == "completed"


def test_cli_run_with_no_model_says_the_judge_was_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in ("SEQJUDGE_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    code = run(
        ["run", str(SUITE / "rules.yaml"), str(SUITE / "traces.jsonl"), "--store", str(tmp_path / "s.db")]
    )
    out = capsys.readouterr().out
    assert code == 1
    (line,) = [x for x in out.splitlines() if "deferred (no model)" in x]
    assert line.startswith("judge rules deferred (no model): confirm-before-delete; in no verdict")
    assert "judge skipped: no model configured" in line and "stored as r" in out
    with Store(tmp_path / "s.db") as db:
        assert len(db.completed_trace_ids(db.resolve_run("latest"))) == 87


def test_cli_run_from_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    cfg = tmp_path / "seqjudge.yaml"
    cfg.write_text(
        f"rules: {SUITE / 'rules.yaml'}\ntraces: {SUITE / 'traces.jsonl'}\nstore: s.db\n"
        "threshold: 0.5\nlabel: nightly\n"
    )
    assert run(["run", str(cfg), "--format", "json"]) == 1
    totals = json.loads(capsys.readouterr().out)
    assert totals["traces"] == 87 and (tmp_path / "s.db").is_file()
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: r.yaml\ntraces: t.jsonl\nthreshhold: 0.5\n")
    assert run(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "threshhold" in err and "bad.yaml" in err and "Traceback" not in err
