"""Converting tau-bench's original results file (OpenAI chat messages under `traj`) reproduces the calls of
the matching 200 traces of traces.jsonl: names, arguments, statuses and order.

How they match: traces.jsonl names each tau-bench run `airline/gpt-4o/task{task_id}/trial{trial}`, with the
same `task_id` and `trial` in its metadata; the raw file's records carry `task_id` and `trial` at the top
level, which the importer keeps as the converted trace's metadata. Failures in tau-bench are only visible
as tool output text starting with "Error", hence `--error-pattern '^Error'`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.ingest import load_traces
from seqjudge.trace import Trace


def tau_dir() -> Path:
    given = os.environ.get("SEQJUDGE_TAU_DATA")
    return Path(given) if given else Path(__file__).resolve().parents[2] / "shared" / "data" / "tau"


RAW = tau_dir() / "raw" / "tau-bench-gpt-4o-airline.openai-messages.json"
NATIVE = tau_dir() / "traces.jsonl"


def key(trace: Trace) -> str:
    return f"airline/gpt-4o/task{trace.metadata['task_id']}/trial{trace.metadata['trial']}"


def calls(trace: Trace) -> list[tuple[str, dict[str, object], str]]:
    return [(c.tool_name, c.arguments, c.status) for c in trace.calls]


@pytest.fixture(scope="module")
def reference() -> dict[str, Trace]:
    assert NATIVE.is_file(), f"the shared tau data is missing at {NATIVE} (set SEQJUDGE_TAU_DATA)"
    return {str(t.trace_id): t for t in load_traces(NATIVE)}


def test_raw_tau_bench_reproduces_the_native_traces(reference: dict[str, Trace]) -> None:
    assert RAW.is_file(), f"the raw tau-bench file is missing at {RAW}"
    converted = list(load_traces(RAW, messages_key="traj", error_pattern="^Error"))
    assert len(converted) == 200
    matched = [reference[key(t)] for t in converted]
    assert len({t.trace_id for t in matched}) == 200
    assert sum(1 for t in reference.values() if t.metadata.get("agent") == "gpt-4o") == 200
    for mine, theirs in zip(converted, matched, strict=True):
        assert calls(mine) == calls(theirs), key(mine)
        # the native file cuts outputs at 1,500 characters (marked with "…"); the start is the same text
        for a, b in zip(mine.calls, theirs.calls, strict=True):
            assert isinstance(a.output, str) and a.output.startswith(str(b.output).removesuffix("…"))
        assert [(m.role, m.content, m.at) for m in mine.messages] == [
            (m.role, m.content, m.at) for m in theirs.messages
        ]
    assert sum(c.status == "error" for t in converted for c in t.calls) == 73
    assert sum(len(t.calls) for t in converted) == 1164


def test_without_the_error_pattern_failures_go_unseen(reference: dict[str, Trace]) -> None:
    converted = list(load_traces(RAW, messages_key="traj"))
    assert all(c.status == "ok" for t in converted for c in t.calls)
    assert any(calls(t) != calls(reference[key(t)]) for t in converted)


def test_convert_command_on_the_raw_file(reference: dict[str, Trace], tmp_path: Path) -> None:
    out = tmp_path / "tau.jsonl"
    code = run(["convert", str(RAW), "--messages-key", "traj", "--error-pattern", "^Error", "-o", str(out)])
    assert code == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200
    first = json.loads(lines[0])
    assert first["trace_id"] == "tau-bench-gpt-4o-airline.openai-messages.json[0]"
    assert first["metadata"]["task_id"] == 0
    back = list(load_traces(out))
    assert [calls(t) for t in back] == [calls(reference[key(t)]) for t in back]
