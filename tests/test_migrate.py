"""`seqjudge migrate`: seed 002's v0 example becomes shape 1 and loads to the same rules."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml

from seqjudge.cli import run
from seqjudge.rules.load import SeqjudgeDeprecationWarning, load_rules
from seqjudge.rules.migrate import NothingToMigrate, migrate_text

SEED_V0 = "# Old format (v0)\nsequences:\n  - [GetCustomer, UpdateCustomer]\n"
SEED_V1 = {"rules": [{"type": "before", "first": "GetCustomer", "then": "UpdateCustomer"}]}


def load_quietly(path: Path):  # noqa: ANN201 - a RuleSet
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeqjudgeDeprecationWarning)
        return load_rules(path)


def load_strictly(path: Path):  # noqa: ANN201 - a RuleSet; fails if the file is still v0
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeqjudgeDeprecationWarning)
        return load_rules(path)


def test_seed_example_becomes_the_seed_v1_form(tmp_path: Path) -> None:
    old = tmp_path / "eval.yaml"
    old.write_text(SEED_V0, encoding="utf-8")
    text = migrate_text(old)
    assert text.startswith("# Migrated from the v0 `sequences:` form of eval.yaml")
    assert yaml.safe_load(text) == SEED_V1
    new = tmp_path / "new.yaml"
    new.write_text(text, encoding="utf-8")
    assert load_strictly(new).rules == load_quietly(old).rules


def test_other_keys_are_kept_and_ids_match(tmp_path: Path) -> None:
    old = tmp_path / "rules.yaml"
    old.write_text(
        "catalog: catalog.json\naliases:\n  Reads: [GetCustomer, GetOrder]\nsequences:\n"
        "  - [Reads, UpdateCustomer, Notify]\n  - [Reads, UpdateCustomer]\n",
        encoding="utf-8",
    )
    data = yaml.safe_load(migrate_text(old))
    assert list(data) == ["catalog", "aliases", "rules"]
    assert data["aliases"] == {"Reads": ["GetCustomer", "GetOrder"]}
    assert data["catalog"] == "catalog.json"
    new = tmp_path / "migrated.yaml"
    new.write_text(migrate_text(old), encoding="utf-8")
    before, after = load_quietly(old), load_strictly(new)
    assert after == before.model_copy(update={"source": str(new)})
    assert [r.rule_id for r in after.rules] == [
        "before:Reads->UpdateCustomer",
        "before:UpdateCustomer->Notify",
        "before:Reads->UpdateCustomer#2",
    ]


def test_existing_rules_are_merged_in_file_order(tmp_path: Path) -> None:
    old = tmp_path / "rules.yaml"
    old.write_text("rules:\n  - {type: require, tool: A}\nsequences:\n  - [A, B]\n", encoding="utf-8")
    data = yaml.safe_load(migrate_text(old))
    assert data == {
        "rules": [{"type": "require", "tool": "A"}, {"type": "before", "first": "A", "then": "B"}]
    }


def test_cli_prints_without_touching_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "eval.yaml"
    old.write_text(SEED_V0, encoding="utf-8")
    assert run(["migrate", str(old)]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == SEED_V1
    assert old.read_text(encoding="utf-8") == SEED_V0
    assert not (tmp_path / "eval.yaml.bak").exists()


def test_cli_write_replaces_the_file_and_keeps_a_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "eval.yaml"
    old.write_text(SEED_V0, encoding="utf-8")
    original_rules = load_quietly(old).rules
    assert run(["migrate", str(old), "--write"]) == 0
    assert (tmp_path / "eval.yaml.bak").read_text(encoding="utf-8") == SEED_V0
    assert yaml.safe_load(old.read_text(encoding="utf-8")) == SEED_V1
    assert load_strictly(old).rules == original_rules
    assert "eval.yaml.bak" in capsys.readouterr().err


def test_cli_write_keeps_json_as_json(tmp_path: Path) -> None:
    old = tmp_path / "eval.json"
    old.write_text(json.dumps({"sequences": [["GetCustomer", "UpdateCustomer"]]}), encoding="utf-8")
    assert run(["migrate", str(old), "--write"]) == 0
    assert json.loads(old.read_text(encoding="utf-8")) == SEED_V1
    assert load_strictly(old).rules == load_quietly(tmp_path / "eval.json.bak").rules
    assert json.loads((tmp_path / "eval.json.bak").read_text(encoding="utf-8")) == {
        "sequences": [["GetCustomer", "UpdateCustomer"]]
    }


def test_current_file_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rules.yaml"
    text = "rules:\n  - {type: require, tool: A}\n"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(NothingToMigrate):
        migrate_text(path)
    assert run(["migrate", str(path), "--write"]) == 0
    assert "nothing to migrate" in capsys.readouterr().err
    assert path.read_text(encoding="utf-8") == text
    assert not (tmp_path / "rules.yaml.bak").exists()


def test_broken_v0_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text("sequences:\n  - [GetCustomer]\n", encoding="utf-8")
    assert run(["migrate", str(path), "--write"]) == 2
    err = capsys.readouterr().err
    assert "line 2 (sequences[0])" in err and "at least two tools" in err
    assert not (tmp_path / "eval.yaml.bak").exists()
