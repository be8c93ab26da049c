"""`seqjudge run`: the main job — engine, judge, reconciliation, review routing, storage, summary."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.check_cmd import ErrorPatternOpt, MessagesKeyOpt, Risk, TraceFormatOpt, load_ruleset
from seqjudge.config import DEFAULT_STORE, RunConfig, load_config
from seqjudge.errors import InputError
from seqjudge.runner import DRY_RUN_OUTPUT_TOKENS, RunEstimate, RunSummary, estimate_run, run_traces


def build_config(args: list[str], overrides: dict[str, Any], base: RunConfig | None = None) -> RunConfig:
    """`run CONFIG` or `run RULES TRACES`; flags (non-None) override the file. ``base``: the stored config
    of the run being resumed, used when no argument is given (`seqjudge run --resume RUN`)."""
    if not args and base is not None:
        cfg = base
    elif len(args) == 1:
        cfg = load_config(args[0])
    elif len(args) == 2:
        try:
            cfg = RunConfig(rules=args[0], traces=args[1])
        except Exception as exc:  # pragma: no cover - two strings always validate
            raise InputError(str(exc)) from None
    else:
        raise InputError(
            f"expected CONFIG or RULES TRACES, got {len(args)} argument(s)",
            where="arguments",
            hint="seqjudge run seqjudge.yaml  or  seqjudge run rules.yaml traces.jsonl  "
            "(or seqjudge run --resume RUN)",
        )
    if overrides.get("model") is None and cfg.model is None and os.environ.get("SEQJUDGE_MODEL"):
        overrides["model"] = os.environ["SEQJUDGE_MODEL"]
    options = {k: overrides.pop(k) for k in ("base_url",) if overrides.get(k) is not None}
    update = {k: v for k, v in overrides.items() if v is not None}
    if options:
        update["model_options"] = cfg.model_options.model_copy(update=options)
    cfg = cfg.model_copy(update=update)
    if "threshold" not in update and cfg.thresholds is not None:
        # Calibrated thresholds per risk level (`seqjudge calibrate --write`); a --threshold flag wins.
        cfg = cfg.model_copy(update={"threshold": cfg.threshold_for()})
    return cfg


def print_summary(summary: RunSummary, out: Any = None) -> None:
    out = out or sys.stdout
    w = out.write
    w(
        f"run {summary.run_id}: {summary.traces} trace(s) decided: {summary.verdicts['pass']} pass, "
        f"{summary.verdicts['fail']} fail, {summary.verdicts['review']} review"
    )
    w(f" ({summary.skipped_stored} already stored, not judged again)\n" if summary.skipped_stored else "\n")
    if summary.judge_skipped:
        w(f"judge skipped: {summary.judge_skipped}. Judge rules stay deferred and go to review.\n")
    else:
        w(
            f"judge: {dict(summary.judge_status)}; tokens: {summary.tokens['input']} input "
            f"({summary.tokens['cached_input']} cached), {summary.tokens['output']} output\n"
        )
        w(cost_line(summary) + "\n")
        w(calls_line(summary) + "\n")
    if summary.reasons:
        w("routed to review: " + ", ".join(f"{k} {v}" for k, v in summary.reasons.most_common()) + "\n")
    overall = summary.agreement.get("overall") or {}
    if overall.get("decisions"):
        kappa = overall["kappa"]
        w(
            f"judge-engine agreement: {overall['agreed']}/{overall['decisions']} = {overall['rate']:.1%}, "
            f"kappa {'n/a' if kappa is None else f'{kappa:.2f}'}\n"
        )
        for rtype, fig in summary.agreement.get("by_type", {}).items():
            k = fig["kappa"]
            w(
                f"  {rtype:<12} {fig['agreed']}/{fig['decisions']} agree, "
                f"kappa {'n/a' if k is None else f'{k:.2f}'}\n"
            )
    if summary.violated:
        w("most often failed: " + ", ".join(f"{k} ({v})" for k, v in summary.violated.most_common(5)) + "\n")
    w(
        f"stored as {summary.run_id}: `seqjudge runs show {summary.run_id}`, `seqjudge review list --run "
        f"{summary.run_id}`\n"
    )
    if summary.status == "stopped":
        w(
            f"STOPPED before every trace was judged: {summary.stopped}. The run is resumable: "
            f"`seqjudge run --resume {summary.run_id}` finishes it (add --max-cost to cap the rest).\n"
        )


def cost_line(summary: RunSummary) -> str:
    cost = summary.cost_totals()
    if cost is None:
        return (
            f"cost: unknown (no price for {summary.model}; give one with --prices FILE or prices: in "
            "seqjudge.yaml)"
        )
    return (
        f"cost: ${cost['usd']:.4f} (input ${cost['input_usd']:.4f}, cached input "
        f"${cost['cached_input_usd']:.4f}, cache writes ${cost['cache_write_usd']:.4f}, output "
        f"${cost['output_usd']:.4f}); ${cost['per_trace_usd']:.5f} a judged trace, at most "
        f"${cost['max_trace_usd']:.5f}; {summary.model} at {summary.price.describe()}"  # type: ignore[union-attr]
    )


def calls_line(summary: RunSummary) -> str:
    calls = summary.calls
    line = f"model calls: {calls.get('calls', 0)} made, {summary.cache_hits} answered from the cache"
    if calls.get("failed_calls"):
        errors = ", ".join(f"{k} {v}" for k, v in sorted(calls.get("errors", {}).items()))
        line += f", {calls['failed_calls']} failed ({errors})"
    if calls.get("transport_retries"):
        line += f", {calls['transport_retries']} SDK retries"
    if calls.get("rate_limited"):
        line += f", {calls['rate_limited']} rate-limit replies (each paused the run)"
    return line


def print_estimate(est: RunEstimate, out: Any = None) -> None:
    """The `--dry-run` report."""
    w = (out or sys.stdout).write
    skipped = f" ({est.skipped_stored} already stored, not counted)" if est.skipped_stored else ""
    w(f"dry run: {est.traces} trace(s){skipped}, {est.calls} judge call(s) (re-asks not counted)\n")
    if est.judge_skipped:
        w(f"judge skipped: {est.judge_skipped}; no tokens would be spent.\n")
        return
    w(
        f"estimated tokens (characters / 4): {est.input_tokens:,} input ({est.static_tokens:,} a call are "
        f"the static part a prompt cache can reuse), {est.output_tokens:,} output (about "
        f"{DRY_RUN_OUTPUT_TOKENS} a reply; at most {est.max_output_tokens:,})\n"
    )
    cost, cached = est.cost(), est.cost(prompt_cache=True)
    if cost is None or cached is None or est.price is None:
        w(f"estimated cost: unknown (no price for {est.model}; give one with --prices FILE)\n")
    else:
        w(
            f"estimated cost: ${cost:.4f} at {est.model} prices ({est.price.describe()}); "
            f"${cached:.4f} if the static part is read from the provider's prompt cache\n"
        )
    w("no model was called and no run was written.\n")


@app.command()
def run(
    args: Annotated[
        list[str] | None,
        typer.Argument(help="CONFIG (seqjudge.yaml), or RULES TRACES; none with --resume (the run's own)."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="provider:model, e.g. openai:gpt-4o.")] = None,
    catalog: Annotated[str | None, typer.Option("--catalog")] = None,
    examples: Annotated[
        str | None, typer.Option("--examples", help="The judge's worked examples (YAML).")
    ] = None,
    risk_level: Annotated[Risk | None, typer.Option("--risk-level")] = None,
    threshold: Annotated[float | None, typer.Option("--threshold", min=0.0, max=1.0)] = None,
    store: Annotated[str | None, typer.Option("--store", help="SQLite store path.")] = None,
    judge_mode: Annotated[str | None, typer.Option("--judge-mode", help="full or contextual.")] = None,
    max_attempts: Annotated[int | None, typer.Option("--max-attempts", min=1)] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1)] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not reuse cached judge replies.")] = False,
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible server URL.")] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="Finish run RUN (id or `latest`).")] = None,
    label: Annotated[str | None, typer.Option("--label", help="A name for this run.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="text or json (the summary).")] = "text",
    trace_format: TraceFormatOpt = None,
    messages_key: MessagesKeyOpt = None,
    error_pattern: ErrorPatternOpt = None,
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

    Exit 0 when every trace passed; 1 when some failed or need review, or when --max-cost stopped the run
    before every trace was judged (it is stored as `stopped`; `seqjudge run --resume RUN` finishes it);
    2 bad input; 3 provider unreachable.
    """
    from seqjudge.ingest import load_traces
    from seqjudge.store import Store

    if judge_mode not in (None, "full", "contextual"):
        raise InputError(
            f"--judge-mode is {judge_mode!r}", where="--judge-mode", hint="use full or contextual"
        )
    base_cfg = None
    if not args and resume:
        base_cfg = stored_config(store or DEFAULT_STORE, resume)
    cfg = build_config(
        args or [],
        {
            "model": model,
            "catalog": catalog,
            "examples": examples,
            "risk_level": risk_level.value if risk_level else None,
            "threshold": threshold,
            "store": store,
            "judge_mode": judge_mode,
            "max_attempts": max_attempts,
            "concurrency": concurrency,
            "cache": False if no_cache else None,
            "base_url": base_url,
            "label": label,
            "trace_format": trace_format,
            "messages_key": messages_key,
            "error_pattern": error_pattern,
            "rpm": rpm,
            "tpm": tpm,
            "max_cost": max_cost,
            "prices": prices,
        },
        base=base_cfg,
    )
    ruleset = load_ruleset(Path(cfg.rules), Path(cfg.catalog) if cfg.catalog else None)
    catalog_obj = examples_obj = None
    if cfg.catalog or ruleset.catalog:
        from seqjudge.rules.catalog import load_catalog

        catalog_obj = load_catalog(cfg.catalog or ruleset.catalog)  # type: ignore[arg-type]
    if cfg.examples:
        from seqjudge.judge.prompt import load_examples

        examples_obj = load_examples(cfg.examples)
    traces = load_traces(
        cfg.traces, format=cfg.trace_format, messages_key=cfg.messages_key, error_pattern=cfg.error_pattern
    )
    if dry_run:
        skip: set[str] = set()
        if resume:
            with Store(cfg.store, create=False) as db:
                skip = db.completed_trace_ids(db.resolve_run(resume))
        est = estimate_run(cfg, ruleset, traces, catalog=catalog_obj, examples=examples_obj, skip=skip)
        if fmt == "json":
            json.dump(est.as_dict(), sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print_estimate(est)
        return 0
    # -- batch runs: submitted here, collected by `seqjudge batch collect` (seqjudge.cli.batch_cmd) --
    if batch:
        from seqjudge.cli.batch_cmd import submit_batch

        return submit_batch(cfg, ruleset, traces, catalog_obj, examples_obj, resume=resume, fmt=fmt)
    # -- end batch runs --
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
    if fmt == "json":
        json.dump(
            {"run_id": summary.run_id, "status": summary.status, **summary.totals()}, sys.stdout, indent=2
        )
        sys.stdout.write("\n")
    else:
        print_summary(summary)
    if summary.status == "stopped":
        return 1
    return 0 if summary.verdicts["pass"] == summary.traces else 1


def stored_config(store_path: str, ref: str) -> RunConfig:
    """The config a run was started with, for `seqjudge run --resume RUN` without arguments."""
    from pydantic import ValidationError

    from seqjudge.store import Store

    with Store(store_path, create=False) as db:
        info = db.run_info(db.resolve_run(ref))
    try:
        return RunConfig.model_validate(info.config)
    except ValidationError as exc:
        raise InputError(
            f"run {info.id} was stored with a config this seqjudge cannot read back "
            f"({exc.errors()[0]['msg']})",
            source=store_path,
            where="--resume",
            hint=f"give the suite again: seqjudge run RULES TRACES --resume {info.id}",
        ) from None


def count_traces(cfg: RunConfig) -> int | None:
    """How many traces the suite holds (for the progress bar's total and time left); None for stdin or
    unreadable input (the run itself reports that properly)."""
    from seqjudge.errors import SeqjudgeError
    from seqjudge.ingest import load_traces

    if cfg.traces == "-":
        return None
    try:
        return sum(
            1
            for _ in load_traces(
                cfg.traces,
                format=cfg.trace_format,
                messages_key=cfg.messages_key,
                error_pattern=cfg.error_pattern,
            )
        )
    except (SeqjudgeError, OSError):
        return None
