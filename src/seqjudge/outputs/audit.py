"""`seqjudge runs show RUN --audit`: the live false-pass rate the resolved audits measure, against α."""

from __future__ import annotations

import json
import sys
from typing import IO

from seqjudge.audit import AuditFigure, AuditReport

_DRIFT = {
    "above_alpha": "DRIFT: the lower bound is above α",
    "within_alpha": "within α: the upper bound is at or below it",
    "undetermined": "undetermined: the interval straddles α (resolve more audits)",
    "no_alpha": "no α to compare with (no certificate; give --alpha)",
    "no_data": "no resolved audit yet",
}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def figure_line(fig: AuditFigure, confidence: float) -> str:
    head = f"{fig.audited} audited, {fig.resolved} resolved, {fig.open} open"
    if fig.unlabelled:
        head += f", {fig.unlabelled} resolved fail without this rule's outcome (not counted)"
    if fig.estimate is None:
        return f"{head}; {_DRIFT[fig.drift]}"
    alpha = "" if fig.alpha is None else f"; α {fig.alpha:g}"
    return (
        f"{head}; {fig.false_passes} false pass(es): {_pct(fig.estimate)} "
        f"[{_pct(fig.lower)}, {_pct(fig.upper)}] at {confidence:.0%}{alpha}; {_DRIFT[fig.drift]}"
    )


def audit_text(report: AuditReport, out: IO[str] | None = None) -> None:
    w = (out or sys.stdout).write
    confidence = 1 - report.delta
    rates = "; ".join(
        f"{run} at {', '.join(f'{p:g}' for p in ps) or '(none)'}" for run, ps in report.rates.items()
    )
    w(f"Audit of {', '.join(report.runs)}: {report.auto_passed} auto-passed trace(s); audit rate: {rates}\n")
    if report.alpha_source:
        w(f"  {report.alpha_source}\n")
    if len({p for ps in report.rates.values() for p in ps}) > 1:
        w("  the rates differ: each audit counts 1/p (Horvitz–Thompson), the interval uses the effective n\n")
    w(f"  false-pass rate (traces): {figure_line(report.overall, confidence)}\n")
    for fig in report.by_rule:
        w(f"  {fig.scope}: {figure_line(fig, confidence)}\n")
    if report.overall.open:
        w(
            f"  {report.overall.open} audit(s) open: `seqjudge review list --reason audit` lists them; the "
            "figures assume they resolve like the resolved ones\n"
        )


def audit_json(report: AuditReport, out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    json.dump(report.model_dump(mode="json"), out, indent=2)
    out.write("\n")
