"""`seqjudge run`'s closing summary and `seqjudge run --dry-run`'s estimate, as text or JSON.

``run_text``/``run_json`` take a ``runner.RunSummary``; ``estimate_text``/``estimate_json`` a
``runner.RunEstimate``; each writes to ``out`` (default: stdout).
"""

from __future__ import annotations

import json
import sys
from typing import IO

from seqjudge.defaults import store_flag
from seqjudge.outputs.coverage import coverage_lines
from seqjudge.runner import DRY_RUN_OUTPUT_TOKENS, RunEstimate, RunSummary


def run_json(summary: RunSummary, out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    json.dump({"run_id": summary.run_id, "status": summary.status, **summary.totals()}, out, indent=2)
    out.write("\n")


def estimate_json(est: RunEstimate, out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    json.dump(est.as_dict(), out, indent=2)
    out.write("\n")


def run_text(summary: RunSummary, out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    w = out.write
    w(
        f"run {summary.run_id}: {summary.traces} trace(s) decided: {summary.verdicts['pass']} pass, "
        f"{summary.verdicts['fail']} fail, {summary.verdicts['review']} review"
    )
    w(f" ({summary.skipped_stored} already stored, not judged again)\n" if summary.skipped_stored else "\n")
    if summary.judge_skipped:
        w(deferred_line(summary) + "\n")
    else:
        w(
            f"judge: {dict(summary.judge_status)}; tokens: {summary.tokens['input']} input "
            f"({summary.tokens['cached_input']} cached), {summary.tokens['output']} output\n"
        )
        w(cost_line(summary) + "\n")
        w(calls_line(summary) + "\n")
        for line in stage_lines(summary):
            w(line + "\n")
    if summary.reasons:
        # The reasons per trace (one trace may have several), then the items: `review list`'s count.
        items = f"{summary.queued} review item{'s' if summary.queued != 1 else ''}"
        w("routed to review: " + ", ".join(f"{k} {v}" for k, v in summary.reasons.most_common()))
        w(f" ({items})\n")
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
    for note in summary.notes:
        w(f"note: {note}\n")
    for line in coverage_lines(summary.coverage):
        w(line + "\n")
    if summary.violated:
        w("most often failed: " + ", ".join(f"{k} ({v})" for k, v in summary.violated.most_common(5)) + "\n")
    store = store_flag(summary.store)  # the hints work from the folder the run was started in
    w(
        f"stored as {summary.run_id}: `seqjudge runs show {summary.run_id}{store}`, `seqjudge review list "
        f"--run {summary.run_id}{store}`\n"
    )
    if summary.status == "stopped":
        w(
            f"STOPPED before every trace was judged: {summary.stopped}. The run is resumable: "
            f"`seqjudge run --resume {summary.run_id}{store}` finishes it (add --max-cost to cap the rest).\n"
        )


def deferred_line(summary: RunSummary) -> str:
    """The one line a run without a judge prints: which `judge` rules were left undecided, and why.

    Those rules count in no score and send no trace to review; the verdicts are the engine's alone."""
    why = f"judge skipped: {summary.judge_skipped}"
    if not summary.deferred_rules:
        return f"{why}; the suite has no judge rules, so the verdicts are the engine's."
    return (
        f"judge rules deferred (no model): {', '.join(summary.deferred_rules)}; in no verdict and no review "
        f"item (verdicts as `seqjudge check`); {why}."
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


def stage_lines(summary: RunSummary) -> list[str]:
    """An escalation cascade, judge by judge: what each settled, passed on, and cost."""
    if summary.stages is None:
        return []
    rows = summary.stages.totals()
    lines = ["escalation (judge rule decisions):"]
    for n, row in enumerate(rows):
        onward = "to review" if n == len(rows) - 1 else f"to {rows[n + 1]['model']}"
        cost = "cost unknown (no price)" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
        lines.append(
            f"  {n + 1}. {row['model']}: asked about {row['traces']} trace(s), settled {row['settled']}, "
            f"passed {row['passed_on']} {onward}; {row['input_tokens']} input, {row['output_tokens']} output "
            f"tokens, {cost}"
        )
    return lines


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


def estimate_text(est: RunEstimate, out: IO[str] | None = None) -> None:
    """The `--dry-run` report."""
    w = (out or sys.stdout).write
    skipped = f" ({est.skipped_stored} already stored, not counted)" if est.skipped_stored else ""
    if est.judge_skipped:
        w(f"dry run: {est.traces} trace(s){skipped}, no judge call\n")
        w(f"judge skipped: {est.judge_skipped}; no tokens would be spent.\n")
        return
    w(f"dry run: {est.traces} trace(s){skipped}, {est.calls} judge call(s) (re-asks not counted)\n")
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
    if est.escalate:
        w(
            f"not estimated: escalation to {', '.join(est.escalate)} (what it is asked depends on the first "
            "judge's confidence; each judge's calls are added to its cost once the run is made)\n"
        )
    w("no model was called and no run was written.\n")
