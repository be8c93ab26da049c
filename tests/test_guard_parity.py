"""Parity: the guard denies a call exactly where the offline engine finds a look-back violation at it.

For random rule sets (every rule type, the strategies of tests/test_engine_property.py, plus lineage rules
over random outputs) and random traces (failed calls, parallel steps, arguments, a context), and for every
bundled golden trace: one guard session walks the trace, deciding each call i before recording it, and it
denies call i for rule R if and only if the engine, on the trace cut after call i, reports a violation of a
type R's rule type decides on the calls before (``guard_kinds``) at call i both when call i succeeded and
when it failed (the proposed call's outcome is unknown when the guard decides). The session's index grows
by appending; the engine indexes each cut trace afresh: the property holds the incremental index to the
engine's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqjudge.guard import Guard
from seqjudge.guard.core import Session
from seqjudge.ingest import load_traces
from seqjudge.rules.engine import Engine
from seqjudge.rules.load import load_rules
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

try:  # the strategies of the engine's property test (tests/ is on sys.path under pytest)
    import test_engine_property as prop
except ImportError:  # pragma: no cover - when tests/ becomes a package
    from tests import test_engine_property as prop

OPERANDS, WHENS, traces = prop.OPERANDS, prop.WHENS, prop.traces

GOLDEN = Path(__file__).parents[1] / "golden_traces"

LINEAGE = st.builds(
    lambda tool, sources, when: {
        "type": "lineage",
        "tool": tool,
        "argument": "order_id",
        "from": sources,
        **({"when": when} if when else {}),
    },
    OPERANDS,
    st.lists(
        st.one_of(
            st.builds(
                lambda op, path: {"output": op, **({"path": path} if path else {})},
                OPERANDS,
                st.sampled_from([None, "order_id", "orders[*].id"]),
            ),
            st.just({"values": [3]}),
            st.just({"context": "env"}),
        ),
        min_size=1,
        max_size=2,
    ),
    WHENS,
)
ANY_RULE = st.one_of(*[prop.rules_of(kind) for kind in prop.RULE_TYPES], LINEAGE)
# What a call's output may be: a record holding an order id, a list of them, text naming one, or nothing.
OUTPUTS = st.one_of(
    st.none(),
    st.fixed_dictionaries({"order_id": st.sampled_from([1, 2, 3, "2"])}),
    st.fixed_dictionaries(
        {"orders": st.lists(st.fixed_dictionaries({"id": st.sampled_from([1, 2])}), max_size=2)}
    ),
    st.sampled_from(["order 1 is shipped", "nothing here", "{not json"]),
)


@st.composite
def traces_with_outputs(draw: st.DrawFn) -> Trace:
    trace = draw(traces())
    for call in trace.calls:
        call.output = draw(OUTPUTS)
    return trace


@st.composite
def long_traces(draw: st.DrawFn) -> Trace:
    """Longer traces of fewer tools, so that the session's cached positions are grown call after call
    (a call to a tool not called before empties them) rather than built afresh."""
    n = draw(st.integers(10, 40))
    tools = prop.TOOLS[:3]
    calls = []
    for _ in range(n):
        arguments = {"order_id": draw(st.sampled_from([1, 2]))} if draw(st.booleans()) else {}
        status = draw(st.sampled_from(["ok", "ok", "error"]))
        calls.append({"tool_name": draw(st.sampled_from(tools)), "arguments": arguments, "status": status})
    return Trace.model_validate({"trace_id": "long", "calls": calls})


def _cut(trace: Trace, i: int, status: str) -> Trace:
    """The trace up to call i, call i with ``status``."""
    calls = [c.model_dump(exclude_none=True) for c in trace.calls[: i + 1]]
    calls[i]["status"] = status
    calls[i].pop("error", None)
    return Trace.model_validate(
        {
            "trace_id": "cut",
            "calls": calls,
            "context": trace.context,
            "metadata": trace.metadata,
            "messages": [m.model_dump() for m in trace.messages],
        }
    )


def _engine_denies(engine: Engine, ruleset: RuleSet, trace: Trace, i: int) -> set[str]:
    """The rules with a look-back violation at call i of the trace cut after it, whatever its status."""
    kinds = {r.rule_id: r.guard_kinds for r in ruleset.rules}
    found = []
    for status in ("ok", "error"):
        report = engine.check_data(_cut(trace, i, status))
        found.append(
            {
                v["rule_id"]
                for v in report["violations"]
                if v["offending_call_index"] == i and v["violation_type"] in kinds[v["rule_id"]]
            }
        )
    return found[0] & found[1]


def _walk(ruleset: RuleSet, trace: Trace) -> None:
    """One session through the trace: at each call, the guard's denials against the engine's."""
    engine = Engine(ruleset)
    session: Session = Guard(ruleset).session(
        "parity", context=trace.context, metadata=trace.metadata, messages=trace.messages
    )
    steps = trace.steps
    for i, call in enumerate(trace.calls):
        same = i > 0 and steps[i] == steps[i - 1]
        decision = session.decide(call.tool_name, call.arguments, same_step=same)
        assert decision.degraded is None
        denied = {r.rule_id for r in decision.rules if r.outcome == "deny"}
        expected = _engine_denies(engine, ruleset, trace, i)
        assert denied == expected, (
            f"call {i} {call.tool_name} {call.arguments}: guard {sorted(denied)}, engine {sorted(expected)}"
            f"\nrules={[r.model_dump(exclude_none=True, by_alias=True) for r in ruleset.rules]}"
            f"\ncalls={[(c.tool_name, c.status, c.step, c.arguments, c.output) for c in trace.calls]}"
        )
        assert (decision.action == "deny") == bool(denied)
        session.record(call.tool_name, call.arguments, output=call.output, status=call.status, same_step=same)
    # The end of the session is the engine's verdict on the whole trace, rule by rule.
    report = engine.check_data(trace)
    failed = {r["rule_id"] for r in report["rules"] if r["outcome"] == "failed"}
    assert {r.rule_id for r in session.finish() if r.outcome == "deny"} == failed


@prop.SETTINGS
@given(
    st.lists(ANY_RULE, min_size=1, max_size=4), prop.ALIASES, st.one_of(traces_with_outputs(), long_traces())
)
def test_guard_denies_exactly_where_the_engine_finds_a_look_back_violation(
    rules: list[dict[str, Any]], aliases: dict[str, list[str]], trace: Trace
) -> None:
    _walk(prop.build_ruleset(rules, aliases), trace)


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()))
def test_guard_parity_on_every_golden_trace(name: str) -> None:
    folder = GOLDEN / name
    ruleset = load_rules(folder / "rules.yaml")
    walked = 0
    for trace in load_traces(folder / "traces.jsonl"):
        _walk(ruleset, trace)
        walked += 1
    assert walked > 0
