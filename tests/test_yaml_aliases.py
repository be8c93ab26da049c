"""Issue 15.5: YAML aliases cannot make a small rule (or examples) file stand for an enormous value."""

from __future__ import annotations

from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.judge.prompt import load_examples
from seqjudge.rules.document import MAX_EXPANDED_NODES
from seqjudge.rules.load import load_rules


def laughs(depth: int, indent: str = "      ") -> str:
    """Anchors a0..a{depth}, each a list of nine of the previous: 9**(depth+1) leaves, a few hundred bytes."""
    lines = [f'{indent}a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{indent}a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, depth + 1)]
    return "\n".join(lines)


def bomb(depth: int) -> str:
    return f"rules:\n  - id: j\n    type: judge\n    description: be kind\n    when:\n{laughs(depth)}\n"


def test_a_billion_laughs_rule_file_is_refused_at_load(tmp_path: Path, capsys) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(bomb(6), encoding="utf-8")  # ~600 bytes, 9**7 = 4.8 million values expanded
    assert path.stat().st_size < 1000
    with pytest.raises(InputError, match="aliases") as caught:
        load_rules(path)
    assert caught.value.where is not None and caught.value.where.startswith("line ")
    assert run(["lint", str(path)]) == 2
    assert "more than 100,000 values" in capsys.readouterr().err


def test_aliases_within_the_budget_still_load(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(bomb(3), encoding="utf-8")  # 9**4 = 6,561 leaves
    assert MAX_EXPANDED_NODES > 9**4
    ruleset = load_rules(path)
    assert ruleset.rules[0].when is not None


def test_a_self_referring_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - &r {id: a, type: require, tool: [*r]}\n", encoding="utf-8")
    with pytest.raises(InputError, match="contains it"):
        load_rules(path)


def test_the_examples_file_is_bounded_too(tmp_path: Path) -> None:
    path = tmp_path / "examples.yaml"
    path.write_text("x:\n" + laughs(6, "  ") + "\nexamples: []\n", encoding="utf-8")
    with pytest.raises(InputError, match="aliases"):
        load_examples(path)
