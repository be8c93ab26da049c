"""`seqjudge check`: the deterministic engine over a set of traces."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Generator, Iterator
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.trace_options import AllowEmpty, ErrorPattern, MessagesKey, TraceFormat, Verbose
from seqjudge.errors import InputError
from seqjudge.ingest.base import Done
from seqjudge.report import DEFAULT_THRESHOLD, Report
from seqjudge.rules.engine import Engine
from seqjudge.rules.model import RuleSet
from seqjudge.textview import Totals, trace_line, violation_block
from seqjudge.trace import PlainTrace, Trace


class Format(StrEnum):
    text = "text"
    json = "json"
    jsonl = "jsonl"


class Risk(StrEnum):
    low = "low"
    medium = "medium"
    high = "high"


def load_ruleset(rules: Path, catalog: Path | None) -> RuleSet:
    """Load rules and, with a catalog (flag or the rule file's `catalog:`), reject unknown tool names."""
    import warnings

    from seqjudge.rules.load import load_rules

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ruleset = load_rules(rules)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    catalog_path = catalog or (Path(ruleset.catalog) if ruleset.catalog else None)
    if catalog_path is not None:
        from seqjudge.catalog import load_catalog
        from seqjudge.rules.lint import lint

        problems = [
            # Cycles do not stop `check`: it evaluates and reports them as violations on the traces.
            p
            for p in lint(ruleset, load_catalog(catalog_path))
            if p.level == "error" and p.code != "cycle"
        ]
        if problems:
            listing = "; ".join(f"{p.rule_id or p.where}: {p.message}" for p in problems)
            raise InputError(
                f"the rules name tools the catalog does not have: {listing}",
                source=str(rules),
                hint=f"fix the names or the catalog {catalog_path} (`seqjudge lint` lists every problem)",
            )
    return ruleset


# Reports are written a few KB at a time; a large buffer turns a syscall per report into one per hundred.
_BUFFER = 1 << 20


@contextlib.contextmanager
def open_output(output: Path | None) -> Iterator[IO[str]]:
    if output is None or str(output) == "-":
        yield sys.stdout
        return
    try:
        handle = output.open("w", encoding="utf-8", buffering=_BUFFER)
    except OSError as exc:
        raise InputError(
            f"cannot write the output file ({exc.strerror})",
            source=str(output),
            hint="choose a writable path",
        ) from None
    with handle:
        yield handle


def _byte_writer(out: IO[str]) -> Callable[[bytes], object]:
    """Write UTF-8 bytes to a text stream: straight to its byte buffer when it has one (after flushing the
    text already written), else decoded (a stream without a buffer, such as a test's StringIO)."""
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        return lambda data: out.write(data.decode("utf-8"))
    out.flush()
    return buffer.write  # type: ignore[no-any-return]


RulesArg = Annotated[Path, typer.Argument(help="Rule file (YAML or JSON, any supported shape).")]
TracesArg = Annotated[str, typer.Argument(help="Trace file, directory, or - for stdin.")]
CatalogOpt = Annotated[
    Path | None, typer.Option("--catalog", help="Tool catalog; unknown tool names are errors.")
]
ThresholdOpt = Annotated[
    float, typer.Option("--threshold", min=0.0, max=1.0, help="Scores below this are routed to review.")
]
RiskOpt = Annotated[Risk, typer.Option("--risk-level", help="high: any score below 1.0 goes to review.")]
FormatOpt = Annotated[Format, typer.Option("--format", help="text, json (one document) or jsonl.")]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")]
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
    fmt: FormatOpt = Format.text,
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

    ruleset = load_ruleset(rules, catalog)
    checker = Checker(Engine(ruleset), threshold, risk_level.value)
    totals = Totals()
    reports = []
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
    if fmt is Format.text:
        stream = (trace for trace in load_traces(traces, **options))
    else:
        # The JSON views need only the engine's data, so plain JSONL records skip the models (PlainTrace),
        # and JSONL output from a large native JSONL file is checked by worker processes (checkpool).
        pool = LinePool(checker, workers=workers) if fmt is Format.jsonl and traces != "-" else None
        stream = load_checkable(traces, native_lines=pool, **options)
    # closing: an error ends the loop early, and a worker pool must shut down then, not at collection.
    with open_output(output) as out, contextlib.closing(stream):
        write_line = _byte_writer(out)
        for item in stream:
            if fmt is Format.jsonl:
                checked = item.result if isinstance(item, Done) else checker.checked(item)
                totals.count(checked.verdict, checked.violated, checked.deferred)
                write_line(checked.line)
                continue
            assert not isinstance(item, Done)
            data = checker.data(item)
            totals.count(
                data["verdict"],
                [v["rule_id"] for v in data["violations"]],
                [r["rule_id"] for r in data["rules"] if r["outcome"] == "deferred"],
            )
            if fmt is Format.json:
                reports.append(data)  # already what model_dump(mode="json") of its Report gives
            else:
                report = Report.model_validate(data)
                assert isinstance(item, Trace)
                for v in report.violations:
                    out.write(violation_block(item, report, v) + "\n\n")
                out.write(trace_line(report) + "\n")
        if fmt is Format.json:
            json.dump({"summary": totals.as_dict(), "reports": reports}, out, ensure_ascii=False, indent=2)
            out.write("\n")
        elif fmt is Format.text:
            if totals.deferred:
                out.write(
                    f"{sum(totals.deferred.values())} judge-rule decision(s) deferred: run `seqjudge judge` "
                    "or `seqjudge run` with a model to decide them.\n"
                )
            out.write(totals.line() + "\n")
    if verbose:
        report_ingest(stats)
    return 0 if totals.verdicts["pass"] == totals.n else 1
