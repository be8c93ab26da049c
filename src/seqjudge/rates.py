"""Violation rates of a run with valid intervals: prediction-powered inference (PPI++) from the judge's
decisions on every trace and the human labels on a few (issue 36).

The estimator is ppi-python's (``ppi_py.ppi_mean_ci``, PPI++ with its power-tuning λ and sample weights),
imported here only, and only when a rate is asked for: it is the optional extra ``seqjudge[rates]``.

Which labels count, and how (the design that keeps the estimate unbiased). A run's traces fall in three
strata for each `judge` rule, fixed before anybody labels anything:

* **routed**: in the review queue for a reason other than ``audit``. Every such trace is queued, so its
  inclusion probability is 1: the stratum is a census. A resolved one's label is its true outcome and is
  counted as it is; an open (or resolved-without-this-rule's-outcome) one is unknown and is bounded by
  0 and 1 in the interval (a person picks which item to resolve, so the resolved ones are not a random
  sample of the stratum: guessing the open ones from them could bias it).
* **auto-passed**: passed with nobody looking, where the run drew audits (``--audit-rate``). The resolved
  audits are a probability sample of this stratum, each weighted by 1 / its stored inclusion probability;
  PPI++ corrects the judge's rate over the stratum by the error the audits measure. Open audits are left
  out and counted, as `runs show --audit` does: the estimate assumes they resolve like the resolved ones.
* **uncovered**: no person could be asked (a fail not queued, or auto-passed in a run without audits):
  counted, named and bounded by 0 and 1 each, never read as a pass (the point takes the judge's call on
  them). `review: {fails: true}` queues the fails, which makes them part of the census.

Which interval stands for the audited stratum (``stratum_interval``). PPI++'s interval is a normal
approximation, which with few labelled violations is too narrow: it missed the truth in up to 85% of seeded
draws at a nominal 10% with a 2% rate and 10 labels, and in 11-12% even from 5 labelled violations and 5
passes (``benchmarks/rates_coverage.py``; docs/rates.md has the table). So PPI++ stands, with Student's t
quantile for its n labels, from MIN_EACH labelled violations and MIN_EACH passes; below, the exact humans-only
interval does (``method`` says which, ``why`` says why not PPI++).

The run's rate is the traces-weighted sum of the strata. The humans-only interval uses the same strata
with the audits alone (Clopper–Pearson, ``seqjudge.audit.estimate``); the judge-only rate is the judge's
share of fails over the traces it scored, without an interval (its error is unknown). Exact rules have
the engine's exact rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from seqjudge.audit import AUDIT_REASON, DEFAULT_DELTA, Draw, auto_passed, estimate, rule_label
from seqjudge.errors import InputError

if TYPE_CHECKING:
    from seqjudge.store import Store

INSTALL = "pip install 'seqjudge[rates]'"
MIN_LABELS = 2  # PPI's interval needs a spread of the labelled errors: fewer gives no interval
# PPI's interval is a normal approximation: with few labelled violations (or passes) it is far too narrow
# (none among the labels gives a near-zero width), and it missed the truth in 11-12% of seeded draws at a
# nominal 10% even from 5 of each (benchmarks/rates_coverage.py; the table is in docs/rates.md). From
# MIN_EACH of each, PPI++'s interval stands, with Student's t quantile for its labels; below, the exact
# humans-only interval (Clopper–Pearson on Kish's n), which held its level in every simulated regime.
MIN_EACH = 10


def _ppi() -> Any:
    """ppi_py, or the one-sentence way to install it (exit 2)."""
    try:
        import ppi_py
    except ImportError:
        raise InputError(
            "violation rates need ppi-python, which is not installed",
            where="--rates",
            hint=f"{INSTALL} (or pip install ppi-python), then ask again",
        ) from None
    return ppi_py


@dataclass(frozen=True)
class Interval:
    estimate: float
    lower: float
    upper: float


def ppi_interval(
    labels: Sequence[float],
    predicted: Sequence[float],
    population: Sequence[float],
    *,
    weights: Sequence[float] | None = None,
    alpha: float = DEFAULT_DELTA,
) -> Interval | None:
    """PPI++'s two-sided ``1 - alpha`` interval for the mean label over ``population`` (the judge's calls on
    every unit of it) from ``labels`` of a sample with the judge's ``predicted`` calls on the same units,
    weighted by ``weights`` (1 / inclusion probability; None: equal). None when fewer than MIN_LABELS.

    None too when the judge's calls are all the same (over the sample and the population: they carry no
    information, and PPI++'s λ is 0 / 0) or the labelled sample shows no spread at all (the normal
    approximation PPI relies on would give a point): callers show the exact humans-only interval then."""
    if len(labels) < MIN_LABELS:
        return None
    import numpy as np

    ppi = _ppi()
    y, yhat = np.asarray(labels, dtype=float), np.asarray(predicted, dtype=float)
    pop = np.asarray(population, dtype=float)
    if np.ptp(yhat) == 0 and np.ptp(pop) == 0 or np.ptp(y) == 0 and np.ptp(yhat) == 0:
        return None
    w = None if weights is None else np.asarray(weights, dtype=float)
    low, high = (float(np.ravel(b)[0]) for b in ppi.ppi_mean_ci(y, yhat, pop, alpha=alpha, w=w))
    # The point is the interval's centre: its normal interval is symmetric about PPI++'s estimate with the
    # λ it tuned (the same value ppi_mean_pointestimate gives, without tuning λ a second time).
    return Interval(min(1.0, max(0.0, (low + high) / 2)), max(0.0, low), min(1.0, high))


def t_alpha(alpha: float, labels: int) -> float:
    """The miss chance whose normal quantile is Student's t quantile with ``labels - 1`` degrees of freedom:
    ppi_mean_ci's normal interval taken at it is the t interval (a little wider with few labels), without
    re-deriving the estimator."""
    from scipy.stats import norm, t  # ppi-python's own dependency

    return float(2 * norm.sf(t.isf(alpha / 2, max(1, labels - 1))))


def human_interval(labels: Sequence[bool], weights: Sequence[float], *, alpha: float) -> Interval | None:
    """The humans-only interval: the audits' weighted share with the exact (Clopper–Pearson on Kish's n)
    interval of ``seqjudge.audit.estimate``."""
    fig = estimate(
        [Draw(1.0 / w, y) for y, w in zip(labels, weights, strict=True)], alpha=None, delta=alpha, scope=""
    )
    if fig.estimate is None or fig.lower is None or fig.upper is None:
        return None
    return Interval(fig.estimate, fig.lower, fig.upper)


# -- a run's rates ------------------------------------------------------------------------------------------
class JudgeRate(BaseModel):
    """One `judge` rule's violation rate over a run's traces."""

    rule_id: str
    traces: int  # traces with a decision on this rule
    judged: int  # of them, the judge scored
    judge_fails: int
    judge_rate: float | None  # judge_fails / judged: biased by the judge's errors, no interval
    # routed stratum (a census): labelled, and still unknown (open, or resolved without this rule's outcome)
    routed: int
    routed_labelled: int
    routed_violations: int
    routed_unknown: int
    # auto-passed stratum, where the run drew audits
    auto_passed: int
    audits: int
    audit_labels: int  # resolved audits with this rule's outcome (the PPI sample)
    audit_violations: int
    audits_open: int
    audits_unlabelled: int  # resolved fail without this rule's outcome
    uncovered: int  # no person could be asked: bounded by 0 and 1
    alpha: float  # each interval misses with this chance (after the adjustment for several rules)
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    human_estimate: float | None = None
    human_lower: float | None = None
    human_upper: float | None = None
    method: Literal["ppi++", "humans-only", "census", "none"] = "none"
    why: str = ""  # why there is no interval, or why the PPI one was not usable


class ExactRate(BaseModel):
    rule_id: str
    traces: int
    violations: int
    unchecked: int  # the engine deferred: bounded by 0 and 1
    rate: float | None
    upper: float | None  # with every unchecked trace a violation


class RatesReport(BaseModel):
    run: str
    delta: float  # the family's miss chance
    simultaneous: bool  # Bonferroni over the judge rules (each at delta / k)
    library: str  # the estimator's implementation and version
    min_each: int = MIN_EACH  # PPI++ from this many labelled violations and passes; below, humans-only
    judge: list[JudgeRate]
    exact: list[ExactRate]


@dataclass
class _Stratified:
    """What one judge rule's traces contribute, gathered in one pass over the run."""

    traces: int = 0
    judged: int = 0
    judge_fails: int = 0
    routed: int = 0
    routed_labelled: int = 0
    routed_violations: int = 0
    auto_calls: list[float] = field(default_factory=list)  # the judge's chance of a violation: auto-passed
    auto_confident: int = 0  # of them, with the judge's confidence (the planner needs it)
    audit_y: list[bool] = field(default_factory=list)
    audit_yhat: list[float] = field(default_factory=list)
    audit_w: list[float] = field(default_factory=list)
    audits: int = 0
    audits_open: int = 0
    audits_unlabelled: int = 0
    uncovered: int = 0
    unknown_fails: int = 0  # the judge's fails among the routed-unknown and uncovered traces


def rates_report(
    db: Store, run_id: str, *, delta: float = DEFAULT_DELTA, simultaneous: bool = True
) -> RatesReport:
    """Every rule's violation rate over ``run_id``: judge rules by PPI++ (see the module's docstring),
    exact rules by the engine. With ``simultaneous``, the judge rules' intervals hold together with chance
    ``1 - delta`` (Bonferroni); otherwise each alone."""
    ppi = _ppi()
    from importlib.metadata import PackageNotFoundError, version

    try:
        library = f"ppi-python {version('ppi-python')} (ppi_py.ppi_mean_ci, PPI++)"
    except PackageNotFoundError:  # importable without its metadata (a source checkout)
        library = f"ppi_py from {ppi.__file__} (ppi_mean_ci, PPI++)"
    judge, exact = _strata(db, run_id)
    each = bonferroni(delta, len(judge)) if simultaneous else delta
    figures = [_judge_rate(rule_id, s, alpha=each) for rule_id, s in sorted(judge.items())]
    exact_figures = [
        ExactRate(
            rule_id=rule_id,
            traces=n,
            violations=v,
            unchecked=u,
            rate=v / n if n else None,
            upper=(v + u) / n if n else None,
        )
        for rule_id, (n, v, u) in sorted(exact.items())
    ]
    return RatesReport(
        run=run_id,
        delta=delta,
        simultaneous=simultaneous and len(judge) > 1,
        library=library,
        judge=figures,
        exact=exact_figures,
    )


def rates_or_note(db: Store, run_id: str) -> tuple[RatesReport | None, str | None]:
    """The run's violation rates for a page (the report's, the workbench's run page), or why the page shows
    none: the same figures as `runs show --rates`; without ppi-python the page says how to get them rather
    than fail."""
    try:
        return rates_report(db, run_id), None
    except InputError:
        return None, f"Violation rates with intervals need ppi-python: {INSTALL}."


def _strata(
    db: Store, run_id: str, *, drawable: bool = False
) -> tuple[dict[str, _Stratified], dict[str, list[int]]]:
    """One pass over the run: each judge rule's strata, and each exact rule's [traces, violations,
    unchecked]. ``drawable``: count the auto-passed traces as drawn from even when the run drew no audit
    (to plan a draw)."""
    audited_run = drawable or float(db.run_info(run_id).config.get("audit_rate") or 0) > 0
    resolutions = {item.trace_id: item.resolution for item in db.review_items(run=run_id, status="all")}
    judge: dict[str, _Stratified] = {}
    exact: dict[str, list[int]] = {}  # rule -> [traces, violations, unchecked]
    for stored in db.results(run_id):
        result = stored.result
        res = resolutions.get(result.trace_id)
        routed = any(r != AUDIT_REASON for r in result.review_reasons)
        drawn = AUDIT_REASON in result.review_reasons and result.audit_probability is not None
        for d in result.rules:
            if d.type != "judge":
                counts = exact.setdefault(d.rule_id, [0, 0, 0])
                counts[0] += 1
                counts[1] += d.engine == "failed"
                counts[2] += d.engine == "deferred"
                continue
            s = judge.setdefault(d.rule_id, _Stratified())
            s.traces += 1
            call = None if d.judge is None else float(d.judge == "failed")
            if call is not None:
                s.judged += 1
                s.judge_fails += int(call)
                # PPI's prediction is the judge's chance of a violation, its confidence where it gave one:
                # any prediction keeps the interval valid; one that varies with the truth narrows it.
                if d.confidence is not None:
                    call = d.confidence if d.judge == "failed" else 1.0 - d.confidence
            said = None if res is None else rule_label(res.verdict, res.rules.get(d.rule_id))
            if routed:
                s.routed += 1
                if said is not None:
                    s.routed_labelled += 1
                    s.routed_violations += said
                else:
                    s.unknown_fails += d.judge == "failed"
            elif auto_passed(result) and (audited_run or drawn) and call is not None:
                s.auto_calls.append(call)
                s.auto_confident += d.confidence is not None
                if drawn and result.audit_probability is not None:
                    s.audits += 1
                    if res is None:
                        s.audits_open += 1
                    elif said is None:
                        s.audits_unlabelled += 1
                    else:
                        s.audit_y.append(said)
                        s.audit_yhat.append(call)
                        s.audit_w.append(1.0 / result.audit_probability)
            else:
                s.uncovered += 1
                s.unknown_fails += d.judge == "failed"
    return judge, exact


def _judge_rate(rule_id: str, s: _Stratified, *, alpha: float) -> JudgeRate:
    routed_unknown = s.routed - s.routed_labelled
    fig = JudgeRate(
        rule_id=rule_id,
        traces=s.traces,
        judged=s.judged,
        judge_fails=s.judge_fails,
        judge_rate=s.judge_fails / s.judged if s.judged else None,
        routed=s.routed,
        routed_labelled=s.routed_labelled,
        routed_violations=s.routed_violations,
        routed_unknown=routed_unknown,
        auto_passed=len(s.auto_calls),
        audits=s.audits,
        audit_labels=len(s.audit_y),
        audit_violations=sum(s.audit_y),
        audits_open=s.audits_open,
        audits_unlabelled=s.audits_unlabelled,
        uncovered=s.uncovered,
        alpha=alpha,
    )
    if not s.traces:
        return fig
    n_auto = len(s.auto_calls)
    # What is known for sure, and what is only bounded: the census's labels, and 0..1 per unknown trace.
    bounds = _Bounds(s.traces, s.routed_violations, routed_unknown + s.uncovered, s.unknown_fails)
    if n_auto == 0 and not s.routed_labelled:
        why = "no person labelled any of these traces and none could be drawn"
        if not s.judged:
            why = "the judge scored none of these traces (no model, or no key) and " + why
        return fig.model_copy(update={"why": why + ": run with --audit-rate and resolve the review queue"})
    if n_auto == 0:
        return fig.model_copy(
            update={
                "method": "census",
                **bounds.combine("", Interval(0.0, 0.0, 0.0), 0),
                **bounds.combine("human_", Interval(0.0, 0.0, 0.0), 0),
            }
        )
    if len(s.audit_y) < MIN_LABELS:
        why = (
            f"{len(s.audit_y)} resolved audit(s) with this rule's outcome; an interval needs at least "
            f"{MIN_LABELS} (resolve more: `seqjudge review list --reason audit`)"
        )
        if not s.audits:
            why = "no audit of the auto-passed traces: run with --audit-rate so people label a sample"
        return fig.model_copy(update={"why": why})
    human = human_interval(s.audit_y, s.audit_w, alpha=alpha)
    chosen, method, why = stratum_interval(
        [float(y) for y in s.audit_y], s.audit_yhat, s.auto_calls, s.audit_w, alpha=alpha
    )
    update: dict[str, Any] = {}
    if human is not None:
        update.update(bounds.combine("human_", human, n_auto))
    if chosen is not None:
        update.update(bounds.combine("", chosen, n_auto), method=method, why=why)
    return fig.model_copy(update=update)


def stratum_interval(
    labels: Sequence[float],
    predicted: Sequence[float],
    population: Sequence[float],
    weights: Sequence[float],
    *,
    alpha: float,
) -> tuple[Interval | None, Literal["ppi++", "humans-only"], str]:
    """The interval ``runs show --rates`` reports for the auto-passed stratum's rate from its audits, the
    method that gave it, and why it is not PPI++'s when it is not: PPI++ (t quantile) from MIN_EACH labelled
    violations and passes, else the exact humans-only interval (the regimes: docs/rates.md)."""
    human = human_interval([bool(y) for y in labels], weights, alpha=alpha)
    violations = int(sum(labels))
    few = min(violations, len(labels) - violations) < MIN_EACH
    if not few:
        ppi = ppi_interval(labels, predicted, population, weights=weights, alpha=t_alpha(alpha, len(labels)))
        if ppi is not None:
            return ppi, "ppi++", ""
    why = (
        f"{violations} violation(s) and {len(labels) - violations} pass(es) among the audits' labels: "
        f"PPI's normal interval holds its level only from {MIN_EACH} of each, so the exact humans-only "
        "interval stands"
    )
    if not few:
        why = (
            "the judge's calls on the auto-passed traces do not vary (or every audit agreed with them): "
            "nothing for PPI to correct with, so the exact humans-only interval stands"
        )
    return human, "humans-only", why


@dataclass(frozen=True)
class _Bounds:
    """The strata outside the sample: the census's known violations, and the traces nobody labelled nor
    could be drawn (``unknown``, of which the judge failed ``unknown_fails``)."""

    total: int
    known: int
    unknown: int
    unknown_fails: int

    def combine(self, prefix: str, auto: Interval, n_auto: int) -> dict[str, float]:
        """The run's rate from the auto-passed stratum's interval: the unknown traces are bounded by 0 and
        1 each, and the point takes the judge's call on them."""
        known, total = self.known + n_auto * auto.estimate, self.total
        return {
            f"{prefix}estimate": (known + self.unknown_fails) / total,
            f"{prefix}lower": (self.known + n_auto * auto.lower) / total,
            f"{prefix}upper": min(1.0, (self.known + n_auto * auto.upper + self.unknown) / total),
        }


def bonferroni(alpha: float, k: int) -> float:
    """Each of ``k`` intervals at this miss chance makes them hold together with chance ``1 - alpha``
    (the union bound: no assumption on how the rules' errors depend on each other)."""
    return alpha / max(1, k)


# -- planning labels ----------------------------------------------------------------------------------------
class DrawPlan(BaseModel):
    draw: Literal["uniform", "active", "humans-only"]
    labels: int | None  # expected labels; None: no draw of the auto-passed traces reaches the width
    audit_rate: float | None  # the --audit-rate that draws them
    violations: float | None = None  # expected violations among them (PPI++ is used from MIN_EACH on)
    note: str = ""  # why the rate is higher than the width asks, or why PPI++ is out of reach


class LabelPlan(BaseModel):
    """How many labels give `rule_id`'s rate over the run an interval of ``width``, from the run's own judge
    confidences, taken as calibrated (the interval itself does not assume that; the plan does)."""

    run: str
    rule_id: str
    width: float
    delta: float
    traces: int
    auto_passed: int  # the traces an audit draws from
    fixed_width: float  # what the unlabelled routed and uncovered traces add whatever is drawn
    plans: list[DrawPlan]
    why: str = ""  # why no draw reaches the width


def plan_labels(db: Store, run_id: str, rule_id: str, *, width: float, delta: float) -> LabelPlan:
    """The labels each draw needs for a two-sided ``1 - delta`` interval of ``width`` on ``rule_id``'s rate.

    With v = ŷ (1 - ŷ) for the judge's chance of a violation ŷ on each auto-passed trace (its variance if
    the confidence is calibrated), a Poisson draw with probabilities π gives PPI (λ = 1) a stratum variance
    of Σ v / π / N² plus the judge's own spread var(ŷ) / N, the two terms of ppi_mean_ci's standard error;
    humans-only needs r (1 - r) / n for the judge's mean r."""
    from statistics import NormalDist

    from seqjudge.audit import AuditDraw, inclusion_probability

    judge, _ = _strata(db, run_id, drawable=True)
    if rule_id not in judge:
        raise InputError(
            f"run {run_id} has no judge rule {rule_id!r}",
            where="--rule",
            hint="its judge rules: " + (", ".join(sorted(judge)) or "none"),
        )
    s = judge[rule_id]
    calls = s.auto_calls
    n_auto, total = len(calls), s.traces
    if calls and not s.auto_confident:
        raise InputError(
            f"the judge gave no confidence for {rule_id} in run {run_id}; the planner reads the labels "
            "needed from the confidences",
            where="--rule",
            hint="run with a judge that states its confidence (--confidence stated, the default)",
        )
    unknown = s.routed - s.routed_labelled + s.uncovered
    fixed = unknown / total if total else 0.0
    plan = LabelPlan(
        run=run_id,
        rule_id=rule_id,
        width=width,
        delta=delta,
        traces=total,
        auto_passed=n_auto,
        fixed_width=fixed,
        plans=[],
    )
    if not n_auto:
        return plan.model_copy(update={"why": "no auto-passed trace with a judge call to draw from"})
    # The stratum's half-width that gives the run's interval ``width`` after the fixed part.
    half = (width - fixed) / 2 * total / n_auto
    if half <= 0:
        why = (
            f"the {unknown} trace(s) without a label and no chance of one (routed but open, or never "
            f"reviewable) alone make the interval {fixed:.1%} wide: resolve the review queue, or queue fails "
            "(review: {fails: true})"
        )
        return plan.model_copy(update={"why": why})
    z = NormalDist().inv_cdf(1 - delta / 2)
    budget = (half / z) ** 2  # the stratum mean's variance allowed
    v = [c * (1 - c) for c in calls]
    mean = sum(calls) / n_auto
    spread = sum((c - mean) ** 2 for c in calls) / n_auto / n_auto
    room = budget - spread

    def rate_for(variance_at: Any) -> float | None:
        """The smallest --audit-rate whose variance fits ``room`` (bisection; None: not even 1)."""
        if room <= 0 or variance_at(1.0) > room:
            return None
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if mid > 0 and variance_at(mid) <= room else (mid, hi)
        return hi

    doubts = [math.sqrt(x) for x in v]

    def expected_each(rate: float, draw: AuditDraw) -> float:
        """The fewer of the expected violations and passes among a draw's labels at ``rate``."""
        p = [inclusion_probability(rate, d, draw) for d in doubts]
        violations = sum(pi * c for pi, c in zip(p, calls, strict=True))
        return min(violations, sum(p) - violations)

    def enough_for_ppi(rate: float | None, draw: AuditDraw) -> tuple[float | None, str]:
        """``rate``, raised where its draw expects fewer than MIN_EACH labelled violations or passes: the
        interval reported then is the humans-only one, not the PPI++ one the width was planned with."""
        if rate is None or expected_each(rate, draw) >= MIN_EACH:
            return rate, ""
        if expected_each(1.0, draw) < MIN_EACH:
            return None, f"fewer than {MIN_EACH} violations or passes expected even labelling every trace"
        lo, hi = rate, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if expected_each(mid, draw) >= MIN_EACH else (mid, hi)
        return (
            hi,
            f"raised from {rate:.3g} so that {MIN_EACH} violations and passes are expected, as PPI++ needs",
        )

    uniform, uniform_note = enough_for_ppi(rate_for(lambda p: sum(v) / p / n_auto**2), "uniform")
    active, active_note = enough_for_ppi(
        rate_for(
            lambda p: (
                sum(x / inclusion_probability(p, d, "active") for x, d in zip(v, doubts, strict=True))
                / n_auto**2
            )
        ),
        "active",
    )
    human_n = z * z * mean * (1 - mean) / half**2
    plans = [
        DrawPlan(draw="uniform", labels=_count(uniform, n_auto), audit_rate=uniform, note=uniform_note),
        DrawPlan(
            draw="active",
            labels=None
            if active is None
            else math.ceil(sum(inclusion_probability(active, d, "active") for d in doubts)),
            audit_rate=active,
            note=active_note,
        ),
        DrawPlan(
            draw="humans-only",
            labels=math.ceil(human_n) if human_n <= n_auto else None,
            audit_rate=min(1.0, human_n / n_auto) if human_n <= n_auto else None,
        ),
    ]
    for i, p in enumerate(plans):
        if p.audit_rate is not None and p.draw != "humans-only":
            draw: AuditDraw = "active" if p.draw == "active" else "uniform"
            expected = sum(
                inclusion_probability(p.audit_rate, d, draw) * c for d, c in zip(doubts, calls, strict=True)
            )
            plans[i] = p.model_copy(update={"violations": expected})
    why = (
        ""
        if any(p.labels is not None for p in plans)
        else (
            "even labelling every auto-passed trace would not make the interval that narrow: ask for a "
            "wider one"
        )
    )
    return plan.model_copy(update={"plans": plans, "why": why})


def _count(rate: float | None, n: int) -> int | None:
    return None if rate is None else math.ceil(rate * n)


# -- comparing two runs -------------------------------------------------------------------------------------
class RateDifference(BaseModel):
    """A judge rule's rate in the candidate minus the baseline's, with an interval."""

    rule_id: str
    baseline: float | None
    candidate: float | None
    difference: float | None = None
    lower: float | None = None
    upper: float | None = None
    why: str = ""  # why there is no interval


class RateComparison(BaseModel):
    baseline_run: str
    candidate_run: str
    delta: float  # the differences' intervals hold together with chance 1 - delta
    rules: list[RateDifference]
    only_in_one: list[str]  # judge rules of one run only: no difference to give


def compare_rates(
    db: Store, baseline: str, candidate: str, *, delta: float = DEFAULT_DELTA
) -> RateComparison:
    """Each shared judge rule's change in violation rate, candidate minus baseline. The two runs' rates are
    independent estimates; each side's interval is taken at ``delta / (2 k)`` for k shared rules, so that
    all of them hold together with chance ``1 - delta`` (Bonferroni) and the difference lies between the
    candidate's lower bound minus the baseline's upper and the candidate's upper minus the baseline's lower.
    Conservative (no variance is pooled), and it keeps each side's bounds on what nobody labelled."""
    base, _ = _strata(db, baseline)
    cand, _ = _strata(db, candidate)
    shared = sorted(set(base) & set(cand))
    each = delta / (2 * max(1, len(shared)))
    rules = []
    for rule_id in shared:
        b, c = (
            _judge_rate(rule_id, base[rule_id], alpha=each),
            _judge_rate(rule_id, cand[rule_id], alpha=each),
        )
        row = RateDifference(rule_id=rule_id, baseline=b.estimate, candidate=c.estimate)
        if b.estimate is None or c.estimate is None or None in (b.lower, b.upper, c.lower, c.upper):
            side, fig = ("baseline", b) if b.estimate is None else ("candidate", c)
            rules.append(row.model_copy(update={"why": f"no interval on the {side}: {fig.why}"}))
            continue
        assert b.lower is not None and b.upper is not None and c.lower is not None and c.upper is not None
        rules.append(
            row.model_copy(
                update={
                    "difference": c.estimate - b.estimate,
                    "lower": c.lower - b.upper,
                    "upper": c.upper - b.lower,
                }
            )
        )
    return RateComparison(
        baseline_run=baseline,
        candidate_run=candidate,
        delta=delta,
        rules=rules,
        only_in_one=sorted(set(base) ^ set(cand)),
    )
