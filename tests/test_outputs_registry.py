"""The output registry: every entry names a writer that exists, and a command's --format offers exactly
its view's formats."""

from __future__ import annotations

import pytest

from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.outputs.registry import FORMATS, names, writer


@pytest.mark.parametrize(("view", "fmt"), [(v, f) for v, fs in FORMATS.items() for f in fs])
def test_every_registered_writer_imports(view: str, fmt: str) -> None:
    assert callable(writer(view, fmt))


def test_an_unregistered_format_is_bad_input_naming_the_choices() -> None:
    with pytest.raises(InputError, match="use one of text, json, jsonl, sarif"):
        writer("check", "xml")


@pytest.mark.parametrize(
    ("argv", "view"),
    [
        (["runs", "list", "--store", "{store}"], "runs"),
        (["review", "list", "--store", "{store}"], "review"),
        (["baseline", "list", "--store", "{store}"], "baselines"),
        (["golden", "validate", "."], "golden"),
        (["check", "rules.yaml", "-"], "check"),
    ],
)
def test_format_choices_come_from_the_registry(argv: list[str], view: str, capsys, tmp_path) -> None:
    args = [a.format(store=tmp_path / "x.db") for a in argv]
    assert run([*args, "--format", "nope"]) == 2  # a usage error, before any file is read
    err = capsys.readouterr().err
    assert all(name in err for name in names(view))
