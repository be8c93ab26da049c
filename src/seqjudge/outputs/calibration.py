"""`seqjudge calibrate`'s report: the sources, the threshold sweep, the chosen thresholds with their
intervals, stability over repeats and judge-engine agreement (text), or every figure (JSON)."""

from __future__ import annotations

import json
from typing import IO, Any

from seqjudge.calibrate_runs import CalibrationReport
from seqjudge.outputs.guarantee_view import guarantee_text


def report_json(report: CalibrationReport, out: IO[str]) -> None:
    json.dump(report.model_dump(mode="json"), out, indent=2)
    out.write("\n")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _threshold(value: float) -> str:
    return ">1" if value > 1.0 else f"{value:.3f}"


def _interval(iv: Any, fmt: Any = _num) -> str:
    return "[n/a]" if iv is None else f"[{fmt(iv[0])}, {fmt(iv[1])}]"


def report_text(report: CalibrationReport, out: IO[str]) -> None:
    """The text summary: sources, the sweep table, the choices with intervals, stability, agreement."""
    w = out.write
    cal = report.calibration
    src = report.source
    w(
        f"calibrate {report.dataset}: {cal.traces} labelled traces scored "
        f"({cal.known_fail} fail, {cal.known_pass} pass)\n"
    )
    if src["kind"] == "judge":
        runs = ", ".join(f"{r} ({'reused' if r in src['reused'] else 'judged now'})" for r in src["runs"])
        w(
            f"scores: judge {src['model']}, judge mode {src['judge_mode']}, risk level {src['risk_level']}, "
            f"{src['repeats']} repeat(s); runs: {runs}\n"
        )
        if src["repeats"] > 1:
            w("  each trace's score is its majority over the repeats (the lower median)\n")
    else:
        w(f"scores: from {src['file']} (no judge called)\n")
    for tid, why in report.excluded.items():
        w(f"left out: {tid}: {why}\n")
    for text in report.dataset_warnings:
        w(f"warning: {text}\n")
    if report.contradictions:
        w(f"labels that contradict the engine ({len(report.contradictions)}; reported, not errors):\n")
        for c in report.contradictions:
            w(
                f"  {c['trace_id']}, {c['rule_id']}: labelled {c['label']}, engine {c['engine']}: "
                f"{c['explanation'].strip()}\n"
            )
    else:
        w("labels versus the engine: no contradiction on any deterministic rule\n")

    w("\nthreshold sweep (flagged: score below the threshold; positive: labelled fail):\n")
    w(
        f"  {'threshold':>9} {'flagged':>7} {'TP':>4} {'FP':>4} {'FN':>4} {'TN':>4} {'precision':>9} "
        f"{'recall':>6} {'F1':>6} {'false-pass':>10} {'kappa':>6}\n"
    )
    for r in cal.sweep:
        w(
            f"  {_threshold(r.threshold):>9} {r.flagged:>7} {r.tp:>4} {r.fp:>4} {r.fn:>4} {r.tn:>4} "
            f"{_num(r.precision):>9} {_num(r.recall):>6} {_num(r.f1):>6} {_pct(r.false_pass_rate):>10} "
            f"{_num(r.kappa, 2):>6}"
            + ("   (flags every trace: not selectable)" if not r.selectable else "")
            + "\n"
        )

    def choice(name: str, c: Any) -> None:
        iv = c.intervals
        row = c.row
        w(
            f"{name}: threshold {_threshold(c.threshold)}  95% CI {_interval(iv.get('threshold'))}"
            f"  ({c.rule})\n"
        )
        if c.fallback:
            w(f"  not met: {c.fallback}\n")
        w(
            f"  false-pass {_pct(row.false_pass_rate)} {_interval(iv.get('false_pass_rate'), _pct)}, "
            f"recall {_num(row.recall)} {_interval(iv.get('recall'))}, "
            f"precision {_num(row.precision)} {_interval(iv.get('precision'))}, "
            f"F1 {_num(row.f1)} {_interval(iv.get('f1'))}, kappa {_num(row.kappa, 2)} "
            f"{_interval(iv.get('kappa'), lambda v: _num(v, 2))}; flagged {row.flagged}/{cal.traces}\n"
        )
        for warning in c.warnings:
            w(f"  note: {warning}\n")
        if c.note:
            w(f"  note: {c.note}\n")

    settings = cal.settings
    w(f"\nchosen threshold (bootstrap: {settings.resamples} stratified resamples, seed {settings.seed}):\n")
    choice("selected", cal.selection)
    w("\nrecommended thresholds per risk level:\n")
    for level in ("low", "medium", "high"):
        choice(level, cal.recommendations[level])

    st = report.stability
    if st is not None:
        w(
            f"\nstability over {st.repeats} repeats ({st.traces} traces): verdict changed on "
            f"{st.verdict_changed} ({_pct(st.verdict_changed_share)}); "
            f"score std mean {_num(st.score_std_mean)}, "
            f"max {_num(st.score_std_max)}\n"
        )
        w(
            f"  pairwise kappa between repeats: verdicts mean {_num(st.verdict_kappa_mean, 2)} (min "
            f"{_num(st.verdict_kappa_min, 2)}), the judge's rule decisions mean "
            f"{_num(st.rule_kappa_mean, 2)} "
            f"(min {_num(st.rule_kappa_min, 2)})\n"
        )
        for item in st.changed[:10]:
            w(f"  {item['trace_id']}: verdicts {', '.join(item['verdicts'])}\n")
        if len(st.changed) > 10:
            w(f"  ... and {len(st.changed) - 10} more (see the JSON)\n")
    ag = report.agreement
    if ag is not None and ag["overall"]["decisions"]:
        o = ag["overall"]
        w(
            f"\njudge-engine agreement over the dataset: {o['agreed']}/{o['decisions']} = {_pct(o['rate'])}, "
            f"kappa {_num(o['kappa'], 2)}\n"
        )
        for rtype, fig in ag["by_type"].items():
            w(
                f"  {rtype:<12} {fig['agreed']}/{fig['decisions']} agree ({_pct(fig['rate'])}), "
                f"kappa {_num(fig['kappa'], 2)}\n"
            )
    elif ag is not None:
        w("\njudge-engine agreement: no cross-checked decision (contextual mode judges only `judge` rules)\n")
    guarantee_text(report.guarantee, out)
    if report.written:
        rec = cal.recommendations
        w(
            f"\nwrote {report.written}: thresholds low {rec['low'].threshold:.4g}, medium "
            f"{rec['medium'].threshold:.4g}, high {rec['high'].threshold:.4g}\n"
        )
