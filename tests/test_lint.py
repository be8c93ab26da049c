"""`seqjudge lint`: precedence cycles (incl. through aliases, sequences, trajectories, dependency specs),
tool names against a catalog, catalog formats, and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run
from seqjudge.rules.catalog import load_catalog
from seqjudge.rules.lint import find_cycles, lint
from seqjudge.rules.load import parse_rules

TAU_RETAIL = Path("/work/shared/data/tau/catalogs/retail.json")
REPO = Path(__file__).resolve().parents[1]


def before(a: Any, b: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "before", "first": a, "then": b, **extra}


def cycles(rules: list[dict[str, Any]], aliases: dict[str, list[str]] | None = None, **kw: Any) -> list[Any]:
    return find_cycles(parse_rules({"rules": rules, "aliases": aliases or {}}), **kw)


# ---------------------------------------------------------------------------------------------- cycles


def test_two_before_rules_form_a_cycle() -> None:
    (cy,) = cycles([before("A", "B"), before("B", "A")])
    assert cy.tools == ["A", "B", "A"]
    assert cy.rule_ids == ["before:A->B", "before:B->A"]
    assert cy.text() == "A -> B -> A"
    assert not cy.conditional


def test_no_cycle_in_a_chain() -> None:
    assert cycles([before("A", "B"), before("B", "C"), before("A", "C")]) == []


def test_three_tool_cycle_is_closed_and_lists_its_rules() -> None:
    (cy,) = cycles(
        [before("A", "B", id="ab"), before("X", "Y"), before("B", "C", id="bc"), before("C", "A", id="ca")]
    )
    assert cy.tools == ["A", "B", "C", "A"]
    assert cy.rule_ids == ["ab", "bc", "ca"]


def test_one_cycle_per_strongly_connected_component() -> None:
    found = cycles(
        [
            before("A", "B"),
            before("B", "A"),
            before("B", "C"),
            before("C", "A"),
            before("X", "Y"),
            before("Y", "X"),
        ]
    )
    assert [c.tools for c in found] == [["A", "B", "A"], ["X", "Y", "X"]]


def test_cycle_through_an_alias_uses_real_tool_names() -> None:
    (cy,) = cycles(
        [before("Check", "delete"), before("delete", "verify_identity")],
        aliases={"Check": ["verify_identity"]},
    )
    assert cy.tools == ["verify_identity", "delete", "verify_identity"]


def test_cycle_through_a_sequence() -> None:
    (cy,) = cycles([{"type": "sequence", "tools": ["Auth", "Load", "Write"]}, before("Write", "Auth")])
    assert cy.tools == ["Auth", "Load", "Write", "Auth"]
    assert cy.rule_ids == ["sequence:Auth>Load>Write", "before:Write->Auth"]


def test_cycle_through_a_trajectory_but_not_any_order() -> None:
    traj = {"type": "trajectory", "expected": ["read_account", "check_policy", "issue_refund"]}
    assert cycles([traj, before("issue_refund", "check_policy")])[0].tools == [
        "check_policy",
        "issue_refund",
        "check_policy",
    ]
    assert cycles([dict(traj, mode="exact"), before("issue_refund", "read_account")])
    assert cycles([dict(traj, mode="any_order"), before("issue_refund", "check_policy")]) == []


def test_cycle_in_a_dependency_spec() -> None:
    rs = parse_rules(
        [
            {"id": "d1", "step": "B", "requires": "A", "hard": True},
            {"id": "d2", "step": "A", "requires": ["B", "C"], "hard": False},
        ]
    )
    (cy,) = find_cycles(rs)
    assert cy.tools == ["A", "B", "A"] and cy.rule_ids == ["d1", "d2/B"]


def test_repeated_sequence_member_is_not_a_cycle() -> None:
    assert cycles([{"type": "sequence", "tools": ["A", "B", "A", "C"]}]) == []
    # ...but its later members still count: C must follow B.
    assert cycles([{"type": "sequence", "tools": ["A", "B", "A", "C"]}, before("C", "B")])


def test_a_tool_in_both_operands_is_not_a_self_cycle() -> None:
    assert cycles([before(["A", "B"], "B")], include_conditional=True) == []


def test_alternatives_make_a_cycle_only_possible() -> None:
    # get_order -> cancel -> get_user satisfies both rules, so this is a warning, not an error.
    rules = [before("Lookups", "cancel"), before("cancel", "get_user")]
    aliases = {"Lookups": ["get_user", "get_order"]}
    assert cycles(rules, aliases) == []
    (cy,) = cycles(rules, aliases, include_conditional=True)
    assert cy.conditional and cy.tools == ["cancel", "get_user", "cancel"]


@pytest.mark.parametrize(
    "rule",
    [
        {"type": "sequence", "tools": ["A", "B"], "strict": True},
        {"type": "trajectory", "expected": ["A", "B"], "mode": "in_order"},
        before("A", "B", same=["order_id"]),
        before("A", "B", when={"user.role": "standard"}),
        before("A", {"tool": "B", "args_match": {"amount": "^[0-9]{4,}$"}}),
    ],
)
def test_weaker_edges_give_conditional_cycles(rule: dict[str, Any]) -> None:
    rules = [rule, before("B", "A")]
    assert cycles(rules) == []
    assert [c.conditional for c in cycles(rules, include_conditional=True)] == [True]


def test_definite_cycle_hides_the_conditional_one_in_the_same_component() -> None:
    found = cycles(
        [before("A", "B"), before("B", "A"), before(["A", "C"], "B"), before("B", "C")],
        include_conditional=True,
    )
    assert len(found) == 1 and not found[0].conditional


def test_long_chain_does_not_recurse() -> None:
    n = 3000
    rules = [before(f"t{i}", f"t{i + 1}") for i in range(n)] + [before(f"t{n}", "t0")]
    (cy,) = cycles(rules)
    assert len(cy.tools) == n + 2 and cy.tools[0] == cy.tools[-1] == "t0"


# ------------------------------------------------------------------------------------------ lint()


def test_lint_reports_cycle_as_error_and_possible_cycle_as_warning() -> None:
    rs = parse_rules(
        {
            "aliases": {"R": ["a", "b"]},
            "rules": [before("A", "B"), before("B", "A"), before("R", "c"), before("c", "a")],
        }
    )
    problems = lint(rs)
    errors = [p for p in problems if p.level == "error"]
    assert len(errors) == 1 and "A -> B -> A" in errors[0].message
    assert any(
        "possible circular precedence a -> c -> a" in p.message for p in problems if p.level == "warning"
    )


def catalog_file(tmp_path: Path, names: list[str]) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"tools": [{"name": n, "kind": "read"} for n in names]}), encoding="utf-8")
    return path


def test_catalog_unknown_tool_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    cat = load_catalog(catalog_file(tmp_path, ["get_user_details", "cancel_pending_order"]))
    rs = parse_rules(
        {
            "aliases": {"Reads": ["get_user_details", "get_order_detail"]},
            "rules": [
                before("get_user_detials", "cancel_pending_order"),
                before("Reads", "cancel_pending_order"),
                {"type": "trajectory", "expected": ["get_user_details", "refund"]},
            ],
        }
    )
    problems = lint(rs, cat)
    errors = [p.message + " " + (p.hint or "") for p in problems if p.level == "error"]
    assert any("'get_user_detials'" in e and "did you mean 'get_user_details'" in e for e in errors)
    assert any("alias 'Reads' lists tool 'get_order_detail'" in e for e in errors)
    assert any("'refund'" in e for e in errors)
    assert len(errors) == 3


def test_alias_named_like_a_catalog_tool_is_a_warning(tmp_path: Path) -> None:
    cat = load_catalog(catalog_file(tmp_path, ["get_user", "get_order", "cancel"]))
    rs = parse_rules({"aliases": {"get_user": ["get_order"]}, "rules": [before("get_user", "cancel")]})
    problems = lint(rs, cat)
    assert [p.level for p in problems] == ["warning"]
    assert "alias 'get_user' has the name of a catalog tool" in problems[0].message


def test_blocklist_matching_no_catalog_tool_is_a_warning(tmp_path: Path) -> None:
    cat = load_catalog(catalog_file(tmp_path, ["get_user", "admin_delete"]))
    ok = lint(parse_rules({"rules": [{"type": "blocklist", "pattern": "admin_"}]}), cat)
    odd = lint(parse_rules({"rules": [{"type": "blocklist", "pattern": "root_"}]}), cat)
    assert ok == []
    assert [p.level for p in odd] == ["warning"] and "'root_'" in odd[0].message


def test_without_a_catalog_names_are_not_checked_but_typos_are_flagged() -> None:
    rs = parse_rules(
        {
            "rules": [
                before("VerifyIdentity", "DeleteCustomer"),
                {"type": "require", "tool": "VerifyIdentity"},
                before("VerifyIdentiy", "UpdateCustomer"),
            ]
        }
    )
    problems = lint(rs)
    assert all(p.level == "warning" for p in problems)
    assert any("not checked" in p.message for p in problems)
    assert any("'VerifyIdentiy'" in p.message and "'VerifyIdentity'" in p.message for p in problems)


def test_unused_alias_and_odd_when_paths_are_warnings() -> None:
    rs = parse_rules(
        {
            "aliases": {"Unused": ["x"]},
            "rules": [
                before("A", "B", when={"context.user_role": "standard"}),
                before("A", "C", when={"user..role": "x"}),
            ],
        }
    )
    messages = [p.message for p in lint(rs)]
    assert any("alias 'Unused' is not used" in m for m in messages)
    # Seed 002 writes paths from the trace's root (context.user_role); the engine accepts that form.
    assert not any("'context.user_role'" in m for m in messages)
    assert any("'user..role' has an empty part" in m for m in messages)


# ------------------------------------------------------------------------------------------ catalogs


def test_tau_catalog_loads() -> None:
    cat = load_catalog(TAU_RETAIL)
    assert "cancel_pending_order" in cat and len(cat.names()) == 17
    spec = cat.tools["cancel_pending_order"]
    assert spec.kind == "write" and "order_id" in spec.parameters


def test_openai_and_anthropic_catalogs_load_to_the_same_tools(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    openai_chat = [
        {
            "type": "function",
            "function": {"name": "get_order", "description": "Get.", "parameters": schema, "strict": True},
        }
    ]
    openai_flat = {
        "tools": [{"type": "function", "name": "get_order", "description": "Get.", "parameters": schema}]
    }
    anthropic = [{"name": "get_order", "description": "Get.", "input_schema": schema}]
    tau = {
        "tools": [
            {"name": "get_order", "description": "Get.", "parameters": {"order_id": {"type": "string"}}}
        ]
    }
    loaded = []
    for i, data in enumerate((openai_chat, openai_flat, anthropic, tau)):
        path = tmp_path / f"c{i}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        loaded.append(load_catalog(path).tools)
    assert all(t == loaded[0] for t in loaded)
    assert loaded[0]["get_order"].parameters == {"order_id": {"type": "string"}}
    assert loaded[0]["get_order"].kind is None


def test_yaml_catalog_loads(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("tools:\n  - name: get_user\n    kind: read\n", encoding="utf-8")
    assert load_catalog(path).names() == ["get_user"]


# ------------------------------------------------------------------------------------------ the CLI


def write_rules(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_cli_cycle_exits_2_and_prints_the_cycle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_rules(
        tmp_path, "rules:\n  - {type: before, first: A, then: B}\n  - {type: before, first: B, then: A}\n"
    )
    assert run(["lint", str(path)]) == 2
    out = capsys.readouterr().out
    assert "A -> B -> A" in out and f"error: {path}, line 2 (rules[0])" in out
    assert "1 error" in out


def test_cli_clean_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = catalog_file(tmp_path, ["A", "B"])
    path = write_rules(tmp_path, "rules:\n  - {type: before, first: A, then: B}\n")
    assert run(["lint", str(path), "--catalog", str(cat)]) == 0
    out = capsys.readouterr().out
    assert "0 errors, 0 warnings" in out


def test_cli_warnings_alone_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_rules(tmp_path, "rules:\n  - {type: before, first: A, then: B}\n")
    assert run(["lint", str(path)]) == 0
    assert "warning:" in capsys.readouterr().out


def test_cli_uses_the_rule_files_catalog_unless_overridden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog_file(tmp_path, ["A", "B"])
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"name": "A"}]), encoding="utf-8")
    path = write_rules(tmp_path, "catalog: catalog.json\nrules:\n  - {type: before, first: A, then: B}\n")
    assert run(["lint", str(path)]) == 0
    capsys.readouterr()
    assert run(["lint", str(path), "--catalog", str(other)]) == 2
    out = capsys.readouterr().out
    assert "names tool 'B', which is neither in the catalog" in out


def test_cli_prints_every_problem_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = catalog_file(tmp_path, ["A", "B", "C"])
    path = write_rules(
        tmp_path,
        "rules:\n  - {type: before, first: A, then: B}\n  - {type: before, first: B, then: A}\n"
        "  - {type: require, tool: D}\n  - {type: require, tool: E}\n",
    )
    assert run(["lint", str(path), "--catalog", str(cat)]) == 2
    out = capsys.readouterr().out
    assert "A -> B -> A" in out and "'D'" in out and "'E'" in out and "3 errors" in out


def test_cli_v0_file_gets_a_migrate_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_rules(tmp_path, "sequences:\n  - [A, B]\n")
    assert run(["lint", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"seqjudge migrate {path}" in out


@pytest.mark.parametrize("suite", ["tau-retail", "tau-airline"])
def test_golden_tau_rules_lint_clean_against_their_catalogs(
    suite: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = REPO / "golden_traces" / suite
    if not (folder / "rules.yaml").exists():
        pytest.skip("golden suite not present")
    assert run(["lint", str(folder / "rules.yaml"), "--catalog", str(folder / "catalog.json")]) == 0, (
        capsys.readouterr().out
    )
