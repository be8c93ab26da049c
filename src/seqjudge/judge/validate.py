"""Checks on both sides of a judge call.

Before the call (seed 000's harness contract): the inputs are structurally valid, or the call is never made
(``InputError``, exit 2). After it: the reply parses, fits the schema, and agrees with itself and with the
rules and trace it was given. Every failed check becomes one sentence a model can act on, because these
sentences are what the re-ask sends back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from seqjudge.errors import InputError, JudgeOutputError
from seqjudge.judge.schema import NULLABLE_INDEX_TYPES, JudgeOutput
from seqjudge.redact import DEFAULT_REDACT, redact_trace
from seqjudge.report import score_of
from seqjudge.rules.model import RuleSet
from seqjudge.rules.select import expand_name, operand_names
from seqjudge.trace import Trace, check_trace_data

# A model writes 2/3 as 0.667 or 0.6667: that is right, not a reason to re-ask. The counts pin the value
# down, so the tolerance forgives only rounding, and the exact value derived from the counts is what is kept.
SCORE_TOLERANCE = 0.005


class InvalidJudgeOutput(JudgeOutputError):
    """A reply to re-ask about. ``stage``: parse, schema or semantic; ``problems``: one sentence each."""

    def __init__(self, stage: str, problems: Sequence[str]) -> None:
        self.stage = stage
        self.problems = list(problems)
        super().__init__(f"{stage} error: " + "; ".join(self.problems))


# ------------------------------------------------------------------------------------------ the inputs


def rule_tool_names(rule: Any, aliases: Mapping[str, list[str]]) -> list[str]:
    """Every tool name a rule's operands can match, aliases expanded (blocklist patterns are not names)."""
    names: list[str] = []
    for op in rule.operands():
        for name in operand_names(op):
            names.extend(expand_name(name, dict(aliases)))
    return names


def check_inputs(
    trace: Any,
    ruleset: Any,
    *,
    catalog_names: set[str] | None = None,
    rule_ids: Sequence[str] | None = None,
    redact: Sequence[str] = DEFAULT_REDACT,
) -> Trace:
    """Seed 000's contract: an ordered list of calls with tool names, a non-empty rule set whose tool names
    exist in the catalog when one is given. Raises ``InputError`` listing every problem; returns the trace
    the judge may see: redacted with ``redact`` (``seqjudge.redact``), since whatever is returned here is
    written into a prompt and sent."""
    if not isinstance(ruleset, RuleSet):
        raise InputError("the judge needs a RuleSet", hint="load the rule file with seqjudge.load_rules")
    source = ruleset.source
    if not isinstance(trace, Trace):
        try:
            trace = Trace.model_validate(trace)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(
                f"the trace is not an ordered list of tool calls: {first['msg']}",
                where=".".join(str(p) for p in first["loc"]),
                hint="each call needs a non-empty tool_name",
            ) from None
    check_trace_data(trace)  # what cannot be written into a prompt or sent: a message, not a traceback
    for i, call in enumerate(trace.calls):
        if not isinstance(call.tool_name, str) or not call.tool_name.strip():
            raise InputError(
                "a call has no tool name",
                source=trace.trace_id,
                where=f"calls[{i}]",
                hint="every call needs a non-empty tool_name",
            )
    rules = ruleset.rules
    if rule_ids is not None:
        wanted = set(rule_ids)
        unknown = sorted(wanted - {r.rule_id for r in rules})
        if unknown:
            raise InputError(
                f"unknown rule id(s) for the judge: {', '.join(unknown)}",
                source=source,
                hint="use ids from the rule file (`seqjudge lint` lists them)",
            )
        rules = [r for r in rules if r.rule_id in wanted]
    if not rules:
        raise InputError(
            "there are no rules to judge",
            source=source,
            hint="add at least one rule (or select at least one rule id)",
        )
    if catalog_names is not None:
        problems = []
        for r in rules:
            missing = sorted({n for n in rule_tool_names(r, ruleset.aliases) if n not in catalog_names})
            if missing:
                problems.append(f"rule {r.rule_id} names {', '.join(repr(n) for n in missing)}")
        if problems:
            raise InputError(
                "the rules name tools that are not in the catalog: " + "; ".join(problems),
                source=source,
                hint="fix the names, add the tools to the catalog, or define an "
                "alias (`seqjudge lint RULES --catalog FILE` lists every problem)",
            )
    return redact_trace(trace, redact)


# ------------------------------------------------------------------------------------------ the output

_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)


def parse_json(text: str) -> Any:
    """The reply's JSON, after stripping one surrounding code fence."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    if not body:
        raise InvalidJudgeOutput("parse", ["the reply was empty; answer with the JSON object"])
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidJudgeOutput(
            "parse",
            [
                f"the reply is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                "answer with "
                "exactly one JSON object, without prose or code fences"
            ],
        ) from None
    # Valid JSON that Python will not read: an integer of more than 4,300 digits (ValueError), or values
    # nested past the recursion limit. A model's reply, so an invalid one: re-asked, never a crash.
    except ValueError:
        raise InvalidJudgeOutput(
            "parse",
            [
                "the reply is not valid JSON for this harness (it holds an integer too long to read); "
                "answer with exactly one JSON object whose numbers are ordinary (a score between 0 and 1, "
                "small counts)"
            ],
        ) from None
    except RecursionError:
        raise InvalidJudgeOutput(
            "parse",
            [
                "the reply is not valid JSON for this harness (its values are nested too deep to read); "
                "answer with exactly one JSON object of the schema's shape"
            ],
        ) from None


def check_schema(data: Any) -> JudgeOutput:
    if not isinstance(data, dict):
        raise InvalidJudgeOutput(
            "schema", [f"the reply must be a JSON object, not a JSON {type(data).__name__}"]
        )
    try:
        return JudgeOutput.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:20]:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
            if err["type"] == "missing":
                problems.append(f"{where} is missing")
            elif err["type"] == "extra_forbidden":
                problems.append(f"{where} is not a field of the output schema; remove it")
            else:
                shown = json.dumps(err.get("input"), ensure_ascii=False, default=str)[:80]
                problems.append(f"{where}: {err['msg']} (got {shown})")
        raise InvalidJudgeOutput("schema", problems) from None


def derived_score(out: JudgeOutput) -> float:
    """The score the output's own decisions give: its violations (which rules failed, how severe) and its
    counts. The harness keeps this exact value; the model's figure only has to be within the tolerance."""
    critical = any(v.severity == "critical" for v in out.violations)
    return score_of(out.rules_passed, out.total_rules_checked, critical)


def semantic_problems(
    out: JudgeOutput,
    rules: Mapping[str, str],
    n_calls: int,
    rule_calls: Mapping[str, Sequence[int]] | None = None,
) -> list[str]:
    """Everything wrong with an output that fits the schema. ``rules``: id -> severity of the rules given;
    ``rule_calls``: per judge rule with ``applies_to``, the indices of the calls it is about."""
    problems: list[str] = []
    rule_calls = rule_calls or {}
    score = out.sequence_correctness_score
    checked, passed, failed = out.total_rules_checked, out.rules_passed, out.rules_failed
    if not 0.0 <= score <= 1.0:
        problems.append(f"sequence_correctness_score is {score}; it must be between 0.0 and 1.0")
    for name, value in (("total_rules_checked", checked), ("rules_passed", passed), ("rules_failed", failed)):
        if value < 0:
            problems.append(f"{name} is {value}; counts cannot be negative")
    if passed + failed != checked:
        problems.append(
            f"rules_passed ({passed}) + rules_failed ({failed}) = {passed + failed}, but "
            f"total_rules_checked is {checked}; they must add up"
        )
    if checked > len(rules):
        problems.append(
            f"total_rules_checked is {checked}, but only {len(rules)} rule(s) were given; "
            "count each rule at most once"
        )
    index_range = f"indices 0 to {n_calls - 1}" if n_calls else "no calls at all"
    ids_hint = ", ".join(list(rules)[:30]) + (", ..." if len(rules) > 30 else "")
    failed_ids: list[str] = []
    for n, v in enumerate(out.violations):
        at = f"violations[{n}]"
        if v.rule_id not in rules:
            problems.append(
                f"{at}.rule_id {v.rule_id!r} is not one of the given rules; use one of: {ids_hint}"
            )
        else:
            if v.rule_id not in failed_ids:
                failed_ids.append(v.rule_id)
            if v.severity != rules[v.rule_id]:
                problems.append(
                    f"{at}.severity is {v.severity!r}, but rule {v.rule_id!r} has severity "
                    f"{rules[v.rule_id]!r}; copy the rule's severity"
                )
        idx = v.offending_call_index
        if idx is None:
            if v.violation_type not in NULLABLE_INDEX_TYPES:
                problems.append(
                    f"{at}.offending_call_index is null, but a {v.violation_type} violation must name "
                    f"the offending call's index (null is allowed only for "
                    f"{', '.join(sorted(NULLABLE_INDEX_TYPES))}); the trace has {index_range}"
                )
        elif not 0 <= idx < n_calls:
            problems.append(f"{at}.offending_call_index is {idx}, but the trace has {index_range}")
        concerned = rule_calls.get(v.rule_id)
        if concerned is not None and idx not in concerned:
            shown = ", ".join(map(str, concerned[:20])) + (", ..." if len(concerned) > 20 else "")
            problems.append(
                f"{at}.offending_call_index is {'null' if idx is None else idx}, but rule {v.rule_id!r} "
                "is decided per call of its "
                f"tools; name the call that fails it (one of: {shown or 'none: the rule is not checked'})"
            )
    for n, m in enumerate(out.missing_prerequisites):
        if not 0 <= m.dependent_call_index < n_calls:
            problems.append(
                f"missing_prerequisites[{n}].dependent_call_index is {m.dependent_call_index}, but "
                f"the trace has {index_range}"
            )
    if failed != len(failed_ids) and all(v.rule_id in rules for v in out.violations):
        problems.append(
            f"rules_failed is {failed}, but the violations name {len(failed_ids)} distinct rule(s)"
            + (f" ({', '.join(failed_ids)})" if failed_ids else "")
            + "; a rule is failed exactly when it has a violation"
        )
    problems.extend(_decision_problems(out, rules, failed_ids))
    critical = [v.rule_id for v in out.violations if v.severity == "critical"]
    if critical:
        if score != 0.0:
            problems.append(
                f"rule {critical[0]!r} has a critical violation, so sequence_correctness_score must "
                f"be 0.0, not {score}"
            )
    elif checked == 0:
        if score != 1.0:
            problems.append(
                f"no rule was checked (total_rules_checked is 0), so sequence_correctness_score must "
                f"be 1.0, not {score}"
            )
    elif checked > 0 and passed >= 0 and abs(score - passed / checked) > SCORE_TOLERANCE:
        problems.append(
            f"sequence_correctness_score is {score}, but with no critical violation it must equal "
            f"rules_passed / total_rules_checked = {passed}/{checked} = {passed / checked:.4f}"
        )
    return problems


def _decision_problems(out: JudgeOutput, rules: Mapping[str, str], failed_ids: Sequence[str]) -> list[str]:
    """``rule_decisions``, when given: one entry per rule given, agreeing with the violations, each with a
    confidence between 0 and 1."""
    if out.rule_decisions is None:
        return []
    problems: list[str] = []
    seen: set[str] = set()
    for n, d in enumerate(out.rule_decisions):
        at = f"rule_decisions[{n}]"
        if d.rule_id not in rules:
            problems.append(f"{at}.rule_id {d.rule_id!r} is not one of the given rules")
            continue
        if d.rule_id in seen:
            problems.append(f"{at}.rule_id {d.rule_id!r} is listed twice; give each rule once")
        seen.add(d.rule_id)
        said = "failed" if d.rule_id in failed_ids else "passed"
        if d.decision != said:
            problems.append(
                f"{at}.decision is {d.decision!r}, but rule {d.rule_id!r} "
                + ("has a violation" if said == "failed" else "has no violation")
                + f", so it must be {said!r}"
            )
        if not 0.0 <= d.confidence <= 1.0:
            problems.append(f"{at}.confidence is {d.confidence}; it must be between 0.0 and 1.0")
    missing = [r for r in rules if r not in seen]
    if missing:
        problems.append(
            "rule_decisions has no entry for rule(s) "
            + ", ".join(repr(r) for r in missing[:10])
            + "; give one entry per rule given"
        )
    return problems


def validate_reply(
    reply: str | Mapping[str, Any],
    rules: Mapping[str, str],
    n_calls: int,
    rule_calls: Mapping[str, Sequence[int]] | None = None,
) -> JudgeOutput:
    """Parse a reply (text, or an already parsed object), check schema and semantics; raise on failure.
    The output returned carries the exact derived score (``derived_score``), not the model's rounding."""
    data = parse_json(reply) if isinstance(reply, str) else dict(reply)
    out = check_schema(data)
    problems = semantic_problems(out, rules, n_calls, rule_calls)
    if problems:
        raise InvalidJudgeOutput("semantic", problems)
    return out.model_copy(update={"sequence_correctness_score": derived_score(out)})
