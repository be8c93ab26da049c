"""Violation rates with valid intervals (issue 36): PPI++ over a run's judge calls and human labels,
stratified so that the review queue's items (not a random sample) do not bias it."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ppi_py import ppi_mean_ci

from calibrate_helpers import judge_output
from seqjudge.audit import AUDIT_REASON
from seqjudge.cli import run
from seqjudge.config import RunConfig
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.rates import human_interval, ppi_interval, rates_report, t_alpha
from seqjudge.rules.load import parse_rules
from seqjudge.runner import run_traces
from seqjudge.store import Store
from test_audit import RULES, certify_confirm, traces

TWO_JUDGED = {
    "rules": [
        *RULES["rules"],
        {"id": "cite", "type": "judge", "severity": "warning", "description": "Cite the source."},
    ]
}


def reply(trace: Any, ruleset: Any, failed: list[str], confidence: float = 0.95) -> dict[str, Any]:
    judged = [r.rule_id for r in ruleset.rules]
    out = judge_output(trace, ruleset, failed=failed, decided=judged)
    out["rule_decisions"] = [
        {"rule_id": rid, "decision": "failed" if rid in failed else "passed", "confidence": confidence}
        for rid in judged
    ]
    return out


def audited_run(
    tmp_path: Path,
    rules: dict[str, Any],
    n: int,
    fail_every: int,
    rate: float,
    *,
    sure: bool = True,
    **config: Any,
) -> tuple[Path, str]:
    """A run of ``n`` traces whose certified judge fails `confirm` on every ``fail_every``-th trace (a fail
    that stands: not queued) and passes the rest, audited at ``rate``; the judge is sure (0.95) of every
    call, or (``sure=False``) from 0.90 to 0.99 by trace, all above the certificate's 0.9."""
    ruleset = parse_rules(rules, source="<test>")
    store = tmp_path / "s.db"
    certify_confirm(store, ruleset)
    items = traces(n)
    cfg = RunConfig(
        rules="-", traces="-", store=str(store), audit_rate=rate, concurrency=2, cache=False, **config
    )
    replies = [
        reply(t, ruleset, ["confirm"] if i % fail_every == 0 else [], 0.95 if sure else 0.9 + (i % 10) / 100)
        for i, t in enumerate(items)
    ]
    with Store(store) as db:
        summary = asyncio.run(run_traces(cfg, ruleset, items, db, provider=ScriptedProvider(replies)))
    return store, summary.run_id


def label_audits(db: Store, run_id: str, count: int, *, violation_every: int) -> None:
    """People resolve the run's first ``count`` audits: every ``violation_every``-th a `confirm` violation."""
    for n, item in enumerate(db.review_items(run=run_id, reason=AUDIT_REASON)[:count]):
        rules = {"confirm": "fail"} if n % violation_every == 0 else {}
        db.resolve_review(item.id, verdict="fail" if rules else "pass", rules=rules, reviewer="t")


def test_ppi_interval_is_ppi_pythons_with_the_weights() -> None:
    y = [1.0, 0, 0, 1, 0, 0, 0, 1, 0, 0]
    yhat = [1.0, 0, 0, 0, 0, 0, 1, 1, 0, 0]
    pop = [1.0, 0, 0, 0] * 50
    w = [2.0, 2, 2, 2, 2, 4, 4, 4, 4, 4]
    got = ppi_interval(y, yhat, pop, weights=w, alpha=0.1)
    lo, hi = ppi_mean_ci(np.array(y), np.array(yhat), np.array(pop), alpha=0.1, w=np.array(w))
    assert got is not None
    assert (got.lower, got.upper) == pytest.approx((max(0, lo[0]), hi[0]))
    assert got.estimate == pytest.approx((lo[0] + hi[0]) / 2)  # the interval's own centre
    assert ppi_interval([1.0], [1.0], pop) is None  # one label: no spread to measure
    assert ppi_interval([0.0, 0.0], [0.0, 0.0], pop) is None  # no spread at all: a point, not an interval


def test_a_run_is_stratified_routed_census_audited_auto_passes_and_uncovered_fails(tmp_path: Path) -> None:
    store, run_id = audited_run(tmp_path, RULES, n=200, fail_every=10, rate=0.5)
    with Store(store) as db:
        audits = db.review_items(run=run_id, reason=AUDIT_REASON)
        assert len(audits) > 60
        # People label 40 audits; 10 of them say the judge's pass was wrong.
        for n, item in enumerate(audits[:40]):
            if n < 10:
                db.resolve_review(item.id, verdict="fail", rules={"confirm": "fail"}, reviewer="t")
            else:
                db.resolve_review(item.id, verdict="pass", reviewer="t")
        db.resolve_review(audits[40].id, verdict="fail", reviewer="t")  # says nothing of `confirm`
        report = rates_report(db, run_id, delta=0.1)
    (fig,) = report.judge
    assert report.library.startswith("ppi-python 0.2") and not report.simultaneous
    assert (fig.traces, fig.judged, fig.judge_fails) == (200, 200, 20)
    assert fig.judge_rate == pytest.approx(0.1)
    assert (fig.routed, fig.auto_passed, fig.uncovered) == (0, 180, 20)  # the judge's fails stand unqueued
    assert (fig.audits, fig.audit_labels, fig.audit_violations) == (len(audits), 40, 10)
    assert (fig.audits_open, fig.audits_unlabelled) == (len(audits) - 41, 1)
    # Every judge call on the auto-passed stratum is a pass: nothing for PPI to use; the exact humans-only
    # interval of that stratum stands, and the run's rate adds the strata.
    assert fig.method == "humans-only" and fig.alpha == 0.1 and "do not vary" in fig.why
    assert ppi_interval([1.0] * 10 + [0.0] * 30, [0.0] * 40, [0.0] * 180) is None
    auto = human_interval([True] * 10 + [False] * 30, [2.0] * 40, alpha=0.1)
    assert auto is not None and auto.estimate == pytest.approx(0.25)
    assert fig.estimate == pytest.approx((180 * auto.estimate + 20) / 200)  # the fails at the judge's call
    assert fig.lower == pytest.approx(180 * auto.lower / 200)  # ... which may all be wrong
    assert fig.upper == pytest.approx((180 * auto.upper + 20) / 200)
    assert (fig.human_lower, fig.human_upper) == (fig.lower, fig.upper)


def test_the_judges_confidence_is_the_prediction_ppi_corrects(tmp_path: Path) -> None:
    store, run_id = audited_run(tmp_path, RULES, n=200, fail_every=10, rate=0.5, sure=False)
    with Store(store) as db:
        audits = db.review_items(run=run_id, reason=AUDIT_REASON)[:40]
        for n, item in enumerate(audits):
            rules = {"confirm": "fail"} if n % 4 == 0 else {}
            db.resolve_review(item.id, verdict="fail" if rules else "pass", rules=rules, reviewer="t")
        results = {s.result.trace_id: s.result for s in db.results(run_id)}
        report = rates_report(db, run_id)
    (fig,) = report.judge
    assert fig.method == "ppi++" and fig.audit_labels == 40 and fig.audit_violations == 10

    def chance(trace_id: str) -> float:
        (d,) = [d for d in results[trace_id].rules if d.rule_id == "confirm"]
        assert d.judge == "passed" and d.confidence is not None
        return 1 - d.confidence

    passed = [t for t, r in results.items() if r.verdict == "pass"]
    auto = ppi_interval(
        [1.0 if n % 4 == 0 else 0.0 for n in range(40)],
        [chance(i.trace_id) for i in audits],
        [chance(t) for t in passed],
        weights=[2.0] * 40,
        alpha=t_alpha(0.05, 40),  # PPI++'s interval with Student's t quantile for its 40 labels
    )
    assert 0.05 > t_alpha(0.05, 40) > 0.04
    assert auto is not None and len(passed) == 180
    assert fig.lower == pytest.approx(180 * auto.lower / 200)
    assert fig.upper == pytest.approx((180 * auto.upper + 20) / 200)


def test_routed_items_are_a_census_and_open_ones_are_bounded(tmp_path: Path) -> None:
    ruleset = parse_rules(RULES, source="<test>")
    store = tmp_path / "s.db"  # no certificate: the judge's fails are advisory and routed to review
    items = traces(30)
    cfg = RunConfig(rules="-", traces="-", store=str(store), audit_rate=0.0, cache=False)
    replies = [reply(t, ruleset, ["confirm"] if i < 10 else []) for i, t in enumerate(items)]
    with Store(store) as db:
        summary = asyncio.run(run_traces(cfg, ruleset, items, db, provider=ScriptedProvider(replies)))
        queue = db.review_items(run=summary.run_id)
        routed = {i.trace_id for i in queue}
        for item in queue[:6]:
            db.resolve_review(item.id, verdict="fail", rules={"confirm": "fail"}, reviewer="t")
        report = rates_report(db, summary.run_id)
    (fig,) = report.judge
    assert fig.routed == len(routed) and fig.routed_labelled == 6 and fig.routed_violations == 6
    unknown = fig.routed_unknown + fig.uncovered
    assert fig.auto_passed == 0 and fig.method == "census"
    assert fig.lower == pytest.approx(6 / 30) and fig.upper == pytest.approx((6 + unknown) / 30)


def test_runs_show_rates_text_json_and_simultaneous_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id = audited_run(tmp_path, TWO_JUDGED, n=120, fail_every=6, rate=0.5, sure=False)
    with Store(store) as db:
        label_audits(db, run_id, 40, violation_every=4)
    args = ["runs", "show", run_id, "--rates", "--store", str(store)]
    assert run([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["simultaneous"] is True and data["delta"] == 0.05
    assert [f["rule_id"] for f in data["judge"]] == ["cite", "confirm"]
    assert all(f["alpha"] == pytest.approx(0.025) for f in data["judge"])  # Bonferroni over the 2 rules
    assert [e["rule_id"] for e in data["exact"]] == ["read-first"] and data["exact"][0]["rate"] == 0
    assert run([*args, "--format", "json", "--per-rule"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert all(f["alpha"] == 0.05 for f in alone["judge"]) and alone["simultaneous"] is False
    wide, narrow = data["judge"][1], alone["judge"][1]
    assert wide["upper"] - wide["lower"] > narrow["upper"] - narrow["lower"]
    assert run(args) == 0
    out = capsys.readouterr().out
    assert "hold together at 95% (Bonferroni: each at 97.50%)" in out and "ppi-python" in out
    for other in (["--audit"], ["--trace", "t0001"], ["--with", run_id], ["--alpha", "0.1"]):
        assert run([*args, *other]) == 2
        assert f"--rates does not take {other[0]}" in capsys.readouterr().err
    assert "confirm (judge):" in out and "by ppi++" in out and "read-first (exact): 0.0% (0 of 120" in out


def test_without_ppi_python_rates_exits_2_saying_how_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id = audited_run(tmp_path, RULES, n=10, fail_every=5, rate=0.5)
    monkeypatch.setitem(sys.modules, "ppi_py", None)  # import ppi_py now raises ImportError
    assert run(["runs", "show", run_id, "--rates", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "need ppi-python" in err and "pip install 'seqjudge[rates]'" in err and "Traceback" not in err


def test_a_rule_nobody_judged_or_labelled_has_no_interval_and_says_why(tmp_path: Path) -> None:
    from seqjudge.batch import _save
    from seqjudge.rules.engine import check

    ruleset = parse_rules(RULES, source="<test>")
    cfg = RunConfig(rules="-", traces="-", store=str(tmp_path / "s.db"), audit_rate=0.5)
    with Store(cfg.store) as db:
        run_id = db.create_run(config=cfg.model_dump(mode="json"), fingerprint={}, label=None)
        for t in traces(12):
            _save(db, run_id, cfg, t, check(t, ruleset), None)  # no judge ran
        report = rates_report(db, run_id)
    (fig,) = report.judge
    assert fig.estimate is None and fig.method == "none" and fig.judged == 0
    assert fig.why.startswith("the judge scored none of these traces") and "--audit-rate" in fig.why
    assert report.exact[0].rate == 0 and report.exact[0].traces == 12


# -- the active draw ----------------------------------------------------------------------------------------
def test_the_active_draw_favours_unsure_passes_floored_and_stores_each_probability(tmp_path: Path) -> None:
    from seqjudge.audit import ACTIVE_FLOOR, audit_draw, inclusion_probability

    assert inclusion_probability(0.1, 0.3, "uniform") == 0.1
    assert inclusion_probability(0.1, math.sqrt(0.95 * 0.05), "active") == pytest.approx(0.1)
    assert inclusion_probability(0.1, 0.0, "active") == pytest.approx(0.1 * ACTIVE_FLOOR)  # never 0
    assert inclusion_probability(0.5, 0.5, "active") == 1.0
    assert inclusion_probability(0.1, None, "active") == 0.1  # no confidence: the plain rate

    ruleset = parse_rules(RULES, source="<test>")
    store = tmp_path / "s.db"
    certify_confirm(store, ruleset)
    items = traces(300)
    confidence = {t.trace_id: 0.9 + (i % 10) / 100 for i, t in enumerate(items)}  # 0.90 .. 0.99
    cfg = RunConfig(rules="-", traces="-", store=str(store), audit_rate=0.2, audit_draw="active", cache=False)
    replies = [reply(t, ruleset, [], confidence[t.trace_id]) for t in items]
    with Store(store) as db:
        summary = asyncio.run(run_traces(cfg, ruleset, items, db, provider=ScriptedProvider(replies)))
        audits = db.review_items(run=summary.run_id, reason=AUDIT_REASON)
    expected = {}
    for t in items:
        c = confidence[t.trace_id]
        p = inclusion_probability(0.2, math.sqrt(c * (1 - c)), "active")
        if audit_draw(t.trace_id, cfg.audit_seed) < p:
            expected[t.trace_id] = p
    assert {i.trace_id: i.inclusion_probability for i in audits} == pytest.approx(expected)
    unsure = [i for i in audits if confidence[i.trace_id] < 0.93]
    sure = [i for i in audits if confidence[i.trace_id] > 0.97]
    assert len(unsure) > 2 * len(sure) > 0  # the draw went where the judge doubted, and still elsewhere too


def test_run_takes_audit_draw_active_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": RULES["rules"][:1]}))
    trace_file = tmp_path / "t.jsonl"
    trace_file.write_text("".join(t.model_dump_json() + "\n" for t in traces(20)))
    store = str(tmp_path / "s.db")
    args = ["run", str(rules), str(trace_file), "--store", store, "--audit-rate", "0.5"]
    assert run([*args, "--audit-draw", "active"]) == 0
    with Store(store) as db:
        assert db.run_info(db.resolve_run("latest")).config["audit_draw"] == "active"
    assert run([*args, "--audit-draw", "sometimes"]) == 2


# -- planning labels ----------------------------------------------------------------------------------------
def test_plan_labels_gives_the_labels_that_reach_the_width_when_the_judge_is_calibrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from seqjudge.rates import plan_labels

    store, run_id = audited_run(tmp_path, RULES, n=600, fail_every=10**6, rate=0.0, sure=False)
    with Store(store) as db:
        plan = plan_labels(db, run_id, "confirm", width=0.05, delta=0.1)
        narrower = plan_labels(db, run_id, "confirm", width=0.04, delta=0.1)
        results = [s.result for s in db.results(run_id)]
    uniform, active, human = plan.plans
    assert (plan.traces, plan.auto_passed, plan.fixed_width) == (600, 599, pytest.approx(1 / 600))
    assert uniform.labels is not None and active.labels is not None and human.labels is not None
    assert active.labels < uniform.labels < human.labels  # where the judge doubts, a label is worth more
    # Expected violations among the uniform draw's labels: its rate times the judge's chances.
    assert uniform.audit_rate is not None and uniform.violations is not None
    assert human.violations is None
    assert narrower.plans[0].labels is not None and narrower.plans[0].labels > uniform.labels
    # Check the plan: a judge whose confidence is calibrated (each pass violates with chance 1 - c), drawn
    # at the planned uniform rate, gives intervals about that wide.
    chances = np.array(
        [1 - d.confidence for r in results if r.verdict == "pass" for d in r.rules if d.rule_id == "confirm"]
    )
    assert len(chances) == 599
    assert uniform.violations == pytest.approx(uniform.audit_rate * chances.sum())
    rng = np.random.default_rng(7)
    widths = []
    for _ in range(200):
        y = (rng.random(599) < chances).astype(float)
        picked = rng.random(599) < uniform.audit_rate
        got = ppi_interval(y[picked], chances[picked], chances, alpha=0.1)
        if got is not None:
            widths.append((got.upper - got.lower) * 599 / 600 + 1 / 600)
    assert len(widths) > 150 and 0.8 * 0.05 <= np.mean(widths) <= 1.2 * 0.05

    args = ["runs", "plan-labels", run_id, "--rule", "confirm", "--width", "0.05", "--store", str(store)]
    assert run([*args, "--delta", "0.1"]) == 0
    out = capsys.readouterr().out
    assert f"uniform (PPI): about {uniform.labels} label(s)" in out and "--audit-draw active" in out
    assert f"about {uniform.violations:.1f} violation(s) among them" in out
    assert run([*args[:4], "read-first", *args[5:]]) == 2
    assert "no judge rule 'read-first'" in capsys.readouterr().err


def test_plan_labels_draws_enough_for_ppi_to_be_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: a wide interval needs few labels, but with fewer than MIN_EACH labelled violations `--rates`
    reports the humans-only interval, not the PPI++ one planned: the PPI plans draw at least that many."""
    from seqjudge.rates import MIN_EACH, plan_labels

    store, run_id = audited_run(tmp_path, RULES, n=600, fail_every=10**6, rate=0.0, sure=False)
    with Store(store) as db:
        uniform, active, human = plan_labels(db, run_id, "confirm", width=0.1, delta=0.1).plans
        far = plan_labels(db, run_id, "confirm", width=0.3, delta=0.1).plans[0]
    for p in (uniform, active):
        assert p.violations is not None and p.violations == pytest.approx(MIN_EACH, rel=1e-6)
        assert p.note.startswith("raised from ") and "as PPI++ needs" in p.note
    assert far.labels == uniform.labels  # wider asks no fewer: the violations PPI++ needs decide
    assert human.labels is not None and human.labels < uniform.labels and human.note == ""
    args = ["runs", "plan-labels", run_id, "--rule", "confirm", "--width", "0.1", "--delta", "0.1"]
    assert run([*args, "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert (
        f"uniform (PPI): about {uniform.labels} label(s)" in out and "so that 10 violations and passes" in out
    )


def test_plan_labels_says_when_unreachable_traces_alone_are_too_wide(tmp_path: Path) -> None:
    from seqjudge.rates import plan_labels

    store, run_id = audited_run(tmp_path, RULES, n=100, fail_every=10, rate=0.0, sure=False)
    with Store(store) as db:
        plan = plan_labels(db, run_id, "confirm", width=0.04, delta=0.05)
    assert plan.fixed_width == pytest.approx(0.1) and plan.plans == []
    assert "alone make the interval 10.0% wide" in plan.why and "fails: true" in plan.why


# -- compare ------------------------------------------------------------------------------------------------
def test_compare_rates_gives_the_change_in_violation_rate_with_its_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for fail_every in (10, 4):  # the candidate's judge fails `confirm` on a quarter of the traces, not 10%
        store, run_id = audited_run(
            tmp_path, RULES, n=200, fail_every=fail_every, rate=0.5, sure=False, review={"fails": True}
        )
        runs.append(run_id)
        with Store(store) as db:
            for item in db.review_items(run=run_id, reason="judge_fail"):  # the queued fails: a census
                db.resolve_review(item.id, verdict="fail", rules={"confirm": "fail"}, reviewer="t")
            for n, item in enumerate(db.review_items(run=run_id, reason=AUDIT_REASON)):
                rules = {"confirm": "fail"} if n % 20 == 0 else {}
                db.resolve_review(item.id, verdict="fail" if rules else "pass", rules=rules, reviewer="t")
    with Store(store) as db:
        from seqjudge.rates import compare_rates

        direct = compare_rates(db, runs[0], runs[1], delta=0.05)
        base = rates_report(db, runs[0], delta=0.025, simultaneous=False).judge[0]
        cand = rates_report(db, runs[1], delta=0.025, simultaneous=False).judge[0]
    (row,) = direct.rules
    assert base.routed == 20 and cand.routed == 50 and base.routed_labelled == 20
    assert row.difference == pytest.approx(cand.estimate - base.estimate)
    assert (row.lower, row.upper) == pytest.approx((cand.lower - base.upper, cand.upper - base.lower))
    assert row.lower is not None and row.lower > 0  # the rise is real, at 95% for both sides together

    args = ["compare", runs[0], runs[1], "--rates", "--store", str(store)]
    run([*args, "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert data["rates"]["rules"][0]["lower"] == pytest.approx(row.lower) and "judge" in data
    run(args)
    out = capsys.readouterr().out
    assert "violation rates, candidate minus baseline (95% intervals" in out
    assert f"confirm: {base.estimate:.1%} -> {cand.estimate:.1%}: +" in out

    exported = tmp_path / "base.jsonl"
    assert run(["runs", "export", runs[0], "-o", str(exported), "--store", str(store)]) == 0
    capsys.readouterr()
    assert run(["compare", str(exported), runs[1], "--rates", "--store", str(store)]) == 2
    assert "an exported file holds none" in capsys.readouterr().err


def test_few_labelled_violations_give_the_exact_interval_not_a_narrow_normal_one(tmp_path: Path) -> None:
    """No violation among 40 audits: PPI's normal interval would be nearly a point at 0; the exact one
    stands, and says why."""
    store, run_id = audited_run(tmp_path, RULES, n=200, fail_every=10**6, rate=0.5, sure=False)
    with Store(store) as db:
        for item in db.review_items(run=run_id, reason=AUDIT_REASON)[:40]:
            db.resolve_review(item.id, verdict="pass", reviewer="t")
        (fig,) = rates_report(db, run_id).judge
        chances = [1 - d.confidence for s in db.results(run_id) for d in s.result.rules if d.confidence]
    assert fig.method == "humans-only" and "holds its level only from 10 of each" in fig.why
    assert (fig.lower, fig.upper) == (fig.human_lower, fig.human_upper)
    assert fig.upper is not None and fig.upper > 0.05  # the exact upper bound of 0 in 40 is about 8.8%
    narrow = ppi_interval([0.0] * 40, chances[:40], chances)  # what PPI alone would have said
    assert narrow is not None and narrow.upper < 0.05


def test_the_output_says_which_method_gave_each_interval_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: 6 labelled violations among 40 (PPI++ from 5 of each missed too often there): the text, the
    JSON and the HTML report name the humans-only method, why, and the boundary."""
    store, run_id = audited_run(tmp_path, RULES, n=200, fail_every=10**6, rate=0.5, sure=False)
    with Store(store) as db:
        label_audits(db, run_id, 40, violation_every=7)
    args = ["runs", "show", run_id, "--rates", "--store", str(store)]
    assert run([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (figure,) = data["judge"]
    assert data["min_each"] == 10 and figure["audit_violations"] == 6 and figure["method"] == "humans-only"
    why = "6 violation(s) and 34 pass(es) among the audits' labels: PPI's normal interval holds its level"
    assert figure["why"].startswith(why)
    assert run(args) == 0
    out = capsys.readouterr().out
    assert "by humans-only" in out and why in out
    assert "PPI++ (t quantile) from 10 labelled violations and 10 passes" in out
    page = tmp_path / "report.html"
    assert run(["report", run_id, "--store", str(store), "-o", str(page)]) == 0
    row = page.read_text(encoding="utf-8").split('<tr data-rule="confirm">')[1].split("</tr>")[0]
    assert "humans-only" in row and "6 violation(s) and 34 pass(es)" in row


def test_the_html_report_shows_the_runs_rates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 36, point 1: the rates `runs show --rates` gives are on the run's HTML report too."""
    store, run_id = audited_run(tmp_path, TWO_JUDGED, n=120, fail_every=6, rate=0.5, sure=False)
    with Store(store) as db:
        label_audits(db, run_id, 30, violation_every=5)
    assert run(["runs", "show", run_id, "--rates", "--store", str(store), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    page = tmp_path / "report.html"
    assert run(["report", run_id, "--store", str(store), "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert 'id="rates"' in html and "Violation rates" in html
    for figure in data["judge"]:
        row = html[html.index(f'<tr data-rule="{figure["rule_id"]}">') :].split("</tr>")[0]
        if figure["lower"] is not None:
            assert f"[{100 * figure['lower']:.1f}%, {100 * figure['upper']:.1f}%]" in row
        assert figure["method"] in row
    assert '<tr data-rule="read-first">' in html


def test_the_html_report_says_how_to_get_rates_without_ppi_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id = audited_run(tmp_path, TWO_JUDGED, n=30, fail_every=6, rate=0.5, sure=False)
    monkeypatch.setitem(sys.modules, "ppi_py", None)  # as if not installed: the page is still written
    page = tmp_path / "report.html"
    assert run(["report", run_id, "--store", str(store), "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert 'id="rates-note"' in html and "pip install &#39;seqjudge[rates]&#39;" in html
