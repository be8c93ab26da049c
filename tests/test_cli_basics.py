"""What people type first: --version, and -h beside --help on the root and on every command."""

from __future__ import annotations

import pytest

from seqjudge.cli import run
from seqjudge.version import __version__


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"seqjudge {__version__}"


@pytest.mark.parametrize("argv", [["-h"], ["check", "-h"], ["run", "-h"], ["review", "list", "-h"]])
def test_dash_h_is_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert "Usage: seqjudge" in out and "--help" in out
