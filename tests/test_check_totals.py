"""`check`'s totals are counted as before with less work a trace (issue 19 point 2).

``Checker.checked`` counts each trace into ``Totals`` (and its coverage) where the trace is checked. It skips
the exercised-rule scan once every rule was exercised, the deferred scan when no rule can be deferred, and
``Totals.count`` counts with Counter's own helper: the totals, their first-seen order, the first trace ids
and the coverage must be what counting each report in full gives.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from seqjudge.checkpool import Checker
from seqjudge.outputs.textview import FIRST_IDS, Totals
from seqjudge.rules.coverage import Coverage
from seqjudge.rules.engine import Engine
from seqjudge.trace import PlainTrace, Trace

try:  # as tests/test_engine_property.py imports tests/reference.py
    from test_engine_property import ALIASES, ANY_RULE, PROFILE, build_ruleset, traces
except ImportError:  # pragma: no cover
    from tests.test_engine_property import ALIASES, ANY_RULE, PROFILE, build_ruleset, traces

SETTINGS = settings(PROFILE, max_examples=150, deadline=None)


class Reference:
    """``Totals.count`` as it was written before."""

    def __init__(self) -> None:
        self.n = 0
        self.verdicts: Counter[str] = Counter()
        self.violated: Counter[str] = Counter()
        self.deferred: Counter[str] = Counter()
        self.first: dict[str, list[str]] = {}

    def count(self, verdict: str, violated: list[str], deferred: list[str], trace_id: str | None) -> None:
        self.n += 1
        self.verdicts[verdict] += 1
        for rule_id in dict.fromkeys(violated):
            self.violated[rule_id] += 1
            if trace_id is not None:
                ids = self.first.setdefault(rule_id, [])
                if len(ids) < FIRST_IDS:
                    ids.append(trace_id)
        for rule_id in deferred:
            self.deferred[rule_id] += 1


RULE_IDS = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=5)


@SETTINGS
@given(
    counts=st.lists(
        st.tuples(
            st.sampled_from(["pass", "fail", "review"]), RULE_IDS, RULE_IDS, st.none() | st.text(max_size=3)
        ),
        max_size=12,
    )
)
def test_totals_count_as_they_did(counts: list[tuple[str, list[str], list[str], str | None]]) -> None:
    totals, reference = Totals(), Reference()
    for verdict, violated, deferred, trace_id in counts:
        totals.count(verdict, violated, deferred, trace_id)
        reference.count(verdict, violated, deferred, trace_id)
    assert totals.n == reference.n
    for name in ("verdicts", "violated", "deferred", "first"):
        mine, theirs = getattr(totals, name), getattr(reference, name)
        assert list(mine.items()) == list(theirs.items()), name  # first-seen order too


def as_plain(trace: Trace) -> PlainTrace:
    calls = trace.calls
    return PlainTrace(
        trace.trace_id,
        trace.context,
        [c.tool_name for c in calls],
        [c.status == "ok" for c in calls],
        [c.arguments for c in calls],
        trace.metadata,
    )


def counted_in_full(engine: Engine, checked: list[Trace | PlainTrace]) -> dict[str, Any]:
    totals = Totals()
    totals.coverage = Coverage.of(engine.ruleset)
    for trace in checked:
        data = engine.check_data(trace, threshold=0.8, risk_level="medium", explain="not-passed")
        rules = data["rules"]
        totals.count(
            data["verdict"],
            [v["rule_id"] for v in data["violations"]],
            [r["rule_id"] for r in rules if r["outcome"] == "deferred"],
            str(data["trace_id"]),
        )
        totals.coverage.add_trace(trace, rules)
    return totals.as_dict()


@SETTINGS
@given(
    rules=st.lists(ANY_RULE, min_size=1, max_size=6),
    aliases=ALIASES,
    checked=st.lists(traces(), min_size=1, max_size=8),
    plain=st.booleans(),
)
def test_a_checker_counts_what_counting_each_report_in_full_counts(
    rules: list[dict[str, Any]], aliases: dict[str, list[str]], checked: list[Trace], plain: bool
) -> None:
    engine = Engine(build_ruleset(rules, aliases))
    for n, trace in enumerate(checked):
        trace.trace_id = f"t{n}"
    given_traces: list[Trace | PlainTrace] = [as_plain(t) if plain else t for t in checked]
    totals = Totals()
    totals.coverage = Coverage.of(engine.ruleset)
    checker = Checker(engine, 0.8, "medium", totals=totals)
    for trace in given_traces:
        checker.checked(trace)
    assert totals.as_dict() == counted_in_full(engine, given_traces)


def test_a_judge_rule_is_counted_as_deferred_and_exercised() -> None:
    engine = Engine(
        build_ruleset([{"type": "judge", "description": "Be polite"}, {"type": "require", "tool": "log"}], {})
    )
    totals = Totals()
    totals.coverage = Coverage.of(engine.ruleset)
    checker = Checker(engine, 0.8, "medium", totals=totals)
    for n in range(3):
        checker.checked(PlainTrace(f"t{n}", {}, ["log"], [True], [{}], {}))
    assert sum(totals.deferred.values()) == 3
    assert totals.coverage.exercised == set(totals.coverage.rule_ids)
