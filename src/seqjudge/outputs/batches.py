"""Batch runs as text or JSON: what `seqjudge run --batch` submitted, the state of a run's provider batches
(`seqjudge batch status`), and what `seqjudge batch collect` stored."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from seqjudge.outputs.summary import run_text
from seqjudge.store import BatchInfo, RunInfo

if TYPE_CHECKING:
    from seqjudge.batch import CollectSummary, SubmitSummary


@dataclass
class Submitted:
    summary: SubmitSummary
    batches: dict[str, BatchInfo]
    provider: str
    model: str
    capped: bool  # the config set --max-cost, which a batch run cannot honour


def submitted_json(view: Submitted, out: IO[str]) -> None:
    summary, batches = view.summary, view.batches
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
    json.dump(data, out, indent=2)
    out.write("\n")


def submitted_text(view: Submitted, out: IO[str]) -> None:
    summary, batches = view.summary, view.batches
    w = out.write
    w(
        f"run {summary.run_id}: {summary.submitted} judge request(s) submitted to the {view.provider} "
        f"batch API ({view.model}) in {len(summary.batch_ids)} batch(es)"
    )
    w(f"; {summary.stored} trace(s) stored at once (no model call needed)\n" if summary.stored else "\n")
    for bid in summary.batch_ids:
        w(f"  batch {bid}: {batches[bid].request_count} request(s), {batches[bid].status}\n")
    if view.capped:
        w("note: --max-cost does not cap a batch run (every request is submitted at once).\n")
    if summary.status == "completed":
        w(f"run {summary.run_id} is complete: `seqjudge runs show {summary.run_id}`\n")
    else:
        w(
            f"status: batch_pending. `seqjudge batch status {summary.run_id}` polls the batches; "
            f"`seqjudge batch collect {summary.run_id} --wait` stores the results and finishes the run.\n"
        )


@dataclass
class BatchStatus:
    run_id: str
    info: RunInfo
    batch_traces: int  # traces judged through batches
    batches: list[BatchInfo]


def status_json(view: BatchStatus, out: IO[str]) -> None:
    data = {
        "run_id": view.run_id,
        "status": view.info.status,
        "traces": view.info.counts["traces"],
        "batch_traces": view.batch_traces,
        "batches": [b.model_dump(mode="json") for b in view.batches],
    }
    json.dump(data, out, indent=2)
    out.write("\n")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def status_text(view: BatchStatus, out: IO[str]) -> None:
    w = out.write
    info, batches = view.info, view.batches
    stored = info.counts["traces"]
    w(f"run {view.run_id}: {info.status}; {stored} trace(s) stored ")
    w(f"({view.batch_traces} judged through batches)\n")
    width = max(len("BATCH"), *(len(b.id) for b in batches))
    w(f"  {'BATCH':<{width}}  ROUND  {'PURPOSE':<7}  {'STATUS':<11}  {'STATE':<9}  REQUESTS  COUNTS\n")
    for b in batches:
        w(
            f"  {b.id:<{width}}  {b.round:>5}  {b.purpose:<7}  {b.status:<11}  {b.state:<9}  "
            f"{b.request_count:>8}  {_counts(b.counts)}\n"
        )


def collected_json(done: CollectSummary, out: IO[str], *, waited: bool = False) -> None:
    data: dict[str, Any] = {
        "run_id": done.run_id,
        "status": done.status,
        "recorded": done.recorded,
        "stored": done.stored,
        "reasked_online": done.reasked_online,
        "follow_up_batches": done.follow_up_batches,
        "pending_batches": done.pending_batches,
        "remaining": done.remaining,
    }
    if done.summary is not None:
        data["totals"] = done.summary.totals()
    json.dump(data, out, indent=2)
    out.write("\n")


def collected_text(done: CollectSummary, out: IO[str], *, waited: bool = False) -> None:
    """``waited``: each round was already shown as it happened (``round_text``)."""
    if not waited:
        round_text(done, out)
    run_id = done.run_id
    if done.summary is not None:
        run_text(done.summary, out)
    elif done.status == "completed":
        out.write(f"run {run_id} was already complete: `seqjudge runs show {run_id}`\n")
    else:
        out.write(
            f"still out: {done.pending_batches} batch(es), {done.remaining} trace(s) not stored yet; "
            f"`seqjudge batch collect {run_id} --wait` waits for them\n"
        )


def round_text(step: CollectSummary, out: IO[str] | None = None) -> None:
    """One collecting round: what was recorded, stored and re-asked."""
    w = (out or sys.stdout).write
    w(
        f"run {step.run_id}: {step.recorded} result(s) recorded from ended batches, {step.stored} trace(s) "
        f"stored, {step.reasked_online} re-asked online\n"
    )
    if step.follow_up_batches:
        w(f"follow-up batch(es) submitted: {', '.join(step.follow_up_batches)}\n")
