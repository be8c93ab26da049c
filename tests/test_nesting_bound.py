"""Issue 38: a value nested past ``MAX_NESTING`` ends in exit 2 naming the record on every path - `check` in
each format, its worker pool, the importers (a LangSmith tree, Codex argument text), `run` and Spark - and
never in a RecursionError (exit 1, read as "a trace failed")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_suite import write_suite
from seqjudge.checkpool import INLINE
from seqjudge.cli import run
from seqjudge.store import Store
from seqjudge.trace import MAX_NESTING, TOO_DEEP


def deep_text(levels: int) -> str:
    """A JSON list nested ``levels`` deep, as text (json.dumps itself cannot write one past ~1,000)."""
    return "[" * levels + "1" + "]" * levels


def deep_line(trace_id: str, levels: int) -> str:
    first = '{"tool_name": "A", "arguments": {"x": ' + deep_text(levels) + "}}"
    return f'{{"trace_id": "{trace_id}", "calls": [{first}, {{"tool_name": "B"}}]}}'


def ok_line(trace_id: str) -> str:
    return json.dumps({"trace_id": trace_id, "calls": [{"tool_name": "A"}, {"tool_name": "B"}]})


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_suite(tmp_path, monkeypatch, [])


def assert_refused(capsys: pytest.CaptureFixture[str], where: str) -> None:
    err = capsys.readouterr().err
    assert TOO_DEEP in err and where in err, err
    assert "Traceback" not in err and "RecursionError" not in err


@pytest.mark.parametrize("fmt", ["text", "jsonl", "json", "html", "junit", "markdown", "sarif"])
@pytest.mark.parametrize("levels", [MAX_NESTING, 600, 1_200], ids=["just-over", "600", "1200"])
def test_check_refuses_a_deep_record_in_every_format(suite: Path, fmt: str, levels: int, capsys) -> None:
    (suite / "t.jsonl").write_text(
        ok_line("fine") + "\n" + deep_line("deep", levels) + "\n", encoding="utf-8"
    )
    assert run(["check", "rules.yaml", "t.jsonl", "--format", fmt, "-o", "out"]) == 2
    assert_refused(capsys, "t.jsonl, line 2")


def test_the_deepest_accepted_record_is_checked(suite: Path, capsys) -> None:
    # "x" is the arguments' first level, so MAX_NESTING - 1 lists below it reach the bound exactly.
    (suite / "t.jsonl").write_text(deep_line("edge", MAX_NESTING - 1) + "\n", encoding="utf-8")
    assert run(["check", "rules.yaml", "t.jsonl", "--format", "html", "-o", "out.html"]) == 0


def test_a_deep_whole_document_names_the_file(suite: Path, capsys) -> None:
    (suite / "t.json").write_text(deep_line("deep", 1_200), encoding="utf-8")
    assert run(["check", "rules.yaml", "t.json"]) == 2
    assert_refused(capsys, "t.json")


def test_the_worker_pool_refuses_a_deep_record_with_its_line(suite: Path, capsys) -> None:
    lines = [ok_line(f"t{i}") for i in range(INLINE * 3)]
    lines[INLINE * 2] = deep_line("deep", 1_200)  # past the records read ahead: in a worker's chunk
    (suite / "t.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for fmt in ("text", "html"):
        assert run(["check", "rules.yaml", "t.jsonl", "--workers", "2", "--format", fmt, "-o", "out"]) == 2
        assert_refused(capsys, f"t.jsonl, line {INLINE * 2 + 1}")


def test_codex_argument_text_nested_deep_is_refused(suite: Path, capsys) -> None:
    call = {
        "type": "response_item",
        "payload": {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command": ' + deep_text(5_000) + "}",
            "call_id": "c1",
        },
    }
    meta = {"type": "session_meta", "payload": {"id": "s1", "cwd": "/w"}}
    (suite / "rollout.jsonl").write_text(json.dumps(meta) + "\n" + json.dumps(call) + "\n", encoding="utf-8")
    assert run(["check", "rules.yaml", "rollout.jsonl", "--trace-format", "codex"]) == 2
    assert_refused(capsys, "rollout.jsonl, line 2")


def test_a_deep_langsmith_tree_is_refused(suite: Path, capsys) -> None:
    # 10,000 runs each the child of the one before: a document far deeper than any decoder takes.
    run_text = '{"id": "r%d", "name": "step", "run_type": "chain", "inputs": {}, "child_runs": ['
    levels = 10_000
    text = "".join(run_text % i for i in range(levels)) + "]}" * levels
    (suite / "tree.json").write_text(text, encoding="utf-8")
    assert run(["check", "rules.yaml", "tree.json", "--trace-format", "langsmith"]) == 2
    assert_refused(capsys, "tree.json")


def test_a_langsmith_tree_deep_enough_to_exhaust_the_walk_is_refused(suite: Path, capsys) -> None:
    # Shallow enough for the decoder (two JSON levels a run) but a tool run's inputs nested past the bound.
    inputs = '{"input": ' + json.dumps('{"q": ' + deep_text(300) + "}") + "}"
    tool = '{"id": "t", "name": "A", "run_type": "tool", "inputs": ' + inputs + ', "child_runs": []}'
    text = '{"id": "root", "name": "agent", "run_type": "chain", "inputs": {}, "child_runs": [' + tool + "]}"
    (suite / "runs.json").write_text(text, encoding="utf-8")
    assert run(["check", "rules.yaml", "runs.json", "--trace-format", "langsmith", "--format", "html"]) == 2
    assert_refused(capsys, "runs.json")


def test_run_refuses_a_deep_record_and_is_stored_as_stopped(suite: Path, capsys) -> None:
    (suite / "t.jsonl").write_text(
        ok_line("first") + "\n" + deep_line("deep", 1_200) + "\n", encoding="utf-8"
    )
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 2
    assert_refused(capsys, "t.jsonl, line 2")
    with Store("s.db") as db:
        assert db.run_info(db.resolve_run("latest")).status == "stopped"


def test_spark_puts_a_deep_row_in_the_error_column() -> None:
    # The function Spark runs on its executors, on one Arrow batch (no JVM needed for this).
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("pyspark")
    from seqjudge import spark as sj
    from seqjudge.rules.model import RuleSet

    rules = RuleSet.model_validate(
        {"rules": [{"id": "a-first", "type": "before", "first": "A", "then": "B"}]}
    )
    evaluate = sj._evaluate(rules.model_dump_json(), 0.5, "medium", "not-passed", "text", ["trace"], "column")
    batch = pa.RecordBatch.from_pydict({"trace": [ok_line("fine"), deep_line("deep", 1_200)]})
    (out,) = list(evaluate(iter([batch])))
    rows = out.to_pylist()
    assert [r["verdict"] for r in rows] == ["pass", "error"]
    assert TOO_DEEP in rows[1]["error"] and "partition 0, line 2" in rows[1]["error"]
