"""The judge's output: seed 000's JSON object as a pydantic model, and its provider-ready JSON Schema.

The model is strict (no coercion of "3" to 3, no unknown keys) because a reply that needs guessing is a
reply to re-ask. Ranges and cross-field agreement (score in [0, 1], counts adding up, known rule ids) are
checked in ``validate.py``, where each failure gets a message the model can act on.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from seqjudge.report import ViolationType

SCHEMA_NAME = "sequence_judge_report"

# Violation types whose offending_call_index may be null: nothing in the trace is "the" offending call
# when a tool never succeeded, when the rules themselves form a cycle, or when a sequence simply stopped.
# A `judge` rule about no tool in particular may fail in the conversation alone; one with `applies_to` names
# the call (validate.py checks that).
NULLABLE_INDEX_TYPES: frozenset[str] = frozenset(
    {"missing_call", "circular_dependency", "incomplete_sequence", "criteria_not_met"}
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class JudgeViolation(_Strict):
    rule_id: str = Field(description="The id of the violated rule, exactly as given.")
    rule_description: str = Field(description="A short paraphrase of the rule.")
    violation_type: ViolationType = Field(description="The kind of violation.")
    expected_order: str = Field(description="What the rule required, in words.")
    actual_order: str = Field(description="What the trace did instead, naming call indices.")
    offending_call_index: int | None = Field(
        description="0-based index of the offending call; null only for missing_call, circular_dependency, "
        "incomplete_sequence or criteria_not_met of a judge rule about no tool in particular."
    )
    severity: Literal["critical", "warning"] = Field(description="The rule's severity, as given.")
    explanation: str = Field(description="Why this is a violation.")


class JudgeMissingPrerequisite(_Strict):
    required_call: str = Field(
        description="The prerequisite tool that never succeeded before the dependent call."
    )
    dependent_call: str = Field(description="The tool that needed it.")
    dependent_call_index: int = Field(description="0-based index of the dependent call.")
    impact: str = Field(description="What the missing prerequisite put at risk.")


class JudgeRuleDecision(_Strict):
    rule_id: str = Field(description="The id of a rule given, exactly as given.")
    decision: Literal["passed", "failed"] = Field(
        description="failed exactly when the rule has a violation; passed otherwise (also when not checked)."
    )
    confidence: float = Field(description="0.0 to 1.0: how likely this decision is right.")


class JudgeOutput(_Strict):
    """Seed 000's output object, with the engine's eight violation types, led by the decision per rule."""

    # The judge's confidence per rule (seqjudge.guarantee thresholds it). First, so that each decision is
    # written before the violations that follow from it: its tokens' log-probabilities then measure the
    # decision itself (seqjudge.judge.confidence). Optional so that replies recorded before it existed still
    # validate; a reply without it has no stated confidence, and a decision without one is never auto-passed.
    rule_decisions: list[JudgeRuleDecision] | None = Field(
        default=None, description="One entry per rule given, with your confidence in its decision."
    )
    sequence_correctness_score: float = Field(
        description="0.0 to 1.0: 0.0 if any critical rule failed, else rules_passed / total_rules_checked, "
        "1.0 when no rule was checked."
    )
    total_rules_checked: int = Field(description="Rules that passed or failed (not those not exercised).")
    rules_passed: int
    rules_failed: int
    violations: list[JudgeViolation]
    missing_prerequisites: list[JudgeMissingPrerequisite]
    summary: str


# What OpenAI's strict mode and Anthropic's structured output both accept; anything else is dropped so an
# OpenAI-compatible server that is stricter than either never rejects the schema.
_KEEP = {"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf", "description"}


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    raw = JudgeOutput.model_json_schema()
    defs = raw.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            # Inline references: some OpenAI-compatible servers do not resolve $defs.
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return walk(merged)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "properties":
                out[key] = {name: walk(sub) for name, sub in value.items()}
            elif key in _KEEP:
                out[key] = walk(value)
        if out.get("type") == "object" or "properties" in out:
            out["type"] = "object"
            out["additionalProperties"] = False
            # Strict mode: every property is required; optional means nullable.
            out["required"] = list(out.get("properties", {}))
        if "enum" in out and "type" not in out:
            out["type"] = "string"
        return out

    return walk(raw)


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return json.dumps(_schema())


def json_schema() -> dict[str, Any]:
    """The output schema for OpenAI strict ``json_schema`` and Anthropic structured output (a fresh copy).

    Copied by parsing its JSON text: every judge request takes one, and this is several times cheaper than
    ``copy.deepcopy``."""
    value: dict[str, Any] = json.loads(_schema_text())
    return value
