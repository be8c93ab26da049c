"""`seqjudge calibrate DATASET`: choose the judge's threshold from a golden dataset, with intervals."""

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import (
    ConcurrencyOpt,
    ConfidenceOpt,
    ConfigRiskOpt,
    ConfigStoreOpt,
    JudgeModeOpt,
    ModelOpt,
    SamplesOpt,
)
from seqjudge.errors import InputError
from seqjudge.outputs.registry import writer
from seqjudge.outputs.streams import open_output
from seqjudge.safetext import say


class ObjectiveOpt(StrEnum):
    false_pass = "false-pass"
    f1 = "f1"
    youden = "youden"
    cost = "cost"


@app.command()
def calibrate(
    dataset: Annotated[
        Path, typer.Argument(help="A golden dataset folder (rules.yaml, traces.jsonl, labels.jsonl).")
    ],
    model: ModelOpt = None,
    escalate: Annotated[
        list[str] | None,
        typer.Option(
            "--escalate",
            help="Calibrate this model too, for `seqjudge run --escalate` (repeat for a longer cascade): "
            "each judge gets its own certificate.",
        ),
    ] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Judge each trace K times.")] = 1,
    risk_level: ConfigRiskOpt = None,
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
            "--scores",
            help='Calibrate external scores (JSONL of {"trace_id", "score"}, optionally "rules": {id: '
            '{"decision", "confidence"}} for --alpha), no judge.',
        ),
    ] = None,
    judge_mode: JudgeModeOpt = None,
    concurrency: ConcurrencyOpt = None,
    no_reuse: Annotated[
        bool, typer.Option("--no-reuse", help="Judge again even when stored runs match.")
    ] = False,
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha",
            min=0.0,
            max=1.0,
            help="Bound on the false-pass share among auto-passed judge decisions.",
        ),
    ] = 0.05,
    delta: Annotated[
        float, typer.Option("--delta", min=0.0, max=1.0, help="Allowed chance that the bound does not hold.")
    ] = 0.05,
    auto_fail: Annotated[
        bool, typer.Option("--auto-fail", help="Certify an auto-fail threshold per judge rule too.")
    ] = False,
    confidence: ConfidenceOpt = None,
    samples: SamplesOpt = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Only check the certificate: exit 1 when model, prompt, rules or labels changed."
        ),
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

    Per `judge` rule it also certifies a confidence threshold: with probability >= 1 - --delta the share of
    label-fail decisions among those auto-passed is <= --alpha (Learn-then-Test with a Clopper-Pearson bound;
    --auto-fail does the same for fails), or says how many labels that would take; and writes the
    certificate (model, prompt template, rules, dataset hashes) that `seqjudge run` gates by. --check exits 1
    when the certificate is stale.

    The judge is required: without a model (--model, `model:` in DATASET/seqjudge.yaml or SEQJUDGE_MODEL)
    it exits 2 and says what to set, unless --scores gives the scores. Exit 0 when the calibration ran,
    2 on bad input, 3 when the provider cannot be reached.
    """
    if escalate:
        return _each_stage(dict(locals()))
    from seqjudge.calibrate import Settings
    from seqjudge.calibrate_guarantee import GuaranteeSettings
    from seqjudge.calibrate_runs import calibrate_golden, write_thresholds

    if check:
        return _check(dataset, model, store)
    for name, value in (("--alpha", alpha), ("--delta", delta)):
        if not 0.0 < value < 1.0:
            raise InputError(f"{name} is {value}", where=name, hint="give a share between 0 and 1, e.g. 0.05")
    no_plot = None
    if plot is not None:
        from seqjudge.outputs.calibrate_plot import plot_unavailable

        # Said before the judge runs; the figures are still computed and written.
        no_plot = plot_unavailable()
        if no_plot:
            say(f"warning: {no_plot}; the figures are written without it", err=True)
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
        judge_mode=judge_mode.value if judge_mode else None,
        store=store,
        concurrency=concurrency,
        scores_file=scores,
        explicit_objective=chosen is not None,
        reuse=not no_reuse,
        say=lambda text: say(text, err=True),
        guarantee=GuaranteeSettings(alpha=alpha, delta=delta, auto_fail=auto_fail),
        confidence=confidence.value if confidence else None,
        samples=samples,
    )
    if write:
        report.written = str(write_thresholds(report, dataset))
    guarantee_plot: Path | None = None
    if plot is not None and no_plot is None:
        from seqjudge.outputs.calibrate_plot import write_plot

        write_plot(report.calibration, plot, title=f"seqjudge calibrate: {report.name}", suite=report.suite)
        if report.guarantee is not None and report.guarantee.rules:
            from seqjudge.outputs.guarantee_view import write_guarantee_plot

            extra = plot.with_name(f"{plot.stem}-guarantee{plot.suffix or '.png'}")
            write_guarantee_plot(report.guarantee, extra, title=f"seqjudge calibrate: {report.name}")
            guarantee_plot = extra
    to_stdout = output is not None and str(output) == "-"
    if output is not None:
        with open_output(output, inputs=_dataset_files(dataset)) as handle:
            writer("calibration", "json")(report, handle)
    if not to_stdout:
        writer("calibration", "text")(report, sys.stdout)
        if output is not None:
            say(f"figures: {output}")
        if plot is not None and no_plot is None:
            say(f"plot: {plot}")
            if guarantee_plot is not None:
                say(f"plot: {guarantee_plot}")
    if no_plot:
        say(f"plot: not written to {plot}: {no_plot}", err=True)
    return 0


def _dataset_files(dataset: Path) -> list[Path]:
    """The files of a golden dataset that calibrate reads (its figures may be written beside them)."""
    from seqjudge.golden import CATALOG_FILE, EXAMPLES_FILES, LABELS_FILE, RULES_FILE, TRACES_FILE

    if not dataset.is_dir():
        return [dataset]
    names = (RULES_FILE, TRACES_FILE, LABELS_FILE, CATALOG_FILE, *EXAMPLES_FILES)
    return [dataset / name for name in names]


def _check(dataset: Path, model: str | None, store: str | Path | None) -> int:
    """`calibrate --check`: 0 when a certificate matches the model, prompt template, rules and labels."""
    from seqjudge.calibrate_runs import certificate_status

    cert, changes, folder = certificate_status(dataset, model=model, store=store)
    if not changes:
        assert cert is not None
        say(f"certificate of {cert.created} holds: same model, prompt template, rules and labels ({folder})")
        return 0
    if cert is None:
        # never calibrated: not "stale", and not a pass either
        say(f"{dataset} has no calibration certificate (looked in {folder}): the judge is not certified")
        say(f"  run `seqjudge calibrate {dataset}` to certify it")
        return 1
    say(f"the calibration certificate of {dataset} is stale: " + "; ".join(changes))
    say(f"  re-run `seqjudge calibrate {dataset}` to certify the judge again")
    return 1


def _each_stage(args: dict[str, object]) -> int:
    """`calibrate --model A --escalate B ...`: each judge of the cascade calibrated (or checked) in turn, one
    certificate each; ``-o`` and ``--plot`` get the model in their names. Exit: the worst of the stages."""
    models = [args["model"], *args["escalate"]]  # type: ignore[misc]
    if args["write"]:
        raise InputError(
            "--write writes one model's score thresholds to seqjudge.yaml; a cascade has several judges",
            where="--write",
            hint="calibrate the first model alone with --write; the cascade's judges use their certificates",
        )
    if args["scores"] is not None:
        raise InputError(
            "--scores calibrates scores you already have: there is no judge to escalate to",
            where="--escalate",
            hint="drop --escalate, or drop --scores to judge the dataset with each model",
        )
    codes = []
    for n, model in enumerate(models):
        if n:
            say()
        say(f"== escalation stage {n + 1} of {len(models)}: {model or '(the configured model)'}")
        named = {k: _named(args[k], model) if len(models) > 1 else args[k] for k in ("output", "plot")}
        codes.append(calibrate(**{**args, **named, "model": model, "escalate": None}))  # type: ignore[arg-type]
    return max(codes)


def _named(path: object, model: object) -> object:
    """``calibration.json`` -> ``calibration.openai-gpt-4o.json`` (stdout stays stdout)."""
    if not isinstance(path, Path) or str(path) == "-":
        return path
    tag = "".join(c if c.isalnum() or c in "-." else "-" for c in str(model or "model"))
    return path.with_name(f"{path.stem}.{tag}{path.suffix}")
