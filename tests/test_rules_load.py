"""Rule files: every shape loads to the same model; aliases, args_match, same, when, groups, ids."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import seqjudge
from seqjudge.errors import InputError
from seqjudge.rules.load import (
    InputProblems,
    SeqjudgeDeprecationWarning,
    load_rules,
    load_rules_located,
    parse_rules,
)
from seqjudge.rules.model import ArgsSelector, BeforeRule, RuleSet


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def core(rs: RuleSet) -> list[dict[str, Any]]:
    """The rules without their group (shape 2 adds one), for comparing shapes."""
    return [r.model_dump(exclude={"group"}) for r in rs.rules]


EXPECTED = [
    {"id": "before:A->B", "type": "before", "first": "A", "then": "B"},
    {"id": "before:B->C", "type": "before", "first": "B", "then": "C"},
]


def test_every_shape_loads_to_the_same_rules(tmp_path: Path) -> None:
    shape1 = write(
        tmp_path,
        "s1.yaml",
        """
rules:
  - type: before
    first: A
    then: B
  - type: before
    first: B
    then: C
""",
    )
    shape1_json = write(
        tmp_path,
        "s1.json",
        json.dumps(
            {
                "rules": [
                    {"type": "before", "first": "A", "then": "B"},
                    {"type": "before", "first": "B", "then": "C"},
                ]
            }
        ),
    )
    shape2 = write(
        tmp_path,
        "s2.yaml",
        """
tests:
  - id: t1
    metric: sequence_valid
    rules:
      - type: before
        first: A
        then: B
      - type: before
        first: B
        then: C
""",
    )
    shape3 = write(
        tmp_path,
        "s3.yaml",
        """
- step: B
  requires: A
  hard: true
- step: C
  requires: B
  severity: critical
""",
    )
    shape3_key = write(
        tmp_path,
        "s3k.json",
        json.dumps({"dependencies": [{"step": "B", "requires": "A"}, {"step": "C", "requires": ["B"]}]}),
    )
    shape4 = write(tmp_path, "s4.yaml", "sequences:\n  - [A, B, C]\n")

    loaded = {}
    for path in (shape1, shape1_json, shape2, shape3, shape3_key):
        loaded[path.name] = load_rules(path)
    with pytest.warns(SeqjudgeDeprecationWarning):
        loaded[shape4.name] = load_rules(shape4)

    for name, rs in loaded.items():
        got = [{k: d[k] for k in ("id", "type", "first", "then")} for d in core(rs)]
        assert got == EXPECTED, name
        assert all(r.severity == "critical" for r in rs.rules), name
    assert core(loaded["s1.yaml"]) == core(loaded["s2.yaml"]) == core(loaded["s4.yaml"])
    assert core(loaded["s3.yaml"]) == core(loaded["s3k.json"]) == core(loaded["s1.json"])
    assert [r.group for r in loaded["s2.yaml"].rules] == ["t1", "t1"]
    assert [r.group for r in loaded["s1.yaml"].rules] == [None, None]
    assert loaded["s1.yaml"].source == str(shape1)


def test_public_api_load_rules(tmp_path: Path) -> None:
    path = write(tmp_path, "r.yaml", "rules:\n  - {type: require, tool: A}\n")
    rs = seqjudge.load_rules(path)
    assert rs.rules[0].rule_id == "require:A"


def test_every_rule_type_and_default_ids() -> None:
    rs = parse_rules(
        {
            "rules": [
                {"type": "require", "tool": "A"},
                {"type": "before", "first": "A", "then": "B"},
                {"type": "blocklist", "pattern": "admin_"},
                {"type": "max_calls", "tool": "A", "max": 3},
                {"type": "eventually", "tool": "A", "within": 5},
                {"type": "never_after", "trigger": "T", "forbidden": "F"},
                {"type": "after", "trigger": "T", "then": "B", "within": 2},
                {"type": "sequence", "tools": ["A", "B", "C"], "strict": True},
                {"type": "trajectory", "expected": ["A", "B", "C"], "mode": "exact"},
                {"type": "judge", "description": "Ask the user for explicit confirmation before any write"},
            ]
        }
    )
    assert [r.rule_id for r in rs.rules] == [
        "require:A",
        "before:A->B",
        "blocklist:admin_",
        "max_calls:A<=3",
        "eventually:A@5",
        "never_after:T!>F",
        "after:T->B@2",
        "sequence:A>B>C",
        "trajectory:A>B>C",
        "judge:ask-the-user-for-explicit-confirmation",
    ]
    assert rs.source is None  # parsed from memory


def test_duplicate_derived_ids_get_suffixes() -> None:
    rule = {"type": "before", "first": "A", "then": "B"}
    rs = parse_rules({"rules": [rule, rule, {"type": "require", "tool": "A"}, rule]})
    assert [r.rule_id for r in rs.rules] == ["before:A->B", "before:A->B#2", "require:A", "before:A->B#3"]


def test_derived_id_never_takes_an_explicit_id() -> None:
    rs = parse_rules(
        {
            "rules": [
                {"type": "before", "first": "A", "then": "B"},
                {"id": "before:A->B", "type": "before", "first": "X", "then": "Y"},
            ]
        }
    )
    assert [r.rule_id for r in rs.rules] == ["before:A->B#2", "before:A->B"]


def test_duplicate_explicit_ids_are_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "d.yaml",
        """rules:
  - id: same-id
    type: require
    tool: A
  - id: same-id
    type: require
    tool: B
""",
    )
    with pytest.raises(InputError) as info:
        load_rules(path)
    text = str(info.value)
    assert "duplicate rule id 'same-id'" in text and "line 5" in text and "line 2" in text


def test_aliases_load_and_nest(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "a.yaml",
        """
aliases:
  Reads: [get_user, Lookups]
  Lookups: [get_order]
rules:
  - type: before
    first: Reads
    then: cancel
""",
    )
    rs = load_rules(path)
    assert rs.aliases == {"Reads": ["get_user", "Lookups"], "Lookups": ["get_order"]}
    from seqjudge.rules.select import compile_operand

    assert compile_operand(rs.rules[0].first, rs.aliases).all_names == {"get_user", "get_order"}


@pytest.mark.parametrize(
    "aliases, needle",
    [
        ({"R": []}, "non-empty list"),
        ({"R": "get_user"}, "Write R: [get_user]"),
        ({"R": ["get_user", ""]}, "member 2"),
        ({"R": ["R", "get_user"]}, "includes itself (R -> R)"),
        ({"R": ["S"], "S": ["R"]}, "includes itself (R -> S -> R)"),
    ],
)
def test_alias_problems(aliases: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError) as info:
        parse_rules({"aliases": aliases, "rules": [{"type": "require", "tool": "get_user"}]})
    assert needle in str(info.value)


@pytest.mark.parametrize(
    "aliases, without_the_loop",
    [
        ({"R": ["R", "get_user"]}, {"R": ["get_user"]}),
        ({"R": ["S"], "S": ["R", "get_user"]}, {"R": ["S"], "S": ["get_user"]}),
    ],
)
def test_a_rule_set_built_in_python_rejects_an_alias_that_reaches_itself(
    aliases: dict[str, Any], without_the_loop: dict[str, Any]
) -> None:
    """The model holds the loader's rule, so the Python API cannot build what a rule file may not say."""
    from pydantic import ValidationError

    from seqjudge.rules.model import RequireRule, RuleSet

    rule = RequireRule(type="require", tool="R")
    with pytest.raises(ValidationError) as info:
        RuleSet(rules=[rule], aliases=aliases)
    assert "includes itself (R -> " in str(info.value)
    assert RuleSet(rules=[rule], aliases=without_the_loop).aliases == without_the_loop


def test_args_match_same_and_when() -> None:
    rs = parse_rules(
        {
            "rules": [
                {
                    "type": "before",
                    "first": {"tool": "get_order_details", "args_match": {"order_id": "^#W"}},
                    "then": "cancel_pending_order",
                    "same": ["order_id"],
                    "when": {"user.role": ["standard", "guest"]},
                }
            ]
        }
    )
    rule = rs.rules[0]
    assert isinstance(rule, BeforeRule)
    assert rule.first == ArgsSelector(tool="get_order_details", args_match={"order_id": "^#W"})
    assert rule.same == ["order_id"]
    assert rule.when == {"user.role": ["standard", "guest"]}
    assert rule.rule_id == "before:get_order_details(order_id~^#W)->cancel_pending_order"


def test_same_on_a_rule_type_without_it_names_the_types_that_take_it() -> None:
    with pytest.raises(InputError) as info:
        parse_rules({"rules": [{"type": "eventually", "tool": "A", "within": 2, "same": ["x"]}]})
    text = str(info.value)
    assert "'same' does not apply to a eventually rule" in text
    assert "before, max_calls, never_after, after, sequence" in text


def test_tests_shape_groups_and_metric() -> None:
    rs = parse_rules(
        {
            "tests": [
                {
                    "id": "verify_before_delete",
                    "metric": "sequence_valid",
                    "rules": [{"type": "before", "first": "VerifyIdentity", "then": "DeleteCustomer"}],
                },
                {"id": "limits", "rules": [{"type": "max_calls", "tool": "SendEmail", "max": 3}]},
            ]
        }
    )
    assert [(r.rule_id, r.group) for r in rs.rules] == [
        ("before:VerifyIdentity->DeleteCustomer", "verify_before_delete"),
        ("max_calls:SendEmail<=3", "limits"),
    ]
    with pytest.raises(InputError, match="unsupported metric 'accuracy'"):
        parse_rules(
            {"tests": [{"id": "t", "metric": "accuracy", "rules": [{"type": "require", "tool": "A"}]}]}
        )
    with pytest.raises(InputError, match="duplicate test id 't'"):
        parse_rules(
            {
                "tests": [
                    {"id": "t", "rules": [{"type": "require", "tool": "A"}]},
                    {"id": "t", "rules": [{"type": "require", "tool": "B"}]},
                ]
            }
        )


def test_dependency_spec_hard_severity_and_lists() -> None:
    rs = parse_rules(
        [
            {
                "id": "dep-1",
                "step": "summarize",
                "requires": "search",
                "hard": True,
                "description": "search first",
            },
            {"id": "dep-2", "step": "update", "requires": "create", "hard": False},
            {
                "id": "dep-3",
                "step": "refund",
                "requires": ["read_account", "check_policy"],
                "severity": "warning",
            },
            {"id": "dep-4", "step": "delete", "requires": ["verify"]},
            {"id": "dep-5", "step": "ship", "requires": [["pay_card", "pay_gift"]]},
            {"step": "write", "requires": "read"},
        ]
    )
    got = [(r.rule_id, r.first, r.then, r.severity) for r in rs.rules]  # type: ignore[union-attr]
    assert got == [
        ("dep-1", "search", "summarize", "critical"),
        ("dep-2", "create", "update", "warning"),
        ("dep-3/read_account", "read_account", "refund", "warning"),
        ("dep-3/check_policy", "check_policy", "refund", "warning"),
        ("dep-4", "verify", "delete", "critical"),
        ("dep-5", ["pay_card", "pay_gift"], "ship", "critical"),  # a nested list is "any of"
        ("before:read->write", "read", "write", "critical"),
    ]
    assert rs.rules[0].description == "search first"


@pytest.mark.parametrize(
    "entry, needle",
    [
        ({"step": "B", "requires": "A", "hard": True, "severity": "critical"}, "both 'severity' and 'hard'"),
        ({"step": "B", "requires": "A", "hard": "yes"}, "'hard' must be true or false"),
        ({"step": "B"}, "missing field 'requires'"),
        ({"step": "B", "requires": []}, "'requires' is an empty list"),
        ({"step": "B", "requires": "B"}, "requires and step are both 'B'"),
        ({"step": "B", "requires": "A", "hardness": True}, "unknown key 'hardness'"),
        ({"type": "before", "first": "A", "then": "B"}, "Put rules under `rules:`"),
    ],
)
def test_dependency_spec_problems(entry: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError) as info:
        parse_rules([entry])
    assert needle in str(info.value)


def test_v0_sequences_warn_and_become_before_pairs(tmp_path: Path) -> None:
    path = write(tmp_path, "v0.yaml", "sequences:\n  - [GetCustomer, UpdateCustomer]\n  - [A, B, C]\n")
    with pytest.warns(SeqjudgeDeprecationWarning, match=f"seqjudge migrate {path}"):
        rs = load_rules(path)
    assert [r.rule_id for r in rs.rules] == [
        "before:GetCustomer->UpdateCustomer",
        "before:A->B",
        "before:B->C",
    ]
    assert issubclass(SeqjudgeDeprecationWarning, DeprecationWarning)


def test_current_shapes_do_not_warn(tmp_path: Path) -> None:
    path = write(tmp_path, "r.yaml", "rules:\n  - {type: require, tool: A}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_rules(path)


def test_shapes_can_be_combined_in_file_order() -> None:
    with pytest.warns(SeqjudgeDeprecationWarning):
        rs = parse_rules(
            {
                "sequences": [["A", "B"]],
                "rules": [{"type": "require", "tool": "A"}],
                "dependencies": [{"id": "d", "step": "C", "requires": "B"}],
            }
        )
    assert [r.rule_id for r in rs.rules] == ["before:A->B", "require:A", "d"]


def test_catalog_path_is_relative_to_the_rule_file(tmp_path: Path) -> None:
    sub = tmp_path / "suite"
    sub.mkdir()
    path = write(sub, "rules.yaml", "catalog: catalog.json\nrules:\n  - {type: require, tool: A}\n")
    assert load_rules(path).catalog == str(sub / "catalog.json")
    assert parse_rules({"catalog": "c.json", "rules": [{"type": "require", "tool": "A"}]}).catalog == "c.json"


def test_json_problems_have_line_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, "r.json", '{\n  "rules": [\n    {"type": "require",\n     "tol": "A"}\n  ]\n}\n')
    with pytest.raises(InputError) as info:
        load_rules(path)
    text = str(info.value)
    assert "line 4 (rules[0].tol)" in text and "did you mean 'tool'" in text


def test_problems_are_collected_not_stopped_at_the_first(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """rules:
  - type: befor
    first: A
    then: B
  - type: max_calls
    tool: A
    max: -1
  - type: require
    tol: A
""",
    )
    with pytest.raises(InputProblems) as info:
        load_rules(path)
    err = info.value
    assert len(err.problems) == 3
    assert [p.where.split(" ")[1] for p in err.problems if p.where] == ["2", "7", "9"]
    assert str(err).startswith(f"3 problems in {path}:")
    assert err.exit_code == 2


def test_locations_name_each_rule(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        "aliases:\n  R: [a]\nrules:\n  - {type: require, tool: R}\n"
        "  - id: second\n    type: require\n    tool: b\n",
    )
    _, locations = load_rules_located(path)
    assert locations == {
        "require:R": "line 4 (rules[0])",
        "second": "line 5 (rules[1])",
        "aliases.R": "line 2 (aliases.R)",
    }


def test_strict_types_no_silent_coercion() -> None:
    # "3" is not 3 and "yes" is not true: a quoted number in a rule file is a mistake worth reporting.
    with pytest.raises(InputError, match="'max' must be a whole number, got the string '3'"):
        parse_rules({"rules": [{"type": "max_calls", "tool": "A", "max": "3"}]})
    with pytest.raises(InputError, match="'strict' must be true or false"):
        parse_rules({"rules": [{"type": "sequence", "tools": ["A", "B"], "strict": "yes"}]})
