"""Plain-text views of engine reports: the actionable FAIL block of seed 002, one line per trace, totals."""

from __future__ import annotations

import json
import operator
import re
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
INDENT = "     "  # of a block's call list


# One encoder for every call's arguments: json.dumps with these options builds a new one each time.
_ENCODER = json.JSONEncoder(separators=(", ", "="), ensure_ascii=False, sort_keys=True, default=str)
ARGS_LIMIT = 60  # characters of a call's arguments shown


def _dump(args: dict[str, Any]) -> str:
    return _ENCODER.encode(args)


def _args_text(args: dict[str, Any], limit: int = ARGS_LIMIT, *, dumped: str | None = None) -> str:
    """``(key=value, ...)``, shortened to ``limit``; ``dumped``: ``_dump(args)``, already known to need no
    redaction."""
    if not args:
        return ""
    text = dumped
    if text is None:
        # A terminal or CI log is outside the process: the one redaction policy.
        text = _dump(redact_value(args))
    return "(" + _shortened(text[1:-1].replace('"', ""), limit) + ")"


def _shortened(text: str, limit: int = ARGS_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# What the encoder escapes in a string (ensure_ascii off): the quote, the backslash and C0 controls.
_JSON_ESCAPED = re.compile('[\x00-\x1f"\\\\]')


def _plain_calls(names: list[str], arguments: list[dict[str, Any]]) -> list[str] | None:
    """Each call's ``name(key=value, ...)`` as ``Calls`` shows it (``_args_text``), made directly when every
    call's arguments are the usual ones - plain strings and integers under string keys - and no key or
    value needs redaction or a JSON escape (the encoder costs several microseconds a call, and every shown
    call is written). None otherwise: the encoder's way then.

    Keys and values already found clean (``_KNOWN``) are not screened again; the others are screened in one
    text. The screen finds its words in a key or value wherever it would in the encoder's text of the
    arguments (the same keys and values, without the quotes no screened word holds), so a miss here is a
    miss there."""
    known = _KNOWN
    fresh: list[str] = []
    texts = []
    limit = ARGS_LIMIT
    for name, args in zip(names, arguments, strict=True):
        # Two arguments, the usual size: the loop below unrolled, without sorted() or a parts list (on the
        # benchmark's 20-call traces 15 us a trace against 23 us for the loop alone).
        if len(args) == 2:
            key, other = args
            if other < key:  # sorted, as the encoder sorts them
                key, other = other, key
            value, second = args[key], args[other]
            if key not in known:
                if type(key) is not str:
                    return None
                fresh.append(key)
            if other not in known:
                if type(other) is not str:
                    return None
                fresh.append(other)
            # Exactly str and int: a bool is an int that JSON writes as true, a subclass may print otherwise.
            kind = type(value)
            if kind is str:
                if value not in known:
                    fresh.append(value)
            elif kind is not int:
                return None
            kind = type(second)
            if kind is str:
                if second not in known:
                    fresh.append(second)
            elif kind is not int:
                return None
            text = f"{key}={value}, {other}={second}"
        elif not args:
            texts.append(name)
            continue
        else:
            parts = []
            for key in sorted(args) if len(args) > 1 else args:
                value = args[key]
                if key not in known:
                    if type(key) is not str:
                        return None
                    fresh.append(key)
                kind = type(value)
                if kind is str:
                    if value not in known:
                        fresh.append(value)
                elif kind is not int:
                    return None
                parts.append(f"{key}={value}")
            text = ", ".join(parts)
        # ``_shortened``, written out: this runs for every call.
        texts.append(f"{name}({text})" if len(text) <= limit else f"{name}({text[: limit - 1]}…)")
    if fresh:
        joined = " ".join(fresh)  # a space: the encoder does not escape it, and no screened word holds one
        if _JSON_ESCAPED.search(joined) or may_need_redaction(joined):
            return None
        if len(known) > _KNOWN_MAX:
            known.clear()
        known.update(text for text in fresh if len(text) <= _KNOWN_LENGTH)
    return texts


# Argument keys and string values found to need neither redaction nor a JSON escape: the same keys, ids and
# words recur from call to call and trace to trace, and a set lookup is far cheaper than screening them
# again. Only short ones, and a bounded number (cleared when full): memory does not grow with the traces.
_KNOWN: set[str] = set()
_KNOWN_MAX = 1 << 16
_KNOWN_LENGTH = 64


def _numbers(n: int) -> list[str]:
    """The start of each line of an ``n``-call list: ``INDENT`` and the call's number, right-aligned."""
    made = _NUMBERS.get(n)
    if made is None:
        width = len(str(n))
        made = _NUMBERS[n] = [f"{INDENT}{i:>{width}}. " for i in range(1, n + 1)]
    return made


_NUMBERS: dict[int, list[str]] = {}  # per number of calls, up to SCREEN_WHOLE


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

    __slots__ = ("names", "args", "steps", "width", "notes", "_texts", "_lines", "_clean", "windows")

    def __init__(self, trace: Trace | PlainTrace) -> None:
        if isinstance(trace, PlainTrace):
            self.names, self.args = trace.names, trace.args
            failed = [] if all(trace.ok) else [i for i, ok in enumerate(trace.ok) if not ok]
        else:
            self.names = [c.tool_name for c in trace.calls]
            self.args = [c.arguments for c in trace.calls]
            failed = [i for i, c in enumerate(trace.calls) if c.status == "error"]
        self.steps = steps = trace.steps
        n = len(steps)
        self.width = len(str(n))  # of the call numbers
        # What follows a call's text: failed, ran in parallel (a step shared with a neighbour).
        self.notes = dict.fromkeys(failed, " [failed]")
        if isinstance(trace, Trace):  # a PlainTrace's calls are each their own step
            for i in range(n):
                if (i > 0 and steps[i] == steps[i - 1]) or (i + 1 < n and steps[i + 1] == steps[i]):
                    self.notes[i] = self.notes.get(i, "") + f" [step {steps[i] + 1}, parallel]"
        self._texts: list[str] | None = None  # each call's name and arguments as shown, when made at once
        self._lines: dict[str, list[str | None]] = {}  # indent -> each call's line, made when first shown
        # trace_lines per (marks, indent, mark), as text, and a violation's per (offending call, mark):
        # violations of several rules often point at the same call.
        self.windows: dict[tuple[Any, ...], str] = {}
        self._clean: list[str] | None = None
        if n <= SCREEN_WHOLE:
            # One redaction screen over every call's arguments: most traces need no walk at all.
            texts = _plain_calls(self.names, self.args)
            if texts is not None:
                # No escape codes: ``terminal`` per call, unless every character of them all is printable.
                if not "".join(texts).isprintable():
                    texts = [terminal(t) for t in texts]
                self._texts = texts
                # Every line of a block's call list at once: most of them are shown.
                made: list[str | None] = list(map(operator.add, _numbers(n), texts))
                for i, note in self.notes.items():
                    made[i] += note  # type: ignore[operator]
                self._lines[INDENT] = made
                return
            dumps = [_dump(a) for a in self.args]
            if not may_need_redaction("\n".join(dumps)):
                self._clean = dumps

    def line(self, i: int, indent: str) -> str:
        """Call ``i``'s line in the list, numbered from 1, without a mark."""
        return self.lines(i, i + 1, indent)[0]

    def lines(self, start: int, end: int, indent: str) -> list[str]:
        """Calls ``start`` to ``end - 1`` as ``line`` shows them, each line made when first asked for."""
        made = self._lines.get(indent)
        if made is None:
            made = self._lines[indent] = [None] * len(self.steps)
        run = made[start:end]
        if None in run:
            for i in range(start, end):
                if made[i] is None:
                    made[i] = f"{indent}{i + 1:>{self.width}}. {self._text(i)}{self.notes.get(i, '')}"
            run = made[start:end]
        return run  # type: ignore[return-value]

    def _text(self, i: int) -> str:
        if self._texts is not None:
            return self._texts[i]
        args = _args_text(self.args[i], dumped=self._clean[i] if self._clean is not None else None)
        return terminal(f"{self.names[i]}{args}")  # no escape codes


def trace_lines(
    trace: Trace | PlainTrace | Calls,
    marks: Iterable[int],
    *,
    indent: str = INDENT,
    palette: Palette = PLAIN,
) -> list[str]:
    """The numbered call list with ``← violation`` at marked calls; a window around them when long.

    Calls are numbered from 1 here (prose: "call N"); machine output counts from 0 (README, "Reports")."""
    return _trace_text(trace, tuple(sorted(set(marks))), indent, palette).split("\n")


def _trace_text(
    trace: Trace | PlainTrace | Calls,
    marked: tuple[int, ...],
    indent: str = INDENT,
    palette: Palette = PLAIN,
) -> str:
    """``trace_lines`` as one text (no line of it holds a newline: ``terminal`` shows one as ``\\n``);
    ``marked``: the marks, sorted, each once."""
    calls = trace if isinstance(trace, Calls) else Calls(trace)
    key = (marked, indent, palette.mark)
    known = calls.windows.get(key)
    if known is None:
        known = calls.windows[key] = "\n".join(_window(calls, marked, indent, palette))
    return known


def _window(calls: Calls, marked: tuple[int, ...], indent: str, palette: Palette) -> list[str]:
    """The lines of ``trace_lines``; ``marked``: the marks, sorted, each once."""
    n = len(calls.steps)
    if n == 0:
        return [indent + "(no calls)"]
    if len(marked) == 1 and n > SHORT_TRACE and 0 <= marked[0] < n:
        # A violation's one offending call: the runs below, written out for one.
        m = marked[0]
        start = m - WINDOW if m > WINDOW else 0
        end = m + WINDOW + 1
        run = calls.lines(start, end if end < n else n, indent)
        run[m - start] += "  " + palette.mark
        if start:
            run.insert(0, _gap(indent, calls.width))
        if end < n:
            run.append(f"{_gap(indent, calls.width)}  ({n} calls in all)")
        return run
    # The calls shown, as runs [start, end): the whole of a short trace (its first calls when nothing is
    # marked), else WINDOW calls either side of each mark, runs that meet or overlap joined.
    if n <= SHORT_TRACE or not marked:
        runs = [(0, n if marked else min(n, SHORT_TRACE))]
    else:
        runs = []
        for m in marked:
            start = m - WINDOW if m > WINDOW else 0
            end = m + WINDOW + 1
            if end > n:
                end = n
            if start >= end:
                continue  # a mark past the last call shows none
            if runs and start <= runs[-1][1]:
                runs[-1] = (runs[-1][0], max(runs[-1][1], end))
            else:
                runs.append((start, end))
    gap = _gap(indent, calls.width)
    mark = "  " + palette.mark
    lines: list[str] = []
    shown_to = 0
    for start, end in runs:
        if start != shown_to:
            lines.append(gap)
        run = calls.lines(start, end, indent)
        for m in marked:
            if start <= m < end:
                run[m - start] += mark
        lines += run
        shown_to = end
    if shown_to != n:
        lines.append(f"{gap}  ({n} calls in all)")
    return lines


def _gap(indent: str, width: int) -> str:
    """The line that stands for calls left out of a list whose numbers are ``width`` wide."""
    gap = _GAPS.get((indent, width))
    if gap is None:
        gap = _GAPS[indent, width] = f"{indent}{'…':>{width}}"
    return gap


_GAPS: dict[tuple[str, int], str] = {}


def violation_text(
    trace: Trace | PlainTrace | Calls,
    trace_id: str,
    v: Mapping[str, Any],
    rule: Mapping[str, Any] | None,
    palette: Palette = PLAIN,
) -> str:
    """The actionable FAIL block of violation ``v`` (a report's violation as data), ``rule`` its rule's
    result (type and group), from the report data as the engine gives it."""
    calls = trace if isinstance(trace, Calls) else Calls(trace)
    return _violation_text(calls, terminal(str(trace_id)), v, rule, palette)


def _violation_text(
    calls: Calls, shown_id: str, v: Mapping[str, Any], rule: Mapping[str, Any] | None, palette: Palette
) -> str:
    """``violation_text``; ``shown_id``: the trace id as shown (``terminal``)."""
    key = violation_key(v, rule)
    parts = _VIOLATION_PARTS.get(key)
    if parts is None:
        parts = violation_parts(key)
    before, after = parts
    head = palette.fail if v["severity"] == "critical" else palette.warn
    return f"{head}: {shown_id} · {before}{window_text(calls, v['offending_call_index'], palette)}{after}"


ViolationKey = tuple[str, str | None, str, str, str, str, str, str | None]


def violation_key(v: Mapping[str, Any], rule: Mapping[str, Any] | None) -> ViolationKey:
    """What a violation's block says but for its trace id, its window and its severity's word: the rule's
    and the engine's words, the same few again and again over a run (``violation_parts``)."""
    return (
        v["rule_id"],
        rule.get("group") if rule else None,
        rule["type"] if rule else "?",
        v["violation_type"],
        v["expected_order"],
        v["actual_order"],
        v["explanation"],
        v.get("suggestion"),
    )


def violation_parts(key: ViolationKey) -> tuple[str, str]:
    """A violation's block (``violation_text``) between the trace id and the window, and after the window;
    kept in ``_VIOLATION_PARTS``."""
    rule_id, group, kind, violation, expected, actual, explanation, suggestion = key
    made = (
        f"{rule_id}{f' [{terminal(str(group))}]' if group else ''}\n\n"
        f"   Rule: {kind} ({violation})\n"
        f"   Expected: {expected}\n"
        f"   Actual: {actual}\n\n"
        "   Trace:\n",
        f"\n\n   Why: {explanation}{f'{_SUGGESTION}{suggestion}' if suggestion else ''}",
    )
    if len(_VIOLATION_PARTS) >= _VIOLATION_PARTS_MAX:
        _VIOLATION_PARTS.clear()
    _VIOLATION_PARTS[key] = made
    return made


_SUGGESTION = "\n   Suggestion: "
# ``violation_parts`` by key: on (b)'s workload 5,000 different ones over 124,000 violations (20,000 traces).
# Bounded (a few MB at most): cleared when full.
_VIOLATION_PARTS: dict[ViolationKey, tuple[str, str]] = {}
_VIOLATION_PARTS_MAX = 8192


def window_text(calls: Calls, call: int | None, palette: Palette = PLAIN) -> str:
    """The call list of a violation whose offending call is ``call`` (None: no call), made once a trace."""
    window = calls.windows.get((call, palette.mark))
    if window is None:
        marked = () if call is None else (call,)
        window = calls.windows[call, palette.mark] = "\n".join(_window(calls, marked, INDENT, palette))
    return window


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
    parts: list[str] = []
    if data["violations"]:
        rules = {r["rule_id"]: r for r in data["rules"]}
        calls = Calls(trace)
        shown_id = terminal(str(data["trace_id"]))
        for v in data["violations"]:
            parts += (_violation_text(calls, shown_id, v, rules.get(v["rule_id"]), palette), "\n\n")
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
        if violated:
            # dict.fromkeys, not a set: first-seen order, so that equal counts list the same way every run.
            # Counted here, not by Counter.update (whose Mapping check alone is two Python calls a trace).
            counts = self.violated
            first = self.first
            for rule_id in dict.fromkeys(violated):
                if rule_id in counts:
                    counts[rule_id] += 1
                else:
                    counts[rule_id] = 1
                if trace_id is not None:
                    ids = first.get(rule_id)
                    if ids is None:
                        first[rule_id] = [trace_id]
                    elif len(ids) < FIRST_IDS:
                        ids.append(trace_id)
        if deferred:
            self.deferred.update(deferred)

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
