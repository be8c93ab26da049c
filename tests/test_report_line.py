"""``report_line`` writes orjson's bytes where they are pydantic-core's, and pydantic-core's everywhere else.

`check --format jsonl` writes each report with ``report_line`` (orjson, issue 19 point 2). The reference is
what the line was before: pydantic-core's ``to_json`` of the report data, which is ``model_dump_json`` of the
report's models. Report-shaped data with hostile text (control characters, U+2028/2029, quotes and
backslashes, astral characters, lone surrogates), every float a score can be, big integers, keys that are not
text, NaN and infinities in a rule's details, and nested details must give the same bytes; where pydantic-core
fails (a lone surrogate: no UTF-8 encoding), the line writes it as its JSON escape (issue 38).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import to_json

from seqjudge.report import VIOLATION_TYPES, Report, report_line

try:  # as tests/test_engine_property.py imports tests/reference.py
    from test_engine_property import PROFILE
except ImportError:  # pragma: no cover
    from tests.test_engine_property import PROFILE

SETTINGS = settings(PROFILE, max_examples=400, deadline=None)

HOSTILE = [
    "\u2028",
    "\u2029",
    "\x00",
    "\x1f",
    "\x7f",
    '"',
    "\\",
    "\\u0000",
    "</script>",
    "😀",
    "é✓",
    "\ud800",
    "\udfff",
]
# Mostly text a report can hold; now and then a lone surrogate, which neither encoder writes.
TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=12),
    st.lists(st.sampled_from(HOSTILE), max_size=4).map("".join),
)
# A score is passed / checked (0.0 on a critical failure, 1.0 with nothing checked); any other float too.
SCORE = st.one_of(
    st.integers(1, 400).flatmap(lambda checked: st.integers(0, checked).map(lambda passed: passed / checked)),
    st.sampled_from([0.0, 1.0, 1e-5, 1e-7, 1e16, 1e22, -0.0, 5e-324]),
    st.floats(),
)
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
    st.floats(),
    TEXT,
)
DETAILS = st.dictionaries(
    st.one_of(TEXT, TEXT, TEXT, st.integers(0, 3)),
    st.recursive(
        LEAF,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
        max_leaves=8,
    ),
    max_size=4,
)
SEVERITY = st.sampled_from(["critical", "warning"])


@st.composite
def rule_entry(draw: st.DrawFn) -> dict[str, Any]:
    outcome = draw(st.sampled_from(["passed", "failed", "not_exercised", "not_applicable", "deferred"]))
    entry: dict[str, Any] = {"rule_id": draw(TEXT), "type": draw(TEXT), "severity": draw(SEVERITY)}
    entry["outcome"] = outcome
    if outcome == "passed" and draw(st.booleans()):  # the lean form of a passed rule
        entry["group"] = draw(st.none() | TEXT)
        return entry
    entry["call_indices"] = draw(st.lists(st.integers(0, 10**6), max_size=4))
    entry["explanation"] = draw(TEXT)
    entry["group"] = draw(st.none() | TEXT)
    entry["details"] = draw(st.none() | DETAILS)
    return entry


@st.composite
def report_data(draw: st.DrawFn) -> dict[str, Any]:
    violations = [
        {
            "rule_id": draw(TEXT),
            "rule_description": draw(TEXT),
            "violation_type": draw(st.sampled_from(VIOLATION_TYPES)),
            "expected_order": draw(TEXT),
            "actual_order": draw(TEXT),
            "offending_call_index": draw(st.none() | st.integers(0, 10**6)),
            "severity": draw(SEVERITY),
            "explanation": draw(TEXT),
            "suggestion": draw(TEXT),
        }
        for _ in range(draw(st.integers(0, 2)))
    ]
    missing = [
        {
            "required_call": draw(TEXT),
            "dependent_call": draw(TEXT),
            "dependent_call_index": draw(st.integers(0, 99)),
            "impact": draw(TEXT),
        }
        for _ in range(draw(st.integers(0, 1)))
    ]
    return {
        "trace_id": draw(TEXT),
        "verdict": draw(st.sampled_from(["pass", "fail", "review"])),
        "sequence_correctness_score": draw(SCORE),
        "total_rules_checked": draw(st.integers(0, 400)),
        "rules_passed": draw(st.integers(0, 400)),
        "rules_failed": draw(st.integers(0, 400)),
        "violations": violations,
        "missing_prerequisites": missing,
        "summary": draw(TEXT),
        "rules": draw(st.lists(rule_entry(), max_size=5)),
    }


def outcome(encode: Any, data: dict[str, Any]) -> bytes | tuple[str, str]:
    try:
        return bytes(encode(data))
    except Exception as exc:
        return type(exc).__name__, str(exc)


@SETTINGS
@given(data=report_data())
def test_report_line_writes_what_pydantic_core_wrote(data: dict[str, Any]) -> None:
    # The encoder `check` used before: the same bytes; where it failed (a lone surrogate, which has no
    # UTF-8 encoding), a line that reads back as the data, the surrogate written as its JSON escape.
    expected = outcome(lambda d: to_json(d) + b"\n", data)
    if isinstance(expected, tuple):
        assert "surrogates not allowed" in expected[1]
        assert _reads_back(report_line(data), data)
        return
    assert outcome(report_line, data) == expected


def _reads_back(line: bytes, data: dict[str, Any]) -> bool:
    """``line`` decodes to ``data`` as JSON holds it (keys as text, NaN compared as written)."""
    return json.dumps(json.loads(line)) == json.dumps(json.loads(json.dumps(data)))


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@SETTINGS
@given(data=report_data())
def test_report_line_is_the_models_json(data: dict[str, Any]) -> None:
    # The models' own JSON, wherever the data is a valid report that the models write (NaN and infinity
    # aside: model_dump_json writes them as null, report_line as pydantic-core always did, NaN/Infinity).
    try:
        model = Report.model_validate(data)
    except ValidationError:
        return
    if not _finite(data):
        return
    expected = outcome(lambda _: (model.model_dump_json(exclude_unset=True) + "\n").encode("utf-8"), data)
    if isinstance(expected, tuple):  # a lone surrogate: the models fail, report_line escapes it (issue 38)
        assert _reads_back(report_line(data), data)
        return
    assert report_line(data) == expected


@pytest.mark.parametrize(
    "details",
    [
        {"x": float("nan")},
        {"x": [1, {"y": float("inf")}]},
        {"x": 2**64},
        {"x": -(2**63) - 1},
        {3: "int key"},
        {"x": {1.5: "float key"}},
        {"x": {"a", "set"}},
    ],
    ids=repr,
)
def test_what_orjson_would_write_otherwise_is_written_by_pydantic_core(details: dict[Any, Any]) -> None:
    data = {
        "trace_id": "t",
        "verdict": "fail",
        "sequence_correctness_score": 0.5,
        "rules": [{"rule_id": "r", "outcome": "failed", "details": details}],
    }
    assert report_line(data) == to_json(data) + b"\n"


@pytest.mark.parametrize("score", [float("nan"), float("inf"), -float("inf")])
def test_a_score_that_is_not_finite_is_written_as_before(score: float) -> None:
    data = {"trace_id": "t", "sequence_correctness_score": score, "rules": []}
    assert report_line(data) == to_json(data) + b"\n"
    assert b"null" not in report_line(data)
