"""Batch runs through the OpenAI Batch API: the real `openai` SDK against the loopback fake's batch
emulator (files upload, batches create/retrieve, output and error files)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

import batch_support as bs
from seqjudge.batch import custom_id
from seqjudge.batch_api import OpenAIBatches
from seqjudge.judge.judge import prepare_request
from seqjudge.rules.model import RuleSet

API = "openai"
# The scenarios both batch APIs share run in tests/test_batch_scenarios.py, once per API.


def test_request_shapes_are_the_online_adapters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The uploaded file is JSONL of {custom_id, method, url, body} with the online Chat Completions body;
    the batch is created for /v1/chat/completions with a 24h window; the store keeps the hashes."""
    with bs.batch_env(API, tmp_path, monkeypatch) as env:
        traces = bs.suite(3)
        sub = env.submit(traces)
        upload = next(r for r in env.server.requests if r.path == "/v1/files")
        assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
        assert b'name="purpose"' in upload.body and b"batch" in upload.body
        create = next(r for r in env.server.requests if r.path == "/v1/batches")
        assert create.body["endpoint"] == "/v1/chat/completions"
        assert create.body["completion_window"] == "24h"
        file_id = create.body["input_file_id"]
        lines = [json.loads(x) for x in env.emulator.files[file_id].splitlines()]
        assert [set(line) for line in lines] == [{"custom_id", "method", "url", "body"}] * 3
        assert {(line["method"], line["url"]) for line in lines} == {("POST", "/v1/chat/completions")}
        stored = {r.custom_id: r for r in env.store.batch_requests(sub.run_id, handled=None)}
        for trace, line in zip(traces, lines, strict=True):
            _, prompt, request = prepare_request(trace, bs.RULES, rule_ids=["verify_first", "one_email"])
            assert line["body"] == env.provider.build_body(request)  # byte for byte the online body
            assert line["body"]["response_format"]["json_schema"]["strict"] is True
            row = stored[line["custom_id"]]
            assert row.trace_id == trace.trace_id and row.prompt_hash == prompt.prompt_hash
            assert row.request_hash == env.provider.hash_request(request, line["body"])
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", line["custom_id"])
        batch = env.store.batches(sub.run_id)[0]
        assert (batch.id, batch.input_file_id, batch.purpose, batch.request_count) == (
            sub.batch_ids[0],
            file_id,
            "first",
            3,
        )


def test_custom_ids_are_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with bs.batch_env(API, tmp_path, monkeypatch, cache=False) as env:
        one = env.submit(bs.suite(3))
        two = env.submit(bs.suite(3))
    ids = [[cid for cid, _ in lines] for _, _, lines in env.emulator.submitted]
    assert ids[0] == ids[1] and len(set(ids[0])) == 3  # the same suite: the same ids, one per trace
    assert one.run_id != two.run_id
    trace = bs.make_trace(0)
    base: dict[str, Any] = dict(
        trace_id="t0",
        trace=trace,
        rules=bs.RULES.rules,
        template_version="1",
        template_hash="abc",
        provider="openai",
        model="gpt-4o",
        prompt_hash="p",
    )
    cid = custom_id(**base)
    assert len(cid) == 64 and cid.startswith("sj-") and cid == custom_id(**base)
    other_trace = trace.model_copy(update={"calls": trace.calls[:2]})
    other_rules = RuleSet.model_validate({"rules": bs.RULES_DATA["rules"][:1]}).rules
    for change in (
        {"trace_id": "t9"},
        {"trace": other_trace},
        {"rules": other_rules},
        {"template_version": "2"},
        {"template_hash": "abd"},
        {"model": "gpt-4o-mini"},
        {"provider": "anthropic"},
    ):
        assert custom_id(**{**base, **change}) != cid, change


def test_large_runs_are_split_into_several_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(OpenAIBatches, "max_requests", 2)
    with bs.batch_env(API, tmp_path, monkeypatch) as env:
        sub = env.submit(bs.suite(5))
        assert len(sub.batch_ids) == 3
        assert [b.request_count for b in env.store.batches(sub.run_id)] == [2, 2, 1]
        assert env.collect(sub.run_id).status == "completed"
        assert len(list(env.store.results(sub.run_id))) == 5
    # And by size: a file never passes the byte limit.
    api = OpenAIBatches(env.provider)
    lines = [bs_line(i) for i in range(6)]
    size = api.line_size(lines[0])
    monkeypatch.setattr(OpenAIBatches, "max_requests", 50_000)
    monkeypatch.setattr(OpenAIBatches, "max_bytes", size * 2 + 1)
    chunks = api.split(lines)
    assert [len(c) for c in chunks] == [2, 2, 2]
    assert all(sum(api.line_size(x) for x in c) <= api.max_bytes for c in chunks)


def bs_line(i: int) -> Any:
    from seqjudge.batch_api import BatchLine

    return BatchLine(f"sj-{i:061d}", {"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 50}]})


def test_a_failed_batch_leaves_its_requests_errored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch the provider failed (or expired) as a whole: every request without a line gets its reason."""
    from seqjudge.batch_api import Polled

    with bs.batch_env(API, tmp_path, monkeypatch) as env:
        api = OpenAIBatches(env.provider)
        failed = Polled(
            "failed", True, {}, {"output_file_id": None, "error_file_id": None, "errors": ["bad"]}
        )
        expired = Polled("expired", True, {}, {"output_file_id": None, "error_file_id": None, "errors": []})

        async def read(polled: Polled) -> Any:
            try:
                return await api.results("batch_x", polled, ["a", "b"])
            finally:
                await env.provider.aclose()

        lines = asyncio.run(read(failed))
        assert [(x.custom_id, x.outcome, x.error) for x in lines] == [
            ("a", "errored", "the batch failed: bad"),
            ("b", "errored", "the batch failed: bad"),
        ]
        assert {x.outcome for x in asyncio.run(read(expired))} == {"expired"}


def test_batch_reasks_stop_at_max_attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-asked in follow-up batches, a reply that never validates ends unscored after max_attempts in all."""
    with bs.batch_env(API, tmp_path, monkeypatch, script={"C-0": ["still not json"]}, max_attempts=2) as env:
        sub = env.submit(bs.suite(2))
        assert env.collect(sub.run_id, reask="batch").follow_up_batches
        done = env.collect(sub.run_id, reask="batch")
        assert done.status == "completed" and done.follow_up_batches == []
        judge = env.store.result(sub.run_id, "t0").result.judge
        assert judge.status == "unscored" and judge.reason.startswith("no valid judgement after 2 attempt(s)")
        assert [(a.n, a.error_stage, a.reasked) for a in judge.attempts] == [
            (1, "parse", False),
            (2, "parse", True),
        ]
        assert env.judge.calls["C-0"] == 2 and len(env.store.batches(sub.run_id)) == 2
        totals = env.store.run_info(sub.run_id).totals
        # Both attempts came from batches: half price, and the call count says where they went.
        assert totals["calls"] == {"calls": 3, "batch_requests": 3, "online_calls": 0, "cache_hits": 0}
        assert totals["cost"]["usd"] == pytest.approx(3 * (100 * 2.5 + 20 * 10.0) / 1e6 * 0.5)
