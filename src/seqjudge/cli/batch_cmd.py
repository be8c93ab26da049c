"""`seqjudge run --batch` (the submission) and `seqjudge batch status|collect`: judge a suite through the
provider's batch API at half price, and finish the run when the batches are done."""

from __future__ import annotations

import asyncio
import json
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt
from seqjudge.config import RunConfig
from seqjudge.errors import InputError
from seqjudge.outputs.summary import run_text
from seqjudge.rules.model import RuleSet
from seqjudge.store import DEFAULT_STORE_PATH, Store

batch_app = typer.Typer(
    help="Batch runs (`seqjudge run --batch`): poll their provider batches, collect the results.",
    no_args_is_help=True,
)
app.add_typer(batch_app, name="batch")


class Reask(StrEnum):
    online = "online"
    batch = "batch"


class Format(StrEnum):
    text = "text"
    json = "json"


RunArg = Annotated[str, typer.Argument(help="A run id, a unique prefix of one, or `latest`.")]
FormatOpt = Annotated[Format, typer.Option("--format", help="text or json.")]


# -- submission (called by `seqjudge run --batch`) ----------------------------------------------------------
def submit_batch(
    cfg: RunConfig,
    ruleset: RuleSet,
    traces: Any,
    catalog: Any,
    examples: Any,
    *,
    resume: str | None = None,
    fmt: str = "text",
) -> int:
    """Submit the run's judge requests; print the run id and the batch ids; exit 0 (the run is pending)."""
    from seqjudge.batch import submit_run
    from seqjudge.batch_api import batch_api
    from seqjudge.judge.providers.base import get_provider

    if resume:
        raise InputError(
            "--batch starts a new run; it cannot be combined with --resume",
            where="--batch",
            hint=f"`seqjudge batch collect {resume}` finishes a batch run",
        )
    if not cfg.model:
        raise InputError(
            "a batch run needs a model",
            where="--batch",
            hint="give --model openai:MODEL or anthropic:MODEL (or `model:` in seqjudge.yaml)",
        )
    opts = cfg.model_options
    provider = get_provider(
        cfg.model, base_url=opts.base_url, timeout=opts.timeout, max_retries=opts.max_retries
    )
    api = batch_api(provider)  # a provider without a batch API is bad input: before any store is opened

    async def submit(db: Store) -> Any:
        try:
            return await submit_run(
                cfg, ruleset, traces, db, provider=provider, catalog=catalog, examples=examples, api=api
            )
        finally:
            await provider.aclose()  # type: ignore[attr-defined]

    with Store(cfg.store) as db:
        summary = asyncio.run(submit(db))
        batches = {b.id: b for b in db.batches(summary.run_id)}
    if fmt == "json":
        data = {
            "run_id": summary.run_id,
            "status": summary.status,
            "submitted": summary.submitted,
            "stored": summary.stored,
            "batches": [
                {"id": bid, "requests": batches[bid].request_count, "status": batches[bid].status}
                for bid in summary.batch_ids
            ],
        }
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    w = sys.stdout.write
    w(
        f"run {summary.run_id}: {summary.submitted} judge request(s) submitted to the {provider.name} "
        f"batch API ({cfg.model}) in {len(summary.batch_ids)} batch(es)"
    )
    w(f"; {summary.stored} trace(s) stored at once (no model call needed)\n" if summary.stored else "\n")
    for bid in summary.batch_ids:
        w(f"  batch {bid}: {batches[bid].request_count} request(s), {batches[bid].status}\n")
    if cfg.max_cost:
        w("note: --max-cost does not cap a batch run (every request is submitted at once).\n")
    if summary.status == "completed":
        w(f"run {summary.run_id} is complete: `seqjudge runs show {summary.run_id}`\n")
    else:
        w(
            f"status: batch_pending. `seqjudge batch status {summary.run_id}` polls the batches; "
            f"`seqjudge batch collect {summary.run_id} --wait` stores the results and finishes the run.\n"
        )
    return 0


# -- status --------------------------------------------------------------------------------------------------
def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


@batch_app.command("status")
def status(run: RunArg, store: StoreOpt = DEFAULT_STORE_PATH, fmt: FormatOpt = Format.text) -> int:
    """Poll the provider about the run's batches and print each one's state and request counts."""
    from seqjudge.batch import poll_batches

    with Store(store, create=False) as db:
        run_id = db.resolve_run(run)
        if not db.batches(run_id):
            raise InputError(
                f"run {run_id} has no provider batches",
                source=str(store),
                hint="`seqjudge run --batch` submits a run to a provider's batch API",
            )
        batches = asyncio.run(poll_batches(db, run_id))
        info = db.run_info(run_id)
        traces = len(db.batch_traces(run_id))
        stored = info.counts["traces"]
    if fmt is Format.json:
        data = {
            "run_id": run_id,
            "status": info.status,
            "traces": info.counts["traces"],
            "batch_traces": traces,
            "batches": [b.model_dump(mode="json") for b in batches],
        }
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    w = sys.stdout.write
    w(f"run {run_id}: {info.status}; {stored} trace(s) stored ({traces} judged through batches)\n")
    width = max(len("BATCH"), *(len(b.id) for b in batches))
    w(f"  {'BATCH':<{width}}  ROUND  {'PURPOSE':<7}  {'STATUS':<11}  {'STATE':<9}  REQUESTS  COUNTS\n")
    for b in batches:
        w(
            f"  {b.id:<{width}}  {b.round:>5}  {b.purpose:<7}  {b.status:<11}  {b.state:<9}  "
            f"{b.request_count:>8}  {_counts(b.counts)}\n"
        )
    return 0


# -- collect -------------------------------------------------------------------------------------------------
@batch_app.command("collect")
def collect(
    run: RunArg,
    store: StoreOpt = DEFAULT_STORE_PATH,
    wait: Annotated[
        bool, typer.Option("--wait", help="Poll until every batch is in and the run is done.")
    ] = False,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", min=0.0, help="Seconds between polls with --wait.")
    ] = 60.0,
    reask: Annotated[
        Reask,
        typer.Option("--reask", help="Re-ask malformed replies online (default) or in a follow-up batch."),
    ] = Reask.online,
    fmt: FormatOpt = Format.text,
) -> int:
    """Store the results of the run's ended batches (re-asking malformed replies, retrying failed requests
    once) and finish the run when every trace is in.

    Exit 0 while batches are still out, or when the finished run passed every trace; 1 when some trace
    failed or needs review; 2 bad input; 3 provider unreachable.
    """
    from seqjudge.batch import collect_run

    with Store(store, create=False) as db:
        run_id = db.resolve_run(run)
        on_round = _print_round if (wait and fmt is Format.text) else None
        done = asyncio.run(
            collect_run(
                db, run_id, reask=reask.value, wait=wait, poll_interval=poll_interval, on_round=on_round
            )
        )
    summary = done.summary
    if fmt is Format.json:
        data: dict[str, Any] = {
            "run_id": run_id,
            "status": done.status,
            "recorded": done.recorded,
            "stored": done.stored,
            "reasked_online": done.reasked_online,
            "follow_up_batches": done.follow_up_batches,
            "pending_batches": done.pending_batches,
            "remaining": done.remaining,
        }
        if summary is not None:
            data["totals"] = summary.totals()
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        if not wait:
            _print_round(done)
        if summary is not None:
            run_text(summary)
        elif done.status == "completed":
            sys.stdout.write(f"run {run_id} was already complete: `seqjudge runs show {run_id}`\n")
        else:
            sys.stdout.write(
                f"still out: {done.pending_batches} batch(es), {done.remaining} trace(s) not stored yet; "
                f"`seqjudge batch collect {run_id} --wait` waits for them\n"
            )
    if summary is None:
        return 0
    return 0 if summary.verdicts["pass"] == summary.traces else 1


def _print_round(step: Any) -> None:
    w = sys.stdout.write
    w(
        f"run {step.run_id}: {step.recorded} result(s) recorded from ended batches, {step.stored} trace(s) "
        f"stored, {step.reasked_online} re-asked online\n"
    )
    if step.follow_up_batches:
        w(f"follow-up batch(es) submitted: {', '.join(step.follow_up_batches)}\n")
