"""Plain-text views of engine reports: the actionable FAIL block of seed 002, one line per trace, totals."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from seqjudge.redact import may_need_redaction, redact_value
from seqjudge.report import Report, Violation
from seqjudge.rules.coverage import Coverage
from seqjudge.safetext import terminal
from seqjudge.trace import PlainTrace, Trace

WINDOW = 4  # calls shown on each side of the offending call in long traces
SHORT_TRACE = 12  # traces up to this many calls are shown whole
SCREEN_WHOLE = 200  # traces up to this many calls have their arguments screened for secrets at once
MARK = "← violation"


# One encoder for every call's arguments: json.dumps with these options builds a new one each time.
_ENCODER = json.JSONEncoder(separators=(", ", "="), ensure_ascii=False, sort_keys=True, default=str)


def _dump(args: dict[str, Any]) -> str:
    return _ENCODER.encode(args)


def _args_text(args: dict[str, Any], limit: int = 60, *, dumped: str | None = None) -> str:
    """``(key=value, ...)``, shortened to ``limit``; ``dumped``: ``_dump(args)``, already known to need no
    redaction."""
    if not args:
        return ""
    text = dumped
    if text is None:
        # A terminal or CI log is outside the process: the one redaction policy.
        text = _dump(redact_value(args))
    text = text[1:-1].replace('"', "")
    return "(" + (text if len(text) <= limit else text[: limit - 1] + "…") + ")"


@dataclass(frozen=True, slots=True)
class Palette:
    """The words the text views mark a verdict with, plain or wrapped in a terminal's colour codes
    (``outputs.check.TextOutput`` builds the coloured one; everything else is plain)."""

    fail: str = "❌ FAIL"
    warn: str = "⚠️  WARN"
    failed: str = "FAIL  "
    passed: str = "PASS  "
    review: str = "REVIEW"
    mark: str = MARK


PLAIN = Palette()


class Calls:
    """A trace's calls as the text views show them, each call's text made once (a trace with several
    violations lists the same calls in each block)."""

    __slots__ = ("names", "failed", "args", "steps", "_lines", "_clean", "windows")

    def __init__(self, trace: Trace | PlainTrace) -> None:
        if isinstance(trace, PlainTrace):
            self.names, self.args = trace.names, trace.args
            self.failed = [not ok for ok in trace.ok]
        else:
            self.names = [c.tool_name for c in trace.calls]
            self.args = [c.arguments for c in trace.calls]
            self.failed = [c.status == "error" for c in trace.calls]
        self.steps = trace.steps
        self._lines: dict[tuple[int, str], str] = {}
        # trace_lines per (marks, indent, mark): violations of several rules often point at the same call.
        self.windows: dict[tuple[tuple[int, ...], str, str], list[str]] = {}
        self._clean: list[str] | None = None
        if len(self.args) <= SCREEN_WHOLE:
            # One redaction screen over every call's arguments: most traces need no walk at all.
            dumps = [_dump(a) for a in self.args]
            if not may_need_redaction("\n".join(dumps)):
                self._clean = dumps

    def line(self, i: int, indent: str) -> str:
        """Call ``i``'s line in the list, numbered from 1, without a mark."""
        shown = self._lines.get((i, indent))
        if shown is None:
            steps, n = self.steps, len(self.steps)
            parallel = (i > 0 and steps[i] == steps[i - 1]) or (i + 1 < n and steps[i + 1] == steps[i])
            note = " [failed]" if self.failed[i] else ""
            note += f" [step {steps[i] + 1}, parallel]" if parallel else ""
            dumped = self._clean[i] if self._clean is not None else None
            text = terminal(f"{self.names[i]}{_args_text(self.args[i], dumped=dumped)}")  # no escape codes
            shown = self._lines[i, indent] = f"{indent}{i + 1:>{len(str(n))}}. {text}{note}"
        return shown


def trace_lines(
    trace: Trace | PlainTrace | Calls,
    marks: Iterable[int],
    *,
    indent: str = "     ",
    palette: Palette = PLAIN,
) -> list[str]:
    """The numbered call list with ``← violation`` at marked calls; a window around them when long.

    Calls are numbered from 1 here (prose: "call N"); machine output counts from 0 (README, "Reports")."""
    calls = trace if isinstance(trace, Calls) else Calls(trace)
    marked = set(marks)
    key = (tuple(sorted(marked)), indent, palette.mark)
    known = calls.windows.get(key)
    if known is None:
        known = calls.windows[key] = _window(calls, marked, indent, palette)
    return list(known)


def _window(calls: Calls, marked: set[int], indent: str, palette: Palette) -> list[str]:
    n = len(calls.steps)
    if n == 0:
        return [indent + "(no calls)"]
    if n <= SHORT_TRACE or not marked:
        shown = set(range(min(n, SHORT_TRACE))) if not marked else set(range(n))
    else:
        shown = set()
        for m in marked:
            shown.update(range(max(0, m - WINDOW), min(n, m + WINDOW + 1)))
    width = len(str(n))
    lines: list[str] = []
    previous = -1
    for i in sorted(shown):
        if i != previous + 1:
            lines.append(f"{indent}{'…':>{width}}")
        lines.append(calls.line(i, indent) + (f"  {palette.mark}" if i in marked else ""))
        previous = i
    if previous != n - 1:
        lines.append(f"{indent}{'…':>{width}}  ({n} calls in all)")
    return lines


def violation_text(
    trace: Trace | PlainTrace | Calls,
    trace_id: str,
    v: Mapping[str, Any],
    rule: Mapping[str, Any] | None,
    palette: Palette = PLAIN,
) -> str:
    """The actionable FAIL block of violation ``v`` (a report's violation as data), ``rule`` its rule's
    result (type and group), from the report data as the engine gives it."""
    head = palette.fail if v["severity"] == "critical" else palette.warn
    group = f" [{terminal(str(rule['group']))}]" if rule and rule.get("group") else ""
    call = v["offending_call_index"]
    lines = [
        f"{head}: {terminal(str(trace_id))} · {v['rule_id']}{group}",
        "",
        f"   Rule: {rule['type'] if rule else '?'} ({v['violation_type']})",
        f"   Expected: {v['expected_order']}",
        f"   Actual: {v['actual_order']}",
        "",
        "   Trace:",
        *trace_lines(trace, [call] if call is not None else [], palette=palette),
        "",
        f"   Why: {v['explanation']}",
    ]
    if v.get("suggestion"):
        lines.append(f"   Suggestion: {v['suggestion']}")
    return "\n".join(lines)


def violation_block(trace: Trace | PlainTrace | Calls, report: Report, v: Violation) -> str:
    rule = next((r for r in report.rules if r.rule_id == v.rule_id), None)
    return violation_text(
        trace,
        report.trace_id,
        v.model_dump(),
        {"type": rule.type, "group": rule.group} if rule else None,
    )


def report_text(trace: Trace | PlainTrace, data: Mapping[str, Any], palette: Palette = PLAIN) -> str:
    """A trace's text: the FAIL block of each violation, then its one line (``Engine.check_data``'s data)."""
    parts = []
    if data["violations"]:
        rules = {r["rule_id"]: r for r in data["rules"]}
        calls = Calls(trace)
        for v in data["violations"]:
            parts.append(
                violation_text(calls, data["trace_id"], v, rules.get(v["rule_id"]), palette) + "\n\n"
            )
    parts.append(
        verdict_line(
            data["verdict"],
            data["trace_id"],
            data["sequence_correctness_score"],
            data["rules_passed"],
            data["total_rules_checked"],
            len(data["violations"]),
            palette,
        )
        + "\n"
    )
    return "".join(parts)


def verdict_line(
    verdict: str,
    trace_id: str,
    score: float,
    passed: int,
    checked: int,
    violations: int,
    palette: Palette = PLAIN,
) -> str:
    label = {"pass": palette.passed, "fail": palette.failed, "review": palette.review}[verdict]
    return (
        f"{label} {terminal(str(trace_id))}  score {score:.2f}  "
        f"({passed}/{checked} rules passed, {violations} violation(s))"
    )


def trace_line(report: Report) -> str:
    return verdict_line(
        report.verdict,
        report.trace_id,
        report.sequence_correctness_score,
        report.rules_passed,
        report.total_rules_checked,
        len(report.violations),
    )


FIRST_IDS = 3  # trace ids kept per failed rule, for the closing tally


class Totals:
    """Running counts over a stream of reports, for the closing lines and the demo.

    Everything here is a count or a short list per rule: a run's summary, never its reports, so memory does
    not grow with the number of traces. A new figure is one more attribute filled in ``count``."""

    def __init__(self) -> None:
        self.verdicts: Counter[str] = Counter()
        self.violated: Counter[str] = Counter()
        self.deferred: Counter[str] = Counter()
        self.first: dict[str, list[str]] = {}  # rule id -> the first FIRST_IDS traces it failed on
        self.n = 0
        self.coverage: Coverage | None = None  # what the traces left unchecked, when the command tracks it

    def add(self, report: Report) -> None:
        self.count(
            report.verdict,
            [v.rule_id for v in report.violations],
            [r.rule_id for r in report.rules if r.outcome == "deferred"],
            report.trace_id,
        )

    def count(
        self, verdict: str, violated: list[str], deferred: list[str], trace_id: str | None = None
    ) -> None:
        """``add`` from a report's verdict, its violations' rule ids and its deferred rules' ids (what
        ``seqjudge check`` has when it skips the report models)."""
        self.n += 1
        self.verdicts[verdict] += 1
        # dict.fromkeys, not a set: first-seen order, so that equal counts list the same way every run.
        for rule_id in dict.fromkeys(violated):
            self.violated[rule_id] += 1
            if trace_id is not None:
                ids = self.first.setdefault(rule_id, [])
                if len(ids) < FIRST_IDS:
                    ids.append(trace_id)
        for rule_id in deferred:
            self.deferred[rule_id] += 1

    def fresh(self) -> Totals:
        """Empty totals that track what these do (the same coverage question): filled with a run's later
        traces elsewhere (a worker process), then ``merge``d here in input order."""
        part = Totals()
        part.coverage = self.coverage.fresh() if self.coverage is not None else None
        return part

    def merge(self, part: Totals) -> None:
        """Count ``part``'s traces (a ``fresh`` copy filled with the traces that follow these) as if each had
        been counted here: the first-seen order of the rules and their first trace ids come out the same."""
        self.n += part.n
        self.verdicts.update(part.verdicts)
        self.violated.update(part.violated)
        self.deferred.update(part.deferred)
        for rule_id, ids in part.first.items():
            mine = self.first.setdefault(rule_id, [])
            mine.extend(ids[: FIRST_IDS - len(mine)])
        if self.coverage is not None and part.coverage is not None:
            self.coverage.merge(part.coverage)

    def line(self) -> str:
        return (
            f"{self.n} trace(s): {self.verdicts['pass']} pass, {self.verdicts['fail']} fail, "
            f"{self.verdicts['review']} review"
        )

    def tally(self) -> list[str]:
        """The closing per-rule tally: each rule that failed, on how many traces, and the first of them."""
        if not self.violated:
            return []
        ranked = self.violated.most_common()
        width = max(len(rule_id) for rule_id, _ in ranked)
        lines = ["failed rules (traces failed, first traces):"]
        for rule_id, n in ranked:
            ids = [terminal(t) for t in self.first.get(rule_id, [])]
            more = ", …" if n > len(ids) else ""
            lines.append(f"  {rule_id:<{width}}  {n:>6}  {', '.join(ids)}{more}")
        return lines

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
