"""The judge harness against the scripted provider: validation, bounded re-asks, cut-offs, refusals,
"unscored" instead of a default, the response cache and the fingerprint."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.cache import ResponseCache, request_key
from seqjudge.judge.judge import judge_trace
from seqjudge.judge.prompt import prompts_dir
from seqjudge.judge.providers.base import ProviderReply, Usage
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

RULES = RuleSet.model_validate(
    {
        "rules": [
            {"id": "read_first", "type": "before", "first": "GetOrder", "then": "Refund"},
            {"id": "one_refund", "type": "max_calls", "tool": "Refund", "max": 1, "severity": "warning"},
            {"id": "confirm", "type": "judge", "description": "Confirm with the user before refunding."},
        ]
    }
)
TRACE = Trace.model_validate(
    {
        "trace_id": "t-1",
        "calls": [
            {"tool_name": "Refund", "arguments": {"order": "O-1"}},
            {"tool_name": "GetOrder", "arguments": {"order": "O-1"}},
        ],
        "messages": [{"role": "user", "content": "refund O-1", "at": 0}],
    }
)

VALID: dict[str, Any] = {
    "sequence_correctness_score": 0.0,
    "total_rules_checked": 3,
    "rules_passed": 1,
    "rules_failed": 2,
    "violations": [
        {
            "rule_id": "read_first",
            "rule_description": "GetOrder before Refund",
            "violation_type": "out_of_order",
            "expected_order": "GetOrder, then Refund",
            "actual_order": "Refund (call 0), then GetOrder (call 1)",
            "offending_call_index": 0,
            "severity": "critical",
            "explanation": "The refund came first.",
        },
        {
            "rule_id": "confirm",
            "rule_description": "Confirm with the user before refunding.",
            "violation_type": "missing_prerequisite",
            "expected_order": "user confirmation, then Refund",
            "actual_order": "Refund (call 0) without confirmation",
            "offending_call_index": 0,
            "severity": "critical",
            "explanation": "No confirmation was asked for.",
        },
    ],
    "missing_prerequisites": [],
    "summary": "The refund was issued before the order was read and without confirmation.",
}
SEMANTIC_BAD = {**VALID, "sequence_correctness_score": 1.0}


def reply(text: str, **fields: Any) -> ProviderReply:
    base: dict[str, Any] = {
        "text": text,
        "model": "model-2026-01-01",
        "finish_reason": "stop",
        "usage": Usage(input_tokens=100, output_tokens=10, cached_input_tokens=40),
        "fingerprint": "fp_1",
        "sampling_sent": {"temperature": 0.0, "seed": 1},
        "sampling_controlled": True,
        "latency_s": 0.25,
    }
    return ProviderReply(**{**base, **fields})


async def run(provider: ScriptedProvider, **options: Any):
    return await judge_trace(TRACE, RULES, provider, **options)


# ----------------------------------------------------------------------------------------------- scoring


async def test_valid_reply_is_scored_in_one_call() -> None:
    provider = ScriptedProvider([VALID])
    result = await run(provider)
    assert result.status == "scored" and result.reason is None
    assert result.report is not None and result.report.sequence_correctness_score == 0.0
    assert len(provider.requests) == 1 and len(result.attempts) == 1
    assert result.attempts[0].error is None and result.attempts[0].reasked is False
    assert result.rule_outcomes() == {"read_first": "failed", "one_refund": "passed", "confirm": "failed"}
    assert result.verdict() == "fail" and result.trace_id == "t-1"
    request = provider.requests[0]
    assert (
        request.reask == [] and request.temperature == 0.0 and request.schema_name == "sequence_judge_report"
    )
    assert request.dynamic_prompt.startswith("# AGENT TRACE") and "## Rule `confirm`" in request.static_prompt


async def test_malformed_then_valid_reasks_with_the_bad_reply_and_the_error() -> None:
    provider = ScriptedProvider(['{"sequence_correctness_score": 0.0,', VALID])
    result = await run(provider)
    assert result.status == "scored" and len(provider.requests) == 2
    first, second = provider.requests
    assert (second.system, second.static_prompt, second.dynamic_prompt) == (
        first.system,
        first.static_prompt,
        first.dynamic_prompt,
    )
    assert second.reask[0] == {"role": "assistant", "content": '{"sequence_correctness_score": 0.0,'}
    assert second.reask[1]["role"] == "user" and "is not valid JSON" in second.reask[1]["content"]
    assert [(a.n, a.error_stage, a.reasked) for a in result.attempts] == [
        (1, "parse", False),
        (2, None, True),
    ]
    assert result.attempts[0].raw_text == '{"sequence_correctness_score": 0.0,'


async def test_semantically_wrong_then_valid() -> None:
    provider = ScriptedProvider([SEMANTIC_BAD, VALID])
    result = await run(provider)
    assert result.status == "scored" and len(provider.requests) == 2
    correction = provider.requests[1].reask[1]["content"]
    assert (
        "rule 'read_first' has a critical violation, so sequence_correctness_score must be 0.0, not 1.0"
        in correction
    )
    assert json.loads(provider.requests[1].reask[0]["content"]) == SEMANTIC_BAD
    assert result.attempts[0].error_stage == "semantic"


async def test_three_bad_replies_leave_the_trace_unscored_never_a_default() -> None:
    provider = ScriptedProvider(["no", "```json\n{}\n```", SEMANTIC_BAD])
    result = await run(provider)
    assert result.status == "unscored" and result.report is None
    assert result.rule_outcomes() == {} and result.verdict() is None
    assert len(provider.requests) == 3 and provider.remaining == 0
    assert [a.error_stage for a in result.attempts] == ["parse", "schema", "semantic"]
    assert "no valid judgement after 3 attempt(s)" in (result.reason or "")
    assert "must be 0.0" in (result.reason or "")
    assert result.fingerprint.attempts_used == 3


async def test_reask_context_holds_the_original_and_only_the_last_bad_reply() -> None:
    provider = ScriptedProvider(["bad one", "bad two", "bad three"])
    await run(provider)
    third = provider.requests[2]
    assert len(third.reask) == 2  # never grows: original prompt + last bad reply + its correction
    assert third.reask[0]["content"] == "bad two"
    assert all("bad one" not in turn["content"] for turn in third.reask)
    assert third.static_prompt == provider.requests[0].static_prompt


async def test_max_attempts_bounds_the_calls() -> None:
    provider = ScriptedProvider(["x", "y", "z", "w", VALID])
    result = await run(provider, max_attempts=4)
    assert result.status == "unscored" and len(provider.requests) == 4
    one = ScriptedProvider(["x", VALID])
    assert (await run(one, max_attempts=1)).status == "unscored" and len(one.requests) == 1
    with pytest.raises(InputError):
        await run(ScriptedProvider([VALID]), max_attempts=0)


# -------------------------------------------------------------------------------------- cut-offs, refusals


async def test_length_cutoff_is_retried_once_with_doubled_max_tokens() -> None:
    provider = ScriptedProvider([reply('{"sequence_corr', finish_reason="length"), VALID])
    result = await run(provider, max_tokens=1000)
    assert result.status == "scored"
    first, second = provider.requests
    assert (first.max_tokens, second.max_tokens) == (1000, 2000)
    assert second.reask == [] and second.dynamic_prompt == first.dynamic_prompt  # not re-asked unchanged
    assert result.attempts[0].error_stage == "length" and "max_tokens=2000" in (
        result.attempts[0].error or ""
    )


async def test_a_second_cutoff_stops_with_the_reason() -> None:
    cut = reply("{", finish_reason="length")
    provider = ScriptedProvider([cut, cut, VALID])
    result = await run(provider, max_tokens=1000)
    assert result.status == "unscored" and len(provider.requests) == 2
    assert "cut off at max_tokens=2000" in (result.reason or "") and "already doubled" in (
        result.reason or ""
    )


async def test_a_cutoff_that_may_not_grow_stops_at_once() -> None:
    provider = ScriptedProvider([reply("{", finish_reason="length"), VALID])
    result = await run(provider, max_tokens=4096, max_tokens_limit=4096)
    assert result.status == "unscored" and len(provider.requests) == 1
    assert "limit of 4096" in (result.reason or "")


async def test_cutoff_after_a_bad_reply_keeps_the_reask_and_grows_tokens() -> None:
    provider = ScriptedProvider(["bad", reply("{", finish_reason="length"), VALID])
    result = await run(provider, max_tokens=500)
    assert result.status == "scored" and len(provider.requests) == 3
    third = provider.requests[2]
    assert third.max_tokens == 1000 and third.reask == provider.requests[1].reask


async def test_a_refusal_stops_without_a_reask() -> None:
    provider = ScriptedProvider(
        [reply("", finish_reason="refusal", refusal="I cannot help with that."), VALID]
    )
    result = await run(provider)
    assert result.status == "unscored" and len(provider.requests) == 1
    assert "refused" in (result.reason or "") and "I cannot help with that." in (result.reason or "")
    assert result.attempts[0].error_stage == "refusal"


# ----------------------------------------------------------------------------------------------- errors


async def test_provider_errors_propagate_with_the_attempts_so_far() -> None:
    provider = ScriptedProvider(
        ["bad", ProviderError("rate limited", kind="rate_limit", provider="scripted")]
    )
    with pytest.raises(ProviderError) as info:
        await run(provider)
    assert info.value.kind == "rate_limit"
    assert [a.error_stage for a in info.value.attempts] == ["parse"]  # type: ignore[attr-defined]


async def test_invalid_inputs_never_reach_the_model() -> None:
    provider = ScriptedProvider([VALID])
    with pytest.raises(InputError, match="not in the catalog"):
        await run(provider, catalog={"tools": [{"name": "Refund"}]})
    with pytest.raises(InputError, match="no rules"):
        await judge_trace(TRACE, RuleSet(rules=[]), provider)
    assert provider.requests == []


async def test_rule_ids_limit_what_the_judge_is_asked_and_accepts() -> None:
    only = {
        **VALID,
        "total_rules_checked": 1,
        "rules_passed": 0,
        "rules_failed": 1,
        "violations": [VALID["violations"][1]],
    }
    provider = ScriptedProvider([VALID, only])
    result = await run(provider, rule_ids=["confirm"])
    assert "### Rule `read_first`" not in provider.requests[0].static_prompt
    assert (
        "'read_first' is not one of the given rules; use one of: confirm"
        in provider.requests[1].reask[1]["content"]
    )
    assert result.status == "scored" and result.rule_outcomes() == {"confirm": "failed"}


# ----------------------------------------------------------------------------------------------- fingerprint


async def test_fingerprint_and_usage_totals() -> None:
    provider = ScriptedProvider([reply("oops"), reply(json.dumps(VALID), latency_s=0.5)])
    result = await run(provider)
    fp = result.fingerprint
    template = (prompts_dir() / "sequence_judge.md.j2").read_bytes()
    request = provider.requests[0]
    parts = (request.system, request.static_prompt, request.dynamic_prompt)
    assert fp.provider == "scripted" and fp.model == "scripted"
    assert fp.model_version == "model-2026-01-01" and fp.system_fingerprint == "fp_1"
    assert fp.template_hash == hashlib.sha256(template).hexdigest() and fp.template_version == "2.0.0"
    assert fp.prompt_hash == hashlib.sha256("\0".join(parts).encode()).hexdigest()
    assert fp.sampling_sent == {"temperature": 0.0, "seed": 1} and fp.sampling_controlled is True
    assert fp.attempts_used == 2
    assert result.usage == Usage(input_tokens=200, output_tokens=20, cached_input_tokens=80)
    assert [a.latency_s for a in result.attempts] == [0.25, 0.5]
    assert all(a.request_hash for a in result.attempts)
    dumped = json.loads(result.model_dump_json())
    assert dumped["status"] == "scored" and dumped["attempts"][0]["raw_text"] == "oops"


# ----------------------------------------------------------------------------------------------- cache


async def test_a_cache_hit_makes_zero_calls_and_replays_every_attempt(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    first = await run(ScriptedProvider(["bad", VALID]), cache=cache)
    lines = (tmp_path / "cache" / "replies.jsonl").read_bytes().splitlines()
    assert len(lines) == 2 and all(len(line.split(b"\t", 1)[0]) == 64 for line in lines)

    again = ScriptedProvider([])  # would raise if called
    second = await run(again, cache=ResponseCache(tmp_path / "cache"))
    assert again.requests == []
    assert second.status == "scored" and second.report == first.report
    assert [(a.cached, a.latency_s, a.error_stage) for a in second.attempts] == [
        (True, 0.0, "parse"),
        (True, 0.0, None),
    ]
    assert second.usage == Usage()  # nothing spent
    assert second.fingerprint.prompt_hash == first.fingerprint.prompt_hash


async def test_cache_keys_cover_prompt_reask_and_model(tmp_path: Path) -> None:
    provider = ScriptedProvider([VALID, VALID])
    await run(provider)
    await run(provider, risk_level="high")
    a, b = provider.requests
    assert request_key(provider, a) != request_key(provider, b)
    assert request_key(provider, a) != request_key(provider, a.model_copy(update={"max_tokens": 1}))
    other = ScriptedProvider([], model="other")
    assert request_key(provider, a) != request_key(other, a)
    assert request_key(provider, a) == request_key(ScriptedProvider([]), a.model_copy())


async def test_a_corrupt_cache_file_is_a_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    provider = ScriptedProvider([VALID])
    await run(provider, cache=cache)
    path = tmp_path / "replies.jsonl"
    (line,) = path.read_bytes().splitlines()
    key = line.split(b"\t", 1)[0]
    path.write_bytes(key + b"\t{ half a li\n")  # a line whose JSON was cut short
    fresh = ScriptedProvider([VALID])
    result = await run(fresh, cache=ResponseCache(tmp_path))
    assert len(fresh.requests) == 1 and result.attempts[0].cached is False
    # The new reply was appended after the broken line, and it is what a third run reads.
    last = path.read_bytes().splitlines()[-1]
    assert json.loads(last.split(b"\t", 1)[1])["reply"]["text"] == json.dumps(VALID)
    third = ScriptedProvider([])
    assert (await run(third, cache=ResponseCache(tmp_path))).attempts[0].cached is True


async def test_a_line_cut_short_by_a_crash_is_closed_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    tmp_path.mkdir(exist_ok=True)
    path.write_bytes(b"f" * 64 + b'\t{"format": 1, "key": "ff')  # no newline: a writer died mid-line
    provider = ScriptedProvider([VALID])
    await run(provider, cache=ResponseCache(tmp_path))
    again = ScriptedProvider([])
    result = await run(again, cache=ResponseCache(tmp_path))
    assert again.requests == [] and result.attempts[0].cached is True
    assert path.read_bytes().count(b"\n") == 2  # the cut line was closed, ours stands on its own


async def test_replies_appended_by_another_process_are_found(tmp_path: Path) -> None:
    reader = ResponseCache(tmp_path)
    await run(ScriptedProvider([VALID]), cache=reader, risk_level="high")  # reader indexes the log
    await run(ScriptedProvider([VALID]), cache=ResponseCache(tmp_path))  # "another process" appends
    again = ScriptedProvider([])
    result = await run(again, cache=reader)  # the miss re-scans the new tail
    assert again.requests == [] and result.attempts[0].cached is True


async def test_without_a_cache_every_run_calls() -> None:
    provider = ScriptedProvider([VALID, VALID])
    await run(provider)
    await run(provider)
    assert len(provider.requests) == 2


async def test_an_unwritable_cache_warns_but_keeps_the_answer(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be", encoding="utf-8")
    provider = ScriptedProvider([VALID])
    with pytest.warns(UserWarning, match="could not write the response cache"):
        result = await run(provider, cache=ResponseCache(blocker))
    assert result.status == "scored" and len(provider.requests) == 1


def test_request_json_is_the_canonical_encoding_even_with_shared_large_parts() -> None:
    from seqjudge.judge.providers.base import JudgeRequest, canonical_json, request_json

    static = "é" * 5000 + '"quoted" \\ and </tags>'  # large: encoded once per run, then remembered
    for dynamic in ("first trace", "second trace\nwith lines"):
        request = JudgeRequest(
            system="s" * 3000,
            static_prompt=static,
            dynamic_prompt=dynamic,
            schema={"b": 1, "a": [1, {"z": 2, "y": "é"}]},
            schema_name="n",
            reask=[{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}],
        )
        assert request_json(request) == canonical_json(request.model_dump(mode="json"))
