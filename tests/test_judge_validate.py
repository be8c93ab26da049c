"""Validation on both sides of a judge call: the input contract, then parse, schema and semantic checks
whose messages say exactly what to fix; and the provider-ready JSON Schema."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from seqjudge.errors import InputError, JudgeOutputError
from seqjudge.judge.schema import JudgeOutput, json_schema
from seqjudge.judge.validate import (
    SCORE_TOLERANCE,
    InvalidJudgeOutput,
    check_inputs,
    check_schema,
    parse_json,
    semantic_problems,
    validate_reply,
)
from seqjudge.report import VIOLATION_TYPES
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

RULES = {"r_crit": "critical", "r_warn": "warning", "r_other": "critical"}
N_CALLS = 4


def violation(rule_id: str = "r_crit", **changes: Any) -> dict[str, Any]:
    base = {
        "rule_id": rule_id,
        "rule_description": "A before B",
        "violation_type": "out_of_order",
        "expected_order": "A then B",
        "actual_order": "B (call 1) then A (call 2)",
        "offending_call_index": 1,
        "severity": RULES.get(rule_id, "critical"),
        "explanation": "B ran first.",
    }
    return {**base, **changes}


def output(**changes: Any) -> dict[str, Any]:
    base = {
        "sequence_correctness_score": 0.0,
        "total_rules_checked": 2,
        "rules_passed": 1,
        "rules_failed": 1,
        "violations": [violation()],
        "missing_prerequisites": [],
        "summary": "r_crit failed.",
    }
    return {**base, **changes}


def problems(data: dict[str, Any], rules: dict[str, str] = RULES, n_calls: int = N_CALLS) -> list[str]:
    return semantic_problems(JudgeOutput.model_validate(data), rules, n_calls)


# ----------------------------------------------------------------------------------------------- parse


def test_valid_output_passes_every_check() -> None:
    out = validate_reply(json.dumps(output()), RULES, N_CALLS)
    assert out.rules_failed == 1 and out.violations[0].rule_id == "r_crit"
    assert validate_reply(output(), RULES, N_CALLS) == out  # an already parsed object


@pytest.mark.parametrize(
    "text",
    ["```json\n{}\n```", "```\n{}\n```", "  ```JSON\n{}```  ", "\n{}\n"],
)
def test_code_fences_are_stripped(text: str) -> None:
    assert parse_json(text.replace("{}", json.dumps(output()))) == output()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"sequence_correctness_score": 1.0,', "not valid JSON"),
        ("Here is my judgement: {}", "line 1, column 1"),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
def test_malformed_json_says_where(text: str, needle: str) -> None:
    with pytest.raises(InvalidJudgeOutput) as info:
        parse_json(text)
    assert info.value.stage == "parse" and needle in str(info.value)
    assert isinstance(info.value, JudgeOutputError)


# ----------------------------------------------------------------------------------------------- schema


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([1, 2], "must be a JSON object, not a JSON list"),
        ({k: v for k, v in output().items() if k != "summary"}, "summary is missing"),
        (output(confidence=0.9), "confidence is not a field of the output schema"),
        (output(rules_passed="1"), "rules_passed: Input should be a valid integer"),
        (output(rules_passed=True), "rules_passed: Input should be a valid integer"),
        (output(rules_passed=1.5), "rules_passed"),
        (output(violations=[violation(violation_type="wrong_order")]), "violations[0].violation_type"),
        (output(violations=[violation(severity="high")]), "violations[0].severity"),
        (output(violations=[violation(offending_call_index="1")]), "violations[0].offending_call_index"),
        (output(missing_prerequisites=[{"required_call": "A"}]), "missing_prerequisites[0].dependent_call"),
    ],
)
def test_schema_errors_name_the_field(data: Any, needle: str) -> None:
    with pytest.raises(InvalidJudgeOutput) as info:
        check_schema(data)
    assert info.value.stage == "schema"
    assert any(needle in p for p in info.value.problems), info.value.problems


# ----------------------------------------------------------------------------------------------- semantics


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (
            output(sequence_correctness_score=1.5, violations=[], rules_failed=0, rules_passed=2),
            "between 0.0 and 1.0",
        ),
        (output(sequence_correctness_score=-0.1), "between 0.0 and 1.0"),
        (
            output(total_rules_checked=3),
            "rules_passed (1) + rules_failed (1) = 2, but total_rules_checked is 3",
        ),
        (output(total_rules_checked=5, rules_passed=4), "only 3 rule(s) were given"),
        (output(rules_passed=-1, total_rules_checked=0), "counts cannot be negative"),
        (
            output(violations=[violation("r_nope")]),
            "'r_nope' is not one of the given rules; use one of: r_crit",
        ),
        (
            output(violations=[violation(severity="warning")]),
            "has severity 'critical'; copy the rule's severity",
        ),
        (output(violations=[violation(offending_call_index=4)]), "is 4, but the trace has indices 0 to 3"),
        (output(violations=[violation(offending_call_index=-1)]), "is -1, but the trace has indices 0 to 3"),
        (output(violations=[violation(offending_call_index=None)]), "null is allowed only for"),
        (
            output(
                missing_prerequisites=[
                    {"required_call": "A", "dependent_call": "B", "dependent_call_index": 9, "impact": "x"}
                ]
            ),
            "missing_prerequisites[0].dependent_call_index is 9",
        ),
        (
            output(sequence_correctness_score=0.5),
            "critical violation, so sequence_correctness_score must be 0.0",
        ),
        (
            output(violations=[violation(), violation("r_other")], rules_failed=1),
            "violations name 2 distinct rule(s) (r_crit, r_other)",
        ),
        (output(violations=[], rules_failed=1, sequence_correctness_score=0.5), "violations name 0 distinct"),
        (
            output(violations=[violation("r_warn")], sequence_correctness_score=0.4),
            "must equal rules_passed / total_rules_checked = 1/2 = 0.5",
        ),
        (
            output(
                total_rules_checked=0,
                rules_passed=0,
                rules_failed=0,
                violations=[],
                sequence_correctness_score=0.0,
            ),
            "no rule was checked",
        ),
    ],
)
def test_semantic_problems_are_precise(data: dict[str, Any], needle: str) -> None:
    found = problems(data)
    assert any(needle in p for p in found), found
    with pytest.raises(InvalidJudgeOutput) as info:
        validate_reply(data, RULES, N_CALLS)
    assert info.value.stage == "semantic" and info.value.problems == found


def test_every_problem_is_reported_at_once() -> None:
    found = problems(
        output(sequence_correctness_score=1.0, violations=[violation("r_nope", offending_call_index=99)])
    )
    assert len(found) == 3
    assert "'r_nope' is not one of the given rules" in found[0]
    assert "offending_call_index is 99" in found[1]
    assert "must be 0.0, not 1.0" in found[2]


@pytest.mark.parametrize("vtype", ["missing_call", "circular_dependency", "incomplete_sequence"])
def test_null_index_is_allowed_where_there_is_no_offending_call(vtype: str) -> None:
    assert problems(output(violations=[violation(violation_type=vtype, offending_call_index=None)])) == []


TWO_OF_THREE_RULES = {"a": "warning", "b": "critical", "c": "critical"}


def two_of_three(score: float) -> dict[str, Any]:
    """2 of 3 rules passed, the failed one a warning: the score is 2/3."""
    return output(
        total_rules_checked=3,
        rules_passed=2,
        rules_failed=1,
        violations=[violation("a", severity="warning")],
        sequence_correctness_score=score,
    )


def test_score_tolerance_and_warning_only_scores() -> None:
    ok = JudgeOutput.model_validate(two_of_three(0.6666667))
    assert semantic_problems(ok, TWO_OF_THREE_RULES, N_CALLS) == []
    off = JudgeOutput.model_validate(two_of_three(0.66))
    assert semantic_problems(off, TWO_OF_THREE_RULES, N_CALLS)


@pytest.mark.parametrize("written", [0.6667, 0.667, 0.67, 0.665])
def test_a_rounded_score_is_accepted_and_the_exact_value_kept(written: float) -> None:
    # However the model rounds 2/3 (within 0.005), the reply is accepted and the exact value kept.
    out = validate_reply(json.dumps(two_of_three(written)), TWO_OF_THREE_RULES, N_CALLS)
    assert out.sequence_correctness_score == 2 / 3
    assert SCORE_TOLERANCE == 0.005


def test_nothing_checked_means_one_and_an_empty_trace_has_no_indices() -> None:
    empty = output(
        total_rules_checked=0, rules_passed=0, rules_failed=0, violations=[], sequence_correctness_score=1.0
    )
    assert problems(empty, n_calls=0) == []
    found = problems(output(), n_calls=0)
    assert any("the trace has no calls at all" in p for p in found)


# ----------------------------------------------------------------------------------------------- JSON Schema

ALLOWED = {"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf", "description"}


def walk(node: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        out.append((path, node))
        for key, value in node.items():
            if key == "properties":
                for name, sub in value.items():
                    out.extend(walk(sub, f"{path}.{name}"))
            elif isinstance(value, dict | list):
                out.extend(walk(value, f"{path}/{key}"))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            out.extend(walk(item, f"{path}[{i}]"))
    return out


def test_json_schema_is_openai_strict_compatible() -> None:
    schema = json_schema()
    assert schema["type"] == "object"
    objects = 0
    for path, node in walk(schema):
        assert set(node) <= ALLOWED, (path, set(node) - ALLOWED)
        if node.get("type") == "object":
            objects += 1
            assert node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path
    assert objects == 4  # the report, a violation, a missing prerequisite, a rule decision
    index = schema["properties"]["violations"]["items"]["properties"]["offending_call_index"]
    assert index["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    vtype = schema["properties"]["violations"]["items"]["properties"]["violation_type"]
    assert vtype["enum"] == list(VIOLATION_TYPES) and len(VIOLATION_TYPES) == 9
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)


def test_json_schema_is_a_fresh_copy() -> None:
    first = json_schema()
    first["properties"].clear()
    assert json_schema()["properties"]


def test_schema_and_model_agree_on_required_fields() -> None:
    schema = json_schema()
    assert schema["required"] == list(JudgeOutput.model_fields)
    # The one optional field (replies recorded before it existed lack it) is nullable in the schema, which
    # is how strict mode says optional.
    optional = [name for name, field in JudgeOutput.model_fields.items() if not field.is_required()]
    assert optional == ["rule_decisions"]
    assert {"type": "null"} in schema["properties"]["rule_decisions"]["anyOf"]
    data = output()
    for key in [k for k in schema["required"] if k not in optional]:
        broken = copy.deepcopy(data)
        del broken[key]
        with pytest.raises(InvalidJudgeOutput):
            check_schema(broken)


# ----------------------------------------------------------------------------------------------- inputs

RULESET = RuleSet.model_validate(
    {
        "rules": [
            {
                "id": "auth",
                "type": "before",
                "first": "Login",
                "then": {"tool": "Pay", "args_match": {"x": "1"}},
            },
            {"id": "seq", "type": "sequence", "tools": ["Cart", ["Pay", "Refund"]]},
            {"id": "blocked", "type": "blocklist", "pattern": "admin_"},
            {"id": "traj", "type": "trajectory", "expected": ["Login", "Logout"]},
            {"id": "words", "type": "judge", "description": "Be polite."},
        ],
        "aliases": {"Login": ["SsoLogin", "PasswordLogin"]},
        "source": "rules.yaml",
    }
)
TRACE = Trace.model_validate({"calls": [{"tool_name": "Cart"}]})


def test_inputs_pass_with_a_complete_catalog() -> None:
    names = {"SsoLogin", "PasswordLogin", "Pay", "Refund", "Cart", "Logout"}
    assert check_inputs(TRACE, RULESET, catalog_names=names) == TRACE  # a redacted copy: nothing to hide
    assert check_inputs({"calls": [{"tool_name": "Cart"}]}, RULESET).calls[0].tool_name == "Cart"


def test_every_unknown_tool_is_listed_before_any_call() -> None:
    with pytest.raises(InputError) as info:
        check_inputs(TRACE, RULESET, catalog_names={"Pay", "Cart"})
    message = str(info.value)
    assert info.value.exit_code == 2 and message.startswith("rules.yaml: ")
    assert "rule auth names 'PasswordLogin', 'SsoLogin'" in message  # the alias is expanded
    assert "rule seq names 'Refund'" in message and "rule traj names" in message and "'Logout'" in message
    assert "blocked" not in message and "words" not in message  # a pattern and words name no tool


@pytest.mark.parametrize(
    ("trace", "rule_ids", "needle"),
    [
        ({"calls": [{"arguments": {}}]}, None, "not an ordered list of tool calls"),
        ({"calls": [{"tool_name": ""}]}, None, "not an ordered list of tool calls"),
        ({"calls": "Cart, Pay"}, None, "not an ordered list of tool calls"),
        (TRACE, [], "there are no rules to judge"),
        (TRACE, ["nope"], "unknown rule id(s) for the judge: nope"),
    ],
)
def test_structurally_invalid_inputs_are_input_errors(trace: Any, rule_ids: Any, needle: str) -> None:
    with pytest.raises(InputError) as info:
        check_inputs(trace, RULESET, rule_ids=rule_ids)
    assert needle in str(info.value) and info.value.exit_code == 2


def test_an_empty_rule_set_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no rules to judge"):
        check_inputs(TRACE, RuleSet(rules=[]))
