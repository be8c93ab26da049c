"""Golden datasets and `seqjudge calibrate`: selection, kappa, bootstrap, repeats, validation, a full run."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from calibrate_helpers import ByTraceProvider, judge_output, label_replies
from seqjudge.calibrate import (
    ABOVE_ONE,
    Settings,
    calibrate,
    kappa_against_labels,
    majority_score,
    percentile_interval,
    select,
    sweep,
    writable,
)
from seqjudge.calibrate_runs import calibrate_golden, write_thresholds
from seqjudge.cli import run
from seqjudge.config import load_config
from seqjudge.golden import cross_check, load_dataset, validate
from seqjudge.judge.providers import ProviderProfile, registry

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "golden_traces"

# The hand-computed case. Known-fail traces score 0.0, 0.0, 0.5, 0.9; known-pass traces 0.8, 1.0, 1.0, 1.0.
SCORES = {"f1": 0.0, "f2": 0.0, "f3": 0.5, "f4": 0.9, "p1": 0.8, "p2": 1.0, "p3": 1.0, "p4": 1.0}
LABELS = {t: "fail" if t.startswith("f") else "pass" for t in SCORES}


def rows_by_threshold(settings: Settings | None = None) -> dict[float, Any]:
    return {r.threshold: r for r in sweep(SCORES, LABELS, settings)}


# -- the sweep, kappa and selection against hand-computed numbers ------------------------------------------
def test_sweep_against_hand_computed_figures() -> None:
    rows = rows_by_threshold(Settings(cost_fn=1, cost_fp=1))
    # Candidates: 0, the observed scores, and just above 1.
    assert list(rows) == [0.0, 0.5, 0.8, 0.9, 1.0, ABOVE_ONE]
    got = {t: (r.flagged, r.tp, r.fp, r.fn, r.tn) for t, r in rows.items()}
    assert got == {
        0.0: (0, 0, 0, 4, 4),  # nothing is below 0
        0.5: (2, 2, 0, 2, 4),  # f1, f2
        0.8: (3, 3, 0, 1, 4),  # + f3
        0.9: (4, 3, 1, 1, 3),  # + p1 (0.8): a false alarm
        1.0: (5, 4, 1, 0, 3),  # + f4 (0.9)
        ABOVE_ONE: (8, 4, 4, 0, 0),  # everything
    }
    r = rows[0.8]
    # precision 3/3, recall 3/4, F1 = 2*3 / (2*3 + 0 + 1) = 6/7, false-pass 1/4, false-alarm 0, J = 0.75.
    assert (r.precision, r.recall, r.false_pass_rate, r.false_alarm_rate, r.youden) == (
        1.0,
        0.75,
        0.25,
        0.0,
        0.75,
    )
    assert r.f1 == pytest.approx(6 / 7)
    r = rows[1.0]
    # precision 4/5, recall 1, F1 = 8/9, false-pass 0, false-alarm 1/4, J = 0.75, cost 1*0 + 1*1 = 1.
    assert (r.precision, r.recall, r.false_pass_rate, r.false_alarm_rate, r.cost) == (
        0.8,
        1.0,
        0.0,
        0.25,
        1.0,
    )
    assert r.f1 == pytest.approx(8 / 9)
    assert rows[0.0].precision is None  # nothing flagged: precision undefined, not 0
    assert rows[0.0].false_pass_rate == 1.0
    assert not rows[ABOVE_ONE].selectable and rows[1.0].selectable


def test_kappa_against_hand_computed_figures() -> None:
    rows = rows_by_threshold()
    # t=0.5: p_o = 6/8; flagged 2/8, fail 4/8: p_e = .5*.25 + .5*.75 = .5; kappa = (.75-.5)/.5 = .5
    assert rows[0.5].kappa == pytest.approx(0.5)
    # t=0.8: p_o = 7/8; p_e = .5*.375 + .5*.625 = .5; kappa = .75
    assert rows[0.8].kappa == pytest.approx(0.75)
    # t=0: nothing flagged: p_o = .5 = p_e: kappa 0. Above 1: everything flagged: kappa 0.
    assert rows[0.0].kappa == pytest.approx(0.0) and rows[ABOVE_ONE].kappa == pytest.approx(0.0)
    # The same figure as seqjudge.crosscheck.cohen_kappa over the (label fail, flagged) pairs.
    for t, r in rows.items():
        assert kappa_against_labels(SCORES, LABELS, t).kappa == pytest.approx(r.kappa)


@pytest.mark.parametrize(
    ("settings", "expected", "fallback"),
    [
        # Default: the lowest threshold with false-pass <= 5%: only 1.0 (false-pass 0) qualifies.
        (Settings(), 1.0, False),
        # With a 25% target, 0.8 (false-pass 1/4) is the lowest that qualifies.
        (Settings(max_false_pass=0.25), 0.8, False),
        # Best F1: 8/9 at 1.0 beats 6/7 at 0.8.
        (Settings(objective="f1"), 1.0, False),
        # Youden: 0.75 at both 0.8 and 1.0: the tie goes to the lowest threshold.
        (Settings(objective="youden"), 0.8, False),
        # Cost 1 per miss, 1 per false alarm: 0.8 costs 1 (one miss), 1.0 costs 1 (one alarm): tie -> 0.8.
        (Settings(objective="cost", cost_fn=1, cost_fp=1), 0.8, False),
        # A miss costs 5: 0.8 costs 5, 1.0 costs 1.
        (Settings(objective="cost", cost_fn=5, cost_fp=1), 1.0, False),
        # Recall >= 0.7: 0.8 (precision 1), 0.9 (0.75), 1.0 (0.8): the best precision is at 0.8.
        (Settings(objective="target-recall", target_recall=0.7), 0.8, False),
        (Settings(objective="target-recall", target_recall=1.0), 1.0, False),
        # The high level: the lowest false-pass, ties to the highest threshold: 1.0.
        (Settings(objective="lowest-false-pass"), 1.0, False),
    ],
)
def test_each_objective_on_the_hand_computed_case(
    settings: Settings, expected: float, fallback: bool
) -> None:
    row, why = select(sweep(SCORES, LABELS, settings), settings.objective, settings)
    assert row.threshold == expected
    assert (why is not None) == fallback


def test_unreachable_target_falls_back_to_f1_and_says_so() -> None:
    # A known-fail trace scores 1.0: no threshold up to 1.0 flags it, so false-pass is at least 1/4.
    scores = {**SCORES, "f4": 1.0}
    cal = calibrate(scores, LABELS, Settings(resamples=200))
    assert cal.selection.fallback is not None and "fell back to the best F1" in cal.selection.fallback
    # F1: at 0.8 -> 6/7 (tp 3, fn 1); at 1.0 -> tp 3, fp 1, fn 1: 6/8. Best F1 is 0.8.
    assert cal.selection.threshold == 0.8
    target = calibrate(scores, LABELS, Settings(objective="target-recall", target_recall=1.0, resamples=200))
    assert target.selection.fallback is not None and "recall of 100.0%" in target.selection.fallback


def test_majority_score_is_the_vote_at_every_threshold() -> None:
    assert majority_score([0.0, 1.0, 0.0]) == 0.0
    assert majority_score([1.0, 0.0, 1.0]) == 1.0
    assert majority_score([0.2, 0.9]) == 0.2  # an even split counts as flagged
    for scores in ([0.0, 0.5, 1.0], [0.3, 0.3, 0.9], [1.0, 0.2, 0.7, 0.7, 0.1]):
        for t in (0.1, 0.25, 0.5, 0.8, 1.0):
            majority = sum(s < t for s in scores) * 2 > len(scores)
            assert (majority_score(scores) < t) == majority


def test_writable_thresholds_keep_what_they_flag() -> None:
    assert writable(5 / 6, [0.0, 5 / 6, 1.0]) == 0.8333  # rounded down: flags the same observed scores
    assert writable(0.12345, [0.12341, 0.2]) == 0.12345  # 0.1234 would stop flagging 0.12341: kept exact
    assert writable(1.0, [0.0]) == 1.0


# -- bootstrap ---------------------------------------------------------------------------------------------
def test_bootstrap_is_reproducible_with_a_seed() -> None:
    # Overlapping scores with many distinct values: the intervals depend on the resamples drawn.
    scores = {f"f{i}": round(i / 40, 4) for i in range(30)} | {
        f"p{i}": round((i + 12) / 41, 4) for i in range(29)
    }
    labels = {t: "fail" if t.startswith("f") else "pass" for t in scores}
    a = calibrate(scores, labels, Settings(seed=7, resamples=300)).model_dump()
    b = calibrate(scores, labels, Settings(seed=7, resamples=300)).model_dump()
    assert a == b
    c = calibrate(scores, labels, Settings(seed=8, resamples=300)).model_dump()
    assert a["sweep"] == c["sweep"]  # the data's own figures do not depend on the seed
    assert a["selection"]["threshold"] == c["selection"]["threshold"]
    assert a["selection"]["intervals"] != c["selection"]["intervals"]  # the resamples do


def test_interval_contains_the_estimate_and_uses_nearest_ranks() -> None:
    assert percentile_interval([float(i) for i in range(1, 101)]) == (3.0, 98.0)  # ceil(2.5)=3, ceil(97.5)=98
    assert percentile_interval([]) is None
    cal = calibrate(SCORES, LABELS, Settings(resamples=1000))
    for choice in (cal.selection, *cal.recommendations.values()):
        lo, hi = choice.intervals["threshold"]
        assert lo <= choice.threshold <= hi


def test_small_dataset_says_the_interval_is_wide() -> None:
    cal = calibrate(SCORES, LABELS, Settings(resamples=500))
    assert cal.selection.wide
    said = " ".join(cal.selection.warnings)
    assert "only 4 known-fail trace(s)" in said and "is wide" in said


def test_large_clean_dataset_is_not_called_wide() -> None:
    scores = {f"f{i}": 0.0 for i in range(40)} | {f"p{i}": 1.0 for i in range(40)}
    labels = {t: "fail" if t.startswith("f") else "pass" for t in scores}
    cal = calibrate(scores, labels, Settings(resamples=300))
    assert cal.selection.threshold == 1.0 and cal.selection.row.false_pass_rate == 0.0
    assert not cal.selection.wide and cal.selection.warnings == []
    assert cal.selection.intervals["false_pass_rate"] == (0.0, 0.0)


def test_calibration_needs_both_kinds_of_label() -> None:
    with pytest.raises(ValueError, match="known-fail and known-pass"):
        calibrate({"a": 0.0}, {"a": "fail"})


# -- golden datasets ---------------------------------------------------------------------------------------
RULES = """\
rules:
  - id: lookup-required
    type: require
    tool: Lookup
  - id: email-limit
    type: max_calls
    tool: SendEmail
    max: 1
    severity: warning
  - id: confirm-before-delete
    type: judge
    description: Confirm with the user before deleting a customer.
"""


def tiny_dataset(root: Path, labels: list[dict[str, Any]] | None = None) -> Path:
    """Four traces a..d (each looks up and deletes its own customer), labelled a pass, b fail, c fail, d pass
    on the judge rule."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "rules.yaml").write_text(RULES)
    traces = [
        {
            "trace_id": t,
            "calls": [
                {"tool_name": "Lookup", "arguments": {"customer_id": f"C-{t}"}},
                {"tool_name": "Delete", "arguments": {"customer_id": f"C-{t}"}},
            ],
        }
        for t in "abcd"
    ]
    (root / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    if labels is None:
        verdict = {"a": "pass", "b": "fail", "c": "fail", "d": "pass"}
        labels = [
            {
                "trace_id": t,
                "verdict": v,
                "rules": {"lookup-required": "pass", "confirm-before-delete": v},
                "labeler": "test",
            }
            for t, v in verdict.items()
        ]
    (root / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return root


def test_shipped_datasets_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("customer-support", "tau-retail", "tau-airline"):
        assert [p.render() for p in validate(GOLDEN / name) if p.level == "error"] == []
        assert run(["golden", "validate", str(GOLDEN / name)]) == 0
    assert "ok: the dataset can be used" in capsys.readouterr().out


def test_label_contradicting_the_engine_is_reported_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tiny_dataset(tmp_path / "ds")
    lines = (root / "labels.jsonl").read_text().splitlines()
    # Trace c does call Lookup, but its label says the require rule failed.
    record = json.loads(lines[2])
    record["rules"]["lookup-required"] = "fail"
    lines[2] = json.dumps(record)
    (root / "labels.jsonl").write_text("\n".join(lines) + "\n")
    assert [p for p in validate(root) if p.level == "error"] == []
    found = cross_check(load_dataset(root))
    assert [(c.trace_id, c.rule_id, c.label, c.engine, c.line) for c in found] == [
        ("c", "lookup-required", "fail", "passed", 3)
    ]
    assert found[0].explanation  # the engine's own explanation comes with it
    assert run(["golden", "validate", str(root)]) == 0
    out = capsys.readouterr().out
    assert "labels.jsonl, line 3: label contradicts the engine: trace c, rule lookup-required" in out
    assert "1 label(s) contradict the engine" in out
    assert run(["golden", "validate", str(root), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["contradictions"][0]["engine"] == "passed"


def test_tau_airline_labels_agree_with_the_engine_on_every_deterministic_rule() -> None:
    """Issue 33, point 3: the four labels that once contradicted the engine by design (a reservation the
    trace itself booked counts as read) agree with it, because the suite's rules say what the policy means
    (lineage rules: the id came from a lookup of it or from the trace's own booking)."""
    dataset = load_dataset(GOLDEN / "tau-airline")
    assert cross_check(dataset) == []
    lineage = {r.rule_id for r in dataset.ruleset.rules if r.type == "lineage"}
    assert {"reservation-details-before-cancel", "reservation-details-before-baggage-change"} <= lineage


def _edit_labels(root: Path, edit: Any) -> None:
    lines = (root / "labels.jsonl").read_text().splitlines()
    (root / "labels.jsonl").write_text("\n".join(edit(lines)) + "\n")


def _set(index: int, **changes: Any) -> Any:
    def edit(lines: list[str]) -> list[str]:
        record = json.loads(lines[index])
        record.update(changes)
        lines[index] = json.dumps(record)
        return lines

    return edit


@pytest.mark.parametrize(
    ("edit", "where", "says"),
    [
        (
            lambda ls: [*ls, json.dumps({"trace_id": "zzz", "verdict": "pass"})],
            "labels.jsonl, line 5",
            "names trace zzz, which is not in traces.jsonl",
        ),
        (lambda ls: ls[:3], "traces.jsonl, line 4", "trace d has no label"),
        (_set(1, rules={"no-such-rule": "fail"}), "labels.jsonl, line 2", "rule no-such-rule is not a rule"),
        (_set(1, verdict="maybe"), "labels.jsonl, line 2", 'verdict is "maybe", not pass or fail'),
        (_set(1, rules={"lookup-required": "unsure"}), "labels.jsonl, line 2", 'labelled "unsure"'),
        (
            _set(0, rules={"confirm-before-delete": "fail"}),
            "labels.jsonl, line 1",
            "the verdict is pass but critical rule confirm-before-delete is labelled fail",
        ),
        (lambda ls: [ls[0], "{not json", *ls[1:]], "labels.jsonl, line 2", "not valid JSON"),
        (lambda ls: [*ls, ls[0]], "labels.jsonl, line 5", "trace a is labelled twice (first on line 1)"),
        (_set(2, trace_id=None), "labels.jsonl, line 3", "trace_id is missing"),
        (_set(2, reviewer="x"), "labels.jsonl, line 3", "unknown key(s) reviewer"),
    ],
)
def test_dataset_validation_errors_are_located_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, where: str, says: str
) -> None:
    root = tiny_dataset(tmp_path / "ds")
    _edit_labels(root, edit)
    problems = [p for p in validate(root) if p.level == "error"]
    assert any(says in p.message for p in problems), [p.render() for p in problems]
    assert run(["golden", "validate", str(root)]) == 2
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if says in x)
    assert line.startswith("error: ") and where in line
    # A calibration refuses the dataset too, before any judge is asked.
    assert run(["calibrate", str(root), "--model", "scripted:x", "--store", str(tmp_path / "db")]) == 2
    assert says in capsys.readouterr().err


def test_missing_labels_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tiny_dataset(tmp_path / "ds")
    (root / "labels.jsonl").unlink()
    assert run(["golden", "validate", str(root)]) == 2
    assert "labels.jsonl: cannot read the labels" in capsys.readouterr().out


def test_fail_verdict_without_a_failed_critical_rule_is_a_warning(tmp_path: Path) -> None:
    root = tiny_dataset(tmp_path / "ds")
    _edit_labels(root, _set(1, rules={"lookup-required": "pass"}))
    problems = validate(root)
    assert [p.level for p in problems] == ["warning"]
    assert "no critical rule is labelled fail" in problems[0].message and problems[0].line == 2


# -- repeats with an inconsistent scripted judge -----------------------------------------------------------
def test_repeats_stability_figures_with_an_inconsistent_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = tiny_dataset(tmp_path / "ds")
    dataset = load_dataset(root)
    traces = {t.trace_id: t for t in dataset.traces}
    decided = ["lookup-required", "email-limit", "confirm-before-delete"]

    def reply(trace_id: str, fails: bool) -> dict[str, Any]:
        failed = ["confirm-before-delete"] if fails else []
        return judge_output(traces[trace_id], dataset.ruleset, failed, decided)

    # The judge's verdict on the judge rule, repeat by repeat: a always passes, c always fails,
    # b fails / passes / fails, d passes / fails / passes.
    plan = {"a": "PPP", "b": "FPF", "c": "FFF", "d": "PFP"}
    provider = ByTraceProvider(dataset.traces, {t: [reply(t, x == "F") for x in p] for t, p in plan.items()})
    report = calibrate_golden(
        root, repeats=3, provider=provider, store=tmp_path / "db", settings=Settings(resamples=200)
    )
    assert sum(provider.calls.values()) == 12  # 4 traces x 3 repeats: real calls, not the cache's replay
    st = report.stability
    assert st is not None and st.repeats == 3 and st.traces == 4
    # b and d changed verdict: 2 of 4.
    assert st.verdict_changed == 2 and st.verdict_changed_share == 0.5
    assert [c["trace_id"] for c in st.changed] == ["b", "d"]
    # b scores 0, 1, 0 and d 1, 0, 1: population std sqrt(2/9) each; a and c 0. Mean = 2*sqrt(2/9)/4.
    assert st.score_std_max == pytest.approx(math.sqrt(2 / 9))
    assert st.score_std_mean == pytest.approx(math.sqrt(2 / 9) / 2)
    # Verdicts (fail or not): r1 = [F,T,T,F], r2 = [F,F,T,T], r3 = r1. Pairs (1,2) and (2,3): p_o = .5,
    # p_e = .5 -> kappa 0; pair (1,3): kappa 1. Mean 1/3, min 0.
    assert [(p.a, p.b, p.verdicts.kappa) for p in st.pairs] == [(1, 2, 0.0), (1, 3, 1.0), (2, 3, 0.0)]
    assert st.verdict_kappa_mean == pytest.approx(1 / 3) and st.verdict_kappa_min == 0.0
    # The judge's rule decisions: 4 traces x 3 rules = 12 per pair, 2 "failed" in each repeat. Pair (1,2):
    # 10 agree: p_o = 10/12, p_e = (2/12)^2 + (10/12)^2 = 104/144 -> kappa = (120-104)/(144-104) = 0.4.
    assert st.pairs[0].judge_rules.decisions == 12
    assert st.pairs[0].judge_rules.kappa == pytest.approx(0.4)
    assert st.rule_kappa_mean == pytest.approx((0.4 + 1 + 0.4) / 3) and st.rule_kappa_min == pytest.approx(
        0.4
    )
    # Majority scores: a 1, b 0, c 0, d 1: the labels are separated perfectly.
    assert {s["trace_id"]: s["score"] for s in report.calibration.scores} == {
        "a": 1.0,
        "b": 0.0,
        "c": 0.0,
        "d": 1.0,
    }
    assert report.calibration.selection.row.false_pass_rate == 0.0

    # A rerun reuses the three stored runs: no model call at all.
    again = calibrate_golden(
        root, repeats=3, provider=provider, store=tmp_path / "db", settings=Settings(resamples=200)
    )
    assert sum(provider.calls.values()) == 12
    assert sorted(again.source["reused"]) == sorted(report.source["runs"])
    assert again.stability == report.stability
    # Asking for a 4th repeat judges once more, only that one.
    provider.script = {t: reply(t, False) for t in plan}  # one reply, given every time
    more = calibrate_golden(
        root, repeats=4, provider=provider, store=tmp_path / "db", settings=Settings(resamples=200)
    )
    assert sum(provider.calls.values()) == 16 and len(more.source["reused"]) == 3


def test_judge_mode_change_is_not_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = tiny_dataset(tmp_path / "ds")
    dataset = load_dataset(root)
    provider = ByTraceProvider(dataset.traces, label_replies(dataset))
    calibrate_golden(root, provider=provider, store=tmp_path / "db", settings=Settings(resamples=100))
    assert sum(provider.calls.values()) == 4
    calibrate_golden(
        root, provider=provider, store=tmp_path / "db", settings=Settings(resamples=100), risk_level="high"
    )  # the risk level is part of the prompt: a new run
    assert sum(provider.calls.values()) == 8


# -- the command -------------------------------------------------------------------------------------------
# Deliberate noise for the scripted judge on customer-support: it misses two failing deletions (false
# passes), fails two confirmed ones (false alarms), and contradicts the engine on two deterministic rules.
FLIPS = {
    "cs-058-user-said-no-agent-deleted": ["confirm-before-delete"],
    "cs-083-yes-to-are-you-there": ["confirm-before-delete"],
    "cs-057-agent-asked-user-said-yes": ["confirm-before-delete"],
    "cs-071-confirmed-with-details": ["confirm-before-delete"],
    "cs-050-two-deletes-logs-cover-both": ["log-deletion"],
    "cs-040-delete-without-verification": ["verify-before-delete"],
}


@pytest.fixture
def labelled_judge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """customer-support copied to tmp, and a provider `labelled:noisy` answering from its labels + FLIPS."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    monkeypatch.delenv("SEQJUDGE_STORE", raising=False)
    suite = tmp_path / "customer-support"
    shutil.copytree(GOLDEN / "customer-support", suite)
    dataset = load_dataset(suite)
    script = label_replies(dataset, FLIPS)
    made: list[ByTraceProvider] = []

    def factory(model: str, **options: Any) -> ByTraceProvider:
        made.append(ByTraceProvider(dataset.traces, script, model=model, **options))
        return made[-1]

    monkeypatch.setitem(registry._REGISTRY, "labelled", ProviderProfile(name="labelled", factory=factory))
    return {"suite": suite, "made": made, "db": tmp_path / "db.sqlite"}


def test_full_calibrate_run_on_customer_support(
    labelled_judge: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, db = labelled_judge["suite"], labelled_judge["db"]
    out_json, out_png = tmp_path / "cal.json", tmp_path / "cal.png"
    args = ["calibrate", str(suite), "--model", "labelled:noisy", "--store", str(db)]
    assert run([*args, "-o", str(out_json), "--plot", str(out_png), "--write"]) == 0
    text = capsys.readouterr().out
    assert sum(p.calls.total() for p in labelled_judge["made"]) == 87  # every trace judged once

    data = json.loads(out_json.read_text())
    cal = data["calibration"]
    assert (cal["traces"], cal["known_fail"], cal["known_pass"]) == (87, 52, 35)
    # Final scores: 50 known-fail traces at 0.0 and the 2 the judge missed at 1.0; the 2 false alarms at
    # 0.0; warning-only passes at 5/6 and 6/7 (the judge rule's pass counts as a checked rule).
    assert [(r["threshold"], r["flagged"]) for r in cal["sweep"]] == [
        (0.0, 0),
        (pytest.approx(5 / 6), 52),
        (pytest.approx(6 / 7), 54),
        (1.0, 56),
        (ABOVE_ONE, 87),
    ]
    sel = cal["selection"]
    # Lowest threshold with false-pass <= 5%: 5/6 flags the 52 zeros: TP 50, FP 2, FN 2 -> false-pass
    # 2/52 = 3.8%, precision = recall = F1 = 50/52.
    assert sel["threshold"] == pytest.approx(5 / 6) and sel["fallback"] is None
    row = sel["row"]
    assert (row["tp"], row["fp"], row["fn"], row["tn"]) == (50, 2, 2, 33)
    assert row["false_pass_rate"] == pytest.approx(2 / 52) and row["f1"] == pytest.approx(50 / 52)
    # kappa: p_o = 83/87, p_e = (52/87)^2 + (35/87)^2 = 3929/7569 -> (7221-3929)/(7569-3929) = 3292/3640.
    assert row["kappa"] == pytest.approx(3292 / 3640)
    lo, hi = sel["intervals"]["false_pass_rate"]
    assert lo <= 2 / 52 <= hi and hi - lo > 0
    recs = cal["recommendations"]
    assert recs["low"]["threshold"] == pytest.approx(5 / 6)  # best F1 there too
    assert recs["medium"]["threshold"] == pytest.approx(5 / 6)
    assert recs["high"]["threshold"] == 1.0 and "routed to review" in recs["high"]["note"]
    # Agreement per rule type: the two deterministic flips show up where they were made.
    by_type = data["agreement"]["by_type"]
    assert (by_type["after"]["agreed"], by_type["after"]["decisions"]) == (86, 87)
    assert by_type["before"]["decisions"] - by_type["before"]["agreed"] == 1
    assert by_type["require"]["rate"] == 1.0
    assert data["contradictions"] == [] and data["source"]["reused"] == []

    # The text summary: the sweep, the choice with its interval, the levels, the high-risk routing.
    assert "threshold sweep" in text and "95% CI [" in text
    assert "at risk level high every score below 1.0 is routed to review" in text
    assert "judge-engine agreement over the dataset" in text

    # The plot: a real PNG that matplotlib drew (not a blank canvas).
    png = out_png.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    import matplotlib.image

    pixels = matplotlib.image.imread(str(out_png))
    assert pixels.shape[0] > 500 and pixels.shape[1] > 700
    colours = {tuple(p) for p in pixels.reshape(-1, pixels.shape[2])[::37].round(2).tolist()}
    assert len(colours) > 30

    # --write: the thresholds, in a config that `seqjudge run` loads and uses per risk level.
    cfg = load_config(suite / "seqjudge.yaml")
    assert cfg.thresholds is not None
    assert (cfg.thresholds.low, cfg.thresholds.medium, cfg.thresholds.high) == (0.8333, 0.8333, 1.0)
    assert cfg.threshold_for("high") == 1.0 and cfg.threshold_for() == 0.8333

    # A second calibration reuses the stored run: no provider is even built.
    assert run([*args, "-o", str(out_json)]) == 0
    assert len(labelled_judge["made"]) == 1
    again = json.loads(out_json.read_text())
    assert again["source"]["reused"] == data["source"]["runs"]
    assert again["calibration"]["sweep"] == cal["sweep"]


def test_calibrate_without_a_model_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    root = tiny_dataset(tmp_path / "ds")
    assert run(["calibrate", str(root), "--store", str(tmp_path / "db")]) == 2
    err = capsys.readouterr().err
    assert "no model configured" in err and "--model provider:model" in err and "--scores FILE" in err
    # A model whose key is missing is bad input too, said plainly, when a new run is needed.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert run(["calibrate", str(root), "--model", "openai:gpt-4o", "--store", str(tmp_path / "db")]) == 2
    assert "OPENAI_API_KEY is not set" in capsys.readouterr().err


def _scores_file(path: Path, scores: dict[str, float]) -> Path:
    path.write_text("".join(json.dumps({"trace_id": t, "score": s}) + "\n" for t, s in scores.items()))
    return path


def test_calibrate_external_scores_without_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    root = tiny_dataset(tmp_path / "ds")
    scores = _scores_file(tmp_path / "s.jsonl", {"a": 0.9, "b": 0.1, "c": 0.6, "d": 0.7})
    out = tmp_path / "o.json"
    assert run(["calibrate", str(root), "--scores", str(scores), "-o", str(out), "--resamples", "200"]) == 0
    data = json.loads(out.read_text())
    assert data["source"] == {"kind": "scores", "file": str(scores), "repeats": 1}
    # Fails score 0.1 and 0.6, passes 0.7 and 0.9: 0.7 flags both fails and nothing else.
    assert data["calibration"]["selection"]["threshold"] == 0.7
    assert data["stability"] is None and data["agreement"] is None
    assert "from " + str(scores) in capsys.readouterr().out
    # Each objective through the command: the medium level takes the one asked for, low keeps F1.
    for flags, medium in (
        (["--objective", "f1"], 0.7),
        (["--objective", "youden"], 0.7),
        (["--objective", "cost", "--cost-fn", "1", "--cost-fp", "5"], 0.7),
        (["--target-recall", "0.5"], 0.6),  # 0.6 flags b only: recall 0.5, precision 1
    ):
        assert (
            run(
                [
                    "calibrate",
                    str(root),
                    "--scores",
                    str(scores),
                    "-o",
                    str(out),
                    "--resamples",
                    "200",
                    *flags,
                ]
            )
            == 0
        )
        got = json.loads(out.read_text())["calibration"]
        assert got["recommendations"]["medium"]["threshold"] == medium, flags
        assert got["recommendations"]["low"]["objective"] == "f1"
    # A score missing for a labelled trace is an error, located in the scores file.
    _scores_file(scores, {"a": 0.9, "b": 0.1, "c": 0.6})
    assert run(["calibrate", str(root), "--scores", str(scores)]) == 2
    assert "1 labelled trace(s) have no score: d" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--objective", "cost"], "--objective cost needs --cost-fn and --cost-fp"),
        (["--cost-fn", "3"], "--cost-fn and --cost-fp go with --objective cost"),
        (["--objective", "f1", "--target-recall", "0.9"], "both choose the threshold"),
        (["--repeats", "2"], "it takes no --model or --repeats"),
    ],
)
def test_conflicting_flags_are_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], says: str
) -> None:
    root = tiny_dataset(tmp_path / "ds")
    scores = _scores_file(tmp_path / "s.jsonl", {"a": 0.9, "b": 0.1, "c": 0.6, "d": 0.7})
    assert run(["calibrate", str(root), "--scores", str(scores), *flags]) == 2
    assert says in capsys.readouterr().err


def test_write_replaces_the_thresholds_block_and_keeps_the_rest(tmp_path: Path) -> None:
    from seqjudge.calibrate_runs import CalibrationReport
    from seqjudge.inputs import build_config

    root = tiny_dataset(tmp_path / "ds")
    config = root / "seqjudge.yaml"
    config.write_text(
        "# my suite\nrules: rules.yaml\ntraces: traces.jsonl\nthresholds:\n  low: 0.1\n\n"
        "model: openai:gpt-4o  # kept\n"
    )
    cal = calibrate(
        {"a": 0.9, "b": 0.1, "c": 0.6, "d": 0.7},
        {"a": "pass", "b": "fail", "c": "fail", "d": "pass"},
        Settings(resamples=100),
    )
    report = CalibrationReport(
        dataset=str(root), name="ds", source={"kind": "scores", "file": "s"}, calibration=cal
    )
    write_thresholds(report, root)
    write_thresholds(report, root)  # twice: still one block
    text = config.read_text()
    assert text.startswith("# my suite\n") and "model: openai:gpt-4o  # kept" in text
    assert text.count("thresholds:") == 1 and "low: 0.1\n" not in text
    cfg = load_config(config)
    assert cfg.thresholds is not None and cfg.thresholds.medium == 0.7 and cfg.thresholds.high == 1.0
    # `seqjudge run CONFIG` uses the level's threshold; a --threshold flag wins over it.
    assert build_config([str(config)], {"risk_level": "high"}).threshold == 1.0
    assert build_config([str(config)], {}).threshold == 0.7
    assert build_config([str(config)], {"threshold": 0.5}).threshold == 0.5


def test_plot_bytes_for_embedding() -> None:
    from seqjudge.outputs.calibrate_plot import calibration_png

    png = calibration_png(calibrate(SCORES, LABELS, Settings(resamples=100)), title="tiny")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    import io

    import matplotlib.image

    assert matplotlib.image.imread(io.BytesIO(png)).ndim == 3
