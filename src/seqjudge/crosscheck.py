"""Engine report + judge result -> one reconciled result per trace, with the reasons to send it to review.

A deterministic rule's final outcome is always the engine's: the judge cross-checks it, and a disagreement
marks the trace for review and counts against the judge's reliability. A `judge` rule's final outcome is the
judge's; it stays `deferred` without a scored judge: routed to review when the judge ran but did not score,
and only named in the run's summary when no judge could run at all (no model configured or no key). A
judge decision that does not gate (no certificate, or below its certified threshold) stays `deferred` too,
and routes its trace to review when it could matter: nothing a judge finds is dropped.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from seqjudge.defaults import REVIEW_REASONS as REVIEW_REASONS  # re-exported: its old home
from seqjudge.defaults import ReviewReason
from seqjudge.report import (
    DEFAULT_THRESHOLD,
    Outcome,
    Report,
    RiskLevel,
    RuleResult,
    Verdict,
    score,
    score_reasons,
    verdict,
)


class JudgedViolation(Protocol):
    """A violation in the judge's report, as reconciliation reads it."""

    @property
    def rule_id(self) -> str: ...
    @property
    def explanation(self) -> str: ...
    @property
    def offending_call_index(self) -> int | None: ...


class JudgedReport(Protocol):
    @property
    def violations(self) -> Sequence[JudgedViolation]: ...


class Judged(Protocol):
    """What reconciliation needs of a judge's result (``seqjudge.judge.judge.JudgeResult`` is one); a
    Protocol so that this module needs no provider code."""

    @property
    def status(self) -> Literal["scored", "unscored"]: ...
    @property
    def report(self) -> JudgedReport | None: ...
    @property
    def rule_ids(self) -> Sequence[str]: ...


class JudgeRouting(Protocol):
    """What a judge rule decision does (``seqjudge.judge_gate.JudgeGate`` is one): ``gate`` (it stands),
    ``review`` (below its certified confidence threshold) or ``advisory`` (no certificate: it decides no
    verdict or score, and a fail of it sends the trace to review as ``uncertified_judge_fail``)."""

    def route(self, rule_id: str, said: str, confidence: float | None) -> str: ...


class RuleDecision(BaseModel):
    rule_id: str
    type: str
    severity: Literal["critical", "warning"]
    engine: Outcome
    judge: Literal["passed", "failed"] | None = None  # None: the judge was not asked, or did not score
    final: Outcome
    agree: bool | None = None  # None: not cross-checked
    call_indices: list[int] = Field(default_factory=list)
    engine_explanation: str = ""
    judge_explanation: str | None = None
    judge_call_indices: list[int] = Field(default_factory=list)
    confidence: float | None = None  # the judge's confidence in ``judge`` (None: none given, or not asked)
    # A judge rule decision that did not gate, and why; either way its trace is not passed unseen.
    route: Literal["review", "advisory"] | None = None


class StageRecord(BaseModel):
    """What one judge of an escalation cascade (``seqjudge.cascade``) did for one trace."""

    model: str
    asked: list[str]  # the rules put to it
    settled: list[str] = Field(default_factory=list)  # the judge rules it auto-decided
    unsettled: list[str] = Field(default_factory=list)  # the judge rules passed on (to the next, or review)
    status: Literal["scored", "unscored"]
    certified: bool  # a certificate matched this stage
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: the model has no price


class TraceResult(BaseModel):
    """Everything decided about one trace: both reports, the reconciliation and the routing."""

    trace_id: str
    verdict: Verdict
    score: float
    rules: list[RuleDecision]
    review_reasons: list[ReviewReason] = Field(default_factory=list)
    engine: Report
    judge: Any = None  # a seqjudge.judge.judge.JudgeResult, kept loose so this module needs no provider code
    judge_skipped: str | None = None  # why no judge ran, when none did
    audit_probability: float | None = None  # routed for an audit with this inclusion probability
    stages: list[StageRecord] = Field(default_factory=list)  # an escalation cascade's judges, in order

    @property
    def disagreements(self) -> list[RuleDecision]:
        return [d for d in self.rules if d.agree is False]

    @property
    def routed(self) -> bool:
        return bool(self.review_reasons)


def reconcile(
    engine: Report,
    judge: Judged | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    risk_level: RiskLevel = "medium",
    judge_skipped: str | None = None,
    gate: JudgeRouting | None = None,
    queue_fails: bool = False,
) -> TraceResult:
    """Reconcile one trace. ``judge`` is a JudgeResult or None (not run: say why in ``judge_skipped``).
    ``gate``: how the judge's decisions on `judge` rules gate (None: they all stand). ``queue_fails``
    (``review: {fails: true}``): a trace whose fail verdict stands is queued too (``engine_fail``,
    ``judge_fail``); by default it is not, since no person's decision is pending on it."""
    asked: set[str] = set(judge.rule_ids) if judge is not None else set()
    report = judge.report if judge is not None and judge.status == "scored" else None
    confidences = _confidences(judge) if report is not None else {}
    scored = report is not None
    judge_fail: dict[str, list[JudgedViolation]] = defaultdict(list)
    if report is not None:
        for v in report.violations:
            judge_fail[v.rule_id].append(v)
    decisions: list[RuleDecision] = []
    for r in engine.rules:
        said: Literal["passed", "failed"] | None = None
        if scored and r.rule_id in asked:
            said = "failed" if r.rule_id in judge_fail else "passed"
        final: Outcome = r.outcome
        agree: bool | None = None
        route: Literal["review", "advisory"] | None = None
        if r.type == "judge" or r.outcome == "deferred":
            # A judge rule the engine found not exercised (no call of its applies_to) stays so; a rule
            # the engine could not settle on this trace (a lineage value in an output it could not read)
            # is the judge's to decide, as a judge rule is.
            if said is not None and r.outcome == "deferred":
                final = said
                routed = (
                    gate.route(r.rule_id, said, confidences.get(r.rule_id)) if gate is not None else "gate"
                )
                if routed in ("review", "advisory"):
                    # Pending a person (review) or advice only: the judge's word is in ``judge``, not final.
                    final, route = "deferred", routed  # type: ignore[assignment]
        elif said is not None and r.outcome in ("passed", "failed", "not_exercised", "not_applicable"):
            # Binary cross-check: did the engine fail the rule, did the judge?
            agree = (r.outcome == "failed") == (said == "failed")
        violations = judge_fail.get(r.rule_id, [])
        decisions.append(
            RuleDecision(
                rule_id=r.rule_id,
                type=r.type,
                severity=r.severity,
                engine=r.outcome,
                judge=said,
                final=final,
                agree=agree,
                call_indices=r.call_indices,
                engine_explanation=r.explanation,
                judge_explanation=" ".join(v.explanation for v in violations) or None,
                judge_call_indices=sorted(
                    {v.offending_call_index for v in violations if v.offending_call_index is not None}
                ),
                confidence=confidences.get(r.rule_id) if said is not None else None,
                route=route,
            )
        )
    finals = [
        RuleResult(rule_id=d.rule_id, type=d.type, severity=d.severity, outcome=d.final, explanation="")
        for d in decisions
    ]
    value, _, _, _ = score(finals)
    critical = [d for d in decisions if d.final == "failed" and d.severity == "critical"]
    # Each reason names what put the trace in the queue. A critical fail stands (verdict fail): it is no
    # "below threshold" doubt, and it is queued only when the project asks a person to see every fail.
    reasons: list[ReviewReason] = [] if critical else score_reasons(value, threshold, risk_level)
    if critical and queue_fails:
        reasons.append("engine_fail" if any(d.type != "judge" for d in critical) else "judge_fail")
    if any(d.agree is False for d in decisions):
        reasons.append("judge_engine_disagreement")
    if judge is not None and judge.status == "unscored":
        reasons.append("unscored")
    # With no judge at all (no model, no key) a deferred judge rule is named once in the run's summary,
    # not routed trace by trace: the verdict is then the engine's, as `seqjudge check` gives it. A decision
    # routed by the certificate (review, advisory) is not undecided: its route says what happens to it.
    if judge_skipped is None and any(d.final == "deferred" and d.route is None for d in decisions):
        reasons.append("judge_rule_undecided")
    if any(d.route == "review" for d in decisions):
        reasons.append("low_confidence")
    # Advice never gates, and is never unseen: a fail no certificate vouches for goes to a person.
    if any(d.route == "advisory" and d.judge == "failed" for d in decisions):
        reasons.append("uncertified_judge_fail")
    final_verdict: Verdict = verdict(value, bool(critical), threshold=threshold, risk_level=risk_level)
    if final_verdict == "pass" and reasons:
        final_verdict = "review"
    return TraceResult(
        trace_id=engine.trace_id,
        verdict=final_verdict,
        score=value,
        rules=decisions,
        review_reasons=reasons,
        engine=engine,
        judge=judge,
        judge_skipped=judge_skipped,
    )


# Reasons that are advice, not a gate: a trace in review for these alone would pass on what gates
# (``compare`` must not count it as a regression).
ADVISORY_REASONS: frozenset[str] = frozenset({"uncertified_judge_fail", "audit"})


def gating_verdict(result: TraceResult) -> Verdict:
    """The verdict on what gates alone: a trace in review only for advice (``ADVISORY_REASONS``) passes."""
    reasons = set(result.review_reasons)
    if result.verdict == "review" and reasons and reasons <= ADVISORY_REASONS:
        return "pass"
    return result.verdict


def _confidences(judge: Judged | None) -> dict[str, float]:
    get = getattr(judge, "rule_confidences", None)
    return get() if get is not None else {}


class Agreement(BaseModel):
    decisions: int
    agreed: int
    rate: float | None
    kappa: float | None


def cohen_kappa(pairs: Iterable[tuple[bool, bool]]) -> Agreement:
    """Cohen's kappa for two raters over binary decisions (True = failed).

    kappa = (p_o - p_e) / (1 - p_e); when both raters are constant and agree, p_e = 1 and kappa is
    undefined: reported as None rather than a number that pretends.
    """
    return kappa_of(Counter(pairs))


def kappa_of(counts: Counter[tuple[bool, bool]]) -> Agreement:
    """``cohen_kappa`` from the count of each (rater a, rater b) pair: a running tally needs no list."""
    n = sum(counts.values())
    if n == 0:
        return Agreement(decisions=0, agreed=0, rate=None, kappa=None)
    agreed = counts[True, True] + counts[False, False]
    p_o = agreed / n
    a_yes = (counts[True, True] + counts[True, False]) / n
    b_yes = (counts[True, True] + counts[False, True]) / n
    p_e = a_yes * b_yes + (1 - a_yes) * (1 - b_yes)
    kappa = None if p_e >= 1.0 else (p_o - p_e) / (1 - p_e)
    return Agreement(decisions=n, agreed=agreed, rate=p_o, kappa=kappa)


class AgreementTally:
    """Judge-engine agreement counted as results come (``agreement``'s figures without keeping them)."""

    def __init__(self) -> None:
        self.overall: Counter[tuple[bool, bool]] = Counter()
        self.by_type: dict[str, Counter[tuple[bool, bool]]] = defaultdict(Counter)
        self.by_rule: dict[str, Counter[tuple[bool, bool]]] = defaultdict(Counter)

    def add(self, decisions: Iterable[RuleDecision]) -> None:
        for d in decisions:
            if d.agree is None or d.judge is None:
                continue
            pair = (d.engine == "failed", d.judge == "failed")
            self.overall[pair] += 1
            self.by_type[d.type][pair] += 1
            self.by_rule[d.rule_id][pair] += 1

    def figures(self) -> dict[str, Any]:
        return {
            "overall": kappa_of(self.overall).model_dump(),
            "by_type": {k: kappa_of(v).model_dump() for k, v in sorted(self.by_type.items())},
            "by_rule": {k: kappa_of(v).model_dump() for k, v in sorted(self.by_rule.items())},
        }


def agreement(results: Iterable[TraceResult]) -> dict[str, Any]:
    """Judge-engine agreement overall, per rule type and per rule, over every cross-checked decision."""
    tally = AgreementTally()
    for res in results:
        tally.add(res.rules)
    return tally.figures()
