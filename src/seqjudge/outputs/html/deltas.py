"""What changed since a baseline, trace by trace, for the report's --compare view.

The comparison itself is ``seqjudge.compare.compare`` (the same figures and regression decisions that
``seqjudge compare`` prints, so the report and the CI gate never disagree). This module only reshapes it
for the page: one entry per candidate trace held by both runs (``compare`` lists only the traces that
changed; an unchanged trace has the same verdict and score on both sides) and the verdict transitions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from seqjudge.compare import Comparison, compare
from seqjudge.crosscheck import TraceResult
from seqjudge.errors import InputError

VERDICTS = ("pass", "review", "fail")
RANK = {v: i for i, v in enumerate(VERDICTS)}  # higher is worse


@dataclass(frozen=True)
class TraceDelta:
    trace_id: str
    before: str  # baseline verdict
    after: str
    before_score: float
    after_score: float
    new: list[str]  # rules failed now, not in the baseline
    fixed: list[str]  # rules failed in the baseline, not now

    @property
    def score_delta(self) -> float:
        return self.after_score - self.before_score

    @property
    def change(self) -> str:
        """``worse``, ``better`` or ``same`` by verdict (pass < review < fail)."""
        if RANK[self.after] > RANK[self.before]:
            return "worse"
        if RANK[self.after] < RANK[self.before]:
            return "better"
        return "same"

    @property
    def changed(self) -> bool:
        return self.change != "same" or self.score_delta != 0 or bool(self.new or self.fixed)


@dataclass
class Deltas:
    baseline_id: str
    baseline_label: str | None
    comparison: Comparison | None  # None: the runs share no trace id (``problem`` says so)
    problem: str | None = None
    traces: dict[str, TraceDelta] = field(default_factory=dict)
    transitions: Counter[tuple[str, str]] = field(default_factory=Counter)
    only_baseline: list[str] = field(default_factory=list)
    only_candidate: list[str] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return len(self.traces)

    @property
    def changes(self) -> list[Any]:
        """``compare``'s changed traces, worst first."""
        return list(self.comparison.changes) if self.comparison else []

    @property
    def new_total(self) -> int:
        return sum(len(r.new) for r in self.comparison.rules) if self.comparison else 0

    @property
    def fixed_total(self) -> int:
        return sum(len(r.fixed) for r in self.comparison.rules) if self.comparison else 0

    def rule_rows(self) -> list[tuple[str, int, int]]:
        """(rule, fixed, new) for every rule that changed on some trace, most changed first."""
        if self.comparison is None:
            return []
        rows = [(r.rule_id, len(r.fixed), len(r.new)) for r in self.comparison.rules if r.new or r.fixed]
        return sorted(rows, key=lambda row: (-(row[1] + row[2]), row[0]))


def compute_deltas(
    baseline: Sequence[TraceResult],
    candidate: Sequence[TraceResult],
    *,
    baseline_id: str,
    baseline_label: str | None = None,
) -> Deltas:
    before_ids = {r.trace_id for r in baseline}
    after_ids = {r.trace_id for r in candidate}
    out = Deltas(
        baseline_id=baseline_id,
        baseline_label=baseline_label,
        comparison=None,
        only_baseline=[r.trace_id for r in baseline if r.trace_id not in after_ids],
        only_candidate=[r.trace_id for r in candidate if r.trace_id not in before_ids],
    )
    try:
        comparison = compare(baseline, candidate, names=("baseline", "this run"))
    except InputError as exc:
        # Nothing matched: the page still shows the run, and says why there is no comparison.
        out.problem = exc.problem
        return out
    out.comparison = comparison
    changed = {c.trace_id: c for c in comparison.changes}
    for r in candidate:
        if r.trace_id not in before_ids:
            continue
        c = changed.get(r.trace_id)
        delta = (
            TraceDelta(r.trace_id, r.verdict, r.verdict, r.score, r.score, [], [])
            if c is None
            else TraceDelta(
                r.trace_id, c.baseline, c.candidate, c.baseline_score, c.candidate_score,
                list(c.new_violations), list(c.fixed),
            )
        )  # fmt: skip
        out.traces[r.trace_id] = delta
        out.transitions[(delta.before, delta.after)] += 1
    return out
