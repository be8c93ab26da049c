"""Issue 15.6: a judge reply larger than max_tokens allows is malformed, only an excerpt of it is kept and
echoed in the re-ask, and every reply is stored once. Real OpenAI SDK against the loopback fake."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cli_suite import passing_reply, trace, write_suite
from fakes.server import FakeLLMServer, openai_chat
from seqjudge.cli import run
from seqjudge.judge.judge import REASK_ECHO_CHARS, reply_char_limit
from seqjudge.store import Store

VALID = passing_reply("REPLY-MARKER fine")


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_suite(tmp_path, monkeypatch, [trace("t1")])


def test_an_oversized_reply_is_malformed_excerpted_and_stored_once(
    suite: Path, fake_llm: FakeLLMServer, capsys
) -> None:
    huge = "HUGE-" + "x" * (reply_char_limit(4096) * 10)  # ten times what max_tokens=4096 allows
    fake_llm.enqueue(openai_chat(huge), openai_chat(VALID))
    argv = ["run", "rules.yaml", "t.jsonl", "--store", "s.db", "--model", "openai:gpt-4o"]
    assert run([*argv, "--base-url", fake_llm.openai_base_url, "--no-cache"]) == 0, capsys.readouterr()
    first, reask = fake_llm.requests
    echoed = reask.body["messages"][-2]["content"]  # the assistant turn that repeats the bad reply
    assert echoed.startswith("HUGE-") and len(echoed) < REASK_ECHO_CHARS + 100
    assert "more characters not repeated" in echoed
    assert len(reask.raw) - len(first.raw) < REASK_ECHO_CHARS + 2_000
    assert "characters long, more than the 32,768" in reask.body["messages"][-1]["content"]
    with Store("s.db") as db:
        run_id = db.resolve_run("latest")
        attempts = db.attempts(run_id, "t1")
        assert [a.error_stage for a in attempts] == ["size", None]
        assert len(attempts[0].raw_reply) < REASK_ECHO_CHARS + 100
        # read back whole: the result's attempts carry their raw replies again
        (stored,) = list(db.results(run_id))
        assert [a.raw_text[:5] for a in stored.result.judge.attempts] == ["HUGE-", '{"seq']
    with sqlite3.connect(suite / "s.db") as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        cells = [str(v) for t in tables for row in conn.execute(f"SELECT * FROM {t}") for v in row]
    assert sum(c.count("HUGE-") for c in cells) == 1  # each reply stored once
    assert sum(c.count("REPLY-MARKER") for c in cells) == 2  # the raw reply, and the parsed report
