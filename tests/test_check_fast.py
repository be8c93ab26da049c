"""`seqjudge check`'s fast paths give the bytes of the model path: PlainTrace records and report_line.

The model path is the reference: a record validated into ``Trace``, checked by ``Engine.check`` and written
with ``Report.model_dump_json()``. Random records (plain ones, and ones a strict test must send to the model:
timestamps, steps, messages, other keys, wrong types) and random rule sets of every type (``same:``,
``when:``, aliases, ``args_match``, trajectories) must give the same report bytes, the same error or the
same default trace id either way. tests/test_check_fast_pool.py holds the command (and its workers) to it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from seqjudge.errors import InputError
from seqjudge.ingest import load_checkable, load_traces, native
from seqjudge.ingest.base import Options, Record, Source
from seqjudge.ingest.plain import plain_trace
from seqjudge.report import Report, report_line
from seqjudge.rules.engine import Engine
from seqjudge.rules.model import RuleSet
from seqjudge.trace import PlainTrace, Trace

try:  # as tests/test_engine_property.py imports tests/reference.py
    from test_engine_property import ALIASES, ANY_RULE, PROFILE, build_ruleset
except ImportError:  # pragma: no cover
    from tests.test_engine_property import ALIASES, ANY_RULE, PROFILE, build_ruleset

SETTINGS = settings(PROFILE, max_examples=200, deadline=None)
TOOLS = ["verify", "get_order", "cancel_order", "admin_refund", "log", "Reads"]
# Names a report quotes in its explanations: JSON escapes, non-ASCII and astral characters included.
ODD_NAMES = st.text(
    st.characters(blacklist_categories=["Cs"]),  # lone surrogates: see the serialisation test below
    min_size=1,
    max_size=6,
)
VALUES = st.one_of(
    st.sampled_from(
        [1, 2, 3, "1", 1.0, True, None, "a", "b", "é✓", 10**20, -0.0, [1, 2], {"z": 1, "a": [2]}]
    ),
    st.floats(allow_nan=False, allow_infinity=False),
)


# What the model must decide, valid or not: one of these in a record sends it down the model path.
CALL_ODDITIES: list[tuple[str, Any]] = [
    ("timestamp", 5),
    ("timestamp", "2024-05-20T10:00:00Z"),
    ("timestamp", "yesterday"),
    ("end_timestamp", 7),
    ("step", 1),
    ("step", "one"),
    ("arguments", None),
    ("arguments", [1]),
    ("status", "failed"),
    ("status", None),
    ("tool_name", ""),
    ("tool_name", 3),
    ("id", 4),
    ("extra", {"kept": True}),
]
TRACE_ODDITIES: list[tuple[str, Any]] = [
    ("trace_id", 7),
    ("trace_id", None),
    ("trace_id", ""),
    ("context", None),
    ("context", [1]),
    ("metadata", "x"),
    ("messages", []),
    ("messages", [{"role": "user", "content": "hi", "at": 0}]),
    ("messages", [{"content": "no role"}]),
    ("calls", {"tool_name": "a"}),
    ("calls", ["a", "b"]),
    ("other", 1),
]


@st.composite
def raw_calls(draw: st.DrawFn) -> dict[str, Any]:
    call: dict[str, Any] = {"tool_name": draw(st.one_of(st.sampled_from(TOOLS * 3), ODD_NAMES))}
    if draw(st.integers(0, 4)):
        call["arguments"] = draw(
            st.fixed_dictionaries({}, optional={"order_id": VALUES, "item": VALUES, "q": VALUES})
        )
    if draw(st.booleans()):
        call["status"] = draw(st.sampled_from(["ok", "ok", "error"]))
    if draw(st.integers(0, 3)) == 0:
        call["output"] = draw(
            st.sampled_from(["Error: boom", "fine", [{"type": "text", "text": "Error"}], 3])
        )
    if draw(st.integers(0, 5)) == 0:
        call["error"] = draw(st.sampled_from(["bad", None, {"code": 1}]))
    if draw(st.integers(0, 5)) == 0:
        call["id"] = draw(st.sampled_from(["c1", None]))
    return call


@st.composite
def raw_traces(draw: st.DrawFn, oddity: tuple[str, Any] | None = None) -> dict[str, Any]:
    """A plain record, or with ``oddity`` one that has it (on a call when it is a call's key)."""
    calls = draw(st.lists(raw_calls(), max_size=8))
    record: dict[str, Any] = {"calls": calls}
    if draw(st.integers(0, 4)):
        record = {"trace_id": "t", **record}
    if draw(st.booleans()):
        record["context"] = draw(
            st.sampled_from([{}, {"env": "prod"}, {"env": "dev", "user": {"role": "admin"}}, {"user": "x"}])
        )
    if draw(st.integers(0, 5)) == 0:
        record["metadata"] = {"m": 1}
    if oddity is not None:
        key, value = oddity
        if oddity in CALL_ODDITIES:
            if not calls:
                calls.append({"tool_name": "log"})
            calls[draw(st.integers(0, len(calls) - 1))][key] = value
        else:
            record[key] = value
    return record


ANY_TRACE = st.one_of(
    raw_traces(), raw_traces(), st.sampled_from(CALL_ODDITIES + TRACE_ODDITIES).flatmap(raw_traces)
)


SOURCE = Source(name="t.jsonl", label="t.jsonl")


def read(record: dict[str, Any], options: Options) -> Trace | PlainTrace | str:
    """The record as line 3 of a JSONL file: the trace read from it, or the error's message."""
    raw = json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"
    try:
        (trace,) = native.parse([Record(SOURCE, 3, raw)], SOURCE, options)
    except InputError as exc:
        return str(exc)
    return trace


def model_path(engine: Engine, record: dict[str, Any], pattern: re.Pattern[str] | None) -> bytes | str:
    trace = read(record, Options(error_pattern=pattern))
    if isinstance(trace, str):
        return trace
    assert isinstance(trace, Trace)
    return (engine.check(trace).model_dump_json() + "\n").encode("utf-8")


def fast_path(engine: Engine, record: dict[str, Any], pattern: re.Pattern[str] | None) -> bytes | str:
    trace = read(record, Options(error_pattern=pattern, plain=True))
    if isinstance(trace, str):
        return trace
    return report_line(engine.check_data(trace))


@SETTINGS
@given(
    rules=st.lists(ANY_RULE, min_size=1, max_size=8),
    aliases=ALIASES,
    records=st.lists(ANY_TRACE, min_size=1, max_size=6),
    pattern=st.sampled_from([None, "^Error"]),
)
def test_plain_records_and_report_line_give_the_model_paths_bytes(
    rules: list[dict[str, Any]],
    aliases: dict[str, list[str]],
    records: list[dict[str, Any]],
    pattern: str | None,
) -> None:
    engine = Engine(build_ruleset(rules, aliases))
    compiled = None if pattern is None else re.compile(pattern)
    for record in records:
        assert fast_path(engine, record, compiled) == model_path(engine, record, compiled), record


@pytest.mark.parametrize("oddity", CALL_ODDITIES + TRACE_ODDITIES, ids=repr)
@settings(PROFILE, max_examples=15, deadline=None)
@given(data=st.data())
def test_a_record_the_model_must_decide_reads_as_before(oddity: tuple[str, Any], data: st.DataObject) -> None:
    record = data.draw(raw_traces(oddity))
    engine = Engine(RuleSet.model_validate({"rules": [{"type": "require", "tool": "log"}]}))
    assert fast_path(engine, record, None) == model_path(engine, record, None)


@SETTINGS
@given(record=ANY_TRACE)
def test_plain_trace_takes_only_what_the_model_takes_unchanged(record: dict[str, Any]) -> None:
    plain = plain_trace(json.loads(json.dumps(record)), None)
    if plain is None:
        return
    trace = Trace.model_validate(record)
    assert plain.trace_id == trace.trace_id
    assert plain.context == trace.context
    assert plain.names == [c.tool_name for c in trace.calls]
    assert plain.ok == [c.status == "ok" for c in trace.calls]
    assert plain.args == [c.arguments for c in trace.calls]
    assert plain.steps == trace.steps


@pytest.mark.parametrize(
    "record",
    [
        {"calls": [{"tool_name": "a", "timestamp": 1}]},
        {"calls": [{"tool_name": "a", "step": 1}]},
        {"calls": [{"tool_name": "a", "arguments": None}]},
        {"calls": [{"tool_name": "a", "status": "failed"}]},
        {"calls": [{"tool_name": ""}]},
        {"calls": [{"tool_name": "a", "id": 3}]},
        {"calls": [{"tool_name": "a", "other": 3}]},
        # The common shape (tool_name, arguments, status) is read inline; a wrong value in it still goes.
        {"calls": [{"tool_name": 3, "arguments": {}, "status": "ok"}]},
        {"calls": [{"tool_name": "", "arguments": {}, "status": "ok"}]},
        {"calls": [{"tool_name": "a", "arguments": [], "status": "ok"}]},
        {"calls": [{"tool_name": "a", "arguments": None, "status": "ok"}]},
        {"calls": [{"tool_name": "a", "arguments": {}, "status": "failed"}]},
        {"calls": [{"tool_name": "a", "arguments": {}, "status": None}]},
        {"calls": [{"tool_name": "a", "arguments": {}, "status": "ok"}, ["a"]]},
        {"calls": ["a"]},
        {"calls": [], "messages": []},
        {"calls": [], "trace_id": 3},
        {"calls": [], "context": None},
        {"calls": [], "metadata": []},
        {"calls": [], "other": 1},
        {"calls": {}},
        ["a", "b"],
        {"trace": []},
    ],
)
def test_anything_but_the_plain_shape_goes_to_the_model(record: Any) -> None:
    assert plain_trace(record, None) is None


def test_the_common_call_shape_and_the_others_read_alike() -> None:
    calls = [
        {"tool_name": "a", "arguments": {"k": 1}, "status": "ok"},
        {"status": "error", "tool_name": "b", "arguments": {}},
        {"tool_name": "c"},
        {"tool_name": "d", "arguments": {}, "status": "ok", "output": "Error: x", "id": "7"},
    ]
    plain = plain_trace({"calls": calls}, re.compile("^Error"))
    assert plain is not None
    assert (plain.names, plain.ok, plain.args) == (
        ["a", "b", "c", "d"],
        [True, False, True, False],
        [
            {"k": 1},
            {},
            {},
            {},
        ],
    )


def test_a_plain_record_without_an_id_gets_the_default_id() -> None:
    trace = read({"calls": [{"tool_name": "a"}]}, Options(plain=True))
    assert isinstance(trace, PlainTrace)
    assert trace.trace_id == "t.jsonl:3"


@SETTINGS
@given(names=st.lists(ODD_NAMES, min_size=1, max_size=5), score=st.floats(0.0, 1.0))
def test_report_line_escapes_and_formats_as_model_dump_json(names: list[str], score: float) -> None:
    # Every rule quotes the names of the calls it saw; the score is set to any float a report may hold
    # (pydantic writes 1e-05 as 0.00001, where json.dumps would not).
    ruleset = RuleSet.model_validate(
        {
            "rules": [
                {"type": "sequence", "tools": [*names, "never"]},
                {"type": "trajectory", "expected": names, "mode": "exact"},
                {"type": "max_calls", "tool": names[0], "max": 0, "same": ["k"]},
            ]
        }
    )
    calls = [{"tool_name": n, "arguments": {"k": n}} for n in reversed(names)]
    data = Engine(ruleset).check_data(Trace.model_validate({"trace_id": names[0], "calls": calls}))
    data["sequence_correctness_score"] = score
    assert report_line(data) == (Report.model_validate(data).model_dump_json() + "\n").encode("utf-8")


def test_a_lone_surrogate_is_written_as_its_json_escape() -> None:
    # The models cannot serialise it (no UTF-8 encoding); the report line writes the id as the input's JSON
    # escape, so `check --format jsonl` gives a verdict instead of a crash (issue 38).
    data = Engine(RuleSet.model_validate({"rules": []})).check_data(
        Trace.model_validate({"trace_id": "\ud800", "calls": []})
    )
    with pytest.raises(PydanticSerializationError):
        Report.model_validate(data).model_dump_json()
    line = report_line(data)
    assert b'"trace_id":"\\ud800"' in line and json.loads(line)["trace_id"] == "\ud800"


def _document_reports(path: Path, engine: Engine, plain: bool) -> list[bytes] | str:
    """A document's reports through the model path (``load_traces``, ``Engine.check``) or the plain one
    (``load_checkable``, ``check_data``, ``report_line``), or the error's message."""
    try:
        if plain:
            return [report_line(engine.check_data(t)) for t in load_checkable(str(path))]  # type: ignore[arg-type]
        return [(engine.check(t).model_dump_json() + "\n").encode() for t in load_traces(str(path))]
    except InputError as exc:
        return str(exc)


@SETTINGS
@given(
    rules=st.lists(ANY_RULE, min_size=1, max_size=6),
    aliases=ALIASES,
    records=st.lists(ANY_TRACE, min_size=0, max_size=4),
)
def test_documents_give_the_model_paths_reports_without_models(
    tmp_path_factory: pytest.TempPathFactory,
    rules: list[dict[str, Any]],
    aliases: dict[str, list[str]],
    records: list[dict[str, Any]],
) -> None:
    # A whole document (one trace, or a list of traces) read for the engine alone: plainly valid ones come
    # as columns (PlainTrace, issue 19's memory point), and every report, id and error is the model path's.
    engine = Engine(build_ruleset(rules, aliases))
    tmp = tmp_path_factory.mktemp("doc")
    documents: list[Any] = [records] + [record for record in records[:2]]
    for n, document in enumerate(documents):
        path = tmp / f"d{n}.json"
        path.write_text(json.dumps(document, ensure_ascii=False, indent=n % 2 or None), encoding="utf-8")
        assert _document_reports(path, engine, True) == _document_reports(path, engine, False)


def test_a_plain_document_is_read_as_columns_and_any_other_as_models(tmp_path: Path) -> None:
    plain = {"trace_id": "p", "calls": [{"tool_name": "a", "arguments": {"k": 1}}, {"tool_name": "b"}]}
    timed = {"trace_id": "t", "calls": [{"tool_name": "a", "timestamp": 1}]}
    for name, document, kinds in (
        ("one.json", plain, [PlainTrace]),
        ("list.json", [plain, {**plain, "trace_id": "q"}], [PlainTrace, PlainTrace]),
        ("timed.json", timed, [Trace]),
        ("mixed.json", [plain, timed], [Trace, Trace]),  # one document, one path: the model's
    ):
        path = tmp_path / name
        path.write_text(json.dumps(document), encoding="utf-8")
        assert [type(t) for t in load_checkable(str(path))] == kinds, name
        assert all(type(t) is Trace for t in load_traces(str(path)))
