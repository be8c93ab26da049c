"""Issue 15.1: a trace that `check` accepts never crashes `run`, `prompt`, `judge` or `convert`.

A lone surrogate and arguments nested deeper than ``MAX_NESTING`` end in exit 2 naming the trace and the
JSON path (before any model call), and a run stopped by one is stored as ``stopped`` with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_suite import passing_reply, run_argv, write_suite
from cli_suite import trace as passing_trace
from fakes.server import FakeLLMServer, openai_chat
from seqjudge.cli import run
from seqjudge.store import Store
from seqjudge.trace import MAX_NESTING

OK_REPLY = passing_reply()


def nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"k": value}
    return value


def trace(trace_id: str, arguments: Any) -> str:
    return json.dumps(passing_trace(trace_id, arguments))


SURROGATE = (
    '{"trace_id": "sur", "calls": [{"tool_name": "A", "arguments": {"q": "x\\udcffy"}}, {"tool_name": "B"}]}'
)
DEEP = trace("deep", nested(300))


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_suite(tmp_path, monkeypatch, [])


@pytest.mark.parametrize(("bad", "checked"), [(SURROGATE, 0), (DEEP, 2)], ids=["surrogate", "deep"])
def test_check_accepts_what_the_other_commands_reject_with_exit_2(
    suite: Path, bad: str, checked: int, capsys
) -> None:
    # `check` reads a lone surrogate (the engine does not mind it) but, since issue 38, no value nested past
    # MAX_NESTING: that bound holds on every path (tests/test_nesting_bound.py).
    (suite / "t.jsonl").write_text(trace("fine", {"q": 1}) + "\n" + bad + "\n", encoding="utf-8")
    assert run(["check", "rules.yaml", "t.jsonl"]) == checked
    capsys.readouterr()
    for argv in (
        ["prompt", "rules.yaml", "t.jsonl", "--trace-id", json.loads(bad)["trace_id"]],
        ["convert", "t.jsonl", "-o", "out.jsonl"],
    ):
        assert run(argv) == 2, argv
        err = capsys.readouterr().err
        assert json.loads(bad)["trace_id"] in err and "calls[0].arguments" in err
        assert "Traceback" not in err
    assert not (suite / "out.jsonl").exists()


@pytest.mark.parametrize("bad", [SURROGATE, DEEP], ids=["surrogate", "deep"])
def test_judge_rejects_before_any_call(suite: Path, bad: str, fake_llm: FakeLLMServer, capsys) -> None:
    (suite / "t.jsonl").write_text(bad + "\n", encoding="utf-8")
    code = run(
        ["judge", "rules.yaml", "t.jsonl", "--model", "openai:gpt-4o", "--base-url", fake_llm.openai_base_url]
    )
    assert code == 2
    assert "calls[0].arguments" in capsys.readouterr().err
    assert fake_llm.requests == []


@pytest.mark.parametrize("bad", [SURROGATE, DEEP], ids=["surrogate", "deep"])
def test_run_stopped_by_bad_input_is_stored_as_such_and_resumes(suite: Path, bad: str, capsys) -> None:
    (suite / "t.jsonl").write_text(trace("first", {"q": 1}) + "\n" + bad + "\n", encoding="utf-8")
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 2
    err = capsys.readouterr().err
    bad_id = json.loads(bad)["trace_id"]
    assert f"trace '{bad_id}'" in err and "t.jsonl" in err and "--resume" in err
    with Store("s.db") as db:
        run_id = db.resolve_run("latest")
        info = db.run_info(run_id)
        assert info.status == "stopped"
        assert info.totals is not None and info.totals["stopped"].startswith("bad input:")
        assert db.completed_trace_ids(run_id) == {"first"}
    # the same input again: the same message, never a traceback; fixed input: the run finishes
    assert run(["run", "--resume", run_id, "--store", "s.db"]) == 2
    (suite / "t.jsonl").write_text(
        trace("first", {"q": 1}) + "\n" + trace(bad_id, {"q": 2}) + "\n", encoding="utf-8"
    )
    assert run(["run", "--resume", run_id, "--store", "s.db"]) == 0
    with Store("s.db") as db:
        assert db.run_info(run_id).status == "completed"
        assert db.completed_trace_ids(run_id) == {"first", bad_id}


def test_the_deepest_accepted_trace_is_judged_stored_and_converted(
    suite: Path, fake_llm: FakeLLMServer, capsys
) -> None:
    # MAX_NESTING levels inside a value: every path (prompt, provider request, store, JSON) must cope.
    (suite / "t.jsonl").write_text(trace("edge", nested(MAX_NESTING)) + "\n", encoding="utf-8")
    fake_llm.enqueue(openai_chat(OK_REPLY))
    assert run(run_argv(fake_llm)) == 0, capsys.readouterr()
    assert len(fake_llm.requests) == 1
    with Store("s.db") as db:
        assert db.completed_trace_ids(db.resolve_run("latest")) == {"edge"}
    assert run(["convert", "t.jsonl", "-o", "out.jsonl"]) == 0
    assert json.loads((suite / "out.jsonl").read_text())["calls"][0]["arguments"] == nested(MAX_NESTING)
    (suite / "t.jsonl").write_text(trace("over", nested(MAX_NESTING + 1)) + "\n", encoding="utf-8")
    assert run(["convert", "t.jsonl", "-o", "out.jsonl"]) == 2
