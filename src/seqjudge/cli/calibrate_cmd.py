"""`seqjudge calibrate DATASET`: choose the judge's threshold from a golden dataset, with intervals."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import ConfigStoreOpt, Risk
from seqjudge.errors import InputError
from seqjudge.outputs.streams import open_output


class ObjectiveOpt(StrEnum):
    false_pass = "false-pass"
    f1 = "f1"
    youden = "youden"
    cost = "cost"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _threshold(value: float) -> str:
    return ">1" if value > 1.0 else f"{value:.3f}"


def _interval(iv: Any, fmt: Any = _num) -> str:
    return "[n/a]" if iv is None else f"[{fmt(iv[0])}, {fmt(iv[1])}]"


def print_report(report: Any, out: IO[str]) -> None:
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
    if report.written:
        rec = cal.recommendations
        w(
            f"\nwrote {report.written}: thresholds low {rec['low'].threshold:.4g}, medium "
            f"{rec['medium'].threshold:.4g}, high {rec['high'].threshold:.4g}\n"
        )


@app.command()
def calibrate(
    dataset: Annotated[
        Path, typer.Argument(help="A golden dataset folder (rules.yaml, traces.jsonl, labels.jsonl).")
    ],
    model: Annotated[str | None, typer.Option("--model", help="provider:model, e.g. openai:gpt-4o.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Judge each trace K times.")] = 1,
    risk_level: Annotated[
        Risk | None,
        typer.Option("--risk-level", help="The risk level the judge runs at (default: the config's)."),
    ] = None,
    objective: Annotated[
        ObjectiveOpt | None,
        typer.Option("--objective", help="false-pass (default), f1, youden or cost."),
    ] = None,
    cost_fn: Annotated[float | None, typer.Option("--cost-fn", min=0.0, help="Cost of a false pass.")] = None,
    cost_fp: Annotated[
        float | None, typer.Option("--cost-fp", min=0.0, help="Cost of a false alarm.")
    ] = None,
    target_recall: Annotated[
        float | None,
        typer.Option("--target-recall", min=0.0, max=1.0, help="Best precision with at least this recall."),
    ] = None,
    max_false_pass: Annotated[
        float, typer.Option("--max-false-pass", min=0.0, max=1.0, help="The false-pass target.")
    ] = 0.05,
    store: ConfigStoreOpt = None,
    write: Annotated[
        bool, typer.Option("--write", help="Write thresholds {low, medium, high} to DATASET/seqjudge.yaml.")
    ] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write every figure as JSON.")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write the calibration plot (PNG).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap.")] = 0,
    resamples: Annotated[int, typer.Option("--resamples", min=100, help="Bootstrap resamples.")] = 2000,
    scores: Annotated[
        Path | None,
        typer.Option(
            "--scores", help='Calibrate external scores (JSONL of {"trace_id", "score"}), no judge.'
        ),
    ] = None,
    judge_mode: Annotated[str | None, typer.Option("--judge-mode", help="full or contextual.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1)] = None,
    no_reuse: Annotated[
        bool, typer.Option("--no-reuse", help="Judge again even when stored runs match.")
    ] = False,
) -> int:
    """Calibrate the judge's pass/fail threshold on a golden dataset.

    Runs the judge over the dataset (reusing stored runs of the same model, judge mode and prompts), sweeps
    the threshold over the observed scores and reports, for each: precision, recall and F1 for catching
    failing traces, the false-pass rate and Cohen's kappa against the labels. Picks a threshold by the
    objective (default: the lowest one whose false-pass rate is at most --max-false-pass, else the best F1)
    with bootstrap 95% intervals, and recommends one per risk level: low (best F1), medium (the default
    objective; the --risk-level level takes --objective when you give one) and high (1.0: every imperfect
    score goes to review). --target-recall R picks the best precision among thresholds with recall >= R.

    The judge is required: without a model (--model, `model:` in DATASET/seqjudge.yaml or SEQJUDGE_MODEL)
    it exits 2 and says what to set, unless --scores gives the scores. Exit 0 when the calibration ran,
    2 on bad input, 3 when the provider cannot be reached.
    """
    from seqjudge.calibrate import Settings
    from seqjudge.calibrate_runs import calibrate_golden, write_thresholds

    if judge_mode not in (None, "full", "contextual"):
        raise InputError(
            f"--judge-mode is {judge_mode!r}", where="--judge-mode", hint="use full or contextual"
        )
    chosen = objective.value if objective is not None else None
    if target_recall is not None:
        if chosen is not None:
            raise InputError(
                f"--target-recall and --objective {chosen} both choose the threshold",
                where="--target-recall",
                hint="give one of them",
            )
        chosen = "target-recall"
    if chosen == "cost" and (cost_fn is None or cost_fp is None or cost_fn + cost_fp == 0):
        raise InputError(
            "--objective cost needs --cost-fn and --cost-fp (not both 0)",
            where="--objective",
            hint="e.g. --cost-fn 10 --cost-fp 1: a false pass costs ten times a false alarm",
        )
    if chosen != "cost" and (cost_fn is not None or cost_fp is not None):
        raise InputError(
            "--cost-fn and --cost-fp go with --objective cost",
            where="--cost-fn",
            hint="add --objective cost, or drop them",
        )
    if scores is not None and (model is not None or repeats != 1):
        raise InputError(
            "--scores calibrates scores you already have: it takes no --model or --repeats",
            where="--scores",
            hint="drop --model/--repeats, or drop --scores to judge the dataset",
        )
    settings = Settings(
        objective=chosen or "false-pass",  # type: ignore[arg-type]
        max_false_pass=max_false_pass,
        target_recall=target_recall,
        cost_fn=cost_fn,
        cost_fp=cost_fp,
        resamples=resamples,
        seed=seed,
    )
    report = calibrate_golden(
        dataset,
        settings=settings,
        repeats=repeats,
        model=model,
        risk_level=risk_level.value if risk_level else None,
        judge_mode=judge_mode,
        store=store,
        concurrency=concurrency,
        scores_file=scores,
        explicit_objective=chosen is not None,
        reuse=not no_reuse,
        say=lambda text: print(text, file=sys.stderr),
    )
    if write:
        report.written = str(write_thresholds(report, dataset))
    if plot is not None:
        from seqjudge.outputs.calibrate_plot import write_plot

        write_plot(report.calibration, plot, title=f"seqjudge calibrate: {report.name}")
    to_stdout = output is not None and str(output) == "-"
    if output is not None:
        with open_output(output) as handle:
            json.dump(report.model_dump(mode="json"), handle, indent=2)
            handle.write("\n")
    if not to_stdout:
        print_report(report, sys.stdout)
        if output is not None:
            print(f"figures: {output}")
        if plot is not None:
            print(f"plot: {plot}")
    return 0
