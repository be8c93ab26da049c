"""`seqjudge check`: the deterministic engine over a set of traces."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import (
    CatalogOpt,
    Explain,
    ExplainOpt,
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
    explain: ExplainOpt = Explain.not_passed,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=0,
            help="Worker processes for --format jsonl from a large JSONL file (default: one per core; "
            "0: check everything in this process).",
        ),
    ] = None,
) -> int:
    """Check every trace against the rules with the deterministic engine.

    Exit 0 when every trace passed, 1 when some trace failed or needs review, 2 on bad input.
    """
    from seqjudge.checkpool import Checker, LinePool
    from seqjudge.ingest import IngestStats, load_checkable, load_traces
    from seqjudge.ingest.stats import report as report_ingest

    ruleset = load_suite(rules, catalog).ruleset
    output_class: type[CheckOutput] = writer("check", fmt)
    checker = Checker(Engine(ruleset), threshold, risk_level.value, explain.value)
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
    stream: Generator[Trace | PlainTrace | Done, None, None]
    if output_class.models:
        stream = (trace for trace in load_traces(traces, **options))
    else:
        # The other views need only the engine's data, so plain JSONL records skip the models (PlainTrace),
        # and line output from a large native JSONL file is checked by worker processes (checkpool).
        pool = LinePool(checker, workers=workers) if output_class.lines and traces != "-" else None
        stream = load_checkable(traces, native_lines=pool, **options)
    # closing: an error ends the loop early, and a worker pool must shut down then, not at collection.
    with open_output(output) as out, contextlib.closing(stream):
        shown = output_class(out, source=traces)
        for item in stream:
            if shown.lines:
                checked = item.result if isinstance(item, Done) else checker.checked(item)
                totals.count(checked.verdict, checked.violated, checked.deferred)
                shown.line(checked)
                continue
            assert not isinstance(item, Done)
            data = checker.data(item)
            totals.count(
                data["verdict"],
                [v["rule_id"] for v in data["violations"]],
                [r["rule_id"] for r in data["rules"] if r["outcome"] == "deferred"],
            )
            shown.report(item, data)
        shown.finish(totals)
    if verbose:
        report_ingest(stats)
    return 0 if totals.verdicts["pass"] == totals.n else 1
