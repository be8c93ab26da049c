"""Start-up stays cheap (issue 17, point 15): the help path of the CLI imports none of the heavy modules, and
`check` of plain native traces loads no other trace importer and no regex, and builds no trace or report
model, while the same things load when an input needs them.

Behaviour, not timing: each case runs the CLI in a fresh interpreter and inspects ``sys.modules`` (and which
pydantic models were built) after it. The time itself is measured by ``benchmarks/startup.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import COMMAND_MODULES, MODULES, register
from seqjudge.cli.app import app
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
built = []  # seqjudge's pydantic models whose validator was built
if "pydantic" in sys.modules:
    from pydantic import BaseModel
    todo = list(BaseModel.__subclasses__())
    while todo:
        model = todo.pop()
        todo.extend(model.__subclasses__())
        if model.__module__.startswith("seqjudge.") and model.__pydantic_complete__:
            built.append(f"{model.__module__}.{model.__qualname__}")
print(json.dumps({"code": code, "modules": sorted(sys.modules), "built": sorted(set(built))}))
"""


def probe(*argv: str, code: int = 0) -> dict[str, Any]:
    """The CLI run in a fresh interpreter: its exit code, the modules it imported, the models it built."""
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == code, done.stderr
    return result


def modules_after(*argv: str) -> set[str]:
    return set(probe(*argv)["modules"])


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


def test_command_annotations_are_objects_not_strings() -> None:
    # typer evaluates a string annotation (from `from __future__ import annotations`) on every start, four
    # times; the command modules leave their annotations evaluated (see seqjudge.cli).
    register(["--help"])
    callbacks = [c.callback for c in app.registered_commands]
    for group in app.registered_groups:
        assert group.typer_instance is not None
        callbacks += [c.callback for c in group.typer_instance.registered_commands]
        if group.typer_instance.registered_callback is not None:
            callbacks.append(group.typer_instance.registered_callback.callback)
    strings = {
        f"{f.__module__}.{f.__name__}": [k for k, v in f.__annotations__.items() if isinstance(v, str)]
        for f in callbacks
        if f is not None
    }
    assert len(strings) >= len(COMMAND_MODULES)
    assert {name: keys for name, keys in strings.items() if keys} == {}


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


# junit makes its cases from the report data: not even the reconciliation's models (markdown reconciles
# its first failing trace, whose blocks it shows).
@pytest.mark.parametrize(("fmt", "unused"), [("junit", ("seqjudge.crosscheck",)), ("markdown", ())])
def test_check_in_a_ci_format_loads_neither_the_store_nor_the_comparison(
    tmp_path: Path, fmt: str, unused: tuple[str, ...]
) -> None:
    # The CI formats share their cases and digest with `report-ci`, whose module also serves stored runs
    # and comparisons: `check` needs none of those (they cost tens of milliseconds to import), nor a
    # network library (xml.sax's quoteattr would load urllib and ssl).
    rules = tmp_path / "rules.yaml"
    rules.write_text(AUTH_FIRST)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({**SMALL, "calls": SMALL["calls"][::-1]}))  # refund first: a failure
    modules = set(probe("check", str(rules), str(trace), "--format", fmt, code=1)["modules"])
    assert "seqjudge.outputs.ci_outputs" in modules  # it did write the format
    own = ("seqjudge.store", "seqjudge.compare", "seqjudge.config", "seqjudge.judge", *unused)
    assert heavy(modules, ("sqlite3", "urllib.request", "http", "ssl", "xml.sax", *own)) == []


# -- `check` of plain native traces: only the native importer, no regex, no trace or report model built --

AUTH_FIRST = "rules:\n  - {id: auth-first, type: before, first: auth, then: refund}\n"
SMALL = {"trace_id": "t", "calls": [{"tool_name": "auth"}, {"tool_name": "refund"}]}
OWN_FORMATS = {"native", "base", "detect", "files", "plain", "stats"}  # the native path's modules


def suite(tmp_path: Path, rules: str, name: str, text: str) -> tuple[str, str]:
    (tmp_path / "rules.yaml").write_text(rules)
    (tmp_path / name).write_text(text)
    return str(tmp_path / "rules.yaml"), str(tmp_path / name)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("t.json", json.dumps(SMALL)),
        ("t.jsonl", json.dumps(SMALL) + "\n" + json.dumps({**SMALL, "trace_id": "u"})),
    ],
    ids=["json", "jsonl"],
)
def test_check_of_native_traces_imports_no_other_importer_and_builds_no_trace_model(
    tmp_path: Path, name: str, text: str
) -> None:
    result = probe("check", *suite(tmp_path, AUTH_FIRST, name, text))
    ingest = {m.rpartition(".")[2] for m in result["modules"] if m.startswith("seqjudge.ingest.")}
    assert ingest == OWN_FORMATS  # no anthropic, openai, spans, ... (they load when a file needs them)
    assert "regex" not in result["modules"]  # no rule has args_match
    # The engine reads plain traces as PlainTrace and writes reports from its data: the validators of the
    # trace and report models are never built. The rule models are (the rule file is validated).
    assert [m for m in result["built"] if m.startswith(("seqjudge.trace.", "seqjudge.report."))] == []
    assert "seqjudge.rules.model.RuleSet" in result["built"]
    assert "seqjudge.rules.catalog.Catalog" not in result["built"]  # no catalog given


def test_what_check_leaves_unloaded_loads_when_the_input_needs_it(tmp_path: Path) -> None:
    # The other side of the test above: a rule with args_match compiles its pattern with regex, a trace with
    # messages is validated by the Trace model, and a file of another format loads its importer.
    rules = (
        AUTH_FIRST
        + "  - {id: r2, type: max_calls, tool: {tool: refund, args_match: {order: '^o'}}, max: 1}\n"
    )
    trace = {**SMALL, "messages": [{"role": "user", "content": "refund please"}]}
    result = probe("check", *suite(tmp_path, rules, "t.json", json.dumps(trace)))
    assert "regex" in result["modules"]
    assert "seqjudge.trace.Trace" in result["built"]
    chat = {
        "messages": [
            {"role": "user", "content": "refund"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "auth", "input": {}}]},
        ]
    }
    result = probe("check", *suite(tmp_path, AUTH_FIRST, "chat.json", json.dumps(chat)))
    assert "seqjudge.ingest.anthropic" in result["modules"]


def test_every_format_is_registered_under_its_own_name() -> None:
    from seqjudge.ingest import FORMATS

    assert {name: FORMATS[name].NAME for name in FORMATS} == {name: name for name in TRACE_FORMATS}


def test_detection_asks_no_format_after_the_first_that_is_sure() -> None:
    # Which formats detection asks is what it imports: a native record is settled by the native importer,
    # the first in order, so no later one is asked (the same choice as asking all: the first YES wins).
    from collections.abc import Iterator, Mapping

    from seqjudge.ingest import FORMATS, detect
    from seqjudge.ingest.base import Options, Record, Source

    asked: list[str] = []

    class Watched(Mapping[str, Any]):
        def __getitem__(self, name: str) -> Any:
            asked.append(name)
            return FORMATS[name]

        def __iter__(self) -> Iterator[str]:
            return iter(FORMATS)

        def __len__(self) -> int:
            return len(FORMATS)

    record = Record(Source("t.jsonl", "t"), 1, json.dumps(SMALL).encode())
    chosen, records = detect.choose(Watched(), record, iter([]), record.source, Options())
    assert (chosen, set(asked)) == ("native", {"native"})
    assert [r.line for r in records] == [1]
