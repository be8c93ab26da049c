"""Batch runs through Anthropic's Message Batches API: the real `anthropic` SDK against the loopback
fake's batch emulator (create, retrieve, and the results stream the SDK reads from `results_url`)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

import batch_support as bs
from seqjudge.batch_api import AnthropicBatches, Polled
from seqjudge.judge.judge import prepare_request

API = "anthropic"
# The scenarios both batch APIs share run in tests/test_batch_scenarios.py, once per API.


def test_request_shapes_are_the_online_adapters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """messages.batches.create gets {requests: [{custom_id, params}]}, params being the online Messages
    body (native structured output, the cache breakpoint after the static prompt)."""
    with bs.batch_env(API, tmp_path, monkeypatch) as env:
        traces = bs.suite(3)
        sub = env.submit(traces)
        create = next(r for r in env.server.requests if r.path == "/v1/messages/batches")
        assert set(create.body) == {"requests"}
        items = create.body["requests"]
        assert [set(item) for item in items] == [{"custom_id", "params"}] * 3
        stored = {r.custom_id: r for r in env.store.batch_requests(sub.run_id, handled=None)}
        for trace, item in zip(traces, items, strict=True):
            _, prompt, request = prepare_request(trace, bs.RULES, rule_ids=["verify_first", "one_email"])
            params = item["params"]
            assert params == env.provider.build_body(request)  # byte for byte the online body
            assert params["output_config"]["format"]["type"] == "json_schema"
            assert params["system"][-1]["cache_control"] == {"type": "ephemeral"}
            assert "temperature" not in params
            row = stored[item["custom_id"]]
            assert row.trace_id == trace.trace_id and row.prompt_hash == prompt.prompt_hash
            assert row.request_hash == env.provider.hash_request(request, params)
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", item["custom_id"])
        batch = env.store.batches(sub.run_id)[0]
        assert batch.wire == {"output_mode": "json_schema"} and batch.input_file_id is None
        assert batch.counts == {"processing": 3, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        env.collect(sub.run_id)
        # The SDK followed the batch's results_url back to the fake.
        assert f"/v1/messages/batches/{sub.batch_ids[0]}/results" in env.server.paths()


def test_tool_mode_batches_are_read_back_in_tool_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider configured for forced tool use sends tool-use params, and its replies are read that way."""
    from fakes.server import anthropic_message
    from seqjudge.judge.providers import get_provider

    with bs.batch_env(API, tmp_path, monkeypatch) as env:
        env.provider = get_provider(
            bs.MODELS[API], base_url=env.cfg.model_options.base_url, output_mode="tool", max_retries=0
        )
        real = env.emulator.answer

        def tool_reply(api: str, cid: str | None, body: dict[str, Any]) -> Any:
            assert body["tool_choice"]["type"] == "tool" and "output_config" not in body
            return real(api, cid, body)

        env.emulator.answer = tool_reply
        # The emulator answers with text; a tool-mode reader reads tool_use blocks: answer with one.
        monkeypatch.setattr(
            "fakes.batches.anthropic_message",
            lambda said, model: anthropic_message(
                tool_input=said, tool_name="sequence_judge_report", model=model
            ),
        )
        sub = env.submit(bs.suite(2))
        assert env.store.batches(sub.run_id)[0].wire == {"output_mode": "tool"}
        assert env.collect(sub.run_id).status == "completed"
        judge = env.store.result(sub.run_id, "t1").result.judge
        assert judge.status == "scored" and judge.report.rules_failed == 1


def test_large_runs_are_split_into_several_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AnthropicBatches, "max_requests", 3)
    with bs.batch_env(API, tmp_path, monkeypatch) as env:
        sub = env.submit(bs.suite(7))
        assert [b.request_count for b in env.store.batches(sub.run_id)] == [3, 3, 1]
        assert env.collect(sub.run_id).status == "completed"
        assert sorted(s.trace_id for s in env.store.results(sub.run_id)) == [f"t{i}" for i in range(7)]


def test_canceled_and_missing_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request gets an outcome: a result line's own, or `errored` when the stream lacks it."""
    with bs.batch_env(API, tmp_path, monkeypatch) as env:
        sub = env.submit(bs.suite(2))
        batch_id = sub.batch_ids[0]
        b = env.emulator.batches[batch_id]
        first = b.lines[0]
        b.lines = [
            first.replace('"type": "succeeded"', '"type": "canceled"', 1).split(', "message"')[0] + "}}"
        ]
        api = AnthropicBatches(env.provider)

        async def read() -> Any:
            try:
                await api.poll(batch_id)
                return await api.results(batch_id, Polled("ended", True, {}), ["sj-missing", *b.custom_ids])
            finally:
                await env.provider.aclose()

        lines = {x.custom_id: x for x in asyncio.run(read())}
        assert lines["sj-missing"].outcome == "errored" and "no result" in (lines["sj-missing"].error or "")
        outcomes = sorted(lines[c].outcome for c in b.custom_ids)
        assert outcomes == ["canceled", "errored"]
