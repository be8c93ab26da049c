"""Issue 38.7: a store this process may not write can still be listed, reported and exported; a write to
it says the store is read-only (exit 2), and no message tells the user to remove the file.

The store is made read-only for real: its file and folder lose their write bits, and a test run as root
(which writes regardless) runs seqjudge without the capability that lets it (``setpriv``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import seqjudge
from seqjudge.cli import run

RULES = "rules:\n  - id: r\n    type: require\n    tool: a\n"
TRACE = '{"trace_id": "t1", "calls": [{"tool_name": "a"}]}\n'
MAIN = "import sys; from seqjudge.cli import run; sys.exit(run(sys.argv[1:]))"


def without_write_access() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a read-only file cannot be made here")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    (tmp_path / "t.jsonl").write_text(TRACE, encoding="utf-8")
    path = tmp_path / "st" / "s.db"
    argv = ["run", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl"), "--store", str(path)]
    assert run(argv) == 0
    path.chmod(0o444)
    path.parent.chmod(0o555)
    yield path
    path.parent.chmod(0o755)


def seqjudge_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(seqjudge.__file__).parents[1])}
    command = [*without_write_access(), sys.executable, "-c", MAIN, *argv]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_a_read_only_store_is_listed_reported_and_exported(store: Path, tmp_path: Path) -> None:
    listed = seqjudge_cli("runs", "list", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    assert "completed" in listed.stdout
    page = tmp_path / "report.html"
    reported = seqjudge_cli("report", "latest", "--store", str(store), "-o", str(page))
    assert reported.returncode == 0, reported.stderr
    assert "<html" in page.read_text(encoding="utf-8").lower()
    exported = seqjudge_cli("runs", "export", "latest", "--store", str(store))
    assert exported.returncode == 0 and '"trace_id"' in exported.stdout


def test_writing_a_read_only_store_says_so(store: Path, tmp_path: Path) -> None:
    written = seqjudge_cli(
        "run", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl"), "--store", str(store)
    )
    assert written.returncode == 2
    assert "read-only" in written.stderr and "remove this file" not in written.stderr
    assert "Traceback" not in written.stderr


def test_no_cache_help_says_the_cache_is_still_filled(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "judge"):
        assert run([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "do not fill" not in text and "fresh replies are still cached" in text
