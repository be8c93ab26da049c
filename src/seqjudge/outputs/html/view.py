"""Stored results -> what the HTML report shows: the run's health, one table row and one detail per trace.

Everything here is plain data (numbers, short strings, lists); the template escapes it and the page's
script only ever puts it into the page as text. Long values (tool outputs, arguments, messages) are cut to
a few hundred characters: the report is for looking at a run, the store keeps the full traces.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from seqjudge.crosscheck import TraceResult, agreement
from seqjudge.outputs.html import svg
from seqjudge.outputs.html.deltas import VERDICTS, Deltas
from seqjudge.report import DEFAULT_THRESHOLD
from seqjudge.store import RunInfo, StoredResult, judge_data
from seqjudge.trace import Trace

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


def health(info: RunInfo, results: list[TraceResult]) -> Health:
    counts: Counter[str] = Counter(r.verdict for r in results)
    n = len(results)
    bins: list[Counter[str]] = [Counter() for _ in BIN_LABELS]
    for r in results:
        bins[score_bin(r.score)][r.verdict] += 1
    failing: Counter[str] = Counter()
    severity: dict[str, str] = {}
    for r in results:
        for d in r.rules:
            severity.setdefault(d.rule_id, d.severity)
            if d.final == "failed":
                failing[d.rule_id] += 1
    ranked = failing.most_common()
    # Why the judge did not run: per reason, how many traces it left unjudged (the run's own reason first).
    skipped = Counter(r.judge_skipped for r in results if r.judge is None and r.judge_skipped)
    run_reason = (info.totals or {}).get("judge_skipped")
    if isinstance(run_reason, str) and run_reason not in skipped:
        skipped[run_reason] = 0
    reasons: Counter[str] = Counter(reason for r in results for reason in r.review_reasons)
    tokens, source = _tokens(info, results)
    threshold = info.config.get("threshold", DEFAULT_THRESHOLD)
    out = Health(
        counts={"traces": n, **{v: counts.get(v, 0) for v in VERDICTS}},
        pass_rate=counts.get("pass", 0) / n if n else None,
        bins=[dict(b) for b in bins],
        threshold=float(threshold) if isinstance(threshold, int | float) else DEFAULT_THRESHOLD,
        violations=[(rule, severity[rule], k) for rule, k in ranked[:MAX_RULE_BARS]],
        violations_more=max(0, len(ranked) - MAX_RULE_BARS),
        agreement=agreement(results),
        tokens=tokens,
        tokens_source=source,
        cost=_cost(info),
        judge_skipped=skipped.most_common(),
        review_reasons=reasons.most_common(),
        review_queue={k: info.counts.get(f"review_{k}", 0) for k in ("open", "resolved")},
        judged=sum(1 for r in results if _judge_status(r) == "scored"),
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


def rows(stored: list[StoredResult], deltas: Deltas | None = None) -> list[Row]:
    out = []
    for i, s in enumerate(stored):
        r = s.result
        out.append(
            Row(
                index=i,
                trace_id=r.trace_id,
                verdict=r.verdict,
                score=r.score,
                calls=len(s.trace.calls),
                failed=[d.rule_id for d in r.rules if d.final == "failed"],
                disagreements=[d.rule_id for d in r.disagreements],
                reasons=list(r.review_reasons),
                judge=_judge_status(r),
                delta=None if deltas is None else deltas.traces.get(r.trace_id),
            )
        )
    return out


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


def _marks(result: TraceResult) -> list[dict[str, Any]]:
    """Every violation, engine's and judge's, at its offending call (``call`` None: at no single call)."""
    marks = [
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
        marks.append(
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
    return marks


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


def detail(s: StoredResult, delta: Any = None) -> dict[str, Any]:
    """One trace for the detail panel (embedded as JSON, rendered by the page's script as text)."""
    r = s.result
    n = len(s.trace.calls)
    return {
        "id": r.trace_id,
        "verdict": r.verdict,
        "score": r.score,
        "reasons": list(r.review_reasons),
        "engine_summary": r.engine.summary,
        "judge": _judge_panel(r),
        "calls": _calls(s.trace),
        "messages": [
            {
                "role": m.role,
                "content": short(m.content, MESSAGE_CHARS),
                "at": m.at if m.at is not None and m.at <= n else None,
            }
            for m in s.trace.messages
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
        "marks": _marks(r),
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
