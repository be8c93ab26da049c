"""Audit sampling (issue 18, part 5): a seeded share of auto-passed traces goes to review with reason
`audit` and its inclusion probability; resolved audits estimate the live false-pass rate with an interval,
checked against α."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from calibrate_helpers import judge_output
from seqjudge.audit import (
    AUDIT_REASON,
    Draw,
    apply_audit,
    audit_draw,
    audit_report,
    estimate,
)
from seqjudge.bounds import clopper_pearson_interval
from seqjudge.cli import run
from seqjudge.config import DEFAULT_AUDIT_SEED, RunConfig
from seqjudge.crosscheck import reconcile
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.rules.engine import check
from seqjudge.rules.load import parse_rules
from seqjudge.runner import run_traces
from seqjudge.store import Store
from seqjudge.trace import Trace

RULES = {
    "rules": [
        {"id": "read-first", "type": "before", "first": "Read", "then": "Write", "severity": "critical"},
        {"id": "confirm", "type": "judge", "severity": "critical", "description": "Confirm before writing."},
    ]
}
ENGINE_ONLY = {"rules": RULES["rules"][:1]}


def traces(n: int, *, failing: int = 0) -> list[Trace]:
    """``n`` traces that pass read-first, and ``failing`` more that break it."""
    read, write = {"tool_name": "Read"}, {"tool_name": "Write"}
    good = [Trace.model_validate({"trace_id": f"t{i:04d}", "calls": [read, write]}) for i in range(n)]
    bad = [Trace.model_validate({"trace_id": f"bad{i}", "calls": [write]}) for i in range(failing)]
    return good + bad


def write_suite(tmp_path: Path, rules: dict[str, Any], items: list[Trace]) -> tuple[Path, Path]:
    rules_path = tmp_path / "rules.json"
    rules_path.write_text(json.dumps(rules))
    traces_path = tmp_path / "traces.jsonl"
    traces_path.write_text("".join(t.model_dump_json() + "\n" for t in items))
    return rules_path, traces_path


# -- the draw -----------------------------------------------------------------------------------------------
def test_the_draw_is_fixed_by_seed_and_trace_and_close_to_the_rate() -> None:
    ruleset = parse_rules(ENGINE_ONLY, source="<test>")
    results = [reconcile(check(t, ruleset)) for t in traces(4000)]
    audited = [apply_audit(r, 0.05, 7) for r in results]
    picked = {r.trace_id for r in audited if AUDIT_REASON in r.review_reasons}
    # Binomial(4000, 0.05): mean 200, sd 13.8; the draw is a hash, so this is the same every time.
    assert 150 <= len(picked) <= 250
    assert picked == {r.trace_id for r in results if audit_draw(r.trace_id, 7) < 0.05}
    again = {r.trace_id for r in (apply_audit(r, 0.05, 7) for r in reversed(results)) if r.review_reasons}
    assert again == picked  # order does not matter
    other = {r.trace_id for r in (apply_audit(r, 0.05, 8) for r in results) if r.review_reasons}
    assert other != picked and len(other & picked) < len(picked) / 2  # another seed, another sample
    for r in audited:
        if r.trace_id in picked:
            assert r.verdict == "pass" and r.review_reasons == ["audit"] and r.audit_probability == 0.05
        else:
            assert r.review_reasons == [] and r.audit_probability is None


def test_only_auto_passed_traces_are_audited() -> None:
    ruleset = parse_rules(ENGINE_ONLY, source="<test>")
    failing = [reconcile(check(t, ruleset)) for t in traces(0, failing=50)]
    assert all(r.verdict == "fail" for r in failing)
    assert all(apply_audit(r, 1.0, 1) == r for r in failing)
    ruleset = parse_rules(RULES, source="<test>")
    deferred = reconcile(check(traces(1)[0], ruleset))  # the judge rule undecided: already in review
    assert deferred.verdict == "review" and apply_audit(deferred, 1.0, 1) == deferred
    assert (
        apply_audit(
            reconcile(check(traces(1)[0], parse_rules(ENGINE_ONLY, source="x"))), 0.0, 1
        ).review_reasons
        == []
    )


# -- the estimate -------------------------------------------------------------------------------------------
def test_one_rate_gives_the_plain_share_and_flags_against_alpha() -> None:
    draws = [Draw(0.1, i < 3) for i in range(20)] + [Draw(0.1, None)] * 4
    fig = estimate(draws, alpha=0.01, scope="trace")
    assert (fig.audited, fig.resolved, fig.open, fig.false_passes) == (24, 20, 4, 3)
    assert fig.estimate == pytest.approx(0.15) and fig.effective_n == pytest.approx(20)
    assert (fig.lower, fig.upper) == pytest.approx(clopper_pearson_interval(3, 20, 0.95))
    assert fig.lower > 0.01 and fig.drift == "above_alpha"
    assert estimate(draws, alpha=0.6, scope="trace").drift == "within_alpha"
    assert estimate(draws, alpha=0.15, scope="trace").drift == "undetermined"
    assert estimate(draws, alpha=None, scope="trace").drift == "no_alpha"
    assert estimate([Draw(0.1, None)], alpha=0.05, scope="trace").drift == "no_data"


def test_pooled_runs_at_different_rates_are_weighted_by_one_over_p() -> None:
    # Run A audited at 0.5: 4 resolved, 1 false pass; run B at 0.1: 2 resolved, 1 false pass. Each audit
    # stands for 1/p traces: (2 + 10) / (4 * 2 + 2 * 10) = 12 / 28, not the plain 2 / 6.
    draws = [Draw(0.5, i == 0) for i in range(4)] + [Draw(0.1, i == 0) for i in range(2)]
    fig = estimate(draws, alpha=0.05, scope="trace")
    assert fig.estimate == pytest.approx(12 / 28)
    assert fig.effective_n == pytest.approx(28**2 / (4 * 4 + 2 * 100))  # Kish: 3.63
    # Conservative rounding: upper on (ceil k, floor n), lower on (floor k, ceil n).
    k_eff = 12 / 28 * fig.effective_n
    assert fig.upper == pytest.approx(clopper_pearson_interval(math.ceil(k_eff), 3, 0.95)[1])
    assert fig.lower == pytest.approx(clopper_pearson_interval(math.floor(k_eff), 4, 0.95)[0])


def confident_pass(trace: Trace, ruleset: Any) -> dict[str, Any]:
    """The judge passes both rules at confidence 0.95."""
    reply = judge_output(trace, ruleset, failed=[], decided=["read-first", "confirm"])
    reply["rule_decisions"] = [
        {"rule_id": rid, "decision": "passed", "confidence": 0.95} for rid in ("read-first", "confirm")
    ]
    return reply


def certify_confirm(store: Path, ruleset: Any, model: str = "scripted:scripted", **fields: Any) -> None:
    """A certificate auto-passing `confirm` from confidence 0.9 (alpha and delta 0.05 unless given)."""
    from calibrate_helpers import save_test_certificate
    from seqjudge.certificate import CertifiedRule

    alpha, delta = fields.get("alpha", 0.05), fields.get("delta", 0.05)
    entry = CertifiedRule(rule_id="confirm", risk_level="medium", auto_pass=0.9, alpha=alpha, delta=delta)
    save_test_certificate(store, ruleset, [entry], model=model, dataset="golden", alpha=alpha, delta=delta)


# -- end to end ---------------------------------------------------------------------------------------------
def test_run_audits_a_share_keeps_the_exit_code_and_runs_show_estimates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    rules, trace_file = write_suite(tmp_path, ENGINE_ONLY, traces(200))
    store = str(tmp_path / "s.db")
    assert run(["run", str(rules), str(trace_file), "--store", store, "--audit-rate", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "routed to review: audit" in out  # the summary counts them; the gate still passes every trace
    with Store(store) as db:
        run_id = db.resolve_run("latest")
        assert db.run_info(run_id).config["audit_seed"] == DEFAULT_AUDIT_SEED  # stored, so it can be redrawn
        items = db.review_items(run=run_id)
    expected = {t.trace_id for t in traces(200) if audit_draw(t.trace_id, DEFAULT_AUDIT_SEED) < 0.1}
    assert {i.trace_id for i in items} == expected and len(expected) >= 10
    assert all(i.reasons == ["audit"] and i.inclusion_probability == 0.1 for i in items)
    assert run(["review", "list", "--reason", "audit", "--store", store]) == 0
    assert capsys.readouterr().out.count("audit (p=0.1)") == len(items)

    assert run(["runs", "show", "latest", "--audit", "--alpha", "0.05", "--store", store]) == 0
    assert "no resolved audit yet" in capsys.readouterr().out
    for n, item in enumerate(items[:10]):
        verdict = "fail" if n < 3 else "pass"
        assert (
            run(
                ["review", "resolve", str(item.id), "--verdict", verdict, "--reviewer", "t", "--store", store]
            )
            == 0
        )
    capsys.readouterr()
    code = run(["runs", "show", "latest", "--audit", "--alpha", "0.01", "--store", store])
    out = capsys.readouterr().out
    assert code == 1  # 3 of 10 audited passes were wrong: the lower bound is far above α = 0.01
    assert "200 auto-passed" in out and f"{len(items)} audited, 10 resolved" in out
    assert "3 false pass(es): 30.0%" in out and "DRIFT" in out and f"{len(items) - 10} audit(s) open" in out
    assert (
        run(["runs", "show", "latest", "--audit", "--alpha", "0.9", "--store", store, "--format", "json"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    lo, hi = clopper_pearson_interval(3, 10, 0.95)
    assert data["overall"]["lower"] == pytest.approx(lo) and data["overall"]["upper"] == pytest.approx(hi)
    assert data["overall"]["drift"] == "within_alpha"


def test_audits_pool_across_runs_and_count_per_judge_rule(tmp_path: Path) -> None:
    ruleset = parse_rules(RULES, source="<test>")
    items = traces(120)
    store = tmp_path / "s.db"
    run_ids = []
    certify_confirm(store, ruleset)
    for rate in (0.5, 0.1):
        cfg = RunConfig(rules="-", traces="-", store=str(store), audit_rate=rate, concurrency=3, cache=False)
        replies = [confident_pass(t, ruleset) for t in items]
        with Store(store) as db:
            summary = asyncio.run(run_traces(cfg, ruleset, items, db, provider=ScriptedProvider(replies)))
        run_ids.append(summary.run_id)
    with Store(store) as db:
        audits = {r: db.review_items(run=r, reason="audit") for r in run_ids}
        # Run A: the first audit fails the judge rule; one more fails the trace without saying which rule.
        a, b = audits[run_ids[0]], audits[run_ids[1]]
        db.resolve_review(a[0].id, verdict="fail", rules={"confirm": "fail"}, reviewer="t")
        db.resolve_review(a[1].id, verdict="fail", reviewer="t")
        for item in a[2:6]:
            db.resolve_review(item.id, verdict="pass", reviewer="t")
        db.resolve_review(b[0].id, verdict="fail", rules={"confirm": "fail"}, reviewer="t")
        db.resolve_review(b[1].id, verdict="pass", reviewer="t")
        report = audit_report(db, run_ids, alpha=0.05)
    assert report.auto_passed == 240 and report.rates == {run_ids[0]: [0.5], run_ids[1]: [0.1]}
    overall = report.overall
    assert (overall.resolved, overall.false_passes) == (8, 3)
    assert overall.estimate == pytest.approx((2 + 2 + 10) / (6 * 2 + 2 * 10))
    (confirm,) = report.by_rule
    assert confirm.scope == "confirm" and confirm.unlabelled == 1  # the bare fail says nothing of the rule
    assert (confirm.resolved, confirm.false_passes) == (7, 2)
    assert confirm.estimate == pytest.approx((2 + 10) / (5 * 2 + 2 * 10))


def test_runs_show_audit_takes_alpha_from_the_runs_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ruleset = parse_rules(RULES, source="<test>")
    rules_file, _ = write_suite(tmp_path, RULES, [])
    items = traces(60)
    store = tmp_path / "s.db"
    certify_confirm(store, ruleset, model="scripted:audited", alpha=0.02, delta=0.1)
    cfg = RunConfig(
        rules=str(rules_file),
        traces="-",
        store=str(store),
        model="scripted:audited",
        audit_rate=0.2,
        cache=False,
    )
    replies = [confident_pass(t, ruleset) for t in items]  # auto-passed under the certificate's 0.9
    with Store(store) as db:
        summary = asyncio.run(run_traces(cfg, ruleset, items, db, provider=ScriptedProvider(replies)))
        items_ = db.review_items(run=summary.run_id, reason="audit")
        for item in items_:
            db.resolve_review(item.id, verdict="pass", reviewer="t")
    assert run(["runs", "show", "latest", "--audit", "--store", str(store), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["alpha_source"].startswith("α 0.02 from the certificate (scripted:audited, golden,")
    assert data["delta"] == 0.1 and data["overall"]["alpha"] == 0.02
    assert data["by_rule"][0]["scope"] == "confirm" and data["by_rule"][0]["alpha"] == 0.02
    # No failure in every resolved audit: the 90% upper bound is (1 - 0.05 ** (1 / n)), still above 0.02.
    n = len(items_)
    assert data["overall"]["upper"] == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-6)
    assert data["overall"]["drift"] == "undetermined"


@pytest.mark.parametrize("rates", [(0.1,), (0.05, 0.3)])
def test_the_interval_covers_the_true_false_pass_rate_in_simulation(rates: tuple[float, ...]) -> None:
    """Seeded: populations of auto-passed traces with a known false-pass rate, audited at ``rates`` (one run
    per rate, pooled); the 90% interval should miss the truth in about 10% of draws at most (exact intervals
    are conservative), with slack for 400 draws (3 standard errors)."""
    import random

    rng = random.Random(20261201)
    truth, size, delta, draws_n = 0.04, 1500, 0.1, 400
    misses = 0
    for _ in range(draws_n):
        draws = []
        for rate in rates:
            for _ in range(size):
                if rng.random() < rate:
                    draws.append(Draw(rate, rng.random() < truth))
        fig = estimate(draws, alpha=None, delta=delta, scope="trace")
        assert fig.lower is not None and fig.upper is not None
        misses += not (fig.lower <= truth <= fig.upper)
    assert misses / draws_n <= delta + 3 * math.sqrt(delta * (1 - delta) / draws_n)


def test_a_batch_run_audits_its_collected_traces_the_same_way(tmp_path: Path) -> None:
    from seqjudge.batch import _save

    ruleset = parse_rules(ENGINE_ONLY, source="<test>")
    cfg = RunConfig(rules="-", traces="-", store=str(tmp_path / "s.db"), audit_rate=0.5, audit_seed=3)
    items = traces(40)
    with Store(cfg.store) as db:
        run_id = db.create_run(config=cfg.model_dump(mode="json"), fingerprint={}, label=None)
        for t in items:
            _save(db, run_id, cfg, t, check(t, ruleset), None)
        audited = {i.trace_id for i in db.review_items(run=run_id, reason="audit")}
    assert audited == {t.trace_id for t in items if audit_draw(t.trace_id, 3) < 0.5} and audited
