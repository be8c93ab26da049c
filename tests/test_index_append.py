"""The appendable index (``TraceIndex.append`` / ``pop``, the guard's session) against an index built afresh.

After any run of appends and pops, with every selector's positions looked up (cached) between them, each
selector's positions, the per-name positions and the columns equal those of an index built from the calls
that remain: the guard's evaluators read the same index the engine's would.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from seqjudge.rules.base import ArgsSelector
from seqjudge.rules.index import Grouping, TraceIndex
from seqjudge.rules.select import compile_operand

try:
    import test_engine_property as prop
except ImportError:  # pragma: no cover - when tests/ becomes a package
    from tests import test_engine_property as prop

TOOLS = ["A", "B", "C"]
CALLS = st.tuples(
    st.sampled_from(TOOLS),
    st.booleans(),
    st.fixed_dictionaries({}, optional={"k": st.sampled_from([1, 2]), "j": st.sampled_from(["x", "y"])}),
)
# Appends (a call) and pops (None), the session's moves: a proposed call tried and taken back, a call run.
MOVES = st.lists(st.one_of(CALLS, CALLS, st.none()), max_size=40)
OPERANDS: list[Any] = [
    "A",
    "B",
    ["A", "B"],
    ["A", "C"],
    ArgsSelector(tool="A", args_match={"k": "1"}),
    ArgsSelector(tool=["B", "C"], status="ok"),
    ArgsSelector(tool="C", status="error"),
    ["A", ArgsSelector(tool="B", args_match={"j": "x"})],
]
SELECTORS = [compile_operand(op, {}) for op in OPERANDS]
SINGLES = [(s, s.single) for s in SELECTORS if s.single is not None]


def fresh(calls: list[tuple[str, bool, dict[str, Any]]]) -> TraceIndex:
    return TraceIndex(
        [c[0] for c in calls], [c[1] for c in calls], [c[2] for c in calls], list(range(len(calls))), SINGLES
    )


@prop.SETTINGS
@given(MOVES)
def test_a_grown_index_reads_as_one_built_afresh(moves: list[Any]) -> None:
    grown = TraceIndex([], [], [], [], SINGLES)
    grouping = Grouping(grown, ("k",))
    calls: list[tuple[str, bool, dict[str, Any]]] = []
    for move in moves:
        if move is None:
            if not calls:
                continue
            grouping.removed(len(calls) - 1)
            grown.pop()
            calls.pop()
        else:
            calls.append(move)
            grouping.added(grown.append(*move, len(calls) - 1))
        built = fresh(calls)
        assert (grown.names, grown.ok, grown.args, grown.n) == (built.names, built.ok, built.args, built.n)
        assert grown.by_name == built.by_name and grown.ok_by_name == built.ok_by_name
        for sel in SELECTORS:  # (each lookup caches: the next move grows what is cached)
            assert grown.positions(sel) == built.positions(sel), sel.text
        again = Grouping(built, ("k",))
        for sel in SELECTORS:
            assert grouping.split(sel) == again.split(sel), sel.text
        assert grouping.all_members() == again.all_members()


OUTPUTS = st.one_of(
    st.none(),
    st.fixed_dictionaries({"k": st.sampled_from([1, 2, "3"])}),
    st.sampled_from(["id 1 is here", "{cut", "plain"]),
)
SOURCE_OPERANDS: list[Any] = ["A", ["A", "B"], ArgsSelector(tool="B", args_match={"j": "x"})]


@prop.SETTINGS
@given(st.lists(st.one_of(st.tuples(CALLS, OUTPUTS), st.none()), max_size=30))
def test_a_grown_index_reads_the_lineage_sources_of_one_built_afresh(moves: list[Any]) -> None:
    from seqjudge.rules.lineage import SourceKey, normalizer
    from seqjudge.trace import Call, Trace

    keys = [
        SourceKey(compile_operand(op, {}), path, normalizer(()))
        for op in SOURCE_OPERANDS
        for path in (None, "k")
    ]
    trace = Trace(calls=[])
    grown = TraceIndex([], [], [], [], SINGLES)
    grown.source = trace
    for move in moves:
        if move is None:
            if not trace.calls:
                continue
            grown.pop()
            trace.calls.pop()
        else:
            (name, ok, args), output = move
            trace.calls.append(
                Call(tool_name=name, arguments=args, status="ok" if ok else "error", output=output)
            )
            grown.append(name, ok, args, len(trace.calls) - 1)
        built = TraceIndex.of(Trace(calls=list(trace.calls)))
        for key in keys:  # (each lookup builds a source index: the next move grows it)
            mine = grown.lineage_sources().index(key, grown.positions(key.sel)[0], grown.ok, grown.steps)
            again = built.lineage_sources().index(key, built.positions(key.sel)[0], built.ok, built.steps)
            assert mine == again, key.sel.text
