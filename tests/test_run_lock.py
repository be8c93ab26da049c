"""Issue 15.7: two resumes of one run at once. The second is refused before any model call, saying the
run is being resumed elsewhere; the first finishes with exactly one result per trace."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cli_suite import passing_reply, trace, write_suite
from fakes.server import FakeLLMServer, openai_chat
from seqjudge.cli import run
from seqjudge.config import RunConfig
from seqjudge.store import Store

VALID = passing_reply()


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_suite(tmp_path, monkeypatch, [trace(f"t{i}") for i in range(3)])


def test_a_second_resume_is_refused_before_any_call(
    suite: Path, store_target: str, fake_llm: FakeLLMServer, capsys
) -> None:
    """On SQLite the lock is a file lock; on PostgreSQL an advisory lock on the server."""
    store = "s.db" if store_target.endswith(".db") else store_target
    base = ["--store", store, "--concurrency", "1", "--no-cache"]
    cfg = RunConfig(
        rules="rules.yaml",
        traces="t.jsonl",
        store=store,
        model="openai:gpt-4o",
        model_options={"base_url": fake_llm.openai_base_url},
    )
    with Store(store) as db:  # a run killed before it stored anything (its lock died with it)
        run_id = db.create_run(config=cfg.model_dump(mode="json"), fingerprint={})
    left = 3
    calls_before = len(fake_llm.requests)
    fake_llm.enqueue(*(openai_chat(VALID, delay=0.5) for _ in range(left)))

    resume = ["run", "--resume", run_id, *base]
    codes: list[int] = []
    first = threading.Thread(target=lambda: codes.append(run(resume)))
    first.start()
    deadline = time.monotonic() + 30
    while len(fake_llm.requests) == calls_before and time.monotonic() < deadline:
        time.sleep(0.01)  # the first resume is now working on the run
    second = run(resume)
    calls_at_refusal = len(fake_llm.requests)
    first.join(60)
    assert second == 2
    assert "being run or resumed elsewhere" in capsys.readouterr().err
    assert codes == [0]
    assert len(fake_llm.requests) == calls_before + left  # the second resume made no call of its own
    assert calls_at_refusal <= calls_before + left
    with Store(store) as db:
        assert db.run_info(run_id).status == "completed"
        assert db.completed_trace_ids(run_id) == {"t0", "t1", "t2"}
    # once finished, the run's lock is free again: another resume has nothing left to do, and says so
    assert run(resume) == 0
