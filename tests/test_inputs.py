"""One loader for a suite's inputs (seqjudge.inputs): every command reads the rule file's `catalog:` the same
way, relative to the rule file, whatever folder seqjudge runs from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.inputs import catalog_path, load_suite

RULES = """
catalog: catalog.json
rules:
  - {id: verify_first, type: before, first: VerifyIdentity, then: DeleteCustomer}
"""
TRACE = {
    "trace_id": "t1",
    "calls": [
        {"tool_name": "VerifyIdentity", "arguments": {"id": "C-1"}},
        {"tool_name": "DeleteCustomer", "arguments": {"id": "C-1"}},
    ],
}


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """suite/rules.yaml naming `catalog: catalog.json`, run from the suite's parent folder."""
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "rules.yaml").write_text(RULES, encoding="utf-8")
    (folder / "catalog.json").write_text(
        json.dumps({"tools": [{"name": "VerifyIdentity"}, {"name": "DeleteCustomer"}]}), encoding="utf-8"
    )
    (folder / "traces.jsonl").write_text(json.dumps(TRACE) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    return Path("suite")


@pytest.mark.parametrize("command", ["check", "lint", "prompt"])
def test_every_command_finds_the_catalog_beside_the_rule_file(suite: Path, command: str, capsys) -> None:
    # Before the one loader, `prompt` joined the catalog to the rule file's folder a second time and failed
    # with "suite/suite/catalog.json: no such catalog" where `check` and `lint` accepted the same file.
    args = [command, str(suite / "rules.yaml")]
    if command != "lint":
        args.append(str(suite / "traces.jsonl"))
    code = run(args)
    captured = capsys.readouterr()
    assert "suite/suite" not in captured.err
    assert code == 0, captured.err
    if command == "prompt":
        # The catalog reached the prompt.
        assert "Tools the rules name" in captured.out and "No catalog entries" not in captured.out


def test_the_loader_resolves_the_catalog_once(suite: Path) -> None:
    loaded = load_suite(suite / "rules.yaml")
    assert loaded.catalog_path == suite / "catalog.json"
    assert loaded.catalog is not None and sorted(loaded.catalog.names()) == [
        "DeleteCustomer",
        "VerifyIdentity",
    ]
    assert loaded.examples is None
    # A flag wins over the rule file's `catalog:`.
    assert catalog_path(loaded.ruleset, "other.json") == Path("other.json")


def test_a_rule_naming_a_tool_the_catalog_lacks_is_bad_input(suite: Path) -> None:
    (suite / "catalog.json").write_text(json.dumps({"tools": [{"name": "VerifyIdentity"}]}), encoding="utf-8")
    with pytest.raises(InputError, match="the rules name tools or arguments the catalog does not have"):
        load_suite(suite / "rules.yaml")
    # The judge commands leave that check to the judge's own validation of rules and traces.
    assert load_suite(suite / "rules.yaml", known_tools=False).catalog is not None


def test_examples_are_loaded_when_asked_for(suite: Path) -> None:
    assert load_suite(suite / "rules.yaml", with_examples=True).examples  # the shipped ones
