"""`seqjudge runs show RUN --rates`: each rule's violation rate; judge rules' with PPI++ intervals."""

from __future__ import annotations

import json
import sys
from typing import IO

from pydantic import BaseModel

from seqjudge.rates import MIN_EACH, JudgeRate, LabelPlan, RateComparison, RatesReport


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _interval(estimate: float | None, lower: float | None, upper: float | None) -> str:
    if estimate is None:
        return "no interval"
    return f"{_pct(estimate)} [{_pct(lower)}, {_pct(upper)}]"


def judge_lines(fig: JudgeRate) -> list[str]:
    judge = f"judge alone {_pct(fig.judge_rate)} ({fig.judge_fails} of {fig.judged} scored, no interval)"
    head = f"  {fig.rule_id} (judge): {_interval(fig.estimate, fig.lower, fig.upper)} by {fig.method}"
    if fig.estimate is None:
        head = f"  {fig.rule_id} (judge): no interval: {fig.why}"
    lines = [
        head,
        f"    {judge}; humans only {_interval(fig.human_estimate, fig.human_lower, fig.human_upper)}",
    ]
    lines.append(
        f"    {fig.traces} trace(s): {fig.routed} routed to review ({fig.routed_labelled} labelled, "
        f"{fig.routed_violations} violation(s)), {fig.auto_passed} auto-passed ({fig.audits} audited, "
        f"{fig.audit_labels} labelled, {fig.audit_violations} violation(s), {fig.audits_open} open, "
        f"{fig.audits_unlabelled} without this rule's outcome), {fig.uncovered} no person could be asked"
    )
    unknown = fig.routed_unknown + fig.uncovered
    if unknown and fig.estimate is not None:
        lines.append(
            f"    {unknown} trace(s) without a label and no chance of one being drawn ({fig.routed_unknown} "
            f"routed but not labelled, {fig.uncovered} never reviewable) widen the upper bound as if each "
            "were a violation"
        )
    if fig.why and fig.estimate is not None:
        lines.append(f"    {fig.why}")
    return lines


def rates_text(report: RatesReport, out: IO[str] | None = None) -> None:
    w = (out or sys.stdout).write
    w(f"Violation rates of run {report.run} ({report.library})\n")
    if report.judge:
        each = report.judge[0].alpha
        if report.simultaneous:
            w(
                f"  the {len(report.judge)} judge rules' intervals hold together at {1 - report.delta:.0%} "
                f"(Bonferroni: each at {1 - each:.2%}); --per-rule for each alone\n"
            )
        else:
            w(f"  each interval at {1 - each:.0%}, on its own\n")
        w(
            f"  PPI++ (t quantile) from {report.min_each} labelled violations and {report.min_each} passes; "
            "with fewer, the exact humans-only interval (docs/rates.md)\n"
        )
    for fig in report.judge:
        for line in judge_lines(fig):
            w(line + "\n")
    for ex in report.exact:
        unchecked = f", {ex.unchecked} unchecked (up to {_pct(ex.upper)})" if ex.unchecked else ""
        w(f"  {ex.rule_id} (exact): {_pct(ex.rate)} ({ex.violations} of {ex.traces} traces){unchecked}\n")


def plan_text(plan: LabelPlan, out: IO[str] | None = None) -> None:
    w = (out or sys.stdout).write
    w(
        f"Labels for {plan.rule_id}'s rate over run {plan.run} within a {plan.width:.1%} wide interval at "
        f"{1 - plan.delta:.0%} ({plan.traces} traces, {plan.auto_passed} auto-passed to draw from)\n"
    )
    if plan.fixed_width:
        w(f"  {plan.fixed_width:.1%} of the width is taken by traces no draw can reach\n")
    if plan.why:
        w(f"  no draw reaches it: {plan.why}\n")
    flags = {"uniform": "", "active": " --audit-draw active", "humans-only": ""}
    for p in plan.plans:
        if p.labels is None:
            w(f"  {p.draw}: not reachable{f' ({p.note})' if p.note else ''}\n")
            continue
        how = "without the judge" if p.draw == "humans-only" else "PPI"
        line = f"  {p.draw} ({how}): about {p.labels} label(s): --audit-rate {p.audit_rate:.3g}"
        line += flags[p.draw]
        if p.violations is not None:
            line += f", about {p.violations:.1f} violation(s) among them"
            if p.violations < MIN_EACH:
                line += f" (under {MIN_EACH}: --rates would show the humans-only interval)"
        if p.note:
            line += f" ({p.note})"
        w(line + "\n")
    w(
        "  (from the judge's confidences, read as calibrated: an overconfident judge needs more; the "
        "interval `runs show --rates` gives does not rely on this)\n"
    )


def rates_json(report: BaseModel, out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    json.dump(report.model_dump(mode="json"), out, indent=2)
    out.write("\n")


def difference_lines(rates: RateComparison) -> list[str]:
    """`compare --rates`: each shared judge rule's change in violation rate, beside the regression test."""
    k = len(rates.rules)
    together = f", the {k} holding together (Bonferroni)" if k > 1 else ""
    lines = [
        f"violation rates, candidate minus baseline ({1 - rates.delta:.0%} intervals{together}; "
        "PPI++ on each run's judge calls and human labels, see `runs show --rates`):"
    ]
    for row in rates.rules:
        if row.difference is None:
            lines.append(f"  {row.rule_id}: no interval: {row.why}")
            continue
        sign = "+" if row.difference >= 0 else ""
        lines.append(
            f"  {row.rule_id}: {_pct(row.baseline)} -> {_pct(row.candidate)}: {sign}{row.difference:.1%} "
            f"[{row.lower:+.1%}, {row.upper:+.1%}]"
        )
    if rates.only_in_one:
        lines.append(f"  judge rules of one run only (no change to give): {', '.join(rates.only_in_one)}")
    if not rates.rules and not rates.only_in_one:
        lines.append("  no judge rule in these runs")
    return lines
