"""Start-up stays cheap: the help path of the CLI imports none of the heavy modules (issue 17, point 15).

Behaviour, not timing: each case runs the CLI in a fresh interpreter and inspects ``sys.modules`` after it.
The time itself is measured by ``benchmarks/startup.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from seqjudge.defaults import TRACE_FORMATS

# What a command imports when it runs, and `--help` must not: the judge's models and providers, templates,
# YAML, the store, Arrow, the event loop, rich's rendering, and seqjudge's own heavy modules.
THIRD_PARTY = ("openai", "anthropic", "jinja2", "yaml", "sqlite3", "pyarrow", "asyncio", "rich", "regex")
OWN = (
    "seqjudge.store",
    "seqjudge.rules",
    "seqjudge.ingest",
    "seqjudge.judge",
    "seqjudge.report",
    "seqjudge.config",
    "seqjudge.crosscheck",
    "seqjudge.runner",
    "seqjudge.outputs.html",
    "seqjudge.calibrate",
    "seqjudge.trace",
)

PROBE = """
import json, sys
from seqjudge.cli import run
code = run(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def modules_after(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, done.stderr
    return set(result["modules"])


def heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_root_help_imports_no_heavy_module() -> None:
    modules = modules_after("--help")
    assert heavy(modules, (*THIRD_PARTY, *OWN, "pydantic")) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--help"],
        ["run", "-h"],
        ["judge", "-h"],
        ["calibrate", "-h"],
        ["report", "-h"],
        ["compare", "-h"],
        ["review", "list", "-h"],
        ["review", "resolve", "-h"],
        ["batch", "collect", "-h"],
        ["golden", "validate", "-h"],
        ["convert", "-h"],
    ],
)
def test_command_help_imports_no_heavy_module(argv: list[str]) -> None:
    # A command's own help may load pydantic: typer itself converts parameters with it. Nothing of
    # seqjudge's runs, nor a provider SDK, the store or YAML.
    assert heavy(modules_after(*argv), (*THIRD_PARTY, *OWN)) == []


def test_help_names_the_trace_formats_of_the_importers() -> None:
    # The CLI names the formats without importing the importers; they must stay the same list, in order.
    from seqjudge.ingest import FORMATS

    assert tuple(FORMATS) == TRACE_FORMATS
