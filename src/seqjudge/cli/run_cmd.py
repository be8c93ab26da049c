"""`seqjudge run`: the main job — engine, judge, reconciliation, review routing, storage, summary."""

import itertools
from typing import TYPE_CHECKING, Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.batch_cmd import submit_batch
from seqjudge.cli.options import (
    AuditDrawChoice,
    BaseUrlOpt,
    CatalogOpt,
    ConcurrencyOpt,
    ConfidenceOpt,
    ConfigMaxAttemptsOpt,
    ConfigRiskOpt,
    ConfigStoreOpt,
    ConfigThresholdOpt,
    ExamplesOpt,
    JudgeModeOpt,
    ModelOpt,
    NoCacheOpt,
    SamplesOpt,
    StrictOpt,
    format_option,
)
from seqjudge.cli.trace_options import AllowEmpty, ErrorPattern, MessagesKey, TraceFormat
from seqjudge.defaults import DEFAULT_STORE
from seqjudge.errors import InputError
from seqjudge.outputs.registry import writer
from seqjudge.safetext import say

if TYPE_CHECKING:
    from seqjudge.config import RunConfig


@app.command()
def run(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="CONFIG (seqjudge.yaml) or a folder holding one (or a rules.yaml over its traces), or "
            "RULES TRACES... (trace files or folders, several allowed; the settings of a seqjudge.yaml "
            "beside RULES apply); none: ./seqjudge.yaml (with --resume: the run's own)."
        ),
    ] = None,
    model: ModelOpt = None,
    escalate: Annotated[
        list[str] | None,
        typer.Option(
            "--escalate",
            help="provider:model to ask about the judge rules --model cannot auto-decide under its "
            "certificate; repeat for a longer cascade (each model calibrated with `seqjudge calibrate`).",
        ),
    ] = None,
    catalog: CatalogOpt = None,
    examples: ExamplesOpt = None,
    risk_level: ConfigRiskOpt = None,
    threshold: ConfigThresholdOpt = None,
    store: ConfigStoreOpt = None,
    judge_mode: JudgeModeOpt = None,
    max_attempts: ConfigMaxAttemptsOpt = None,
    concurrency: ConcurrencyOpt = None,
    no_cache: NoCacheOpt = False,
    base_url: BaseUrlOpt = None,
    confidence: ConfidenceOpt = None,
    samples: SamplesOpt = None,
    resume: Annotated[str | None, typer.Option("--resume", help="Finish run RUN (id or `latest`).")] = None,
    label: Annotated[str | None, typer.Option("--label", help="A name for this run.")] = None,
    fmt: Annotated[str, format_option("run", help="The summary's format: text or json.")] = "text",
    trace_format: TraceFormat = None,
    messages_key: MessagesKey = None,
    error_pattern: ErrorPattern = None,
    allow_empty: AllowEmpty = False,
    strict: StrictOpt = None,
    rpm: Annotated[
        int | None,
        typer.Option(
            "--rpm", min=0, help="Requests per minute at most (default: the provider's; 0 = no limit)."
        ),
    ] = None,
    tpm: Annotated[
        int | None,
        typer.Option(
            "--tpm", min=0, help="Tokens per minute at most (default: the provider's; 0 = no limit)."
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost", min=0.0, help="Stop starting judge calls once this many USD are spent (0 = no cap)."
        ),
    ] = None,
    prices: Annotated[
        str | None, typer.Option("--prices", help="YAML/JSON prices (USD per million tokens) over the table.")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Render every prompt; print estimated tokens and cost; call nothing."),
    ] = False,
    audit_rate: Annotated[
        float | None,
        typer.Option(
            "--audit-rate",
            min=0.0,
            max=1.0,
            help="Send this share of auto-passed traces to review (reason `audit`) to measure the live "
            "false-pass rate: `seqjudge runs show RUN --audit` (default: the config's, else 0).",
        ),
    ] = None,
    audit_seed: Annotated[
        int | None,
        typer.Option("--audit-seed", help="Seed of the audit draw (default: the config's, else 18; stored)."),
    ] = None,
    audit_draw: Annotated[
        AuditDrawChoice | None,
        typer.Option(
            "--audit-draw",
            help="uniform: every auto-passed trace at --audit-rate; active: more often where the judge was "
            "less sure (from a quarter of the rate up), each audit's probability stored (default: the "
            "config's, else uniform).",
        ),
    ] = None,
    # -- batch runs (seqjudge.cli.batch_cmd) --
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Submit the judge requests to the provider's batch API (half price) and exit; "
            "`seqjudge batch collect RUN` finishes the run.",
        ),
    ] = False,
) -> int:
    """Run the engine and (where a model is configured) the judge over a suite, reconcile them rule by rule,
    route doubtful traces to review, and store everything.

    A `judge` rule gates only under a calibration certificate that matches the model, prompt template and
    rules (`seqjudge calibrate`): its passes stand at or above the certified confidence threshold and go to
    review below it. Without one the judge's decisions on `judge` rules are advisory (reported, never
    gating) and the summary says so; --strict makes that an error (exit 2).

    A model asked for (--model, `model:`, SEQJUDGE_MODEL, --escalate) that cannot run (no key) is exit 2,
    --strict or not; with no model at all the engine decides alone and the `judge` rules are named deferred.

    Exit 0 when every trace passed; 1 when some failed or need review, or when --max-cost stopped the run
    before every trace was judged (it is stored as `stopped`; `seqjudge run --resume RUN` finishes it);
    2 bad input; 3 provider unreachable.
    """
    from seqjudge.ingest import load_traces
    from seqjudge.inputs import build_config, suite_of
    from seqjudge.outputs.coverage import coverage_lines
    from seqjudge.runner import estimate_run, run_traces
    from seqjudge.store import Store

    base_cfg = None
    if not args and resume:
        base_cfg = stored_config(str(store or DEFAULT_STORE), resume)
    cfg = build_config(
        args or [],
        {
            "model": model,
            "escalate": escalate or None,
            "catalog": None if catalog is None else str(catalog),
            "examples": None if examples is None else str(examples),
            "risk_level": risk_level.value if risk_level else None,
            "threshold": threshold,
            "store": None if store is None else str(store),
            "judge_mode": judge_mode.value if judge_mode else None,
            "max_attempts": max_attempts,
            "concurrency": concurrency,
            "cache": False if no_cache else None,
            "base_url": base_url,
            "label": label,
            "trace_format": trace_format,
            "messages_key": messages_key,
            "error_pattern": error_pattern,
            "allow_empty": True if allow_empty else None,
            "strict": strict,  # None: the config's; --strict / --no-strict override it
            "rpm": rpm,
            "tpm": tpm,
            "max_cost": max_cost,
            "prices": prices,
            "audit_rate": audit_rate,
            "audit_seed": audit_seed,
            "audit_draw": audit_draw.value if audit_draw else None,
            "confidence": confidence.value if confidence else None,
            "samples": samples,
        },
        base=base_cfg,
    )
    suite = suite_of(cfg)
    ruleset, catalog_obj, examples_obj = suite.ruleset, suite.catalog, suite.examples
    traces = load_traces(
        cfg.traces,
        format=cfg.trace_format,
        messages_key=cfg.messages_key,
        error_pattern=cfg.error_pattern,
        allow_empty=cfg.allow_empty,
    )
    # Read the first trace now: an input without traces ends here (exit 2), before a run is stored.
    first = next(traces, None)
    traces = traces if first is None else itertools.chain([first], traces)
    if dry_run:
        skip: set[str] = set()
        if resume:
            with Store(cfg.store, create=False) as db:
                skip = db.completed_trace_ids(db.resolve_run(resume))
        est = estimate_run(cfg, ruleset, traces, catalog=catalog_obj, examples=examples_obj, skip=skip)
        writer("estimate", fmt)(est)
        return 0
    from seqjudge.judge.providers.registry import skipped_judge

    # A judge asked for that cannot run is exit 2 (run_traces says so too): here, before a store is created.
    skipped_judge(cfg.model, cfg.model_options.base_url, escalate=cfg.escalate)
    # -- batch runs: submitted here, collected by `seqjudge batch collect` (seqjudge.cli.batch_cmd) --
    if batch:
        if cfg.escalate:
            raise InputError(
                "--batch cannot escalate: a cascade asks the next judge only after the first has answered",
                where="--escalate",
                hint="run the cascade online (drop --batch), or --batch with one --model",
            )
        return submit_batch(cfg, ruleset, traces, catalog_obj, examples_obj, resume=resume, fmt=fmt)
    # -- end batch runs --
    import asyncio

    from seqjudge.cli.progress import RunProgress, progress_wanted

    total = count_traces(cfg) if progress_wanted() else None
    with Store(cfg.store) as db:
        run_id = db.resolve_run(resume) if resume else None
        already = len(db.completed_trace_ids(run_id)) if run_id else 0
        with RunProgress(total, already=already) as bar:
            summary = asyncio.run(
                run_traces(
                    cfg,
                    ruleset,
                    traces,
                    db,
                    run_id=run_id,
                    catalog=catalog_obj,
                    examples=examples_obj,
                    on_progress=bar.update,
                )
            )
    writer("run", fmt)(summary)
    if fmt != "text":  # the text summary ends with these; JSON keeps stdout for its data
        for line in coverage_lines(summary.coverage):
            say(line, err=True)
    failure = summary.coverage.strict_error() if summary.coverage is not None else None
    if failure is not None:
        raise InputError(failure, hint=f"See the warnings above; run {summary.run_id} is stored")
    if summary.status == "stopped":
        return 1
    return 0 if summary.verdicts["pass"] == summary.traces else 1


def stored_config(store_path: str, ref: str) -> "RunConfig":
    """The config a run was started with, for `seqjudge run --resume RUN` without arguments."""
    from pydantic import ValidationError

    from seqjudge.config import RunConfig
    from seqjudge.store import Store
    from seqjudge.store.target import mask_url

    with Store(store_path, create=False) as db:
        info = db.run_info(db.resolve_run(ref))
    try:
        return RunConfig.model_validate(info.config)
    except ValidationError as exc:
        raise InputError(
            f"run {info.id} was stored with a config this seqjudge cannot read back "
            f"({exc.errors()[0]['msg']})",
            source=mask_url(store_path),
            where="--resume",
            hint=f"give the suite again: seqjudge run RULES TRACES --resume {info.id}",
        ) from None


def count_traces(cfg: "RunConfig") -> int | None:
    """How many traces the suite holds (for the progress bar's total and time left); None for stdin or
    unreadable input (the run itself reports that properly)."""
    from seqjudge.errors import SeqjudgeError
    from seqjudge.ingest import load_traces

    if "-" in ([cfg.traces] if isinstance(cfg.traces, str) else cfg.traces):
        return None
    try:
        return sum(
            1
            for _ in load_traces(
                cfg.traces,
                format=cfg.trace_format,
                messages_key=cfg.messages_key,
                error_pattern=cfg.error_pattern,
                allow_empty=cfg.allow_empty,
                notes=False,  # the run itself says which files it skipped
            )
        )
    except (SeqjudgeError, OSError):
        return None
