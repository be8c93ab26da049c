"""Issue 15.3: only validated replies are cached, a re-ask is never answered from the cache, and
--no-cache writes fresh entries. Real OpenAI SDK client against the loopback fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_suite import judge_argv, passing_reply, trace, write_suite
from fakes.server import FakeLLMServer, openai_chat
from seqjudge.cli import run

reply = passing_reply


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_suite(tmp_path, monkeypatch, [trace("t1")])


def judge(server: FakeLLMServer, capsys: Any, *extra: str) -> dict[str, Any]:
    run(judge_argv(server, "--format", "json", *extra))
    return json.loads(capsys.readouterr().out)["results"][0]["judge"]


def test_every_attempt_is_a_real_call_and_a_bad_reply_is_not_cached(suite, fake_llm, capsys) -> None:
    fake_llm.enqueue(*(openai_chat("not json") for _ in range(3)))
    first = judge(fake_llm, capsys, "--max-attempts", "3")
    assert first["status"] == "unscored"
    assert len(fake_llm.requests) == 3  # the third re-ask equals the second, yet is sent
    assert [a["cached"] for a in first["attempts"]] == [False, False, False]
    # the provider recovers: the rerun asks it again instead of replaying the bad reply
    fake_llm.enqueue(openai_chat(reply("recovered")))
    second = judge(fake_llm, capsys)
    assert len(fake_llm.requests) == 4
    assert second["status"] == "scored" and second["report"]["summary"] == "recovered"
    # ... and that valid reply is what the cache now answers, with no call
    third = judge(fake_llm, capsys)
    assert len(fake_llm.requests) == 4 and third["attempts"][0]["cached"] is True
    assert third["report"]["summary"] == "recovered"


def test_a_valid_reply_after_a_reask_is_not_served_to_the_next_first_request(suite, fake_llm, capsys) -> None:
    fake_llm.enqueue(openai_chat("not json"), openai_chat(reply("after re-ask")))
    assert judge(fake_llm, capsys)["status"] == "scored"
    fake_llm.enqueue(openai_chat(reply("fresh")))
    again = judge(fake_llm, capsys)
    assert len(fake_llm.requests) == 3 and again["report"]["summary"] == "fresh"


def test_no_cache_writes_a_fresh_entry_that_later_runs_read(suite, fake_llm, capsys) -> None:
    fake_llm.enqueue(openai_chat(reply("old")))
    assert judge(fake_llm, capsys)["report"]["summary"] == "old"
    fake_llm.enqueue(openai_chat(reply("new")))
    fresh = judge(fake_llm, capsys, "--no-cache")
    assert len(fake_llm.requests) == 2 and fresh["report"]["summary"] == "new"
    cached = judge(fake_llm, capsys)
    assert len(fake_llm.requests) == 2 and cached["report"]["summary"] == "new"
