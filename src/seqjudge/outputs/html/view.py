"""Stored results -> what the HTML report shows: the run's health, one table row and one detail per trace.

Everything here is plain data (numbers, short strings, lists); the template escapes it and the page's
script only ever puts it into the page as text. Long values (tool outputs, arguments, messages) are cut to
a few hundred characters: the report is for looking at a run, the store keeps the full traces.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from seqjudge.crosscheck import AgreementTally, TraceResult
from seqjudge.outputs.html import svg
from seqjudge.outputs.html.deltas import VERDICTS, Deltas
from seqjudge.report import DEFAULT_THRESHOLD
from seqjudge.store import RunInfo, StoredResult, judge_data
from seqjudge.trace import PlainTrace, Trace

FIELD_CHARS = 300  # arguments, outputs and errors shown per call
MESSAGE_CHARS = 500
MAX_RULE_BARS = 20  # rules shown in the "violations by rule" chart; the rest are summed in one line
BIN_LABELS = [f"{i / 10:.1f}" for i in range(10)] + ["1.0"]


def short(value: Any, limit: int = FIELD_CHARS) -> str | None:
    """A value as one line of text of at most ``limit`` characters (None stays None)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def score_bin(value: float) -> int:
    """0..9 for [0, 0.1) .. [0.9, 1.0); 10 for a perfect 1.0 (kept apart: it is the common case)."""
    if value >= 1.0:
        return 10
    return min(9, max(0, int(value * 10)))


@dataclass
class Row:
    """One line of the traces table."""

    index: int
    trace_id: str
    verdict: str
    score: float
    calls: int
    failed: list[str]
    disagreements: list[str]
    reasons: list[str]
    judge: str  # scored | unscored | skipped
    delta: Any = None  # a deltas.TraceDelta when comparing

    @property
    def search(self) -> str:
        """What the text filter matches: the trace id and every rule the row names."""
        return " ".join([self.trace_id, *self.failed, *self.disagreements]).lower()


@dataclass
class Health:
    counts: dict[str, int]
    pass_rate: float | None
    bins: list[dict[str, int]]
    threshold: float
    violations: list[tuple[str, str, int]]  # (rule, severity, traces failing it)
    violations_more: int  # rules beyond MAX_RULE_BARS
    agreement: dict[str, Any]
    tokens: dict[str, int] | None
    tokens_source: str  # "run totals" or "judge replies"
    cost: float | None
    judge_skipped: list[tuple[str, int]]  # (reason, traces left unjudged)
    review_reasons: list[tuple[str, int]]
    review_queue: dict[str, int]
    judged: int  # traces the judge scored
    charts: dict[str, Any] = field(default_factory=dict)


def _judge_status(result: TraceResult) -> str:
    data = judge_data(result.judge)
    if data is None:
        return "skipped"
    return "scored" if data.get("status") == "scored" else "unscored"


def _tokens(info: RunInfo, results: list[TraceResult]) -> tuple[dict[str, int] | None, str]:
    totals = info.totals or {}
    tokens = totals.get("tokens")
    if isinstance(tokens, dict) and any(isinstance(v, int | float) and v for v in tokens.values()):
        return {str(k): int(v) for k, v in tokens.items() if isinstance(v, int | float)}, "run totals"
    summed = Counter[str]()
    for r in results:
        usage = (judge_data(r.judge) or {}).get("usage") or {}
        summed["input"] += int(usage.get("input_tokens", 0))
        summed["cached_input"] += int(usage.get("cached_input_tokens", 0))
        summed["output"] += int(usage.get("output_tokens", 0))
    if not any(summed.values()):
        return None, ""
    return dict(summed), "judge replies"


def _cost(info: RunInfo) -> float | None:
    """USD from the run totals: ``cost_usd`` or ``cost`` as a number, or a ``cost`` object with a ``total``
    (or ``usd``) figure, or else its parts (input, output...) added up."""
    totals = info.totals or {}
    for key in ("cost_usd", "cost"):
        value = totals.get(key)
        if isinstance(value, dict):
            value = value.get("total", value.get("usd", value))
            if isinstance(value, dict):
                parts = [v for v in value.values() if isinstance(v, int | float) and not isinstance(v, bool)]
                value = sum(parts) if parts else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


class HealthTally:
    """The health figures gathered one trace at a time: counts per verdict, score band, rule and reason,
    never the results, so ``check --format html`` streams its traces through one."""

    def __init__(self) -> None:
        self.verdicts: Counter[str] = Counter()
        self.bins: list[Counter[str]] = [Counter() for _ in BIN_LABELS]
        self.failing: Counter[str] = Counter()
        self.severity: dict[str, str] = {}
        self.skipped: Counter[str] = Counter()  # why the judge did not run -> traces left unjudged
        self.reasons: Counter[str] = Counter()
        self.judged = 0
        self.agreement = AgreementTally()

    def add(self, r: TraceResult) -> None:
        self.add_parts(
            r.verdict,
            r.score,
            [(d.rule_id, d.severity, d.final == "failed") for d in r.rules],
            r.review_reasons,
            _judge_status(r),
            r.judge_skipped if r.judge is None else None,
        )
        self.agreement.add(r.rules)

    def add_parts(
        self,
        verdict: str,
        score: float,
        rules: Sequence[tuple[str, str, bool]],
        reasons: Sequence[str],
        judge: str,
        judge_skipped: str | None,
    ) -> None:
        """One trace: its verdict and score, each rule as (id, severity, failed), its review reasons, its
        judge status (``_judge_status``) and why the judge did not run."""
        self.verdicts[verdict] += 1
        self.bins[score_bin(score)][verdict] += 1
        for rule_id, severity, failed in rules:
            self.severity.setdefault(rule_id, severity)
            if failed:
                self.failing[rule_id] += 1
        if judge_skipped:
            self.skipped[judge_skipped] += 1
        self.reasons.update(reasons)
        self.judged += judge == "scored"

    def health(
        self,
        threshold: float,
        *,
        tokens: tuple[dict[str, int] | None, str] = (None, ""),
        cost: float | None = None,
        review_queue: dict[str, int] | None = None,
        run_reason: str | None = None,
    ) -> Health:
        n = sum(self.verdicts.values())
        ranked = self.failing.most_common()
        skipped = Counter(self.skipped)
        if run_reason and run_reason not in skipped:  # the run's own reason, even with no trace left unjudged
            skipped[run_reason] = 0
        out = Health(
            counts={"traces": n, **{v: self.verdicts.get(v, 0) for v in VERDICTS}},
            pass_rate=self.verdicts.get("pass", 0) / n if n else None,
            bins=[dict(b) for b in self.bins],
            threshold=threshold,
            violations=[(rule, self.severity[rule], k) for rule, k in ranked[:MAX_RULE_BARS]],
            violations_more=max(0, len(ranked) - MAX_RULE_BARS),
            agreement=self.agreement.figures(),
            tokens=tokens[0],
            tokens_source=tokens[1],
            cost=cost,
            judge_skipped=skipped.most_common(),
            review_reasons=self.reasons.most_common(),
            review_queue=review_queue or {"open": 0, "resolved": 0},
            judged=self.judged,
        )
        out.charts = {
            "verdicts": svg.verdict_bar(out.counts),
            "scores": svg.histogram(out.bins, BIN_LABELS, threshold=out.threshold),
            "rules": svg.hbars(
                [(rule, [svg.Segment(sev, k)]) for rule, sev, k in out.violations],
                title="Traces failing each rule",
            ),
        }
        return out


def health(info: RunInfo, results: list[TraceResult]) -> Health:
    tally = HealthTally()
    for r in results:
        tally.add(r)
    threshold = info.config.get("threshold", DEFAULT_THRESHOLD)
    run_reason = (info.totals or {}).get("judge_skipped")
    return tally.health(
        float(threshold) if isinstance(threshold, int | float) else DEFAULT_THRESHOLD,
        tokens=_tokens(info, results),
        cost=_cost(info),
        review_queue={k: info.counts.get(f"review_{k}", 0) for k in ("open", "resolved")},
        run_reason=run_reason if isinstance(run_reason, str) else None,
    )


def rows(stored: list[StoredResult], deltas: Deltas | None = None) -> list[Row]:
    return [
        row(i, s.trace, s.result, None if deltas is None else deltas.traces.get(s.result.trace_id))
        for i, s in enumerate(stored)
    ]


def row(index: int, trace: Trace | PlainTrace, r: TraceResult, delta: Any = None) -> Row:
    """One trace's line of the table."""
    return Row(
        index=index,
        trace_id=r.trace_id,
        verdict=r.verdict,
        score=r.score,
        calls=len(trace.names) if isinstance(trace, PlainTrace) else len(trace.calls),
        failed=[d.rule_id for d in r.rules if d.final == "failed"],
        disagreements=[d.rule_id for d in r.disagreements],
        reasons=list(r.review_reasons),
        judge=_judge_status(r),
        delta=delta,
    )


def _calls(trace: Trace) -> list[dict[str, Any]]:
    steps = trace.steps
    n = len(trace.calls)
    out = []
    for i, c in enumerate(trace.calls):
        parallel = (i > 0 and steps[i] == steps[i - 1]) or (i + 1 < n and steps[i + 1] == steps[i])
        out.append(
            {
                "tool": c.tool_name,
                "step": steps[i] + 1,
                "parallel": parallel,
                "status": c.status,
                "args": short(c.arguments) if c.arguments else None,
                "output": short(c.output),
                "error": short(c.error),
            }
        )
    return out


def marks(result: TraceResult) -> list[dict[str, Any]]:
    """Every violation, engine's and judge's, at its offending call (``call`` None: at no single call)."""
    found = [
        {
            "source": "engine",
            "rule": v.rule_id,
            "severity": v.severity,
            "type": v.violation_type,
            "call": v.offending_call_index,
            "expected": v.expected_order,
            "actual": v.actual_order,
            "explanation": v.explanation,
            "suggestion": v.suggestion,
        }
        for v in result.engine.violations
    ]
    report = (judge_data(result.judge) or {}).get("report") or {}
    for v in report.get("violations") or []:
        found.append(
            {
                "source": "judge",
                "rule": v.get("rule_id", ""),
                "severity": v.get("severity", "warning"),
                "type": v.get("violation_type", ""),
                "call": v.get("offending_call_index"),
                "expected": v.get("expected_order", ""),
                "actual": v.get("actual_order", ""),
                "explanation": v.get("explanation", ""),
                "suggestion": "",
            }
        )
    return found


def _judge_panel(result: TraceResult) -> dict[str, Any]:
    data = judge_data(result.judge)
    if data is None:
        return {"status": "skipped", "reason": result.judge_skipped}
    fp = data.get("fingerprint") or {}
    report = data.get("report") or {}
    return {
        "status": "scored" if data.get("status") == "scored" else "unscored",
        "reason": data.get("reason"),
        "model": f"{fp.get('provider', '?')}:{fp.get('model', '?')}",
        "score": report.get("sequence_correctness_score"),
        "summary": report.get("summary"),
        "attempts": len(data.get("attempts") or []),
    }


def detail(trace: Trace, r: TraceResult, delta: Any = None) -> dict[str, Any]:
    """One trace for the detail panel (embedded as JSON, rendered by the page's script as text)."""
    n = len(trace.calls)
    return {
        "id": r.trace_id,
        "verdict": r.verdict,
        "score": r.score,
        "reasons": list(r.review_reasons),
        "engine_summary": r.engine.summary,
        "judge": _judge_panel(r),
        "calls": _calls(trace),
        "messages": [
            {
                "role": m.role,
                "content": short(m.content, MESSAGE_CHARS),
                "at": m.at if m.at is not None and m.at <= n else None,
            }
            for m in trace.messages
        ],
        "rules": [
            {
                "id": d.rule_id,
                "type": d.type,
                "severity": d.severity,
                "engine": d.engine,
                "judge": d.judge,
                "final": d.final,
                "agree": d.agree,
                "engine_explanation": d.engine_explanation,
                "judge_explanation": d.judge_explanation,
            }
            for d in r.rules
        ],
        "marks": marks(r),
        "delta": None
        if delta is None
        else {
            "before": delta.before,
            "after": delta.after,
            "before_score": delta.before_score,
            "score_delta": delta.score_delta,
            "new": delta.new,
            "fixed": delta.fixed,
        },
    }
