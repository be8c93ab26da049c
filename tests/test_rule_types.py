"""Rule types carry their own behaviour (issue 13, item 6): a rule type is one module of
``seqjudge.rules.types``; its class holds the evaluator, the operand fields, the description and the judge
requirement, and a class missing any of them fails when it is defined, not later and quietly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest

import seqjudge
from seqjudge.rules.base import RuleBase, operand_text
from seqjudge.rules.model import RULE_CLASSES, RULE_TYPES, RuleSet


def test_every_module_of_the_types_package_is_a_registered_rule_type() -> None:
    package = Path(__file__).parents[1] / "src" / "seqjudge" / "rules" / "types"
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    assert set(RULE_TYPES) == modules
    # Listed in the README's order, which messages ("valid types: ...") follow.
    assert RULE_TYPES[:3] == ("require", "before", "blocklist") and RULE_TYPES[-1] == "judge"


@pytest.mark.parametrize("name", RULE_TYPES)
def test_each_rule_type_declares_real_operand_fields(name: str) -> None:
    cls = RULE_CLASSES[name]
    for field in (*cls.operand_fields, *cls.operand_list_fields):
        assert field in cls.model_fields


def _define(name: str, *, leave_out: tuple[str, ...] = (), **overrides: Any) -> type[RuleBase]:
    """A rule class built as a module would write it (``type: Literal[name]`` and a ``tool`` field), with
    the pieces in ``leave_out`` not written."""
    pieces: dict[str, Any] = {
        "rank": 50,
        "operand_fields": ("tool",),
        "default_id": lambda self: f"{name}:{self.tool}",
        "describe": lambda self: operand_text(self.tool),
        "requirement": lambda self, say: str(say.words(self.tool)),
        "ordering": lambda self: None,
        "compile": lambda self, select: None,
        "guard_kinds": frozenset(),
        "guard_at_end": "decided at the end",
        **overrides,
    }
    namespace = {k: v for k, v in pieces.items() if k not in leave_out}
    namespace["__annotations__"] = {"type": Literal[name], "tool": str}
    return type(f"Rule_{name}", (RuleBase,), namespace)


def test_a_rule_class_without_its_judge_requirement_fails_when_defined() -> None:
    with pytest.raises(TypeError, match=r"rule type 'half_done' .* does not define requirement$"):
        _define("half_done", leave_out=("requirement",))
    assert "half_done" not in RULE_CLASSES


def test_a_rule_class_without_operand_fields_or_evaluator_fails_when_defined() -> None:
    with pytest.raises(TypeError, match=r"does not define compile, ordering, operand_fields$"):
        _define("no_fields", leave_out=("compile", "ordering", "operand_fields"))


def test_a_rule_class_that_does_not_say_what_the_guard_decides_fails_when_defined() -> None:
    with pytest.raises(TypeError, match=r"does not define guard_kinds, guard_at_end$"):
        _define("unguarded", leave_out=("guard_kinds", "guard_at_end"))


@pytest.mark.parametrize("name", RULE_TYPES)
def test_each_rule_type_says_what_the_guard_decides(name: str) -> None:
    cls = RULE_CLASSES[name]
    # Something is decided before a call, at the end, or both; never neither.
    assert cls.guard_kinds or cls.guard_at_end


def test_operand_fields_must_name_fields_of_the_class() -> None:
    with pytest.raises(TypeError, match=r"operand field\(s\) it does not have: \['tools'\]"):
        _define("misnamed", operand_fields=("tools",))


def test_a_complete_rule_type_defined_after_the_union_was_built_is_refused() -> None:
    # It could never be read from a rule file (the union is closed), so defining it is an error.
    with pytest.raises(TypeError, match=r"defined after the rule union was built"):
        _define("late")
    assert "late" not in RULE_CLASSES


def test_the_same_type_name_twice_is_refused() -> None:
    with pytest.raises(TypeError, match=r"rule type 'require' is defined twice"):
        _define("require")


def test_lint_reads_the_order_a_rule_type_declares() -> None:
    from seqjudge.rules.lint import find_cycles

    rs = RuleSet.model_validate(
        {
            "rules": [
                {"type": "before", "first": "A", "then": "B"},
                {"type": "sequence", "tools": ["B", "C"]},
                {"type": "trajectory", "expected": ["C", "A"]},
                {"type": "trajectory", "expected": ["B", "A"], "mode": "any_order"},  # orders nothing
            ]
        }
    )
    cycles = find_cycles(rs)
    assert [c.tools for c in cycles] == [["A", "B", "C", "A"]]
    assert RULE_CLASSES["require"](type="require", tool="A").ordering() is None


def test_operands_come_from_the_class_for_judge_validation_and_lint() -> None:
    from seqjudge.judge.validate import rule_tool_names as judge_names
    from seqjudge.rules.lint import rule_tool_names as lint_names

    rs = RuleSet.model_validate(
        {
            "aliases": {"W": ["w1", "w2"]},
            "rules": [
                {"type": "after", "trigger": "T", "then": ["W", {"tool": "X"}]},
                {"type": "sequence", "tools": ["A", "B", "C"]},
                {"type": "trajectory", "expected": ["P", "Q"]},
                {"type": "blocklist", "pattern": "rm"},
            ],
        }
    )
    after, seq, traj, block = rs.rules
    assert judge_names(after, rs.aliases) == ["T", "w1", "w2", "X"]
    assert lint_names(after) == ["T", "W", "X"]
    assert judge_names(seq, rs.aliases) == ["A", "B", "C"]
    assert lint_names(traj) == ["P", "Q"]
    assert judge_names(block, rs.aliases) == []  # a pattern is not a tool name


NEW_TYPE = '''
"""`first_call`: the trace's first call is the tool (a rule type added as one module)."""

from __future__ import annotations

from functools import partial
from typing import Literal

from seqjudge.rules.base import Operand, RuleBase, check_operand, operand_text
from seqjudge.rules.evaluate import Finding, Flaw


class FirstCallRule(RuleBase):
    type: Literal["first_call"]
    tool: Operand

    rank = 100
    operand_fields = ("tool",)
    guard_kinds = frozenset({"out_of_order"})  # decided at the first call, on nothing before it
    guard_at_end = None

    def default_id(self):
        return f"first_call:{operand_text(self.tool)}"

    def describe(self):
        return f"the first call is {operand_text(self.tool)}"

    def requirement(self, say):
        return f"The trace's first call must be {say.words(self.tool)}. Violation: `out_of_order` at call 0."

    def ordering(self):
        return None

    def compile(self, c):
        return partial(first_call, self, c(self.tool))


def first_call(rule, sel, v):
    every, _ = v.positions(sel)
    if every and every[0] == 0:
        return Finding("passed", "It is.", [0])
    return Finding("failed", "It is not.", [0], [Flaw("out_of_order", 0, sel.text, "other", "No.", "Do.")])
'''

SCRIPT = """
import json, sys
import seqjudge
assert seqjudge.__file__.startswith(sys.argv[1]), seqjudge.__file__
from seqjudge.judge.prompt import rule_view
from seqjudge.judge.validate import rule_tool_names
from seqjudge.rules.engine import Engine
from seqjudge.guard import Guard
from seqjudge.trace import Trace
rules = seqjudge.load_rules(sys.argv[2])
engine = Engine(rules)
good = engine.check(Trace.model_validate({"calls": [{"tool_name": "login"}, {"tool_name": "x"}]}))
bad = engine.check(Trace.model_validate({"calls": [{"tool_name": "x"}, {"tool_name": "login"}]}))
print(json.dumps({
    "outcomes": [good.rules[0].outcome, bad.rules[0].outcome],
    "violation": bad.violations[0].model_dump(mode="json"),
    "view": rule_view(rules.rules[0], rules.aliases),
    "names": rule_tool_names(rules.rules[0], rules.aliases),
    "guard": [Guard(rules).session("s").decide(t, {}).action for t in ("login", "x")],
}))
"""


def test_a_new_rule_type_is_one_module(tmp_path: Path) -> None:
    """A module added to the types package (of a copy of the source tree) is a rule type that the loader,
    the engine, the judge prompt, the judge's input checks and the guard all know, with no other edit."""
    tree = tmp_path / "src"
    shutil.copytree(
        Path(seqjudge.__file__).parent, tree / "seqjudge", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tree / "seqjudge" / "rules" / "types" / "first_call.py").write_text(
        textwrap.dedent(NEW_TYPE), encoding="utf-8"
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {type: first_call, tool: login}\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tree), str(rules)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["outcomes"] == ["passed", "failed"]
    assert out["violation"]["rule_id"] == "first_call:login"
    assert out["violation"]["rule_description"] == "the first call is login"
    assert out["view"]["requirement"].startswith("The trace's first call must be `login`.")
    assert out["names"] == ["login"]
    assert out["guard"] == ["allow", "deny"]  # the guard runs the new type's evaluator too
