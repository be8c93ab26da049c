"""`seqjudge check`: the deterministic engine over a set of traces."""

import contextlib
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import (
    CatalogOpt,
    ConfigRiskOpt,
    ConfigThresholdOpt,
    Explain,
    ExplainOpt,
    OutputOpt,
    Risk,
    StrictOpt,
    format_option,
)
from seqjudge.cli.trace_options import AllowEmpty, ErrorPattern, MessagesKey, TraceFormat, Verbose
from seqjudge.defaults import DEFAULT_THRESHOLD
from seqjudge.errors import InputError
from seqjudge.outputs.registry import writer
from seqjudge.outputs.streams import open_output
from seqjudge.safetext import say

if TYPE_CHECKING:
    from seqjudge.config import RunConfig
    from seqjudge.outputs.check import CheckOutput
    from seqjudge.trace import PlainTrace, Trace

FormatOpt = Annotated[str, format_option("check")]
# The trace-reading options are defined once, in trace_options; these names are what the commands use.
TraceFormatOpt = TraceFormat
MessagesKeyOpt = MessagesKey
ErrorPatternOpt = ErrorPattern
VerboseOpt = Verbose


@app.command()
def check(
    rules: Annotated[
        Path | None,
        typer.Argument(
            help="Rule file (YAML or JSON, any supported shape; the settings of a seqjudge.yaml beside it "
            "apply); none: the rules, traces and catalog of ./seqjudge.yaml, or of DIR/seqjudge.yaml when "
            "this is a folder (as `seqjudge init` writes; without one, DIR/rules.yaml over DIR's traces)."
        ),
    ] = None,
    traces: Annotated[
        list[str] | None,
        typer.Argument(
            help="Trace files or directories (several may be given, e.g. traces/*.json), or - for stdin; the "
            "suite's own files (rules.yaml, catalog.json, labels.jsonl, ...) are skipped with a note; none: "
            "the config's.",
            show_default=False,
        ),
    ] = None,
    catalog: CatalogOpt = None,
    threshold: ConfigThresholdOpt = None,
    risk_level: ConfigRiskOpt = None,
    fmt: FormatOpt = "text",
    output: OutputOpt = None,
    trace_format: TraceFormatOpt = None,
    messages_key: MessagesKeyOpt = None,
    error_pattern: ErrorPatternOpt = None,
    verbose: VerboseOpt = False,
    allow_empty: AllowEmpty = False,
    strict: StrictOpt = None,
    explain: ExplainOpt = Explain.not_passed,
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
    from seqjudge.checkpool import Checker, Checks, LinePool
    from seqjudge.ingest import IngestStats, load_checkable
    from seqjudge.ingest.base import Batch, Done
    from seqjudge.ingest.stats import report as report_ingest
    from seqjudge.inputs import load_suite
    from seqjudge.outputs.coverage import coverage_lines
    from seqjudge.outputs.textview import Totals
    from seqjudge.rules.coverage import Coverage
    from seqjudge.rules.engine import Engine

    # The suite config applies whenever it is found (the one named, or the seqjudge.yaml beside RULES), as
    # for `run` (inputs.config_of); each flag given wins over it, both ways for --strict/--no-strict.
    cfg = _config(rules, traces)
    if cfg is not None:
        rules = Path(cfg.rules)
        traces = [cfg.traces] if isinstance(cfg.traces, str) else list(cfg.traces)
        catalog = catalog if catalog is not None else (Path(cfg.catalog) if cfg.catalog else None)
        # The config's risk level and threshold, unless given as flags: `check` and `run` of a suite agree.
        risk_level = risk_level or Risk(cfg.risk_level)
        threshold = cfg.threshold_for(risk_level.value) if threshold is None else threshold
        strict = cfg.strict if strict is None else strict
        trace_format = trace_format or cfg.trace_format
        messages_key = messages_key or cfg.messages_key
        error_pattern = error_pattern or cfg.error_pattern
        allow_empty = allow_empty or cfg.allow_empty
    assert rules is not None and traces  # _config said what is missing otherwise
    risk_level = risk_level or Risk.medium
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    strict = bool(strict)
    suite = load_suite(rules, catalog)
    ruleset = suite.ruleset
    output_class: type[CheckOutput] = writer("check", fmt)
    totals = Totals()
    coverage = totals.coverage = Coverage.of(ruleset, suite.catalog, strict=strict)
    stats = IngestStats()
    options: dict[str, Any] = dict(
        format=trace_format,
        messages_key=messages_key,
        error_pattern=error_pattern,
        verbose=verbose,
        allow_empty=allow_empty,
        stats=stats,
    )
    with open_output(output, inputs=[rules, catalog, *traces]) as out:
        # Several paths name no single file or folder, as stdin does not (SARIF then gives no file location).
        shown = output_class(
            out,
            source=traces[0] if len(traces) == 1 else "-",
            title=" ".join(traces),
            ruleset=ruleset,
            threshold=threshold,
            risk_level=risk_level.value,
        )
        # Each format renders a trace's part where the trace is checked, and the totals are counted there
        # too, so a large native JSONL file is checked, formatted and counted by worker processes
        # (checkpool) in every format; plain JSONL records skip the models (PlainTrace) unless the format
        # shows what only the models hold.
        checker = Checker(
            Engine(ruleset),
            threshold,
            risk_level.value,
            render=shown.render,
            explain=explain.value,
            totals=totals,
        )
        pool = (
            LinePool(checker, workers=workers, join=shown.joins(), failures_only=failures_only)
            if "-" not in traces
            else None
        )
        stream: Generator[Trace | PlainTrace | Done | Batch, None, None]
        stream = load_checkable(traces, native_lines=pool, plain=not output_class.models, **options)
        # closing: an error ends the loop early, and a worker pool must shut down then, not at collection.
        try:
            with contextlib.closing(stream):
                # The head waits for the first trace: input that is bad from the start writes nothing.
                started = False
                for item in stream:
                    if isinstance(item, Batch):  # a worker's chunk, in a few builtins, not an item a trace
                        assert isinstance(item.result, Checks)
                        if not started:
                            shown.start()
                            started = True
                        shown.take_all(item.result, failures_only)
                        continue
                    checked = item.result if isinstance(item, Done) else checker.checked(item)
                    if not started:
                        shown.start()
                        started = True
                    shown.take(checked, failures_only)
                if not started:
                    shown.start()
                shown.finish(totals)
        except BaseException:
            with contextlib.suppress(OSError):  # the error that ended the run is the one to show
                shown.abandon()
            raise
    if output is not None and str(output) != "-":
        # The output went to a file: one line here says it ran and how it came out, as linters do.
        say(f"seqjudge: {totals.line()}; written to {output}", err=True)
    if verbose:
        report_ingest(stats)
    if fmt != "text":  # the text view ends with these; machine formats keep stdout for their data
        for line in coverage_lines(coverage):
            say(line, err=True)
    failure = coverage.strict_error()
    if failure is not None:
        raise InputError(failure, hint="See the warnings above; fix the rules or the input")
    return 0 if totals.verdicts["pass"] == totals.n else 1


def _config(rules: Path | None, traces: list[str] | None) -> "RunConfig | None":
    """`check` or `check DIR`: the config of DIR/seqjudge.yaml (or of this folder's); `check RULES TRACES`:
    the seqjudge.yaml beside RULES, if any (None: the files alone, and no config module is loaded)."""
    from seqjudge.inputs import config_of

    if rules is not None and not traces and not rules.is_dir():
        raise InputError(
            "missing TRACES",
            where="arguments",
            hint="seqjudge check RULES TRACES, or seqjudge check [DIR] for the suite of DIR/seqjudge.yaml",
        )
    return config_of(([] if rules is None else [str(rules)]) + list(traces or []))
