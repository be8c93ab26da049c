"""Choose the pass/fail threshold from labelled data, and say how sure the choice is.

Input: one final score per trace (``TraceResult.score``, what ``threshold`` is compared with) and the
human verdict. A trace is *flagged* (predicted to fail) when ``score < threshold``, as in ``reconcile``;
the positive class is a trace labelled ``fail``. Everything here is pure computation on numbers: no I/O,
no judge, no numpy (the bootstrap works on counts per distinct score, so it stays fast in plain Python).

Decisions beyond the issue text:

- Candidate thresholds are 0.0, every distinct observed score, 1.0, and "just above 1" (``ABOVE_ONE``,
  flags every trace). A threshold equal to an observed score ``s`` flags the scores below ``s``. Every
  threshold is in the sweep; only those in [0, 1] can be chosen (a config threshold is at most 1.0, and
  "flag every trace" is not a threshold, it is doing without the judge).
- false-pass rate = share of known-fail traces that are not flagged = FN / (TP + FN) = 1 - recall. The
  false-alarm rate is the other error: known-pass traces flagged, FP / (FP + TN).
- Objectives (ties: the lowest threshold, which flags the fewest traces for the same figure):
  ``false-pass`` (default): the lowest threshold whose false-pass rate is at most ``max_false_pass``, else
  the best F1 (and the result says it fell back); ``f1``: the best F1; ``youden``: the best
  recall - false-alarm rate; ``cost``: the least ``cost_fn * FN + cost_fp * FP``; ``target-recall``: among
  the thresholds with recall >= R, the best precision, else the best F1 (fallback); ``lowest-false-pass``
  (risk level high): the lowest false-pass rate, ties to the *highest* threshold, which is always 1.0 since
  the false-pass rate can only fall as the threshold rises: at high risk every imperfect score goes to
  review anyway (seed 000).
- Bootstrap: ``resamples`` stratified resamples (known-fail and known-pass traces each resampled with
  replacement to their own count), from ``random.Random(seed)``. The threshold's interval comes from running
  the same selection on each resample; a metric's interval from evaluating the chosen threshold, held
  fixed, on each resample (what a user of that threshold would see). Percentile intervals, nearest rank,
  so each end is a value a resample really produced. An interval wider than ``WIDE`` or fewer than
  ``MIN_FAILS`` known-fail traces is said to be wide, in words.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel, Field

from seqjudge.crosscheck import Agreement, cohen_kappa

ABOVE_ONE = math.nextafter(1.0, 2.0)
DEFAULT_MAX_FALSE_PASS = 0.05
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
CONFIDENCE = 0.95
WIDE = 0.2  # an interval wider than this is called wide
MIN_FAILS = 30  # fewer known-fail traces than this: the false-pass rate rests on few failures
METRICS = ("precision", "recall", "f1", "false_pass_rate", "false_alarm_rate", "kappa", "flagged_share")

Objective = Literal["false-pass", "f1", "youden", "cost", "target-recall", "lowest-false-pass"]
OBJECTIVES: tuple[str, ...] = Objective.__args__  # type: ignore[attr-defined]
RISK_OBJECTIVES: dict[str, str] = {"low": "f1", "medium": "false-pass", "high": "lowest-false-pass"}


class Row(BaseModel):
    """The figures of one threshold; None where a figure is undefined (precision with nothing flagged)."""

    threshold: float
    flagged: int
    tp: int
    fp: int
    fn: int
    tn: int
    precision: float | None
    recall: float | None
    f1: float | None
    false_pass_rate: float | None
    false_alarm_rate: float | None
    youden: float | None
    kappa: float | None
    cost: float | None = None
    selectable: bool = True

    @property
    def flagged_share(self) -> float | None:
        n = self.tp + self.fp + self.fn + self.tn
        return self.flagged / n if n else None


class Settings(BaseModel):
    objective: Objective = "false-pass"
    max_false_pass: float = DEFAULT_MAX_FALSE_PASS
    target_recall: float | None = None
    cost_fn: float | None = None
    cost_fp: float | None = None
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    confidence: float = CONFIDENCE


class Choice(BaseModel):
    """A chosen threshold: why, its figures, and their bootstrap intervals."""

    objective: Objective
    rule: str  # the objective in words
    threshold: float
    row: Row
    fallback: str | None = None  # set when the objective could not be met and best F1 was used instead
    intervals: dict[str, tuple[float, float] | None] = Field(default_factory=dict)  # threshold + METRICS
    wide: bool = False
    warnings: list[str] = Field(default_factory=list)
    note: str | None = None


class Calibration(BaseModel):
    settings: Settings
    traces: int
    known_fail: int
    known_pass: int
    sweep: list[Row]
    selection: Choice
    recommendations: dict[str, Choice]
    warnings: list[str] = Field(default_factory=list)
    scores: list[dict[str, Any]] = Field(default_factory=list)  # {trace_id, label, score, scores?}


# -- counting ------------------------------------------------------------------------------------------------
class _Counts:
    """Distinct scores, ascending, with how many known-fail and known-pass traces have each."""

    __slots__ = ("values", "fails", "passes", "n_fail", "n_pass")

    def __init__(self, fail_scores: Iterable[float], pass_scores: Iterable[float]) -> None:
        f, p = Counter(fail_scores), Counter(pass_scores)
        self.values = sorted(set(f) | set(p))
        self.fails = [f.get(v, 0) for v in self.values]
        self.passes = [p.get(v, 0) for v in self.values]
        self.n_fail = sum(self.fails)
        self.n_pass = sum(self.passes)

    def candidates(self) -> list[float]:
        # 1.0 always: "only a perfect score passes" is a threshold a user may want even when no trace
        # scored exactly 1.0 (and it is where the high risk level operates).
        return sorted({0.0, 1.0, *self.values}) + [ABOVE_ONE]

    def rows(self, thresholds: Sequence[float], cost: tuple[float, float] | None = None) -> list[Row]:
        """One row per threshold (ascending), in one pass over the distinct scores."""
        out: list[Row] = []
        i = tp = fp = 0
        for t in thresholds:
            while i < len(self.values) and self.values[i] < t:
                tp += self.fails[i]
                fp += self.passes[i]
                i += 1
            out.append(_row(t, tp, fp, self.n_fail - tp, self.n_pass - fp, cost))
        return out


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _row(t: float, tp: int, fp: int, fn: int, tn: int, cost: tuple[float, float] | None) -> Row:
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    false_alarm = _ratio(fp, fp + tn)
    youden = None if recall is None or false_alarm is None else recall - false_alarm
    return Row(
        threshold=t,
        flagged=tp + fp,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        precision=precision,
        recall=recall,
        f1=f1,
        false_pass_rate=None if recall is None else 1.0 - recall,
        false_alarm_rate=false_alarm,
        youden=youden,
        kappa=_kappa(tp, fp, fn, tn),
        cost=None if cost is None else cost[0] * fn + cost[1] * fp,
        selectable=0.0 <= t <= 1.0,
    )


def _kappa(tp: int, fp: int, fn: int, tn: int) -> float | None:
    """Cohen's kappa of (label fail, flagged), from the confusion counts (the same figure as
    ``crosscheck.cohen_kappa`` over the pairs; computed from counts so that the bootstrap stays cheap)."""
    n = tp + fp + fn + tn
    if not n:
        return None
    p_o = (tp + tn) / n
    a_yes, b_yes = (tp + fn) / n, (tp + fp) / n
    p_e = a_yes * b_yes + (1 - a_yes) * (1 - b_yes)
    return None if p_e >= 1.0 else (p_o - p_e) / (1 - p_e)


def sweep(
    scores: Mapping[str, float], labels: Mapping[str, str], settings: Settings | None = None
) -> list[Row]:
    """The sweep table over 0, the observed scores and just above 1. ``labels``: trace id -> pass | fail."""
    counts = _counts(scores, labels)
    return counts.rows(counts.candidates(), _cost(settings or Settings()))


def kappa_against_labels(
    scores: Mapping[str, float], labels: Mapping[str, str], threshold: float
) -> Agreement:
    """Cohen's kappa of the flags at ``threshold`` against the labels, by ``crosscheck.cohen_kappa``."""
    return cohen_kappa((labels[t] == "fail", s < threshold) for t, s in scores.items())


def _counts(scores: Mapping[str, float], labels: Mapping[str, str]) -> _Counts:
    missing = [t for t in scores if t not in labels]
    if missing:
        raise ValueError(f"no label for trace(s): {', '.join(missing[:5])}")
    return _Counts(
        (s for t, s in scores.items() if labels[t] == "fail"),
        (s for t, s in scores.items() if labels[t] != "fail"),
    )


def _cost(settings: Settings) -> tuple[float, float] | None:
    if settings.cost_fn is None or settings.cost_fp is None:
        return None
    return (settings.cost_fn, settings.cost_fp)


# -- selection ---------------------------------------------------------------------------------------------
def _key(value: float | None) -> float:
    return -math.inf if value is None else value


def _best(rows: list[Row], figure: Callable[[Row], float | None]) -> Row:
    # max() keeps the first of equals and rows are ascending: ties go to the lowest threshold.
    return max(rows, key=lambda r: _key(figure(r)))


def rule_text(objective: str, settings: Settings) -> str:
    return {
        "false-pass": f"the lowest threshold with a false-pass rate of at most {settings.max_false_pass:.1%}",
        "f1": "the best F1 for catching failing traces",
        "youden": "the best Youden's J (recall minus false-alarm rate)",
        "cost": f"the least cost ({settings.cost_fn:g} per false pass, {settings.cost_fp:g} per false alarm)"
        if settings.cost_fn is not None and settings.cost_fp is not None
        else "the least cost",
        "target-recall": f"the best precision with a recall of at least {settings.target_recall:.1%}"
        if settings.target_recall is not None
        else "the best precision at the target recall",
        "lowest-false-pass": "the lowest false-pass rate (every score below 1.0 goes to review)",
    }[objective]


def select(rows: list[Row], objective: str, settings: Settings) -> tuple[Row, str | None]:
    """The chosen row among the selectable ones, and the fallback reason when the objective was not met."""
    pool = [r for r in rows if r.selectable]
    if not pool:
        raise ValueError("no selectable threshold")
    if objective == "false-pass":
        ok = [
            r
            for r in pool
            if r.false_pass_rate is not None and r.false_pass_rate <= settings.max_false_pass + 1e-12
        ]
        if ok:
            return ok[0], None
        return _best(pool, lambda r: r.f1), (
            f"no threshold up to 1.0 keeps the false-pass rate at or below {settings.max_false_pass:.1%} "
            "(some known-fail trace scores 1.0): fell back to the best F1"
        )
    if objective == "target-recall":
        target = settings.target_recall if settings.target_recall is not None else 1.0
        ok = [r for r in pool if r.recall is not None and r.recall >= target - 1e-12]
        if ok:
            return _best(ok, lambda r: r.precision), None
        return _best(pool, lambda r: r.f1), (
            f"no threshold up to 1.0 reaches a recall of {target:.1%}: fell back to the best F1"
        )
    if objective == "f1":
        return _best(pool, lambda r: r.f1), None
    if objective == "youden":
        return _best(pool, lambda r: r.youden), None
    if objective == "cost":
        if settings.cost_fn is None or settings.cost_fp is None:
            raise ValueError("the cost objective needs cost_fn and cost_fp")
        return _best(pool, lambda r: None if r.cost is None else -r.cost), None
    if objective == "lowest-false-pass":
        # Ties to the highest threshold: the cautious end, and 1.0 (false-pass can only fall as t rises).
        best = min(_key(r.false_pass_rate) for r in pool)
        return [r for r in pool if _key(r.false_pass_rate) == best][-1], None
    raise ValueError(f"unknown objective {objective!r}")


# -- bootstrap ---------------------------------------------------------------------------------------------
def percentile_interval(
    values: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Nearest-rank percentile interval: ends are values that occurred. None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    n = len(ordered)
    alpha = (1 - confidence) / 2
    lo = ordered[max(0, math.ceil(alpha * n) - 1)]
    hi = ordered[min(n - 1, math.ceil((1 - alpha) * n) - 1)]
    return (lo, hi)


def _figure(row: Row, name: str) -> float | None:
    return row.flagged_share if name == "flagged_share" else getattr(row, name)


def bootstrap(
    fail_scores: Sequence[float],
    pass_scores: Sequence[float],
    chosen: Mapping[str, tuple[str, float]],
    settings: Settings,
) -> dict[str, dict[str, tuple[float, float] | None]]:
    """Intervals per chosen threshold. ``chosen``: name -> (objective, threshold)."""
    rng = random.Random(settings.seed)
    cost = _cost(settings)
    thresholds: dict[str, list[float]] = {name: [] for name in chosen}
    figures: dict[str, dict[str, list[float]]] = {name: {m: [] for m in METRICS} for name in chosen}
    fixed = sorted({t for _, t in chosen.values()})
    nf, np_ = len(fail_scores), len(pass_scores)
    for _ in range(settings.resamples):
        counts = _Counts(
            rng.choices(fail_scores, k=nf) if nf else [], rng.choices(pass_scores, k=np_) if np_ else []
        )
        rows = counts.rows(counts.candidates(), cost)
        at = dict(zip(fixed, counts.rows(fixed, cost), strict=True))
        for name, (objective, t) in chosen.items():
            thresholds[name].append(select(rows, objective, settings)[0].threshold)
            for m in METRICS:
                value = _figure(at[t], m)
                if value is not None:
                    figures[name][m].append(value)
    out: dict[str, dict[str, tuple[float, float] | None]] = {}
    for name in chosen:
        out[name] = {"threshold": percentile_interval(thresholds[name], settings.confidence)}
        for m in METRICS:
            values = figures[name][m]
            # A figure undefined in most resamples has no honest interval.
            enough = len(values) * 2 >= settings.resamples
            out[name][m] = percentile_interval(values, settings.confidence) if enough else None
    return out


def _wide_warnings(intervals: Mapping[str, tuple[float, float] | None], n_fail: int) -> list[str]:
    said: list[str] = []
    names = {
        "threshold": "threshold",
        "false_pass_rate": "false-pass rate",
        "recall": "recall",
        "precision": "precision",
        "f1": "F1",
    }
    for name, words in names.items():
        iv = intervals.get(name)
        if iv is not None and iv[1] - iv[0] > WIDE:
            said.append(
                f"the 95% interval of the {words} is wide ({iv[0]:.3g} to {iv[1]:.3g}, width "
                f"{iv[1] - iv[0]:.2f} > {WIDE}): more labelled traces would narrow it"
            )
    if n_fail < MIN_FAILS:
        said.append(
            f"only {n_fail} known-fail trace(s) (fewer than {MIN_FAILS}): the false-pass rate rests on few "
            "failures, and its interval is wide whatever it shows"
        )
    return said


# -- the whole calibration ---------------------------------------------------------------------------------
def calibrate(
    scores: Mapping[str, float],
    labels: Mapping[str, str],
    settings: Settings | None = None,
    *,
    risk_objectives: Mapping[str, str] | None = None,
) -> Calibration:
    """Sweep, select by ``settings.objective``, recommend per risk level, bootstrap every choice.

    ``risk_objectives`` overrides the objective of a risk level (default ``RISK_OBJECTIVES``)."""
    settings = settings or Settings()
    counts = _counts(scores, labels)
    if not counts.n_fail or not counts.n_pass:
        raise ValueError(
            f"calibration needs known-fail and known-pass traces (have {counts.n_fail} fail, "
            f"{counts.n_pass} pass)"
        )
    cost = _cost(settings)
    rows = counts.rows(counts.candidates(), cost)
    levels = {**RISK_OBJECTIVES, **(risk_objectives or {})}
    plan: dict[str, str] = {"selection": settings.objective, **levels}
    picked = {name: select(rows, objective, settings) for name, objective in plan.items()}
    fail_scores = [s for t, s in scores.items() if labels[t] == "fail"]
    pass_scores = [s for t, s in scores.items() if labels[t] != "fail"]
    intervals = bootstrap(
        fail_scores, pass_scores, {n: (plan[n], picked[n][0].threshold) for n in plan}, settings
    )
    choices: dict[str, Choice] = {}
    for name, objective in plan.items():
        row, fallback = picked[name]
        warnings = _wide_warnings(intervals[name], counts.n_fail)
        note = None
        if name == "high" or objective == "lowest-false-pass":
            note = (
                "at risk level high every score below 1.0 is routed to review whatever the threshold: "
                "only a perfect score passes without a person"
            )
        choices[name] = Choice(
            objective=objective,  # type: ignore[arg-type]
            rule=rule_text(objective, settings),
            threshold=row.threshold,
            row=row,
            fallback=fallback,
            intervals=intervals[name],
            wide=bool(warnings),
            warnings=warnings,
            note=note,
        )
    return Calibration(
        settings=settings,
        traces=len(scores),
        known_fail=counts.n_fail,
        known_pass=counts.n_pass,
        sweep=rows,
        selection=choices.pop("selection"),
        recommendations=choices,
        scores=[{"trace_id": t, "label": labels[t], "score": s} for t, s in scores.items()],
    )


def writable(threshold: float, observed: Iterable[float]) -> float:
    """``threshold`` rounded down to 4 decimals for a config file, unless that would change which observed
    scores it flags (then it is kept exact)."""
    rounded = math.floor(threshold * 10_000) / 10_000
    if any(rounded <= s < threshold for s in observed):
        return threshold
    return rounded


# -- repeats -----------------------------------------------------------------------------------------------
def majority_score(scores: Sequence[float]) -> float:
    """The lower median: for an odd number of repeats, ``median < t`` exactly when most repeats score below
    ``t``, at every threshold ``t`` (the majority verdict); for an even number a tie counts as flagged."""
    ordered = sorted(scores)
    return ordered[(len(ordered) - 1) // 2]


class PairAgreement(BaseModel):
    a: int
    b: int
    verdicts: Agreement  # trace verdict "fail" or not, over the traces scored in both repeats
    judge_rules: Agreement  # the judge's own per-rule decisions (failed or not), over (trace, rule)


class Stability(BaseModel):
    repeats: int
    traces: int
    verdict_changed: int
    verdict_changed_share: float | None
    score_std_mean: float | None
    score_std_max: float | None
    pairs: list[PairAgreement]
    verdict_kappa_mean: float | None
    verdict_kappa_min: float | None
    rule_kappa_mean: float | None
    rule_kappa_min: float | None
    changed: list[dict[str, Any]] = Field(default_factory=list)  # {trace_id, verdicts, scores}


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def stability(repeats: Sequence[Mapping[str, Any]]) -> Stability:
    """How much K judgements of the same traces differ. ``repeats[k]``: trace id -> TraceResult.

    A trace counts when it has a result in every repeat. Its verdict changed when the reconciled verdicts
    (pass / fail / review) are not all equal; its spread is the population standard deviation of its K
    final scores. Pairwise agreement is Cohen's kappa between two repeats, on the trace verdict (fail or
    not) and on the judge's own decision for each rule it was asked about (failed or not).
    """
    k = len(repeats)
    ids = [t for t in repeats[0] if all(t in r for r in repeats)] if repeats else []
    changed: list[dict[str, Any]] = []
    stds: list[float] = []
    for t in ids:
        verdicts = [r[t].verdict for r in repeats]
        scores = [r[t].score for r in repeats]
        stds.append(statistics.pstdev(scores) if k > 1 else 0.0)
        if len(set(verdicts)) > 1:
            changed.append({"trace_id": t, "verdicts": verdicts, "scores": scores})
    pairs: list[PairAgreement] = []
    for a, b in combinations(range(k), 2):
        verdict_pairs = [(repeats[a][t].verdict == "fail", repeats[b][t].verdict == "fail") for t in ids]
        rule_pairs: list[tuple[bool, bool]] = []
        for t in ids:
            da = {d.rule_id: d.judge for d in repeats[a][t].rules if d.judge is not None}
            db = {d.rule_id: d.judge for d in repeats[b][t].rules if d.judge is not None}
            rule_pairs.extend((da[r] == "failed", db[r] == "failed") for r in da if r in db)
        pairs.append(
            PairAgreement(
                a=a + 1, b=b + 1, verdicts=cohen_kappa(verdict_pairs), judge_rules=cohen_kappa(rule_pairs)
            )
        )
    vk = [p.verdicts.kappa for p in pairs if p.verdicts.kappa is not None]
    rk = [p.judge_rules.kappa for p in pairs if p.judge_rules.kappa is not None]
    return Stability(
        repeats=k,
        traces=len(ids),
        verdict_changed=len(changed),
        verdict_changed_share=len(changed) / len(ids) if ids else None,
        score_std_mean=_mean(stds),
        score_std_max=max(stds) if stds else None,
        pairs=pairs,
        verdict_kappa_mean=_mean(vk),
        verdict_kappa_min=min(vk) if vk else None,
        rule_kappa_mean=_mean(rk),
        rule_kappa_min=min(rk) if rk else None,
        changed=changed,
    )
