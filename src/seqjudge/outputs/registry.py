"""The output formats of each view, and the one way a command picks one.

A *view* is what a command shows (the reports of `seqjudge check`, a run's summary, the stored runs); a
*format* is how (text, json, jsonl, csv, sarif). Each entry names the writer as ``module:attribute``,
imported only when chosen, so a command loads no other format's code. What a writer is depends on the view
(``outputs.check.CheckOutput`` for `check`, a function ``(data, out)`` for the summaries); the module of the
view's text format says it.

Adding a format: its module in ``seqjudge/outputs/`` and one line below; the command's ``--format`` offers
it from then on (``cli.options.format_option`` reads the choices from here).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import IO, Any

from seqjudge.errors import InputError
from seqjudge.safetext import terminal_stream

FORMATS: dict[str, dict[str, str]] = {
    "check": {
        "text": "seqjudge.outputs.check:TextOutput",
        "json": "seqjudge.outputs.check:JsonOutput",
        "jsonl": "seqjudge.outputs.check:JsonlOutput",
        "sarif": "seqjudge.outputs.sarif:SarifOutput",
        "junit": "seqjudge.outputs.check_ci:JunitOutput",
        "markdown": "seqjudge.outputs.check_ci:MarkdownOutput",
        "html": "seqjudge.outputs.check_html:HtmlOutput",
    },
    "judge": {
        "text": "seqjudge.outputs.judged:TextOutput",
        "json": "seqjudge.outputs.judged:JsonOutput",
        "jsonl": "seqjudge.outputs.judged:JsonlOutput",
    },
    "run": {
        "text": "seqjudge.outputs.summary:run_text",
        "json": "seqjudge.outputs.summary:run_json",
    },
    "runs": {"text": "seqjudge.outputs.listings:runs_text", "json": "seqjudge.outputs.listings:models_json"},
    "audit": {"text": "seqjudge.outputs.audit:audit_text", "json": "seqjudge.outputs.audit:audit_json"},
    "rates": {"text": "seqjudge.outputs.rates:rates_text", "json": "seqjudge.outputs.rates:rates_json"},
    "plan-labels": {"text": "seqjudge.outputs.rates:plan_text", "json": "seqjudge.outputs.rates:rates_json"},
    "review": {
        "text": "seqjudge.outputs.listings:review_text",
        "json": "seqjudge.outputs.listings:models_json",
    },
    "export": {
        "jsonl": "seqjudge.outputs.listings:export_jsonl",
        "csv": "seqjudge.outputs.listings:export_csv",
    },
    "baselines": {
        "text": "seqjudge.outputs.listings:baselines_text",
        "json": "seqjudge.outputs.listings:baselines_json",
    },
    "compare": {
        "text": "seqjudge.outputs.comparison:comparison_text",
        "json": "seqjudge.outputs.comparison:comparison_json",
    },
    "report-ci": {
        "text": "seqjudge.outputs.comparison:run_counts_text",
        "json": "seqjudge.outputs.comparison:run_counts_json",
    },
    "batch-submit": {
        "text": "seqjudge.outputs.batches:submitted_text",
        "json": "seqjudge.outputs.batches:submitted_json",
    },
    "batch-status": {
        "text": "seqjudge.outputs.batches:status_text",
        "json": "seqjudge.outputs.batches:status_json",
    },
    "batch-collect": {
        "text": "seqjudge.outputs.batches:collected_text",
        "json": "seqjudge.outputs.batches:collected_json",
    },
    "golden": {
        "text": "seqjudge.outputs.datasets:validation_text",
        "json": "seqjudge.outputs.datasets:validation_json",
    },
    "calibration": {
        "text": "seqjudge.outputs.calibration:report_text",
        "json": "seqjudge.outputs.calibration:report_json",
    },
    "estimate": {
        "text": "seqjudge.outputs.summary:estimate_text",
        "json": "seqjudge.outputs.summary:estimate_json",
    },
}


def names(view: str) -> list[str]:
    """The formats of ``view``, text first."""
    return list(FORMATS[view])


def writer(view: str, fmt: str) -> Any:
    """The writer of ``view`` in format ``fmt`` (an ``InputError`` naming the choices when there is none)."""
    try:
        target = FORMATS[view][fmt]
    except KeyError:
        raise InputError(
            f"no {fmt!r} output for {view}",
            where="--format",
            hint=f"use one of {', '.join(FORMATS.get(view, {}))}",
        ) from None
    module, _, attr = target.partition(":")
    chosen = getattr(import_module(module), attr)
    if fmt != "text" or view in OWN_ESCAPING:
        return chosen
    return _terminal_safe(chosen)


# Text views that make their output terminal-safe themselves: `check` escapes each untrusted field where it
# enters (its per-trace path is benchmarked, and its colours are escape codes of its own), `judge`'s
# writer is a class that wraps its stream (``terminal_stream``).
OWN_ESCAPING = frozenset({"check", "judge"})


def _terminal_safe(write: Callable[..., Any]) -> Callable[..., Any]:
    """A text view's writer ``(data, out=None, ...)`` writing through ``terminal_stream``: whatever the view
    shows, no escape code or other control character of its data reaches the reader's terminal."""

    def safe(data: Any, out: IO[str] | None = None, *args: Any, **kwargs: Any) -> Any:
        return write(data, terminal_stream(out if out is not None else sys.stdout), *args, **kwargs)

    return safe
