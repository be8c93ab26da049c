"""Plain-text views of engine reports: the actionable FAIL block of seed 002, one line per trace, totals."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from seqjudge.redact import redact_value
from seqjudge.report import Report, Violation
from seqjudge.rules.coverage import Coverage
from seqjudge.safetext import terminal
from seqjudge.trace import Trace

WINDOW = 4  # calls shown on each side of the offending call in long traces
SHORT_TRACE = 12  # traces up to this many calls are shown whole
MARK = "← violation"


def _args_text(args: dict[str, Any], limit: int = 60) -> str:
    if not args:
        return ""
    args = redact_value(args)  # a terminal or CI log is outside the process: the one redaction policy
    text = json.dumps(args, separators=(", ", "="), ensure_ascii=False, sort_keys=True, default=str)
    text = text[1:-1].replace('"', "")
    return "(" + (text if len(text) <= limit else text[: limit - 1] + "…") + ")"


def trace_lines(trace: Trace, marks: Iterable[int], *, indent: str = "     ") -> list[str]:
    """The numbered call list with ``← violation`` at marked calls; a window around them when long."""
    calls = trace.calls
    marked = set(marks)
    n = len(calls)
    if n == 0:
        return [indent + "(no calls)"]
    if n <= SHORT_TRACE or not marked:
        shown = set(range(min(n, SHORT_TRACE))) if not marked else set(range(n))
    else:
        shown = set()
        for m in marked:
            shown.update(range(max(0, m - WINDOW), min(n, m + WINDOW + 1)))
    steps = trace.steps
    width = len(str(n))
    lines: list[str] = []
    previous = -1
    for i in sorted(shown):
        if i != previous + 1:
            lines.append(f"{indent}{'…':>{width}}")
        c = calls[i]
        parallel = (i > 0 and steps[i] == steps[i - 1]) or (i + 1 < n and steps[i + 1] == steps[i])
        note = " [failed]" if c.status == "error" else ""
        note += f" [step {steps[i] + 1}, parallel]" if parallel else ""
        mark = f"  {MARK}" if i in marked else ""
        shown_call = terminal(f"{c.tool_name}{_args_text(c.arguments)}")  # trace text: no escape codes
        lines.append(f"{indent}{i + 1:>{width}}. {shown_call}{note}{mark}")
        previous = i
    if previous != n - 1:
        lines.append(f"{indent}{'…':>{width}}  ({n} calls in all)")
    return lines


def violation_block(trace: Trace, report: Report, v: Violation) -> str:
    rule = next((r for r in report.rules if r.rule_id == v.rule_id), None)
    head = "❌ FAIL" if v.severity == "critical" else "⚠️  WARN"
    group = f" [{terminal(str(rule.group))}]" if rule and rule.group else ""
    marks = [v.offending_call_index] if v.offending_call_index is not None else []
    lines = [
        f"{head}: {terminal(str(report.trace_id))} · {v.rule_id}{group}",
        "",
        f"   Rule: {rule.type if rule else '?'} ({v.violation_type})",
        f"   Expected: {v.expected_order}",
        f"   Actual: {v.actual_order}",
        "",
        "   Trace:",
        *trace_lines(trace, marks),
        "",
        f"   Why: {v.explanation}",
    ]
    if v.suggestion:
        lines.append(f"   Suggestion: {v.suggestion}")
    return "\n".join(lines)


def trace_line(report: Report) -> str:
    label = {"pass": "PASS  ", "fail": "FAIL  ", "review": "REVIEW"}[report.verdict]
    return (
        f"{label} {terminal(str(report.trace_id))}  score {report.sequence_correctness_score:.2f}  "
        f"({report.rules_passed}/{report.total_rules_checked} rules passed, "
        f"{len(report.violations)} violation(s))"
    )


class Totals:
    """Running counts over a stream of reports, for the closing lines and the demo."""

    def __init__(self) -> None:
        self.verdicts: Counter[str] = Counter()
        self.violated: Counter[str] = Counter()
        self.deferred: Counter[str] = Counter()
        self.n = 0
        self.coverage: Coverage | None = None  # what the traces left unchecked, when the command tracks it

    def add(self, report: Report) -> None:
        self.count(
            report.verdict,
            [v.rule_id for v in report.violations],
            [r.rule_id for r in report.rules if r.outcome == "deferred"],
        )

    def count(self, verdict: str, violated: list[str], deferred: list[str]) -> None:
        """``add`` from a report's verdict, its violations' rule ids and its deferred rules' ids (what
        ``seqjudge check`` has when it skips the report models)."""
        self.n += 1
        self.verdicts[verdict] += 1
        # dict.fromkeys, not a set: first-seen order, so that equal counts list the same way every run.
        for rule_id in dict.fromkeys(violated):
            self.violated[rule_id] += 1
        for rule_id in deferred:
            self.deferred[rule_id] += 1

    def line(self) -> str:
        return (
            f"{self.n} trace(s): {self.verdicts['pass']} pass, {self.verdicts['fail']} fail, "
            f"{self.verdicts['review']} review"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "traces": self.n,
            "pass": self.verdicts["pass"],
            "fail": self.verdicts["fail"],
            "review": self.verdicts["review"],
            "violations_by_rule": dict(self.violated.most_common()),
            "deferred_rules": dict(self.deferred.most_common()),
            **({"coverage": self.coverage.as_dict()} if self.coverage is not None else {}),
        }
