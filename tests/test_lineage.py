"""Issue 33: `lineage` rules, where an argument's value came from.

The property test compares the engine with ``reference_lineage`` below, a brute-force reading of the rule's
contract written from its documentation (docs/rules.md) and sharing no code with the engine: for every call
of the checked tool, look at every earlier call, message, the context and the listed values. Traces are drawn
with values copied from outputs, mutated, invented or given by the user; outputs nested, cut, not JSON or of
failed calls.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqjudge.cli import run as cli
from seqjudge.config import asked_on, judge_rule_ids
from seqjudge.crosscheck import reconcile
from seqjudge.ingest.plain import plain_trace
from seqjudge.rules.engine import Engine
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

RULE: dict[str, Any] = {
    "id": "order-from-lookup",
    "type": "lineage",
    "tool": "cancel",
    "argument": "order_id",
    "from": [{"output": "lookup", "path": "order.id"}, {"user": True}],
}


def ruleset(**changes: Any) -> RuleSet:
    return RuleSet.model_validate({"rules": [{**RULE, **changes}]})


def outcome(trace: dict[str, Any], **changes: Any) -> dict[str, Any]:
    report = Engine(ruleset(**changes)).check(Trace.model_validate(trace), explain="all")
    (rule,) = report.model_dump(mode="json")["rules"]
    return rule


def lookup(order: str, *, status: str = "ok", output: Any = None) -> dict[str, Any]:
    out = json.dumps({"order": {"id": order, "items": 2}}) if output is None else output
    return {"tool_name": "lookup", "arguments": {"q": "mine"}, "status": status, "output": out}


def cancel(order: Any, **extra: Any) -> dict[str, Any]:
    return {"tool_name": "cancel", "arguments": {"order_id": order}, **extra}


# -- the three outcomes, with what they name ------------------------------------------------------------
def test_a_value_from_an_earlier_output_is_derived_and_names_where() -> None:
    rule = outcome({"calls": [lookup("#W1"), cancel("#W1")]})
    assert rule["outcome"] == "passed"
    assert "order_id '#W1' of cancel (call 2) came from lookup (call 1) at `order.id`" in rule["explanation"]


def test_an_invented_value_fails_naming_the_value_and_every_place_looked_in() -> None:
    report = (
        Engine(ruleset())
        .check(
            Trace.model_validate(
                {
                    "calls": [lookup("#W1"), cancel("#W9")],
                    "messages": [{"role": "user", "content": "cancel my order", "at": 0}],
                }
            )
        )
        .model_dump(mode="json")
    )
    (rule,) = report["rules"]
    assert rule["outcome"] == "failed" and report["verdict"] == "fail"
    (v,) = report["violations"]
    assert v["offending_call_index"] == 1 and v["violation_type"] == "missing_prerequisite"
    assert "'#W9'" in v["actual_order"]
    assert "1 successful earlier lookup output(s) at `order.id`" in v["explanation"]
    assert "1 user message(s) before it" in v["explanation"]
    assert report["missing_prerequisites"][0]["dependent_call_index"] == 1


def test_a_value_the_user_gave_is_derived_only_from_a_message_before_the_call() -> None:
    said = {"role": "user", "content": "Please cancel order W7, thanks", "at": 0}
    later = {**said, "at": 1}
    assert outcome({"calls": [cancel("W7")], "messages": [said]})["outcome"] == "passed"
    assert outcome({"calls": [cancel("W7")], "messages": [later]})["outcome"] == "failed"
    # a whole word only: W7 is not in W77
    assert outcome({"calls": [cancel("W7")], "messages": [{**said, "content": "order W77"}]})["outcome"] == (
        "failed"
    )


def test_an_output_that_is_not_json_at_a_path_is_undetermined_never_a_pass() -> None:
    rule = outcome({"calls": [lookup("", output="Order #W1 is pending"), cancel("#W1")]})
    assert rule["outcome"] == "deferred"
    assert "the output of lookup (call 1) is text, so `order.id` cannot be read" in rule["explanation"]


def test_a_cut_output_leaves_a_value_it_lacks_undetermined() -> None:
    """tau's traces keep 1,500 characters of an output and a cut mark: a value past the cut is unknown."""
    cut = '{"orders": {"#W1": {"items": 2}, "#W2": {"ite …'
    src = {"from": [{"output": "lookup"}]}
    assert outcome({"calls": [lookup("", output=cut), cancel("#W3")]}, **src)["outcome"] == "deferred"
    assert outcome({"calls": [lookup("", output=cut), cancel("#W2")]}, **src)["outcome"] == "passed"


def test_plain_text_output_without_a_path_is_searched_as_words() -> None:
    src = [{"output": "lookup"}]
    assert (
        outcome({"calls": [lookup("", output="Order #W1 is pending"), cancel("#W1")]}, **{"from": src})[
            "outcome"
        ]
        == "passed"
    )
    assert (
        outcome({"calls": [lookup("", output="Order #W12 is pending"), cancel("#W1")]}, **{"from": src})[
            "outcome"
        ]
        == "failed"
    )


def test_a_failed_calls_output_is_never_a_source() -> None:
    assert outcome({"calls": [lookup("#W1", status="error"), cancel("#W1")]})["outcome"] == "failed"


def test_a_source_in_the_same_step_does_not_count() -> None:
    calls = [{**lookup("#W1"), "step": 1}, {**cancel("#W1"), "step": 1}]
    assert outcome({"calls": calls})["outcome"] == "failed"


def test_not_exercised_without_a_call_carrying_the_argument() -> None:
    assert outcome({"calls": [lookup("#W1")]})["outcome"] == "not_exercised"
    assert outcome({"calls": [{"tool_name": "cancel", "arguments": {}}]})["outcome"] == "not_exercised"


def test_every_attempt_is_checked_and_every_element_of_a_list() -> None:
    rule = outcome({"calls": [lookup("#W1"), cancel("#W9", status="error")]})
    assert rule["outcome"] == "failed"  # a failed cancellation of an invented id still acted on it
    both = {"tool_name": "cancel", "arguments": {"order_id": ["#W1", "#W2"]}}
    rule = outcome({"calls": [lookup("#W1"), both]})
    assert rule["outcome"] == "failed" and "'#W2'" in rule["explanation"]


def test_normalisers_make_two_spellings_one_value() -> None:
    trace = {"calls": [lookup("#W1"), cancel(" w1 ")]}
    assert outcome(trace)["outcome"] == "failed"
    assert outcome(trace, normalize=["strip_hash", "lowercase", "trim"])["outcome"] == "passed"
    # numbers and their text are one value
    assert (
        outcome({"calls": [lookup("", output=json.dumps({"order": {"id": 15}})), cancel("15")]})["outcome"]
        == "passed"
    )


def test_context_and_listed_values_are_sources() -> None:
    rs = {"from": [{"context": "customer.orders"}, {"values": ["#TEST"]}]}
    ctx = {"customer": {"orders": ["#A", "#B"]}}
    assert outcome({"calls": [cancel("#B")], "context": ctx}, **rs)["outcome"] == "passed"
    assert outcome({"calls": [cancel("#TEST")], "context": ctx}, **rs)["outcome"] == "passed"
    assert outcome({"calls": [cancel("#C")], "context": ctx}, **rs)["outcome"] == "failed"


def test_a_created_value_counts_as_read() -> None:
    """The airline suite's reading: a reservation the trace itself booked may be changed."""
    rs = {"from": [{"output": "get_details", "path": "id"}, {"output": "book", "path": "id"}]}
    booked = {"tool_name": "book", "arguments": {}, "output": json.dumps({"id": "HATHAT"})}
    assert outcome({"calls": [booked, cancel("HATHAT")]}, **rs)["outcome"] == "passed"
    assert outcome({"calls": [cancel("HATHAT"), booked]}, **rs)["outcome"] == "failed"


def test_the_plain_path_gives_the_models_report() -> None:
    record = {"trace_id": "t", "calls": [lookup("#W1"), cancel("#W1"), cancel("#W2")]}
    plain = plain_trace(json.loads(json.dumps(record)), None)
    assert plain is not None
    engine = Engine(ruleset())
    assert engine.check(plain) == engine.check(Trace.model_validate(record))
    assert engine.check(plain).rules[0].outcome == "failed"


# -- the rule file ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "words"),
    [
        ({"output": "lookup", "path": "order[[.id"}, "not a valid JMESPath expression"),
        ({"output": "lookup", "user": True}, "exactly one of"),
        ({"path": "order.id"}, "exactly one of"),
        ({"user": True, "path": "x"}, "path: goes with output"),
        ({"values": []}, "lists no value"),
        ({"output": "lookup", "pth": "x"}, "pth"),
    ],
)
def test_bad_sources_are_refused_with_the_place(
    tmp_path: Path, source: dict[str, Any], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rules.yaml").write_text(json.dumps({"rules": [{**RULE, "from": [source]}]}))
    assert cli(["lint", str(tmp_path / "rules.yaml")]) == 2
    err = capsys.readouterr().err
    assert words in err and "rules.yaml" in err and "Traceback" not in err


def test_an_unknown_normaliser_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rules.yaml").write_text(json.dumps({"rules": [{**RULE, "normalize": ["upper"]}]}))
    assert cli(["lint", str(tmp_path / "rules.yaml")]) == 2
    assert "strip_hash" in capsys.readouterr().err


def test_lint_checks_source_tools_against_the_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rules.yaml").write_text(json.dumps({"rules": [{**RULE, "from": [{"output": "lokup"}]}]}))
    (tmp_path / "tools.json").write_text(json.dumps([{"name": "lookup"}, {"name": "cancel"}]))
    cli(["lint", str(tmp_path / "rules.yaml"), "--catalog", str(tmp_path / "tools.json")])
    out = capsys.readouterr()
    assert "lokup" in out.out + out.err


def test_lint_refuses_an_argument_the_catalog_does_not_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rules.yaml").write_text(json.dumps({"rules": [{**RULE, "argument": "orderid"}]}))
    tools = [
        {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
        {"name": "cancel", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
    ]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    assert cli(["lint", str(tmp_path / "rules.yaml"), "--catalog", str(tmp_path / "tools.json")]) == 2
    assert "Did you mean 'order_id'" in capsys.readouterr().out


# -- the judge decides what the engine could not ----------------------------------------------------------
def test_a_judge_is_asked_about_a_lineage_rule_on_the_traces_the_engine_left_undetermined() -> None:
    rs = RuleSet.model_validate(
        {"rules": [RULE, {"id": "b", "type": "before", "first": "lookup", "then": "cancel"}]}
    )
    contextual = judge_rule_ids(rs, "contextual")
    assert contextual == []  # no judge rule: nothing to ask about by default
    engine = Engine(rs)
    unsure = engine.check(Trace.model_validate({"calls": [lookup("", output="not json"), cancel("#W1")]}))
    sure = engine.check(Trace.model_validate({"calls": [lookup("#W1"), cancel("#W1")]}))
    assert asked_on(contextual, unsure.rules) == ["order-from-lookup"]
    assert asked_on(contextual, sure.rules) == []
    assert asked_on(judge_rule_ids(rs, "full"), unsure.rules) == ["order-from-lookup", "b"]


class _Judged:
    """A scored judge result that failed ``order-from-lookup`` (what reconcile reads of one)."""

    def __init__(self, report: Any) -> None:
        self.rule_ids = ["order-from-lookup"]
        self.status = "scored"
        self.report = report
        self.rule_decisions = None


def test_an_undetermined_value_is_the_judges_to_decide() -> None:
    trace = Trace.model_validate({"calls": [lookup("", output="not json"), cancel("#W1")]})
    engine = Engine(ruleset()).check(trace)
    assert engine.rules[0].outcome == "deferred"
    failed = SimpleNamespace(rule_id="order-from-lookup", explanation="not there", offending_call_index=1)
    said = SimpleNamespace(violations=[failed])
    result = reconcile(engine, _Judged(said))  # type: ignore[arg-type]
    (decision,) = result.rules
    assert decision.engine == "deferred" and decision.judge == "failed"
    assert decision.final in ("failed", "deferred")  # the judge's word, or pending a person: never passed
    assert result.verdict != "pass"


# -- the property test against a brute-force reference --------------------------------------------------
def _ref_leaves(value: Any, keys: bool = False) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool | int | float):
        return [json.dumps(value)]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in ([k] if keys else []) + _ref_leaves(v, keys)]
    if isinstance(value, list):
        return [x for v in value for x in _ref_leaves(v, keys)]
    return []


def _ref_at(data: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def reference_lineage(trace: dict[str, Any], path: str | None) -> str:
    """The rule's outcome on ``trace`` for sources (output of `lookup` at ``path``, the user's messages)."""
    calls = trace["calls"]
    failed = unsure = False
    exercised = False
    for i, call in enumerate(calls):
        if call["tool_name"] != "cancel" or "order_id" not in call["arguments"]:
            continue
        values = _ref_leaves(call["arguments"]["order_id"])
        if not values:
            continue
        exercised = True
        for value in values:
            found = maybe = False
            for j in range(i):
                src = calls[j]
                if src["tool_name"] != "lookup" or src.get("status", "ok") != "ok":
                    continue
                out = src.get("output")
                if not isinstance(out, str):
                    at = _ref_at(out, path) if path else out
                    found = found or value in _ref_leaves(at, keys=path is None)
                    continue
                cut = out.endswith("…")
                if out.startswith("{") and not cut:
                    try:
                        data = json.loads(out)
                    except ValueError:
                        cut = True
                    else:
                        at = _ref_at(data, path) if path else data
                        found = found or value in _ref_leaves(at, keys=path is None)
                        continue
                # text: searched for the value as a word when there is no path; not finding it settles
                # nothing when the text is cut or a path was asked for
                if path is None and re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", out):
                    found = True
                elif cut or path is not None:
                    maybe = True
            for m in trace.get("messages", []):
                if m["role"] == "user" and m["at"] <= i:
                    found = found or bool(re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", m["content"]))
            if not found:
                if maybe:
                    unsure = True
                else:
                    failed = True
    if not exercised:
        return "not_exercised"
    return "failed" if failed else "deferred" if unsure else "passed"


IDS = st.sampled_from(["W1", "W2", "#W1", "w1", "W12", "7", "x y"])


@st.composite
def lineage_traces(draw: st.DrawFn) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["lookup", "cancel", "other", "say"]))
        if kind == "say":
            messages.append({"role": "user", "content": f"about {draw(IDS)} please", "at": len(calls)})
        elif kind == "lookup":
            shapes = ["nested", "flat", "keyed", "cut", "text", "cut text", "list", "number"]
            shape = draw(st.sampled_from(shapes))
            order = draw(IDS)
            output: Any = {
                "nested": json.dumps({"order": {"id": order}}),
                "flat": json.dumps({"id": order}),
                "keyed": json.dumps({"orders": {order: {"n": 1}}}),
                "cut": json.dumps({"order": {"id": order}})[:-3],
                "text": f"found order {order}",
                "cut text": f"found order {order} and …",
                "list": json.dumps({"order": {"id": [order, "W2"]}}),
                "number": json.dumps({"order": {"id": 7}}),
            }[shape]
            status = draw(st.sampled_from(["ok", "ok", "error"]))
            calls.append({"tool_name": "lookup", "arguments": {}, "status": status, "output": output})
        elif kind == "cancel":
            arg = draw(st.one_of(IDS, st.lists(IDS, max_size=2), st.just(7)))
            args = {"order_id": arg} if draw(st.booleans()) or not calls else {}
            status = draw(st.sampled_from(["ok", "error"]))
            calls.append({"tool_name": "cancel", "arguments": args, "status": status})
        else:
            calls.append({"tool_name": "other", "arguments": {"order_id": draw(IDS)}})
    return {"trace_id": "t", "calls": calls, "messages": messages}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=lineage_traces(), path=st.sampled_from(["order.id", None]))
def test_the_engine_matches_the_brute_force_reference(trace: dict[str, Any], path: str | None) -> None:
    source: dict[str, Any] = {"output": "lookup", **({"path": path} if path else {})}
    got = outcome(trace, **{"from": [source, {"user": True}]})["outcome"]
    assert got == reference_lineage(trace, path)


# -- the provenance pack of the bundled tau suites --------------------------------------------------------
GOLDEN = Path(__file__).resolve().parents[1] / "golden_traces"


@pytest.mark.parametrize(
    ("suite", "failed"), [("tau-retail", {}), ("tau-airline", {"payment-id-has-a-source": 1})]
)
def test_the_provenance_pack_on_the_bundled_suites(suite: str, failed: dict[str, int]) -> None:
    """The suites' READMEs ("Provenance pack") say what fails and why; these are their counts."""
    from seqjudge import load_rules, load_traces

    engine = Engine(load_rules(GOLDEN / suite / "provenance.yaml"))
    counts: dict[str, int] = {}
    for trace in load_traces(GOLDEN / suite / "traces.jsonl"):
        for rule in engine.check(trace).rules:
            if rule.outcome == "failed":
                counts[rule.rule_id] = counts.get(rule.rule_id, 0) + 1
    assert counts == failed


def test_the_judge_prompt_keeps_what_a_lineage_rule_reads(tmp_path: Path) -> None:
    """Deferred to the judge, a lineage rule is worded with its sources, and the outputs of its source tools
    and the messages are kept whole where other outputs are cut."""
    from seqjudge.judge.prompt import render

    long = json.dumps({"order": {"id": "#W1"}, "pad": "x" * 2000})
    trace = Trace.model_validate(
        {
            "calls": [lookup("", output=long), {"tool_name": "other", "output": "y" * 2000}, cancel("#W1")],
            "messages": [{"role": "user", "content": "cancel #W1", "at": 0}],
        }
    )
    prompt = render(trace, ruleset())
    text = prompt.static + prompt.dynamic
    assert "## Rule `order-from-lookup` (lineage, critical)" in text
    assert "must appear earlier in: `lookup` output at `order.id`, the user's messages" in text
    assert "x" * 1500 not in text  # read at a path: the usual cut
    anywhere = render(trace, ruleset(**{"from": [{"output": "lookup"}]}))
    assert "x" * 1500 in anywhere.text() and "y" * 1500 not in anywhere.text()


def test_check_counts_and_names_an_undetermined_lineage_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Undetermined is never a silent pass: `check` counts and names it as it does a deferred judge rule."""
    (tmp_path / "rules.yaml").write_text(json.dumps({"rules": [RULE]}))
    trace = {"trace_id": "t", "calls": [lookup("", output="Order #W1 is pending"), cancel("#W1")]}
    (tmp_path / "t.jsonl").write_text(json.dumps(trace) + "\n")
    cli(["check", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl")])
    out = capsys.readouterr().out
    assert "Deferred: order-from-lookup on 1 trace(s)" in out


def test_run_without_a_judge_names_an_undetermined_lineage_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no model, `run` names a rule the engine left undetermined, as it names deferred judge rules
    (the suite has no judge rule: before, the summary said the verdicts were the engine's, full stop)."""
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    (tmp_path / "rules.yaml").write_text(json.dumps({"rules": [RULE]}))
    trace = {"trace_id": "t", "calls": [lookup("", output="Order #W1 is pending"), cancel("#W1")]}
    (tmp_path / "t.jsonl").write_text(json.dumps(trace) + "\n")
    store = str(tmp_path / "s.db")
    cli(["run", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl"), "--store", store])
    out = capsys.readouterr().out
    assert "judge rules deferred (no model): order-from-lookup;" in out


def test_prompt_shows_what_run_asks_about_a_trace_the_engine_left_undetermined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`prompt` is exactly what the model sees: in contextual mode, a lineage rule the engine left
    undetermined on the trace is in it, as `run` asks about it; a trace it settled asks nothing."""
    (tmp_path / "rules.yaml").write_text(json.dumps({"rules": [RULE]}))
    unsure = {"trace_id": "u", "calls": [lookup("", output="Order #W1 is pending"), cancel("#W1")]}
    sure = {"trace_id": "s", "calls": [lookup("#W1"), cancel("#W1")]}
    (tmp_path / "t.jsonl").write_text(json.dumps(unsure) + "\n" + json.dumps(sure) + "\n")
    base = ["prompt", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl"), "--judge-mode", "contextual"]
    assert cli([*base, "--trace-id", "u"]) == 0
    assert "## Rule `order-from-lookup` (lineage, critical)" in capsys.readouterr().out
    assert cli([*base, "--trace-id", "s"]) == 2
    assert "the engine decided every rule on trace 's'" in capsys.readouterr().err
