"""Start-up stays cheap: the help path of the CLI imports none of the heavy modules (issue 17, point 15).

Behaviour, not timing: each case runs the CLI in a fresh interpreter and inspects ``sys.modules`` after it.
The time itself is measured by ``benchmarks/startup.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from seqjudge.cli import COMMAND_MODULES, MODULES, app, register
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


def test_a_command_line_imports_only_its_command_module() -> None:
    modules = modules_after("check", "--help")
    assert sorted(m for m in modules if m.endswith("_cmd")) == ["seqjudge.cli.check_cmd"]
    every = modules_after("--help")
    assert {f"seqjudge.cli.{m}" for m in MODULES} <= every


def test_the_command_table_is_what_the_modules_register() -> None:
    # A command missing from COMMAND_MODULES still works (everything is imported), but slowly: add it.
    register(["--help"])
    found: dict[str, str] = {}
    for command in app.registered_commands:
        assert command.callback is not None
        name = command.name or command.callback.__name__.replace("_", "-")
        found[name] = command.callback.__module__.rpartition(".")[2]
    for group in app.registered_groups:
        assert group.typer_instance is not None and group.name is not None
        callbacks = [c.callback for c in group.typer_instance.registered_commands]
        (module,) = {c.__module__.rpartition(".")[2] for c in callbacks if c is not None}
        found[group.name] = module
    assert found == COMMAND_MODULES
    assert set(COMMAND_MODULES.values()) <= set(MODULES)


def test_check_of_a_small_trace_loads_only_what_the_engine_needs(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {id: auth-first, type: before, first: auth, then: refund}\n")
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"trace_id": "t", "calls": [{"tool_name": "auth"}, {"tool_name": "refund"}]}))
    modules = modules_after("check", str(rules), str(trace))
    assert "seqjudge.rules.engine" in modules  # it did check
    unneeded = ("openai", "anthropic", "jinja2", "sqlite3", "asyncio", "rich", "pyarrow", "multiprocessing")
    own = ("seqjudge.store", "seqjudge.config", "seqjudge.judge", "seqjudge.runner", "seqjudge.outputs.html")
    assert heavy(modules, (*unneeded, "concurrent.futures", *own)) == []
