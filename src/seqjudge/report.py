"""The per-trace report (seed 000's JSON object plus trace_id, verdict and per-rule outcomes), the score
and the verdict. Shared by the engine, the judge, the cross-check and every view."""

from __future__ import annotations

import math
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from seqjudge.defaults import DEFAULT_THRESHOLD, ReviewReason
from seqjudge.safetext import json_bytes

ViolationType = Literal[
    "out_of_order",
    "missing_prerequisite",
    "circular_dependency",
    "forbidden_call",
    "too_many_calls",
    "deadline_missed",
    "missing_call",
    "incomplete_sequence",
    # A `judge` rule's criteria fail at a call (or, for a rule about no tool in particular, in the trace).
    "criteria_not_met",
]
VIOLATION_TYPES: tuple[str, ...] = ViolationType.__args__  # type: ignore[attr-defined]
Outcome = Literal["passed", "failed", "not_exercised", "not_applicable", "deferred"]
Verdict = Literal["pass", "fail", "review"]
RiskLevel = Literal["low", "medium", "high"]
# How much of each rule a report explains: "not-passed" (the lean report `check` writes by default) gives a
# passed rule only its id, type, severity, outcome and group; "all" gives every rule its explanation, call
# indices and details.
Explain = Literal["not-passed", "all"]
EXPLAIN_CHOICES: tuple[str, ...] = Explain.__args__  # type: ignore[attr-defined]


# Built on first use: `check` writes reports from the engine's data (report_line), never through these.
_DEFERRED = ConfigDict(defer_build=True)


class Violation(BaseModel):
    model_config = _DEFERRED

    rule_id: str
    rule_description: str
    violation_type: ViolationType
    expected_order: str
    actual_order: str
    offending_call_index: int | None
    severity: Literal["critical", "warning"]
    explanation: str
    suggestion: str = ""


class MissingPrerequisite(BaseModel):
    model_config = _DEFERRED

    required_call: str
    dependent_call: str
    dependent_call_index: int
    impact: str


class RuleResult(BaseModel):
    """One rule's outcome. In a lean report (``Explain``) a passed rule has no ``call_indices``,
    ``explanation`` or ``details`` keys: its model has the defaults, and
    ``model_dump_json(exclude_unset=True)`` writes the lean JSON back as it was."""

    model_config = _DEFERRED

    rule_id: str
    type: str
    severity: Literal["critical", "warning"]
    outcome: Outcome
    call_indices: list[int] = Field(default_factory=list)
    explanation: str = ""
    group: str | None = None
    details: dict[str, Any] | None = None


class Report(BaseModel):
    """``model_dump(mode="json")`` is the report of the README's "Report" section."""

    model_config = _DEFERRED

    trace_id: str
    verdict: Verdict
    sequence_correctness_score: float
    total_rules_checked: int
    rules_passed: int
    rules_failed: int
    violations: list[Violation]
    missing_prerequisites: list[MissingPrerequisite]
    summary: str
    rules: list[RuleResult]


def score_of(passed: int, checked: int, critical_failed: bool) -> float:
    """Seed 000's score: 0.0 if a critical rule failed, else passed / checked (1.0 when none was checked)."""
    if critical_failed:
        return 0.0
    return passed / checked if checked else 1.0


def score(results: list[RuleResult]) -> tuple[float, int, int, int]:
    """(score, checked, passed, failed) of the rules' outcomes (``score_of``)."""
    passed = sum(1 for r in results if r.outcome == "passed")
    failed = sum(1 for r in results if r.outcome == "failed")
    critical = any(r.outcome == "failed" and r.severity == "critical" for r in results)
    return score_of(passed, passed + failed, critical), passed + failed, passed, failed


def verdict(
    value: float,
    has_critical_violation: bool,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    risk_level: RiskLevel = "medium",
) -> Verdict:
    if has_critical_violation:
        return "fail"
    if value < threshold or (risk_level == "high" and value < 1.0):
        return "review"
    return "pass"


def score_reasons(value: float, threshold: float, risk_level: str) -> list[ReviewReason]:
    """The review reasons a score alone gives (all there are when no judge ran): ``verdict``'s review
    conditions, named."""
    reasons: list[ReviewReason] = []
    if value < threshold:
        reasons.append("below_threshold")
    if risk_level == "high" and value < 1.0:
        reasons.append("high_risk_imperfect")
    return reasons


def report_line(data: dict[str, Any], *, finite: bool = False) -> bytes:
    """``Report.model_validate(data).model_dump_json()`` and a newline, as UTF-8 bytes, without building the
    models: one line of `check --format jsonl`, written as it is (never decoded to text and encoded back).

    ``data`` is ``Engine.check_data``'s: already valid, with every dict's keys in its model's field order, so
    a serializer with pydantic-core's output (the one behind ``model_dump_json``: same separators, floats and
    escapes) writes the same bytes straight from it. orjson writes them in less than half pydantic-core's
    time; where its output could differ it says so by raising (an int past 64 bits, a key that is not a
    str, a lone surrogate, a subclass of a builtin, any other type) or is kept from it (a float that is not
    finite, which orjson would write as null), and pydantic-core writes the line (or raises its own error)
    as before. tests/test_check_fast.py and tests/test_report_line.py hold the two to byte equality.

    ``finite``: the caller vouches that the data holds no NaN or infinity, as ``Engine.check_data``'s never
    does (see ``seqjudge.rules.engine.FINITE``), and the screen for them is skipped.
    """
    if finite or _finite(data):
        try:
            return orjson.dumps(data, option=_ORJSON)
        except TypeError:  # orjson.JSONEncodeError: pydantic-core decides, as it always did
            pass
    return json_bytes(data) + b"\n"  # pydantic-core, or a lone surrogate as its JSON escape


# A subclass of str, int, dict or list (an enum, say) or a dataclass or datetime raises instead of being
# written orjson's way, so that pydantic-core writes it.
_ORJSON = (
    orjson.OPT_APPEND_NEWLINE
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def _finite(data: dict[str, Any]) -> bool:
    """Whether the report holds no NaN or infinity (orjson writes them as null, pydantic-core as NaN and
    Infinity). A report's floats are its score and what a rule's ``details`` hold; the rest is text and
    counts."""
    score = data.get("sequence_correctness_score")
    if type(score) is float and not math.isfinite(score):
        return False
    for rule in data.get("rules", ()):
        if "details" in rule:  # (a lean report's passed entries have no key at all)
            details = rule["details"]
            if details and not _details_finite(details):
                return False
    return True


def _details_finite(details: Any) -> bool:
    # orjson writes every NaN and infinity as null, so details it writes without a null hold none: a C-speed
    # screen (a fifth of walking them here); a null, or what it will not write, is walked.
    try:
        if b"null" not in orjson.dumps(details, option=_ORJSON):
            return True
    except TypeError:
        pass
    return _all_finite(details)


def _all_finite(value: Any) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_all_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_all_finite(v) for v in value)
    return True
