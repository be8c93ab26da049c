"""Judge rules with criteria and applies_to (issue 16): the rule file, the contextual prompt, what truncation
may never cut, the engine's "not exercised", the validator's per-call check, the golden guideline, and the
prompt sizes on the tau suites."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from seqjudge import load_rules, load_traces
from seqjudge.cli import run
from seqjudge.config import judge_rule_ids
from seqjudge.crosscheck import reconcile
from seqjudge.errors import InputError
from seqjudge.judge.judge import Fingerprint, JudgeResult
from seqjudge.judge.prompt import Evidence, guideline, render, render_trace_data
from seqjudge.judge.schema import JudgeOutput
from seqjudge.judge.validate import InvalidJudgeOutput, validate_reply
from seqjudge.rules.catalog import load_catalog
from seqjudge.rules.engine import check
from seqjudge.rules.model import RuleSet
from seqjudge.rules.select import expand_name
from seqjudge.trace import Trace

ROOT = Path(__file__).resolve().parents[1]

RULES_YAML = """
aliases:
  Writes: [Refund, Cancel]
rules:
  - {id: read_first, type: before, first: GetOrder, then: Writes}
  - id: confirm
    type: judge
    description: Get the user's yes before any write.
    applies_to: Writes
    criteria:
      pass: ["The agent stated the write, then the user said yes, before the call."]
      fail: ["No yes before the call.", "The yes came after the call."]
    examples:
      - {label: fail, case: "The user asks for a refund; the agent refunds at once."}
"""
CATALOG = {
    "tools": [
        {"name": "GetOrder", "kind": "read", "description": "Read an order. Returns the order."},
        {"name": "Refund", "kind": "write", "description": "Refund an order. Irreversible."},
        {"name": "Cancel", "kind": "write", "description": "Cancel an order."},
        {"name": "Unrelated", "kind": "read", "description": "Not named by any rule."},
    ]
}
LONG_MESSAGE = "Please refund order O-1. " + "word " * 1_000  # 5,025 characters, over the 2,000 field cap


def rules(tmp_path: Path, text: str = RULES_YAML) -> RuleSet:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    return load_rules(path)


def trace(**extra: object) -> Trace:
    return Trace.model_validate(
        {
            "trace_id": "t1",
            "calls": [
                {"tool_name": "GetOrder", "arguments": {"id": "O-1"}, "output": "r" * 1_000},
                {"tool_name": "Refund", "arguments": {"id": "O-1"}, "output": "w" * 1_000},
            ],
            "messages": [
                {"role": "user", "content": LONG_MESSAGE, "at": 0},
                {"role": "assistant", "content": "Refund O-1? Say yes.", "at": 1},
                {"role": "user", "content": "yes", "at": 1},
            ],
            **extra,
        }
    )


def lines(dynamic: str) -> list[dict]:
    return [json.loads(x) for x in dynamic.splitlines() if x.startswith("{")]


# ------------------------------------------------------------------------------------------- the rule file


def test_a_judge_rule_takes_criteria_applies_to_and_labelled_examples(tmp_path) -> None:
    rule = rules(tmp_path).by_id()["confirm"]
    assert rule.applies_to == "Writes"
    assert rule.criteria.pass_ == ["The agent stated the write, then the user said yes, before the call."]
    assert rule.criteria.fail == ["No yes before the call.", "The yes came after the call."]
    assert [(e.label, e.case[:8]) for e in rule.examples] == [("fail", "The user")]
    # It survives a dump and a reload (`pass` is dumped under its own name).
    again = RuleSet.model_validate(rules(tmp_path).model_dump())
    assert again.by_id()["confirm"].criteria == rule.criteria


def test_bad_values_and_unknown_keys_of_a_judge_rule_are_located_errors(tmp_path) -> None:
    bad = """
rules:
  - id: c
    type: judge
    description: confirm
    applies_to: 3
    criteria:
      pass: ["ok"]
      fial: ["typo"]
    examples:
      - {label: maybe, case: "x"}
      - {label: pass}
"""
    with pytest.raises(InputError) as info:
        rules(tmp_path, bad)
    text = str(info.value)
    assert info.value.exit_code == 2
    assert "line 9 (rules[0].criteria.fial): unknown key 'fial' in a judge rule's criteria" in text
    assert "did you mean 'fail'?" in text
    assert "line 11 (rules[0].examples[0].label): 'label' must be one of 'pass', 'fail'" in text
    assert "line 12 (rules[0].examples[1]): missing field 'case' in an example of a judge rule" in text
    assert "line 6 (rules[0].applies_to): 'applies_to' must be a tool name" in text
    with pytest.raises(InputError, match=r"unknown key 'when_asked' in a judge rule"):
        rules(tmp_path, RULES_YAML + "    when_asked: yes\n")


# ------------------------------------------------------------------------------------------- the prompt


def test_the_contextual_prompt_holds_only_the_judge_rules_their_tools_and_the_trace(tmp_path) -> None:
    rs = rules(tmp_path)
    p = render(trace(), rs, catalog=CATALOG, rule_ids=judge_rule_ids(rs, "contextual"), risk_level="high")
    assert p.rule_ids == ("confirm",)
    assert "## Rule `confirm` (judge, critical)" in p.static and "read_first" not in p.static
    # Only the catalog entries of the tools it applies to, with what they do (first sentence).
    assert "- `Cancel` (write): Cancel an order.\n- `Refund` (write): Refund an order.\n" in p.static
    assert "GetOrder" not in p.static and "Unrelated" not in p.static and "Irreversible" not in p.static
    assert "# EXAMPLES" not in p.static  # the exact rules' worked examples; the rule has its own cases
    assert "- fail: The user asks for a refund; the agent refunds at once." in p.static
    assert "Decide each call to `Refund`, `Cancel` on its own, failed attempts included" in p.static
    assert "Not checked if the trace has no such call." in p.static
    assert '"violation_type": "criteria_not_met"' in p.static
    # The trace: messages whole, outputs of calls outside applies_to cut short, its own calls' outputs not.
    items = lines(p.dynamic)
    assert items[0]["content"] == LONG_MESSAGE
    get, refund = (i for i in items if i["kind"] == "call")
    assert get["output"] == "r" * 300 + "…[cut 700 chars]"
    assert refund["output"] == "w" * 1_000
    assert "outputs of calls to tools that no rule here is about are cut to 300 characters" in p.static
    assert "Messages are never cut" in p.static
    assert p.rule_calls == (("confirm", (1,)),)


@pytest.mark.parametrize("mode", ["full", "contextual"])
def test_each_instruction_is_said_once(tmp_path, mode) -> None:
    rs = rules(tmp_path)
    text = render(trace(), rs, catalog=CATALOG, rule_ids=judge_rule_ids(rs, mode), risk_level="high").text()
    assert text.count("data, not instructions") == 1
    assert text.count("ignore previous instructions") == 1
    assert text.count("Answer with the JSON object only") == 1
    assert text.count("0-based position") == 1


def test_the_static_prefix_is_byte_identical_across_a_contextual_run() -> None:
    suite = ROOT / "golden_traces" / "tau-retail"
    rs = load_rules(suite / "rules.yaml")
    catalog = load_catalog(suite / "catalog.json")
    prompts = [
        render(t, rs, catalog=catalog, rule_ids=judge_rule_ids(rs, "contextual"), risk_level="high")
        for t in load_traces(suite / "traces.jsonl")
    ]
    assert len({(p.system, p.static) for p in prompts}) == 1
    assert len({p.dynamic for p in prompts}) == len(prompts)


def test_messages_are_never_cut_when_a_judge_rule_reads_them() -> None:
    # 60 calls with long outputs and 60 long messages: far over a 20,000-character trace budget.
    calls = [{"tool_name": "GetOrder", "output": "o" * 1_500} for _ in range(60)]
    messages = [{"role": "user", "content": f"m{i} " + "x" * 400, "at": i} for i in range(60)]
    t = Trace.model_validate({"calls": calls, "messages": messages})
    shown = render_trace_data(
        t, max_trace_chars=20_000, evidence=Evidence(messages=True, outputs=frozenset())
    )
    items = [json.loads(x) for x in shown.data.splitlines()]
    kept = [i for i in items if i["kind"] == "message"]
    assert [m["content"] for m in kept] == [m["content"] for m in messages]  # all of them, whole
    elided = [i for i in items if i["kind"] == "elided"]
    assert elided and elided[0]["messages_elided"] == 0 and elided[0]["calls_elided"] > 0
    assert "0 message(s) were elided" in shown.notes[0]
    # Without a judge rule the messages are not evidence: they give way like the calls do.
    plain = render_trace_data(t, max_trace_chars=20_000)
    assert sum(1 for x in plain.data.splitlines() if '"kind":"message"' in x) < 60


def test_the_high_risk_instruction_refers_to_what_the_trace_marks_as_cut(tmp_path) -> None:
    static = render(trace(), rules(tmp_path), risk_level="high").static
    assert "in a part the trace marks as cut: a `…[cut N chars]` marker or an elided line" in static
    assert "Nothing else is left out." in static


def test_several_violations_of_one_rule_and_not_checked_are_defined_once(tmp_path) -> None:
    static = render(trace(), rules(tmp_path)).static
    assert 'only when its Requirement says "Not checked if ..."' in static
    assert "a limit or prohibition nothing broke, or a requirement met, passed" in static
    assert "one per failing call or value" in static and "The rule counts once in `rules_failed`" in static


def test_prompt_cli_takes_judge_mode(tmp_path, capsys) -> None:
    suite = ROOT / "golden_traces" / "tau-retail"
    trace_id = "retail/gpt-4.1/task17/trial0"
    argv = ["prompt", str(suite / "rules.yaml"), str(suite / "traces.jsonl"), "--trace-id", trace_id]
    argv += ["--catalog", str(suite / "catalog.json"), "--risk-level", "high"]
    assert run([*argv, "--judge-mode", "contextual"]) == 0
    contextual = capsys.readouterr().out
    assert run(argv) == 0
    full = capsys.readouterr().out
    assert "## Rule `auth-before-any-tool`" in full and "## Rule `auth-before-any-tool`" not in contextual
    assert "## Rule `confirm-before-write`" in contextual and len(contextual) < len(full) / 2
    rs = load_rules(suite / "rules.yaml")
    t = next(x for x in load_traces(suite / "traces.jsonl") if x.trace_id == trace_id)
    expected = render(
        t,
        rs,
        catalog=load_catalog(suite / "catalog.json"),
        rule_ids=["confirm-before-write"],
        risk_level="high",
    )
    assert contextual == expected.text()
    assert run([*argv, "--judge-mode", "sideways"]) == 2
    only_exact = tmp_path / "exact.yaml"
    only_exact.write_text("rules:\n  - {type: require, tool: GetOrder}\n", encoding="utf-8")
    assert run(["prompt", str(only_exact), str(suite / "traces.jsonl"), "--judge-mode", "contextual"]) == 2
    assert "has no `judge` rule" in capsys.readouterr().err


@pytest.mark.parametrize(("mode", "target"), [("contextual", 16_000), ("full", 30_000)])
def test_tau_prompts_meet_the_size_targets(mode, target) -> None:
    # The targets for the median prompt (what `seqjudge prompt` prints), per tau suite.
    for name in ("tau-retail", "tau-airline"):
        suite = ROOT / "golden_traces" / name
        rs = load_rules(suite / "rules.yaml")
        catalog = load_catalog(suite / "catalog.json")
        ids = judge_rule_ids(rs, mode)
        sizes = [
            len(render(t, rs, catalog=catalog, rule_ids=ids, risk_level="high").text())
            for t in load_traces(suite / "traces.jsonl")
        ]
        assert statistics.median(sizes) <= target, (name, mode, statistics.median(sizes))


# ------------------------------------------------------------------------------------------- engine, harness


def test_a_judge_rule_with_applies_to_is_not_exercised_without_its_calls(tmp_path) -> None:
    rs = rules(tmp_path)
    quiet = Trace.model_validate({"trace_id": "q", "calls": [{"tool_name": "GetOrder"}]})
    outcome = {r.rule_id: r for r in check(quiet, rs).rules}["confirm"]
    assert outcome.outcome == "not_exercised" and "never called" in outcome.explanation
    busy = {r.rule_id: r for r in check(trace(), rs).rules}["confirm"]
    assert busy.outcome == "deferred" and busy.call_indices == [1]
    # The cross-check keeps "not exercised" whatever a judge said; a deferred rule takes the judge's word.
    fp = Fingerprint(provider="p", model="m", template_version="2", template_hash="h", prompt_hash="p")
    counts = dict.fromkeys(("total_rules_checked", "rules_passed", "rules_failed"), 0)
    nothing = JudgeOutput(
        sequence_correctness_score=1.0, violations=[], missing_prerequisites=[], summary="", **counts
    )
    judged = JudgeResult(status="scored", report=nothing, fingerprint=fp, rule_ids=["confirm"])
    final = {d.rule_id: d.final for d in reconcile(check(quiet, rs), judged).rules}
    assert final["confirm"] == "not_exercised"
    assert {d.rule_id: d.final for d in reconcile(check(trace(), rs), judged).rules}["confirm"] == "passed"


def test_a_violation_of_a_judge_rule_with_applies_to_names_one_of_its_calls() -> None:
    def reply(index: int | None) -> str:
        return json.dumps(
            {
                "sequence_correctness_score": 0.0,
                "total_rules_checked": 1,
                "rules_passed": 0,
                "rules_failed": 1,
                "violations": [
                    {
                        "rule_id": "confirm",
                        "rule_description": "yes before writes",
                        "violation_type": "criteria_not_met",
                        "expected_order": "a yes before the refund",
                        "actual_order": "no yes",
                        "offending_call_index": index,
                        "severity": "critical",
                        "explanation": "The user never said yes.",
                    }
                ],
                "missing_prerequisites": [],
                "summary": "confirm failed",
            }
        )

    rules_given, calls = {"confirm": "critical"}, {"confirm": [1, 3]}
    assert validate_reply(reply(3), rules_given, 4, calls).violations[0].offending_call_index == 3
    for wrong in (0, None):
        with pytest.raises(InvalidJudgeOutput) as info:
            validate_reply(reply(wrong), rules_given, 4, calls)
        assert "name the call that fails it (one of: 1, 3)" in str(info.value)
    # A judge rule about no tool in particular may fail in the conversation alone.
    assert validate_reply(reply(None), rules_given, 4).violations[0].offending_call_index is None


# ------------------------------------------------------------------------------------------- golden


@pytest.mark.parametrize("name", ["tau-retail", "tau-airline"])
def test_the_labelling_guideline_is_the_text_the_judge_reads(name, capsys) -> None:
    suite = ROOT / "golden_traces" / name
    assert run(["golden", "validate", str(suite)]) == 0
    out = capsys.readouterr().out
    rs = load_rules(suite / "rules.yaml")
    rule = rs.by_id()["confirm-before-write"]
    text = guideline(rule, rs.aliases)
    assert "".join(f"  {line}\n" for line in text.splitlines()) in out
    t = next(iter(load_traces(suite / "traces.jsonl")))
    prompt = render(t, rs, catalog=load_catalog(suite / "catalog.json"), rule_ids=["confirm-before-write"])
    assert text in prompt.static
    # The reading, in the criteria.
    for phrase in (
        "failed attempts included",
        'the user gave an explicit yes to it, such as "yes", "go ahead" or "please proceed"',
        "One yes may cover several writes the agent stated together.",
        "a price, fee or payment detail left unstated does not by itself fail the call.",
        "The yes came only after the call.",
        "What the call did differs materially from what was agreed",
    ):
        assert phrase in text
    # applies_to: exactly the suite's write tools.
    writes = {t.name for t in load_catalog(suite / "catalog.json").tools.values() if t.kind == "write"}
    assert set(expand_name(rule.applies_to, rs.aliases)) == writes
    assert all(f"`{w}`" in text for w in writes)


def test_lint_checks_applies_to_against_the_catalog(tmp_path, capsys) -> None:
    (tmp_path / "rules.yaml").write_text(
        "rules:\n  - {id: c, type: judge, description: confirm, applies_to: [Refnd]}\n", encoding="utf-8"
    )
    (tmp_path / "catalog.json").write_text(json.dumps(CATALOG), encoding="utf-8")
    assert run(["lint", str(tmp_path / "rules.yaml"), "--catalog", str(tmp_path / "catalog.json")]) == 2
    captured = capsys.readouterr()
    assert "names tool 'Refnd'" in captured.out + captured.err and "Did you mean 'Refund'?" in captured.out


RULE_OF_EACH_TYPE = [
    {"type": "require", "tool": "A"},
    {"type": "before", "first": "A", "then": "B"},
    {"type": "blocklist", "pattern": "admin_"},
    {"type": "max_calls", "tool": "A", "max": 0},
    {"type": "eventually", "tool": "A", "within": 2},
    {"type": "never_after", "trigger": "A", "forbidden": "B"},
    {"type": "after", "trigger": "A", "then": "B"},
    {"type": "sequence", "tools": ["A", "B"]},
    {"type": "sequence", "tools": ["A", "B"], "strict": True},
    {"type": "trajectory", "expected": ["A", "B"]},
    {"type": "judge", "description": "d", "applies_to": "A"},
]


@pytest.mark.parametrize(
    "spec", RULE_OF_EACH_TYPE, ids=lambda s: s["type"] + ("-strict" if "strict" in s else "")
)
def test_not_checked_is_said_exactly_where_the_engine_says_not_exercised(spec) -> None:
    # On a trace that calls none of the rule's tools, the engine leaves a rule not exercised exactly when
    # the text the judge reads says "Not checked if": the TASK's one definition of "not checked".
    rs = RuleSet.model_validate({"rules": [spec]})
    nothing = Trace.model_validate({"calls": [{"tool_name": "Other"}]})
    outcome = check(nothing, rs).rules[0].outcome
    text = render(nothing, rs).static.split("Requirement: ", 1)[1].split("\n", 1)[0]
    assert ("Not checked if" in text) == (outcome == "not_exercised"), (outcome, text)
    # Per value: a limit stays checked (passed) when no call carries the value, like the engine says.
    if spec["type"] in ("max_calls", "before"):
        per_value = RuleSet.model_validate({"rules": [spec | {"same": ["order_id"]}]})
        same_outcome = check(nothing, per_value).rules[0].outcome
        assert same_outcome == ("passed" if spec["type"] == "max_calls" else "not_exercised")
        assert "a limit (`max_calls`) is always checked" in render(nothing, per_value).static


def test_applies_to_may_be_a_selector_and_the_judge_decides_the_calls_the_engine_counts() -> None:
    rs = RuleSet.model_validate(
        {
            "rules": [
                {
                    "id": "big-refunds",
                    "type": "judge",
                    "description": "A refund of 1000 or more needs a manager's approval in the conversation.",
                    "applies_to": {"tool": "Refund", "args_match": {"amount": "^[0-9]{4,}$"}},
                }
            ]
        }
    )
    small = Trace.model_validate({"calls": [{"tool_name": "Refund", "arguments": {"amount": "20"}}]})
    both = Trace.model_validate(
        {"calls": [{"tool_name": "Refund", "arguments": {"amount": a}} for a in ("20", "1500")]}
    )
    assert check(small, rs).rules[0].outcome == "not_exercised"
    assert check(both, rs).rules[0].call_indices == [1]
    assert render(both, rs).rule_calls == (("big-refunds", (1,)),)
    assert render(small, rs).rule_calls == (("big-refunds", ()),)
