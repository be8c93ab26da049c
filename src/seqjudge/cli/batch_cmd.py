"""`seqjudge run --batch` (the submission) and `seqjudge batch status|collect`: judge a suite through the
provider's batch API at half price, and finish the run when the batches are done."""

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt, format_option
from seqjudge.defaults import DEFAULT_STORE
from seqjudge.errors import InputError
from seqjudge.outputs.registry import writer

if TYPE_CHECKING:
    from seqjudge.config import RunConfig
    from seqjudge.rules.model import RuleSet
    from seqjudge.store import Store

batch_app = typer.Typer(
    help="Batch runs (`seqjudge run --batch`): poll their provider batches, collect the results.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(batch_app, name="batch")


class Reask(StrEnum):
    online = "online"
    batch = "batch"


RunArg = Annotated[str, typer.Argument(help="A run id, a unique prefix of one, or `latest`.")]


# -- submission (called by `seqjudge run --batch`) ----------------------------------------------------------
def submit_batch(
    cfg: "RunConfig",
    ruleset: "RuleSet",
    traces: Any,
    catalog: Any,
    examples: Any,
    *,
    resume: str | None = None,
    fmt: str = "text",
) -> int:
    """Submit the run's judge requests; print the run id and the batch ids; exit 0 (the run is pending)."""
    import asyncio

    from seqjudge.batch import submit_run
    from seqjudge.batch_api import batch_api
    from seqjudge.judge.providers.base import get_provider
    from seqjudge.outputs.batches import Submitted
    from seqjudge.store import Store

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

    async def submit(db: "Store") -> Any:
        try:
            return await submit_run(
                cfg, ruleset, traces, db, provider=provider, catalog=catalog, examples=examples, api=api
            )
        finally:
            await provider.aclose()  # type: ignore[attr-defined]

    with Store(cfg.store) as db:
        summary = asyncio.run(submit(db))
        batches = {b.id: b for b in db.batches(summary.run_id)}
    view = Submitted(summary, batches, provider.name, cfg.model, capped=bool(cfg.max_cost))
    writer("batch-submit", fmt)(view, sys.stdout)
    return 0


# -- status --------------------------------------------------------------------------------------------------
@batch_app.command("status")
def status(
    run: RunArg,
    store: StoreOpt = DEFAULT_STORE,
    fmt: Annotated[str, format_option("batch-status")] = "text",
) -> int:
    """Poll the provider about the run's batches and print each one's state and request counts."""
    import asyncio

    from seqjudge.batch import poll_batches
    from seqjudge.outputs.batches import BatchStatus
    from seqjudge.store import Store

    with Store(store, create=False) as db:
        run_id = db.resolve_run(run)
        if not db.batches(run_id):
            raise InputError(
                f"run {run_id} has no provider batches",
                source=db.location,
                hint="`seqjudge run --batch` submits a run to a provider's batch API",
            )
        batches = asyncio.run(poll_batches(db, run_id))
        info = db.run_info(run_id)
        traces = len(db.batch_traces(run_id))
    writer("batch-status", fmt)(BatchStatus(run_id, info, traces, batches), sys.stdout)
    return 0


# -- collect -------------------------------------------------------------------------------------------------
@batch_app.command("collect")
def collect(
    run: RunArg,
    store: StoreOpt = DEFAULT_STORE,
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
    fmt: Annotated[str, format_option("batch-collect")] = "text",
) -> int:
    """Store the results of the run's ended batches (re-asking malformed replies, retrying failed requests
    once) and finish the run when every trace is in.

    Exit 0 while batches are still out, or when the finished run passed every trace; 1 when some trace
    failed or needs review; 2 bad input; 3 provider unreachable.
    """
    import asyncio

    from seqjudge.batch import collect_run
    from seqjudge.outputs.batches import round_text
    from seqjudge.store import Store

    with Store(store, create=False) as db:
        run_id = db.resolve_run(run)
        # While waiting, the text view says what each round did as it happens.
        on_round = round_text if (wait and fmt == "text") else None
        done = asyncio.run(
            collect_run(
                db, run_id, reask=reask.value, wait=wait, poll_interval=poll_interval, on_round=on_round
            )
        )
    summary = done.summary
    writer("batch-collect", fmt)(done, sys.stdout, waited=wait)
    if summary is None:
        return 0
    return 0 if summary.verdicts["pass"] == summary.traces else 1
