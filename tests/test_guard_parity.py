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
from seqjudge.trace import Message, Trace

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
            st.just({"user": True}),
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


USER_TEXTS = st.sampled_from(["refund order 1", "it is order 2", "hello"])


@st.composite
def traces_with_outputs(draw: st.DrawFn) -> Trace:
    trace = draw(traces())
    for call in trace.calls:
        call.output = draw(OUTPUTS)
    # User messages between the calls, some naming an order (a lineage source: `user: true`).
    n = len(trace.calls)
    trace.messages = [
        Message(role="user", content=text, at=at)
        for text, at in draw(st.lists(st.tuples(USER_TEXTS, st.integers(0, n)), max_size=2))
    ]
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


def _trace_of(trace: Trace, calls: list[dict[str, Any]], skipped: frozenset[int] = frozenset()) -> Trace:
    """``trace`` with these calls (each labelled with its step), its messages each after the calls it
    followed but those ``skipped``."""
    messages = []
    for m in trace.messages:
        message = m.model_dump()
        if m.at is not None:
            message["at"] = m.at - sum(1 for p in skipped if p < m.at)
        messages.append(message)
    return Trace.model_validate(
        {
            "trace_id": "cut",
            "calls": calls,
            "context": trace.context,
            "metadata": trace.metadata,
            "messages": messages,
        }
    )


def _with_status(call: dict[str, Any], status: str) -> dict[str, Any]:
    out = {**call, "status": status}
    out.pop("error", None)
    return out


def _flagged_at_last(
    engine: Engine,
    trace: Trace,
    made: list[dict[str, Any]],
    aside: dict[str, set[int]],
    call: dict[str, Any],
    kinds: dict[str, Any],
) -> set[str]:
    """The rules the engine finds a look-back violation of at ``call``, each on the calls ``made`` before
    it without those it set aside (one check per distinct set of calls set aside)."""
    rules_by_aside: dict[frozenset[int], list[str]] = {}
    for rule_id, skipped in aside.items():
        rules_by_aside.setdefault(frozenset(skipped), []).append(rule_id)
    found: set[str] = set()
    for skipped, rule_ids in rules_by_aside.items():
        calls = [c for p, c in enumerate(made) if p not in skipped] + [call]
        last = len(calls) - 1
        report = engine.check_data(_trace_of(trace, calls, skipped))
        found |= {
            v["rule_id"]
            for v in report["violations"]
            if v["rule_id"] in rule_ids
            and v["offending_call_index"] == last
            and v["violation_type"] in kinds[v["rule_id"]]
        }
    return found


def _walk(ruleset: RuleSet, trace: Trace, enforced: bool = False) -> None:
    """One session through the trace: at each call, the guard's denials against the engine's. Shadow walk:
    every call is recorded, denied or not; ``enforced``: a denied call does not run."""
    engine = Engine(ruleset)
    kinds = {r.rule_id: r.guard_kinds for r in ruleset.rules}
    session: Session = Guard(ruleset).session(
        "parity", context=trace.context, metadata=trace.metadata, messages=trace.messages
    )
    steps = trace.steps
    made: list[dict[str, Any]] = []  # the calls recorded, each labelled with its step in the trace
    aside: dict[str, set[int]] = {rule_id: set() for rule_id in kinds}  # per rule: the calls it flagged
    last_step: int | None = None
    for i, call in enumerate(trace.calls):
        same = steps[i] == last_step
        decision = session.decide(call.tool_name, call.arguments, same_step=same)
        assert decision.degraded is None
        denied = {r.rule_id for r in decision.rules if r.outcome == "deny"}
        labelled = {**call.model_dump(exclude_none=True), "step": steps[i]}
        expected = _flagged_at_last(
            engine, trace, made, aside, _with_status(labelled, "ok"), kinds
        ) & _flagged_at_last(engine, trace, made, aside, _with_status(labelled, "error"), kinds)
        assert denied == expected, (
            f"call {i} {call.tool_name} {call.arguments}: guard {sorted(denied)}, engine {sorted(expected)}"
            f"\nrules={[r.model_dump(exclude_none=True, by_alias=True) for r in ruleset.rules]}"
            f"\ncalls={[(c.tool_name, c.status, c.step, c.arguments, c.output) for c in trace.calls]}"
            f"\naside={aside} enforced={enforced}"
        )
        assert (decision.action == "deny") == bool(denied)
        if enforced and denied:
            continue
        session.record(call.tool_name, call.arguments, output=call.output, status=call.status, same_step=same)
        # (Enforced, a rule is broken only by a call whose violation hung on its outcome, not denied.)
        for rule_id in _flagged_at_last(engine, trace, made, aside, labelled, kinds):
            aside[rule_id].add(len(made))
        made.append(labelled)
        last_step = steps[i]
    # The end of the session is the engine's verdict on the calls made, rule by rule.
    report = engine.check_data(_trace_of(trace, made))
    failed = {r["rule_id"] for r in report["rules"] if r["outcome"] == "failed"}
    assert {r.rule_id for r in session.finish() if r.outcome == "deny"} == failed


@prop.SETTINGS
@given(
    st.lists(ANY_RULE, min_size=1, max_size=4), prop.ALIASES, st.one_of(traces_with_outputs(), long_traces())
)
def test_guard_denies_exactly_where_the_engine_finds_a_look_back_violation(
    rules: list[dict[str, Any]], aliases: dict[str, list[str]], trace: Trace
) -> None:
    ruleset = prop.build_ruleset(rules, aliases)
    _walk(ruleset, trace)
    _walk(ruleset, trace, enforced=True)


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()))
def test_guard_parity_on_every_golden_trace(name: str) -> None:
    folder = GOLDEN / name
    ruleset = load_rules(folder / "rules.yaml")
    walked = 0
    for trace in load_traces(folder / "traces.jsonl"):
        _walk(ruleset, trace)
        _walk(ruleset, trace, enforced=True)
        walked += 1
    assert walked > 0
