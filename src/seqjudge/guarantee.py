"""Risk-controlled confidence thresholds for the judge's rule decisions (Learn-then-Test).

For one judge rule, the calibration data are its labelled decisions: what the judge said (passed or failed),
the judge's confidence in that, and the person's label. Auto-passing the judge's passes with confidence at or
above ``t`` errs on the ones labelled fail; the null hypothesis at ``t`` is "that error rate exceeds alpha".
Fixed-sequence testing walks a grid of thresholds from the strictest (1.0) down and rejects while the
one-sided Clopper–Pearson upper bound of the error rate is at most ``alpha``; it stops at the first threshold
it cannot reject. The loosest rejected threshold is chosen, and with probability at least ``1 - delta`` over
the calibration sample the error rate among future auto-passed decisions is at most ``alpha`` (Angelopoulos
et al. 2021, "Learn then Test"; fixed-sequence testing needs no correction for the number of thresholds).
Auto-fail is the mirror image: the judge's fails, erring on the ones labelled pass.

Choices beyond the issue text:
- The grid is fixed before seeing data (0.000 to 1.000 in steps of ``GRID_STEP``), as Learn-then-Test
  requires. The threshold reported is the lowest confidence among the decisions the chosen grid point
  auto-decides: the same set on the calibration data, without reaching down to confidences never seen.
- The walk starts at the strictest *testable* threshold: one that would auto-decide at least
  ``labels_needed(alpha, delta)`` decisions (59 for 0.05/0.05). Above it not even zero errors could reject,
  so those hypotheses are dropped rather than tested and failed, which would end the walk before it began.
  Which ones are dropped depends only on the confidences, never on the labels, so given the confidences
  the order is fixed in advance and the fixed-sequence guarantee holds.
- A decision without a confidence is never auto-decided (it goes to review) but counts in the coverage's
  denominator, which is every labelled decision of the rule, whatever the judge said.
- When no threshold can be certified the result has no threshold and says how many labelled decisions of
  that kind it would take (``bounds.labels_needed`` at the error rate observed over all of them).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from seqjudge.bounds import clopper_pearson_upper, labels_needed, upper_bound_at_most

GRID_STEP = 0.005
GRID: tuple[float, ...] = tuple(round(1.0 - i * GRID_STEP, 6) for i in range(round(1 / GRID_STEP) + 1))
DEFAULT_ALPHA = 0.05
DEFAULT_DELTA = 0.05

Side = Literal["pass", "fail"]


@dataclass(frozen=True)
class LabelledDecision:
    """One judge decision on one rule of one trace, with the person's label of that rule on that trace."""

    rule_id: str
    judge: Literal["passed", "failed"]
    confidence: float | None
    label: Literal["pass", "fail"]
    trace_id: str = ""


class Step(BaseModel):
    """One tested threshold: how many decisions it would auto-decide, how many of them wrongly, whether its
    null was rejected, and the bound (worked out for the chosen step and the one that stopped the walk)."""

    threshold: float
    n: int
    errors: int
    upper_bound: float | None
    rejected: bool


class Guarantee(BaseModel):
    """Auto-pass (or auto-fail, ``side``) under a risk guarantee, for one rule at one risk level.

    ``threshold`` None: the labels cannot support ``alpha``; ``needed`` then says how many labelled decisions
    of that kind it would take at the error rate seen (None: more labels cannot help, the judge errs too
    often). For auto-fail, ``n_auto_passed`` and ``auto_pass_coverage`` count auto-failed decisions (the JSON
    names them ``n_auto_failed`` and ``auto_fail_coverage``)."""

    side: Side = "pass"
    alpha: float
    delta: float
    threshold: float | None
    upper_bound: float | None
    n_auto_passed: int
    auto_pass_coverage: float | None
    errors: int = 0  # wrongly auto-decided among the labelled decisions at the threshold
    decisions: int = 0  # labelled decisions of the rule (the coverage's denominator)
    candidates: int = 0  # labelled decisions the judge made on this side (passes, or fails for auto-fail)
    no_confidence: int = 0  # of those, how many had no confidence (never auto-decided)
    needed: int | None = None
    reason: str | None = None
    steps: list[Step] = Field(default_factory=list, exclude=True)  # for the plot and the text

    def public(self) -> dict[str, object]:
        """The issue's JSON shape (``n_auto_failed``/``auto_fail_coverage`` for auto-fail) plus the extras."""
        data = self.model_dump(mode="json", exclude={"side"})
        if self.side == "fail":
            data["n_auto_failed"] = data.pop("n_auto_passed")
            data["auto_fail_coverage"] = data.pop("auto_pass_coverage")
        return data


def _wrong(d: LabelledDecision, side: Side) -> bool:
    return d.label == ("fail" if side == "pass" else "pass")


def certify(
    decisions: Sequence[LabelledDecision],
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
    side: Side = "pass",
    grid: Sequence[float] = GRID,
) -> Guarantee:
    """The loosest threshold of ``grid`` (descending) that fixed-sequence testing certifies for one rule."""
    if not 0.0 < alpha < 1.0 or not 0.0 < delta < 1.0:
        raise ValueError(f"alpha ({alpha}) and delta ({delta}) must be between 0 and 1 (exclusive)")
    said = "passed" if side == "pass" else "failed"
    mine = [d for d in decisions if d.judge == said]
    scored = sorted(
        ((d.confidence, _wrong(d, side)) for d in mine if d.confidence is not None),
        key=lambda x: -x[0],
    )
    steps: list[Step] = []
    chosen: Step | None = None
    floor = 1.0
    i = n = errors = 0
    testable = labels_needed(alpha, delta) or 1
    for t in grid:
        while i < len(scored) and scored[i][0] >= t - 1e-12:
            n += 1
            errors += scored[i][1]
            i += 1
        if n < testable and i < len(scored):
            continue  # untestable: see the module docstring
        rejected = upper_bound_at_most(errors, n, delta, alpha)  # one CDF; the bound itself only if shown
        steps.append(Step(threshold=t, n=n, errors=errors, upper_bound=None, rejected=rejected))
        if not rejected:
            break
        chosen = steps[-1]
        floor = scored[i - 1][0]  # rejected means n > 0
    for step in {id(s): s for s in (chosen, steps[-1] if steps else None) if s is not None}.values():
        step.upper_bound = clopper_pearson_upper(step.errors, step.n, delta) if step.n else 1.0
    total = len(decisions)
    base = {
        "side": side,
        "alpha": alpha,
        "delta": delta,
        "decisions": total,
        "candidates": len(mine),
        "no_confidence": sum(1 for d in mine if d.confidence is None),
        "steps": steps,
    }
    if chosen is not None:
        return Guarantee(
            **base,  # type: ignore[arg-type]
            threshold=floor,
            upper_bound=chosen.upper_bound,
            n_auto_passed=chosen.n,
            auto_pass_coverage=chosen.n / total if total else None,
            errors=chosen.errors,
        )
    wrong = sum(1 for d in mine if _wrong(d, side))
    rate = wrong / len(mine) if mine else 0.0
    need = labels_needed(alpha, delta, rate)
    kind = "passes" if side == "pass" else "fails"
    if need is None:
        reason = (
            f"{wrong} of the judge's {len(mine)} labelled {kind} are wrong ({rate:.1%}, not below alpha "
            f"{alpha:g}): more labels cannot certify this rule; improve the judge or its criteria"
        )
    else:
        reason = (
            f"the labels cannot support alpha {alpha:g} at delta {delta:g}: about {need} labelled judge "
            f"{kind} with confidence are needed at the error rate seen ({wrong} of {len(mine)}), "
            f"{max(0, need - len(scored))} more than there are"
        )
    return Guarantee(
        **base,  # type: ignore[arg-type]
        threshold=None,
        upper_bound=None,
        n_auto_passed=0,
        auto_pass_coverage=0.0 if total else None,
        needed=need,
        reason=reason,
    )


class RuleGuarantee(BaseModel):
    """What calibration certifies for one judge rule at one risk level."""

    rule_id: str
    risk_level: str
    guarantee: Guarantee
    auto_fail: Guarantee | None = None
    unlabelled: int = 0  # judge decisions with no label for this rule (not used)


def certify_rules(
    decisions: Iterable[LabelledDecision],
    risk_level: str,
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
    *,
    auto_fail: bool = False,
    rule_ids: Sequence[str] = (),
) -> list[RuleGuarantee]:
    """``certify`` per rule (every id of ``rule_ids`` gets an entry, with or without decisions)."""
    by_rule: dict[str, list[LabelledDecision]] = defaultdict(list)
    for rid in rule_ids:
        by_rule[rid]
    for d in decisions:
        by_rule[d.rule_id].append(d)
    out: list[RuleGuarantee] = []
    for rid in sorted(by_rule):
        mine = by_rule[rid]
        out.append(
            RuleGuarantee(
                rule_id=rid,
                risk_level=risk_level,
                guarantee=certify(mine, alpha, delta, "pass"),
                auto_fail=certify(mine, alpha, delta, "fail") if auto_fail else None,
            )
        )
    return out


def more_labels(g: Guarantee, factor: float = 2.0) -> float | None:
    """The upper bound the same auto-decided share and error rate would give with ``factor`` times the
    labels: what more labelling would buy at the chosen threshold (None without a threshold)."""
    if g.threshold is None or not g.n_auto_passed:
        return None
    n = math.ceil(g.n_auto_passed * factor)
    k = math.ceil(g.errors / g.n_auto_passed * n - 1e-9)
    return clopper_pearson_upper(k, n, g.delta)
