"""`seqjudge check`: the deterministic engine over a set of traces."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import (
    CatalogOpt,
    OutputOpt,
    Risk,
    RiskOpt,
    RulesArg,
    ThresholdOpt,
    TracesArg,
    format_option,
)
from seqjudge.cli.trace_options import AllowEmpty, ErrorPattern, MessagesKey, TraceFormat, Verbose
from seqjudge.ingest.base import Done
from seqjudge.inputs import load_suite
from seqjudge.outputs.check import CheckOutput
from seqjudge.outputs.registry import writer
from seqjudge.outputs.streams import open_output
from seqjudge.outputs.textview import Totals
from seqjudge.report import DEFAULT_THRESHOLD
from seqjudge.rules.engine import Engine
from seqjudge.trace import PlainTrace, Trace

FormatOpt = Annotated[str, format_option("check")]
# The trace-reading options are defined once, in trace_options; these names are what the commands use.
TraceFormatOpt = TraceFormat
MessagesKeyOpt = MessagesKey
ErrorPatternOpt = ErrorPattern
VerboseOpt = Verbose


@app.command()
def check(
    rules: RulesArg,
    traces: TracesArg,
    catalog: CatalogOpt = None,
    threshold: ThresholdOpt = DEFAULT_THRESHOLD,
    risk_level: RiskOpt = Risk.medium,
    fmt: FormatOpt = "text",
    output: OutputOpt = None,
    trace_format: TraceFormatOpt = None,
    messages_key: MessagesKeyOpt = None,
    error_pattern: ErrorPatternOpt = None,
    verbose: VerboseOpt = False,
    allow_empty: AllowEmpty = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=0,
            help="Worker processes for a large JSONL file (default: one per core; "
            "0: check everything in this process).",
        ),
    ] = None,
    failures_only: Annotated[
        bool,
        typer.Option(
            "--failures-only",
            "-q",
            help="Leave out the traces that passed (every format; the summary still counts them).",
        ),
    ] = False,
) -> int:
    """Check every trace against the rules with the deterministic engine.

    Exit 0 when every trace passed, 1 when some trace failed or needs review, 2 on bad input.
    """
    from seqjudge.checkpool import Checker, LinePool
    from seqjudge.ingest import IngestStats, load_checkable
    from seqjudge.ingest.stats import report as report_ingest

    ruleset = load_suite(rules, catalog).ruleset
    output_class: type[CheckOutput] = writer("check", fmt)
    totals = Totals()
    stats = IngestStats()
    options: dict[str, Any] = dict(
        format=trace_format,
        messages_key=messages_key,
        error_pattern=error_pattern,
        verbose=verbose,
        allow_empty=allow_empty,
        stats=stats,
    )
    with open_output(output) as out:
        shown = output_class(
            out, source=traces, ruleset=ruleset, threshold=threshold, risk_level=risk_level.value
        )
        # Each format renders a trace's part where the trace is checked, so a large native JSONL file is
        # checked and formatted by worker processes (checkpool) in every format; plain JSONL records skip
        # the models (PlainTrace).
        checker = Checker(Engine(ruleset), threshold, risk_level.value, render=shown.render)
        pool = LinePool(checker, workers=workers) if traces != "-" else None
        stream: Generator[Trace | PlainTrace | Done, None, None]
        stream = load_checkable(traces, native_lines=pool, **options)
        # closing: an error ends the loop early, and a worker pool must shut down then, not at collection.
        with contextlib.closing(stream):
            # The head waits for the first trace: input that is bad from the start writes nothing.
            started = False
            for item in stream:
                checked = item.result if isinstance(item, Done) else checker.checked(item)
                if not started:
                    shown.start()
                    started = True
                totals.count(checked.verdict, checked.violated, checked.deferred, checked.trace_id)
                if not (failures_only and checked.verdict == "pass"):
                    shown.line(checked)
            if not started:
                shown.start()
            shown.finish(totals)
    if verbose:
        report_ingest(stats)
    return 0 if totals.verdicts["pass"] == totals.n else 1
