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
from seqjudge.config import RunConfig, load_config
from seqjudge.errors import InputError
from seqjudge.runner import RunSummary, run_traces


def build_config(args: list[str], overrides: dict[str, Any]) -> RunConfig:
    """`run CONFIG` or `run RULES TRACES`; flags (non-None) override the file."""
    if len(args) == 1:
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
            hint="seqjudge run seqjudge.yaml  or  seqjudge run rules.yaml traces.jsonl",
        )
    if overrides.get("model") is None and cfg.model is None and os.environ.get("SEQJUDGE_MODEL"):
        overrides["model"] = os.environ["SEQJUDGE_MODEL"]
    options = {k: overrides.pop(k) for k in ("base_url",) if overrides.get(k) is not None}
    update = {k: v for k, v in overrides.items() if v is not None}
    if options:
        update["model_options"] = cfg.model_options.model_copy(update=options)
    return cfg.model_copy(update=update)


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


@app.command()
def run(
    args: Annotated[list[str], typer.Argument(help="CONFIG (seqjudge.yaml), or RULES TRACES.")],
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
) -> int:
    """Run the engine and (where a model is configured) the judge over a suite, reconcile them rule by rule,
    route doubtful traces to review, and store everything.

    Exit 0 when every trace passed, 1 when some failed or need review, 2 bad input, 3 provider unreachable.
    """
    from seqjudge.ingest import load_traces
    from seqjudge.store import Store

    if judge_mode not in (None, "full", "contextual"):
        raise InputError(
            f"--judge-mode is {judge_mode!r}", where="--judge-mode", hint="use full or contextual"
        )
    cfg = build_config(
        args,
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
        },
    )
    ruleset = load_ruleset(Path(cfg.rules), Path(cfg.catalog) if cfg.catalog else None)
    catalog_obj = examples_obj = None
    if cfg.catalog or ruleset.catalog:
        from seqjudge.catalog import load_catalog

        catalog_obj = load_catalog(cfg.catalog or ruleset.catalog)  # type: ignore[arg-type]
    if cfg.examples:
        from seqjudge.judge.prompt import load_examples

        examples_obj = load_examples(cfg.examples)
    traces = load_traces(
        cfg.traces, format=cfg.trace_format, messages_key=cfg.messages_key, error_pattern=cfg.error_pattern
    )
    with Store(cfg.store) as db:
        run_id = db.resolve_run(resume) if resume else None
        summary = asyncio.run(
            run_traces(cfg, ruleset, traces, db, run_id=run_id, catalog=catalog_obj, examples=examples_obj)
        )
    if fmt == "json":
        json.dump({"run_id": summary.run_id, **summary.totals()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_summary(summary)
    return 0 if summary.verdicts["pass"] == summary.traces else 1
