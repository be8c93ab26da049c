"""Rules that can never mean anything are refused when the rule file is loaded (issue 17.2): each is an
error naming the file, the line and path, the rule and the fix. Near misses that do mean something load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.rules.load import load_rules

ALIASES = "aliases:\n  Auth: [find_user, login]\n"

# (rule as one YAML flow mapping, the path the message must name, words of the problem, words of the fix)
POINTLESS = [
    (
        "{id: r, type: before, first: [a, b], then: [b, a]}",
        "rules[0].first",
        "every call first (a|b) selects is also a call of then",
        "Name the prerequisite in first",
    ),
    (
        "{id: r, type: before, first: Auth, then: [find_user, login, x]}",
        "rules[0].first",
        "every call first (Auth) selects is also a call of then",
        "Name the prerequisite",
    ),
    (
        "{id: r, type: before, first: a, then: [a, b]}",
        "rules[0].first",
        "can never have a successful `first` before it",
        "only the calls that need it",
    ),
    (
        "{id: r, type: before, first: {tool: a, status: ok}, then: a}",
        "rules[0].first",
        "also a call of then",
        "Name the prerequisite",
    ),
    (
        "{id: r, type: after, trigger: [a, b], then: a}",
        "rules[0].then",
        "the last trigger can never be followed",
        "different from the trigger",
    ),
    (
        "{id: r, type: require, tool: {tool: a, status: error}}",
        "rules[0].tool",
        "selects only failed calls",
        "Remove `status: error` from tool",
    ),
    (
        "{id: r, type: before, first: {tool: a, status: error}, then: b}",
        "rules[0].first",
        "selects only failed calls",
        "Remove `status: error` from first",
    ),
    (
        "{id: r, type: eventually, tool: [{tool: a, status: error}], within: 3}",
        "rules[0].tool",
        "selects only failed calls",
        "Remove `status: error`",
    ),
    (
        "{id: r, type: after, trigger: a, then: {tool: b, status: error}}",
        "rules[0].then",
        "selects only failed calls",
        "Remove `status: error` from then",
    ),
    (
        "{id: r, type: sequence, tools: [a, {tool: b, status: error}]}",
        "rules[0].tools[1]",
        "tools[1] selects only failed calls",
        "Remove `status: error` from tools[1]",
    ),
    (
        "{id: r, type: never_after, trigger: a, forbidden: b, when: {tier: []}}",
        "rules[0].when.tier",
        "when 'tier' lists no values, so the rule applies to no trace",
        "List the values",
    ),
    # Refused before this issue too, by the field limits; kept here so the list is complete.
    ("{id: r, type: sequence, tools: [a]}", "rules[0].tools", "at least two tools", "`require`"),
    (
        "{id: r, type: eventually, tool: a, within: 0}",
        "rules[0].within",
        "'within' must be >= 1",
        "at least 1",
    ),
    ("{id: r, type: after, trigger: a, then: b, within: 0}", "rules[0].within", ">= 1", "at least 1"),
    ("{id: r, type: before, first: a, then: a}", "rules[0]", "both 'a'", "own prerequisite"),
]


@pytest.mark.parametrize(("rule", "path", "problem", "fix"), POINTLESS, ids=[p[0] for p in POINTLESS])
def test_a_rule_that_can_never_mean_anything_is_refused_at_load(
    rule: str, path: str, problem: str, fix: str, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"{ALIASES}rules:\n  - {rule}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_rules(rules)
    message = str(caught.value)
    assert str(rules) in message
    assert f"line 4 ({path})" in message
    assert problem in message and fix in message


def test_check_exits_2_naming_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rules.yaml").write_text(
        "rules:\n  - {id: auth-first, type: before, first: [a, b], then: [b, a]}\n", encoding="utf-8"
    )
    (tmp_path / "t.jsonl").write_text(json.dumps({"calls": [{"tool_name": "a"}]}) + "\n", encoding="utf-8")
    code = run(["check", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and "rule 'auth-first'" in err and "line 2 (rules[0].first)" in err


@pytest.mark.parametrize(
    "rule",
    [
        "{type: before, first: [a, b], then: b}",  # met by a successful a
        "{type: before, first: a, then: {tool: a, status: error}}",  # a ok, then a failing a
        "{type: after, trigger: {tool: a, status: error}, then: a}",  # a retry after a failure
        "{type: never_after, trigger: a, forbidden: a}",  # a in one step only
        "{type: max_calls, tool: {tool: a, status: error}, max: 0}",  # no failed a
        "{type: sequence, tools: [{tool: a, status: ok}, b]}",
        "{type: require, tool: [a, {tool: b, status: error}]}",  # a successful a meets it
    ],
)
def test_rules_that_can_mean_something_still_load(rule: str, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"rules:\n  - {rule}\n", encoding="utf-8")
    assert len(load_rules(rules).rules) == 1


try:  # as tests/test_check_fast_pool.py imports its sibling modules
    from test_ingest_native import tau_dir
except ImportError:  # pragma: no cover
    from tests.test_ingest_native import tau_dir

TAU = tau_dir()


@pytest.mark.parametrize(
    ("rule", "argument", "guess"),
    [
        (
            "{id: r, type: before, first: {tool: get_order_details, args_match: {oder_id: W}}, "
            "then: cancel_pending_order}",
            "args_match.oder_id names argument 'oder_id'",
            "did you mean 'order_id'?",
        ),
        (
            "{id: r, type: max_calls, tool: cancel_pending_order, max: 1, same: [orderid]}",
            "same: names argument 'orderid'",
            "did you mean 'order_id'?",
        ),
    ],
)
def test_an_argument_the_catalog_schema_lacks_is_refused(
    rule: str, argument: str, guess: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"rules:\n  - {rule}\n", encoding="utf-8")
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps({"calls": [{"tool_name": "cancel_pending_order"}]}) + "\n", encoding="utf-8")
    argv = ["check", str(rules), str(traces)]
    assert run(argv) in (0, 1)  # without a catalog the argument cannot be checked
    capsys.readouterr()
    assert run([*argv, "--catalog", str(TAU / "catalogs" / "retail.json")]) == 2
    err = capsys.readouterr().err
    assert "line 2 (rules[0])" in err and "rule 'r'" in err and argument in err and guess in err
