"""Malformed rule files and catalogs: each ends with exit 2 and a message naming the file, the line (or the
path inside it) and the offending key or value, and never with a traceback."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from seqjudge.cli import run

GOOD_RULES = "rules:\n  - type: before\n    first: get_user\n    then: cancel\n"


@dataclass
class Case:
    name: str
    text: str
    where: str  # the line ("line 4") or path inside the file
    needles: tuple[str, ...]  # the offending key or value, and what is wrong
    suffix: str = ".yaml"
    catalog: str | None = None  # when set, `text` is the catalog and GOOD_RULES the rule file


CASES = [
    Case(
        "unknown key",
        "rules:\n  - type: before\n    first: A\n    thne: B\n",
        "line 4 (rules[0].thne)",
        ("'thne'", "did you mean 'then'"),
    ),
    Case(
        "unknown rule type",
        "rules:\n  - type: befor\n    first: A\n    then: B\n",
        "line 2",
        ("'befor'", "require, before, blocklist"),
    ),
    Case(
        "missing field",
        "rules:\n  - type: before\n    first: A\n",
        "line 2 (rules[0])",
        ("missing field 'then'",),
    ),
    Case(
        "wrong type",
        "rules:\n  - type: max_calls\n    tool: SendEmail\n    max: three\n",
        "line 4 (rules[0].max)",
        ("'max'", "'three'", "whole number"),
    ),
    Case(
        "negative max",
        "rules:\n  - type: max_calls\n    tool: SendEmail\n    max: -1\n",
        "line 4",
        ("'max' must be >= 0", "-1"),
    ),
    Case(
        "within below one",
        "rules:\n  - type: eventually\n    tool: Validate\n    within: 0\n",
        "line 4",
        ("'within' must be >= 1", "got 0"),
    ),
    Case(
        "after within zero",
        "rules:\n  - type: after\n    trigger: Open\n    then: Close\n    within: 0\n",
        "line 5",
        ("'within' must be >= 1",),
    ),
    Case(
        "empty blocklist pattern",
        "rules:\n  - type: blocklist\n    pattern: ''\n",
        "line 3 (rules[0].pattern)",
        ("blocklist pattern is empty",),
    ),
    Case(
        "first equals then",
        "rules:\n  - type: before\n    first: Login\n    then: Login\n",
        "line 2 (rules[0])",
        ("'Login'", "own prerequisite"),
    ),
    Case(
        "one-tool sequence",
        "rules:\n  - type: sequence\n    tools: [Auth]\n",
        "line 3 (rules[0].tools)",
        ("at least two tools", "got 1"),
    ),
    Case(
        "bad regex",
        "rules:\n  - type: require\n    tool: {tool: get_order, args_match: {order_id: '(#W'}}\n",
        "line 3",
        ("args_match.order_id", "'(#W'", "regular expression"),
    ),
    Case(
        "same on require",
        "rules:\n  - type: require\n    tool: A\n    same: [order_id]\n",
        "line 4 (rules[0].same)",
        ("'same' does not apply to a require rule", "before, max_calls"),
    ),
    Case(
        "unknown top-level key",
        "rulez:\n  - type: require\n    tool: A\n",
        "line 1 (rulez)",
        ("'rulez'", "did you mean 'rules'"),
    ),
    Case(
        "yaml syntax",
        "rules:\n  - type: before\n    first: A\n   then: B\n",
        "line 4, column",
        ("invalid YAML",),
    ),
    Case(
        "json syntax",
        '{\n  "rules": [\n    {"type": "require", "tool": "A"},\n  ]\n}\n',
        "line 4, column",
        ("invalid JSON",),
        suffix=".json",
    ),
    Case(
        "json unknown key",
        '{\n  "rules": [\n    {"type": "require",\n     "tool": "A",\n     "sevrity": "warning"}\n  ]\n}\n',
        "line 5 (rules[0].sevrity)",
        ("'sevrity'", "did you mean 'severity'"),
        suffix=".json",
    ),
    Case(
        "duplicate explicit id",
        "rules:\n  - {id: r1, type: require, tool: A}\n  - {id: r1, type: require, tool: B}\n",
        "line 3",
        ("duplicate rule id 'r1'",),
    ),
    Case(
        "duplicate yaml key",
        "rules:\n  - type: before\n    first: A\n    first: B\n    then: C\n",
        "line 4",
        ("duplicate key 'first'", "line 3"),
    ),
    Case(
        "unsupported metric",
        "tests:\n  - id: t1\n    metric: accuracy\n    rules:\n      - {type: require, tool: A}\n",
        "line 3 (tests[0].metric)",
        ("'accuracy'", "sequence_valid"),
    ),
    Case(
        "unknown key in a test",
        "tests:\n  - id: t1\n    rulez: []\n    rules:\n      - {type: require, tool: A}\n",
        "line 3 (tests[0].rulez)",
        ("'rulez'", "did you mean 'rules'"),
    ),
    Case(
        "severity and hard",
        "- id: d1\n  step: B\n  requires: A\n  severity: critical\n  hard: true\n",
        "line 5 ([0].hard)",
        ("'severity' and 'hard'",),
    ),
    Case(
        "hard not a boolean",
        "dependencies:\n  - {id: d1, step: B, requires: A, hard: maybe}\n",
        "line 2",
        ("'hard' must be true or false", "'maybe'"),
    ),
    Case(
        "v0 one-tool sequence",
        "sequences:\n  - [GetCustomer, UpdateCustomer]\n  - [Lonely]\n",
        "line 3 (sequences[1])",
        ("at least two tools",),
    ),
    Case(
        "empty alias",
        "aliases:\n  Reads: []\nrules:\n  - {type: require, tool: Reads}\n",
        "line 2 (aliases.Reads)",
        ("alias 'Reads'", "non-empty list"),
    ),
    Case(
        "alias includes itself",
        "aliases:\n  Reads: [get_user, Reads]\nrules:\n  - {type: require, tool: Reads}\n",
        "line 2",
        ("alias 'Reads' includes itself",),
    ),
    Case(
        "yaml boolean as tool",
        "rules:\n  - type: require\n    tool: yes\n",
        "line 3 (rules[0].tool)",
        ("'tool'", "boolean true", "quotes"),
    ),
    Case(
        "number as operand",
        "rules:\n  - type: before\n    first: 42\n    then: B\n",
        "line 3 (rules[0].first)",
        ("'first'", "the number 42"),
    ),
    Case(
        "bad severity",
        "rules:\n  - type: require\n    tool: A\n    severity: Critical\n",
        "line 4",
        ("'Critical'", "did you mean 'critical'"),
    ),
    Case(
        "bad trajectory mode",
        "rules:\n  - type: trajectory\n    expected: [A, B]\n    mode: inorder\n",
        "line 4",
        ("'inorder'", "did you mean 'in_order'"),
    ),
    Case(
        "unknown key in a selector",
        "rules:\n  - type: require\n    tool: {tol: get_order}\n",
        "line 3 (rules[0].tool.tol)",
        ("'tol'", "did you mean 'tool'"),
    ),
    Case(
        "when not a mapping",
        "rules:\n  - type: require\n    tool: A\n    when: admin\n",
        "line 4 (rules[0].when)",
        ("'when' must be a mapping", "'admin'"),
    ),
    Case(
        "judge without description",
        "rules:\n  - type: judge\n",
        "line 2 (rules[0])",
        ("missing field 'description'",),
    ),
    Case(
        "missing type",
        "rules:\n  - first: A\n    then: B\n",
        "line 2 (rules[0])",
        ("missing field 'type'", "type: before"),
    ),
    Case(
        "rules is a mapping",
        "rules:\n  type: require\n  tool: A\n",
        "line 2 (rules)",
        ("'rules' must be a list", "a mapping"),
    ),
    Case(
        "json with tabs",
        '{\n\t"rules": [\n\t\t{"type": "require", "tol": "A"}\n\t]\n}\n',
        "line 3 (rules[0].tol)",
        ("'tol'",),
        suffix=".json",
    ),
    Case(
        "json duplicate key",
        '{\n\t"rules": [\n\t\t{"type": "require",\n\t\t "tool": "A",\n\t\t "tool": "B"}\n\t]\n}\n',
        "line 5",
        ("duplicate key 'tool'", "line 4"),
        suffix=".json",
    ),
    Case("empty rules", "rules: []\n", "line 1 (rules)", ("'rules' is an empty list",)),
    Case("scalar file", "just some words\n", "line 1", ("got the string 'just some words'",)),
    Case(
        "two documents",
        "rules:\n  - {type: require, tool: A}\n---\nrules: []\n",
        "line 3",
        ("more than one YAML document",),
    ),
    # catalogs (the rule file is fine; the catalog given with --catalog is not)
    Case(
        "catalog bad json",
        '{"tools": [\n  {"name": "get_user"}\n  {"name": "cancel"}\n]}\n',
        "line 3, column",
        ("invalid JSON",),
        catalog="catalog.json",
    ),
    Case(
        "catalog tool without name",
        '{"tools": [\n  {"name": "get_user"},\n  {"description": "x"}\n]}\n',
        "line 3 (tools[1])",
        ("non-empty name", "no 'name'"),
        catalog="catalog.json",
    ),
    Case(
        "catalog bad kind",
        '{"tools": [\n  {"name": "get_user", "kind": "reed"}\n]}\n',
        "line 2 (tools[0].kind)",
        ("'reed'", "did you mean 'read'"),
        catalog="catalog.json",
    ),
    Case(
        "catalog duplicate tool",
        '[\n  {"name": "get_user"},\n  {"name": "get_user"}\n]\n',
        "line 3 ([1].name)",
        ("'get_user' is listed twice",),
        catalog="catalog.json",
    ),
    Case(
        "catalog openai wrong type",
        '[{"type": "function", "function": "get_user"}]\n',
        "line 1 ([0].function)",
        ("'function' must be a mapping", "'get_user'"),
        catalog="tools.json",
    ),
    Case("catalog unknown top key", '{"tols": []}\n', "line 1", ("'tols'",), catalog="catalog.json"),
]


def _run_lint(tmp_path: Path, case: Case, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    if case.catalog:
        bad = tmp_path / case.catalog
        bad.write_text(case.text, encoding="utf-8")
        rules = tmp_path / "rules.yaml"
        rules.write_text(GOOD_RULES, encoding="utf-8")
        code = run(["lint", str(rules), "--catalog", str(bad)])
    else:
        bad = tmp_path / ("rules" + case.suffix)
        bad.write_text(case.text, encoding="utf-8")
        code = run(["lint", str(bad)])
    captured = capsys.readouterr()
    return code, captured.err, bad


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_input_exits_2_with_a_located_message(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, bad = _run_lint(tmp_path, case, capsys)
    assert code == 2, err
    assert "Traceback" not in err
    assert str(bad) in err
    assert case.where in err, err
    for needle in case.needles:
        assert needle in err, (needle, err)


def test_there_are_enough_distinct_cases() -> None:
    assert len({c.name for c in CASES}) == len(CASES) >= 22


@pytest.mark.parametrize("kind", ["missing", "directory", "empty", "not utf-8"])
def test_unreadable_paths(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rules.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_text("\n\n", encoding="utf-8")
    elif kind == "not utf-8":
        path.write_bytes(b"rules:\n  - {type: require, tool: \xff\xfe}\n")
    code = run(["lint", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err and "Traceback" not in err
    expected = {
        "missing": "no such rule file",
        "directory": "is a directory",
        "empty": "is empty",
        "not utf-8": "not UTF-8",
    }[kind]
    assert expected in err


def test_missing_catalog_named_by_the_rule_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("catalog: nowhere.json\n" + GOOD_RULES, encoding="utf-8")
    code = run(["lint", str(rules)])
    err = capsys.readouterr().err
    assert code == 2
    assert str(tmp_path / "nowhere.json") in err and "no such catalog" in err


def test_every_problem_of_a_file_is_printed_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "rules:\n  - type: befor\n    first: A\n    then: B\n  - type: max_calls\n    tool: A\n    max: -2\n"
        "  - type: require\n    tol: A\n",
        encoding="utf-8",
    )
    code = run(["lint", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"3 problems in {path}" in err
    for where, needle in (("line 2", "'befor'"), ("line 7", "-2"), ("line 9", "'tol'")):
        assert any(where in line and needle in line for line in err.splitlines()), (where, err)
