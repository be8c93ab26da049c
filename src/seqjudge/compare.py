"""Baseline versus candidate: which traces and rules got worse, and is it a regression or judge noise?

Traces are matched by id. Four decision rules, each reported with the figures behind it:

- ``deterministic``: a rule the engine decides (any type but ``judge``) whose final outcome was not
  ``failed`` on a trace in the baseline and is ``failed`` on that trace in the candidate. The engine is
  exact, so a single such trace is a regression: there is no noise to allow for.
- ``judge_paired``: the rules only the LLM judge decides (type ``judge``) vary from run to run even when
  nothing changed. Per trace, the judge rules pass (none failed) or fail (one failed); traces where a judge
  rule is undecided on either side are left out, and so are those where no judge rule was exercised (an
  ``applies_to`` rule whose tools the trace never calls decides nothing). With no pair left the test is not
  applicable, said as such: neither a pass nor a fail. Two views of the same paired data must agree before the
  candidate is blamed: McNemar's exact test on the discordant pairs (pass->fail ``b`` against
  fail->pass ``c``; p < alpha with ``b > c``), and a seeded paired bootstrap (1 - alpha) interval of the
  mean change of the per-trace judge score (the share of its judge rules that passed) lying entirely below
  zero. Either alone is too easily moved by a handful of flips (the percentile bootstrap in particular is
  anti-conservative when few traces are discordant). With a repeat run of the baseline (``repeat=``: the
  same traces judged again by the same judge), the share of traces on which the two repeats disagree is a
  noise floor the net flip rate ``(b - c) / n`` must also exceed. Without one, McNemar and the bootstrap
  already account for noise, since both work on paired differences.
- ``max_drop`` (only when set): the pass rate on the traces both runs hold fell by more than ``max_drop``.
- ``missing``: baseline traces absent from the candidate, or a candidate run that did not complete
  (``candidate_status`` not ``completed``: stopped, interrupted, still running). What was never checked
  cannot pass the gate, so this counts unless ``allow_missing`` (``--allow-missing``) makes it a report.

Rules present on only one side (a changed rule file) are listed and never count as regressions: a rule
the baseline never decided cannot have regressed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from seqjudge.crosscheck import RuleDecision, TraceResult, agreement, gating_verdict
from seqjudge.errors import InputError
from seqjudge.report import Verdict
from seqjudge.safetext import listing
from seqjudge.store import StoredResult

DecisionRule = Literal["deterministic", "judge_paired", "max_drop", "missing"]
RESAMPLES = 2000
LISTED = 5  # trace ids named in one reason before "and N more"


# -- statistics ---------------------------------------------------------------------------------------------
def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: a binomial(b + c, 1/2) test on the discordant pairs.

    p = min(1, 2 * sum_{i <= min(b, c)} C(n, i) / 2^n); 1.0 when there is no discordant pair. Integer
    arithmetic up to the one division, so large counts lose no precision."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def bootstrap_interval(
    deltas: Sequence[float], *, level: float = 0.95, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of paired differences; the same seed, the same interval."""
    n = len(deltas)
    if n == 0:
        raise ValueError("no paired differences to resample")
    if all(d == deltas[0] for d in deltas):
        return (float(deltas[0]), float(deltas[0]))  # every resample has this mean
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(deltas, k=n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2.0
    low = means[min(resamples - 1, max(0, math.floor(tail * resamples)))]
    high = means[min(resamples - 1, max(0, math.ceil((1.0 - tail) * resamples) - 1))]
    return (low, high)


# -- the report ----------------------------------------------------------------------------------------------
class SideSummary(BaseModel):
    """One side of the comparison, over all its traces."""

    name: str
    run_id: str | None = None
    label: str | None = None
    status: str | None = None  # the run's status, when known (an interrupted run misses traces)
    traces: int
    counts: dict[str, int]  # pass, fail, review
    pass_rate: float | None
    mean_score: float | None
    agreement: float | None  # judge-engine agreement rate over cross-checked decisions, None if none


class TraceChange(BaseModel):
    trace_id: str
    baseline: Verdict
    candidate: Verdict
    baseline_score: float
    candidate_score: float
    delta: float
    new_violations: list[str] = Field(default_factory=list)  # rules failed now and not before
    fixed: list[str] = Field(default_factory=list)  # rules failed before and not now
    deterministic_regressions: list[str] = Field(default_factory=list)  # engine rules among new_violations
    review_reasons: list[str] = Field(default_factory=list)  # the candidate's, when it is in review


class RuleChange(BaseModel):
    rule_id: str
    type: str
    severity: str
    decided_by: Literal["engine", "judge"]
    baseline_failed: int
    candidate_failed: int
    new: list[str] = Field(default_factory=list)  # trace ids
    fixed: list[str] = Field(default_factory=list)
    p_value: float | None = None  # judge rules: McNemar over the traces decided on both sides


class ScoreChange(BaseModel):
    """The trace score over the matched traces, with a bootstrap interval of the mean change."""

    baseline_mean: float
    candidate_mean: float
    mean_change: float
    interval: tuple[float, float]
    level: float
    resamples: int
    seed: int


class JudgeTest(BaseModel):
    rules: list[str]
    paired: int  # traces whose judge rules are decided on both sides
    undecided: int  # matched traces left out: a judge rule undecided (deferred) on a side
    unexercised: int = 0  # matched traces left out: no judge rule exercised on either side (nothing decided)
    advisory: int = 0  # of those, traces where a judge rule was advisory (no certificate matched its run)
    pass_to_fail: int
    fail_to_pass: int
    p_value: float
    mean_change: float | None = None  # of the per-trace judge score
    interval: tuple[float, float] | None = None
    mcnemar_worse: bool = False
    bootstrap_worse: bool = False
    above_noise: bool | None = None  # None: no repeat run given


class NoiseFloor(BaseModel):
    """Judge disagreement between the baseline and a repeat run of it (same traces, same judge)."""

    name: str
    paired: int
    discordant: int
    rate: float


class Decision(BaseModel):
    rule: DecisionRule
    applies: bool  # False: not configured (max_drop unset) or nothing to decide (no judge rules)
    fired: bool
    reason: str


class Comparison(BaseModel):
    baseline: SideSummary
    candidate: SideSummary
    matched: int
    only_in_baseline: list[str]
    only_in_candidate: list[str]
    worse: list[str]  # pass -> fail or review
    better: list[str]  # fail or review -> pass
    changes: list[TraceChange]  # traces whose verdict, score or failed rules changed; worst first
    rules: list[RuleChange]
    rules_only_in_baseline: list[str] = Field(default_factory=list)
    rules_only_in_candidate: list[str] = Field(default_factory=list)
    pass_rate: dict[str, float]  # baseline, candidate: over the matched traces
    score: ScoreChange
    judge: JudgeTest | None = None
    noise: NoiseFloor | None = None
    decisions: list[Decision]
    regression: bool
    alpha: float
    max_drop: float | None = None

    @property
    def fired(self) -> list[Decision]:
        return [d for d in self.decisions if d.fired]

    def decision(self, rule: DecisionRule) -> Decision:
        return next(d for d in self.decisions if d.rule == rule)


# -- helpers -------------------------------------------------------------------------------------------------
def _results(items: Iterable[TraceResult | StoredResult], side: str) -> dict[str, TraceResult]:
    out: dict[str, TraceResult] = {}
    for item in items:
        result = item.result if isinstance(item, StoredResult) else item
        if result.trace_id in out:
            raise InputError(
                f"trace {result.trace_id!r} appears twice in the {side}",
                where=side,
                hint="compare one run with another: trace ids are unique within a run",
            )
        out[result.trace_id] = result
    return out


def _listing(ids: Sequence[str], limit: int = LISTED) -> str:
    return listing(ids, limit)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def summarize(name: str, results: Sequence[TraceResult]) -> SideSummary:
    counts = {"pass": 0, "fail": 0, "review": 0}
    for r in results:
        counts[r.verdict] += 1
    n = len(results)
    rate = agreement(results)["overall"]["rate"]
    return SideSummary(
        name=name,
        traces=n,
        counts=counts,
        pass_rate=counts["pass"] / n if n else None,
        mean_score=math.fsum(r.score for r in results) / n if n else None,
        agreement=rate,
    )


# Final outcomes of a judge rule that decide nothing about the trace: it was not exercised (an `applies_to`
# rule whose tools the trace never calls) or its `when:` did not match. A trace of only these has no judge
# outcome to pair; counting it as a pass made a comparison of two judge-less runs a green judge test.
NOT_DECIDING = frozenset({"not_exercised", "not_applicable"})


def _judge_decisions(result: TraceResult, rule_ids: set[str]) -> list[RuleDecision]:
    """The trace's decisions of the judge rules in ``rule_ids`` that were exercised (or left deferred)."""
    return [d for d in result.rules if d.rule_id in rule_ids and d.final not in NOT_DECIDING]


def judge_outcome(result: TraceResult, rule_ids: set[str]) -> Literal["pass", "fail"] | None:
    """The trace's judge rules as one pass/fail: fail if one failed, None if one is undecided or none was
    exercised."""
    decisions = _judge_decisions(result, rule_ids)
    if not decisions:
        return None
    if any(d.final == "failed" for d in decisions):
        return "fail"
    if any(d.final == "deferred" for d in decisions):
        return None
    return "pass"


def judge_score(result: TraceResult, rule_ids: set[str]) -> float | None:
    """The share of the trace's decided judge rules that did not fail; None if one is undecided or none was
    exercised."""
    decisions = _judge_decisions(result, rule_ids)
    if not decisions or any(d.final == "deferred" for d in decisions):
        return None
    return sum(1 for d in decisions if d.final != "failed") / len(decisions)


def _judge_rule_ids(base: dict[str, TraceResult], cand: dict[str, TraceResult]) -> set[str]:
    def ids(results: dict[str, TraceResult]) -> set[str]:
        return {d.rule_id for r in results.values() for d in r.rules if d.type == "judge"}

    return ids(base) & ids(cand)


def noise_floor(
    name: str, baseline: Iterable[TraceResult | StoredResult], repeat: Iterable[TraceResult | StoredResult]
) -> NoiseFloor:
    """How often the judge rules' pass/fail differs between two runs of the same traces and judge."""
    base = _results(baseline, "baseline")
    again = _results(repeat, "repeat run")
    rule_ids = _judge_rule_ids(base, again)
    paired = discordant = 0
    for trace_id in base.keys() & again.keys():
        a = judge_outcome(base[trace_id], rule_ids)
        b = judge_outcome(again[trace_id], rule_ids)
        if a is None or b is None:
            continue
        paired += 1
        discordant += a != b
    if paired == 0:
        raise InputError(
            "the repeat run shares no judged trace with the baseline",
            where="--repeat",
            hint="give a second run of the baseline's traces with the same judge (model) configured",
        )
    return NoiseFloor(name=name, paired=paired, discordant=discordant, rate=discordant / paired)


# -- the comparison ------------------------------------------------------------------------------------------
def compare(
    baseline_results: Iterable[TraceResult | StoredResult],
    candidate_results: Iterable[TraceResult | StoredResult],
    *,
    max_drop: float | None = None,
    alpha: float = 0.05,
    seed: int = 0,
    resamples: int = RESAMPLES,
    noise: NoiseFloor | None = None,
    allow_missing: bool = False,
    candidate_status: str | None = None,
    names: tuple[str, str] = ("baseline", "candidate"),
) -> Comparison:
    """Compare two runs' per-trace results; see the module docstring for the decision rules."""
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha is {alpha}", where="--alpha", hint="give a level between 0 and 1, e.g. 0.05")
    if max_drop is not None and not 0.0 <= max_drop <= 1.0:
        raise InputError(
            f"max drop is {max_drop}",
            where="--max-drop",
            hint="give an absolute drop of the pass rate between 0 and 1, e.g. 0.05 for five points",
        )
    base = _results(baseline_results, "baseline")
    cand = _results(candidate_results, "candidate")
    matched_ids = [t for t in base if t in cand]  # baseline order: stable output
    if not matched_ids:
        raise InputError(
            f"the {names[0]} ({len(base)} traces) and the {names[1]} ({len(cand)} traces) share no trace id",
            where="compare",
            hint="compare two runs over the same suite: traces are matched by trace_id",
        )
    only_base = [t for t in base if t not in cand]
    only_cand = [t for t in cand if t not in base]

    # Per rule and per trace: final outcomes side by side.
    base_rules = {d.rule_id for r in base.values() for d in r.rules}
    cand_rules = {d.rule_id for r in cand.values() for d in r.rules}
    rule_info: dict[str, RuleDecision] = {}
    for r in list(cand.values()) + list(base.values()):
        for d in r.rules:
            rule_info.setdefault(d.rule_id, d)
    judge_ids = _judge_rule_ids(base, cand)
    rule_changes: dict[str, RuleChange] = {}
    for rule_id in sorted(base_rules & cand_rules):
        info = rule_info[rule_id]
        rule_changes[rule_id] = RuleChange(
            rule_id=rule_id,
            type=info.type,
            severity=info.severity,
            decided_by="judge" if info.type == "judge" else "engine",
            baseline_failed=0,
            candidate_failed=0,
        )
    changes: list[TraceChange] = []
    worse: list[str] = []
    better: list[str] = []
    deterministic: dict[str, list[str]] = {}  # rule -> traces where it newly failed
    judge_decided: dict[str, list[tuple[bool, bool]]] = {r: [] for r in judge_ids}  # (failed before, now)
    for trace_id in matched_ids:
        b, c = base[trace_id], cand[trace_id]
        before = {d.rule_id: d for d in b.rules}
        now = {d.rule_id: d for d in c.rules}
        new: list[str] = []
        fixed: list[str] = []
        det: list[str] = []
        for rule_id, change in rule_changes.items():
            old_d, new_d = before.get(rule_id), now.get(rule_id)
            if old_d is None or new_d is None:
                continue  # the rule did not reach this trace on one side (a changed rule file)
            was, is_ = old_d.final == "failed", new_d.final == "failed"
            change.baseline_failed += was
            change.candidate_failed += is_
            if is_ and not was:
                change.new.append(trace_id)
                new.append(rule_id)
                if change.decided_by == "engine":
                    det.append(rule_id)
                    deterministic.setdefault(rule_id, []).append(trace_id)
            elif was and not is_:
                change.fixed.append(trace_id)
                fixed.append(rule_id)
            if rule_id in judge_decided and {old_d.final, new_d.final} <= {"passed", "failed"}:
                judge_decided[rule_id].append((was, is_))
        if b.verdict == "pass" and c.verdict != "pass":
            worse.append(trace_id)
        elif b.verdict != "pass" and c.verdict == "pass":
            better.append(trace_id)
        if b.verdict != c.verdict or b.score != c.score or new or fixed:
            changes.append(
                TraceChange(
                    trace_id=trace_id,
                    baseline=b.verdict,
                    candidate=c.verdict,
                    baseline_score=b.score,
                    candidate_score=c.score,
                    delta=c.score - b.score,
                    new_violations=new,
                    fixed=fixed,
                    deterministic_regressions=det,
                    review_reasons=list(c.review_reasons) if c.verdict == "review" else [],
                )
            )
    severity_rank = {"fail": 0, "review": 1, "pass": 2}
    changes.sort(key=lambda t: (t.delta, severity_rank[t.candidate], t.trace_id))
    for rule_id, pairs in judge_decided.items():
        if not pairs:
            continue  # decided on no trace on both sides: no test, no p-value
        b_count = sum(1 for was, is_ in pairs if is_ and not was)
        c_count = sum(1 for was, is_ in pairs if was and not is_)
        rule_changes[rule_id].p_value = mcnemar_exact(b_count, c_count)

    level = 1.0 - alpha
    base_scores = [base[t].score for t in matched_ids]
    cand_scores = [cand[t].score for t in matched_ids]
    deltas = [c_ - b_ for b_, c_ in zip(base_scores, cand_scores, strict=True)]
    score = ScoreChange(
        baseline_mean=math.fsum(base_scores) / len(matched_ids),
        candidate_mean=math.fsum(cand_scores) / len(matched_ids),
        mean_change=math.fsum(deltas) / len(deltas),
        interval=bootstrap_interval(deltas, level=level, resamples=resamples, seed=seed),
        level=level,
        resamples=resamples,
        seed=seed,
    )
    # On what gates: a trace in review only for an uncertified judge's fail (advice) passes here.
    pass_rate = {
        "baseline": sum(1 for t in matched_ids if gating_verdict(base[t]) == "pass") / len(matched_ids),
        "candidate": sum(1 for t in matched_ids if gating_verdict(cand[t]) == "pass") / len(matched_ids),
    }

    judge = _judge_test(base, cand, matched_ids, judge_ids, alpha, level, resamples, seed, noise)
    decisions = [
        _deterministic_decision(deterministic, rule_changes),
        _judge_decision(judge, alpha, noise),
        _max_drop_decision(pass_rate, max_drop, len(matched_ids)),
        _missing_decision(only_base, allow_missing, candidate_status, names[1]),
    ]
    base_side = summarize(names[0], list(base.values()))
    cand_side = summarize(names[1], list(cand.values()))
    return Comparison(
        baseline=base_side,
        candidate=cand_side,
        matched=len(matched_ids),
        only_in_baseline=only_base,
        only_in_candidate=only_cand,
        worse=worse,
        better=better,
        changes=changes,
        rules=sorted(rule_changes.values(), key=lambda r: (-len(r.new), r.rule_id)),
        rules_only_in_baseline=sorted(base_rules - cand_rules),
        rules_only_in_candidate=sorted(cand_rules - base_rules),
        pass_rate=pass_rate,
        score=score,
        judge=judge,
        noise=noise,
        decisions=decisions,
        regression=any(d.fired for d in decisions),
        alpha=alpha,
        max_drop=max_drop,
    )


def _judge_test(
    base: dict[str, TraceResult],
    cand: dict[str, TraceResult],
    matched: list[str],
    rule_ids: set[str],
    alpha: float,
    level: float,
    resamples: int,
    seed: int,
    noise: NoiseFloor | None,
) -> JudgeTest | None:
    if not rule_ids:
        return None
    b = c = undecided = advisory = unexercised = 0
    deltas: list[float] = []
    for trace_id in matched:
        if not _judge_decisions(base[trace_id], rule_ids) and not _judge_decisions(cand[trace_id], rule_ids):
            unexercised += 1  # no judge rule concerns this trace on either side: nothing to compare
            continue
        old, new = judge_outcome(base[trace_id], rule_ids), judge_outcome(cand[trace_id], rule_ids)
        old_s, new_s = judge_score(base[trace_id], rule_ids), judge_score(cand[trace_id], rule_ids)
        if old is None or new is None or old_s is None or new_s is None:
            undecided += 1
            advisory += any(
                d.route == "advisory"
                for r in (base[trace_id], cand[trace_id])
                for d in r.rules
                if d.rule_id in rule_ids
            )
            continue
        b += old == "pass" and new == "fail"
        c += old == "fail" and new == "pass"
        deltas.append(new_s - old_s)
    p = mcnemar_exact(b, c)
    test = JudgeTest(
        rules=sorted(rule_ids),
        paired=len(deltas),
        undecided=undecided,
        unexercised=unexercised,
        advisory=advisory,
        pass_to_fail=b,
        fail_to_pass=c,
        p_value=p,
        mcnemar_worse=p < alpha and b > c,
    )
    if deltas:
        test.mean_change = math.fsum(deltas) / len(deltas)
        test.interval = bootstrap_interval(deltas, level=level, resamples=resamples, seed=seed)
        test.bootstrap_worse = test.interval[1] < 0.0
        if noise is not None:
            test.above_noise = (b - c) / len(deltas) > noise.rate
    return test


def _deterministic_decision(regressed: dict[str, list[str]], rules: dict[str, RuleChange]) -> Decision:
    if not regressed:
        return Decision(
            rule="deterministic",
            applies=True,
            fired=False,
            reason="no engine-decided rule newly failed on any trace",
        )
    parts = [
        f"{rule_id} ({rules[rule_id].type}, {rules[rule_id].severity}) newly failed on "
        f"{len(traces)} trace(s): {_listing(traces)}"
        for rule_id, traces in sorted(regressed.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    return Decision(
        rule="deterministic",
        applies=True,
        fired=True,
        reason="the engine is exact, so any new failure counts: " + "; ".join(parts),
    )


def _judge_decision(judge: JudgeTest | None, alpha: float, noise: NoiseFloor | None) -> Decision:
    if judge is None:
        return Decision(rule="judge_paired", applies=False, fired=False, reason="no judge rule on both sides")
    decision = _paired_decision(judge, alpha, noise)
    if judge.advisory:
        # seqjudge.judge_gate: a run no certificate matched (model, prompt, rules) took them as advice.
        decision.reason = (
            f"judge rules advisory on {judge.advisory} trace(s) (no calibration certificate matched the "
            f"run): left out, never gating; {decision.reason}"
        )
    return decision


def _paired_decision(judge: JudgeTest, alpha: float, noise: NoiseFloor | None) -> Decision:
    if judge.paired == 0:
        left = [
            *([f"{judge.undecided} undecided"] if judge.undecided else []),
            *([f"{judge.unexercised} with no judge rule exercised"] if judge.unexercised else []),
        ]
        todo = (
            "run both with a model to compare the judge rules"
            if judge.undecided
            else "no trace calls a tool the judge rules apply to, so there is nothing to compare"
        )
        return Decision(
            rule="judge_paired",
            applies=False,
            fired=False,
            reason=f"not applicable: no trace has its judge rules decided on both sides ({', '.join(left)}): "
            + todo,
        )
    counts = (
        f"{judge.pass_to_fail} pass->fail and {judge.fail_to_pass} fail->pass of {judge.paired} paired "
        f"trace(s)"
        + (f" ({judge.unexercised} with no judge rule exercised left out)" if judge.unexercised else "")
    )
    mcnemar = f"McNemar exact p = {judge.p_value:.4g} ({'<' if judge.p_value < alpha else '>='} {alpha:g})"
    assert judge.interval is not None and judge.mean_change is not None
    low, high = judge.interval
    boot = (
        f"mean judge-score change {judge.mean_change:+.3f}, {100 * (1 - alpha):g}% bootstrap interval "
        f"[{low:+.3f}, {high:+.3f}]"
    )
    parts = [counts, mcnemar, boot]
    if noise is not None:
        net = (judge.pass_to_fail - judge.fail_to_pass) / judge.paired
        parts.append(
            f"net flip rate {_pct(net)} {'>' if judge.above_noise else '<='} the repeat runs' "
            f"disagreement {_pct(noise.rate)}"
        )
    fired = judge.mcnemar_worse and judge.bootstrap_worse and judge.above_noise is not False
    if fired:
        verdict = "the judge rules got worse beyond judge noise"
    elif judge.mcnemar_worse or judge.bootstrap_worse:
        verdict = "within judge noise: the tests do not agree that the candidate is worse"
    elif judge.pass_to_fail or judge.fail_to_pass:
        verdict = "within judge noise"
    else:
        verdict = "no judge-rule outcome changed"
    return Decision(rule="judge_paired", applies=True, fired=fired, reason=f"{verdict}: " + "; ".join(parts))


def _max_drop_decision(pass_rate: dict[str, float], max_drop: float | None, matched: int) -> Decision:
    drop = pass_rate["baseline"] - pass_rate["candidate"]
    points = 100 * (pass_rate["candidate"] - pass_rate["baseline"])
    figures = (
        f"pass rate on the {matched} trace(s) both hold {_pct(pass_rate['baseline'])} -> "
        f"{_pct(pass_rate['candidate'])} ({points:+.1f} points)"
    )
    if max_drop is None:
        return Decision(rule="max_drop", applies=False, fired=False, reason=f"not set; {figures}")
    # A small tolerance: 0.95 - 0.90 is 0.04999... in floating point and must not beat --max-drop 0.05.
    fired = drop > max_drop + 1e-12
    relation = "exceeds" if fired else "is within"
    return Decision(
        rule="max_drop",
        applies=True,
        fired=fired,
        reason=f"{figures}: the drop {relation} --max-drop {max_drop:g}",
    )


def _missing_decision(
    only_base: list[str], allow_missing: bool, candidate_status: str | None, candidate: str
) -> Decision:
    problems = []
    if candidate_status is not None and candidate_status != "completed":
        problems.append(f"the candidate run {candidate} is {candidate_status}, not completed")
    if only_base:
        problems.append(
            f"{len(only_base)} baseline trace(s) missing from the candidate: {_listing(only_base)}"
        )
    if not problems:
        return Decision(
            rule="missing",
            applies=not allow_missing,
            fired=False,
            reason="the candidate holds every baseline trace",
        )
    figures = "; ".join(problems)
    if allow_missing:
        return Decision(rule="missing", applies=False, fired=False, reason=f"{figures} (--allow-missing)")
    return Decision(
        rule="missing",
        applies=True,
        fired=True,
        reason=f"{figures}: what was not checked cannot pass (--allow-missing reports it only)",
    )
