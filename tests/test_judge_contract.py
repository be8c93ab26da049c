"""Contract tests: the whole judge harness with the REAL openai and anthropic SDK clients, built by our
adapters, against the loopback fake server. Each test asserts the exact number of HTTP calls, what a
re-ask carried, and the attempts the result recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fakes.server import (
    FakeLLMServer,
    FakeReply,
    anthropic_error,
    anthropic_message,
    openai_chat,
    openai_error,
)
from seqjudge.errors import ProviderError
from seqjudge.judge.judge import JudgeResult, judge_trace
from seqjudge.judge.prompt import render
from seqjudge.judge.providers import get_provider
from seqjudge.judge.schema import json_schema
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

RULES = RuleSet.model_validate(
    {
        "rules": [
            {"id": "verify_first", "type": "before", "first": "VerifyIdentity", "then": "DeleteCustomer"},
            {"id": "one_email", "type": "max_calls", "tool": "SendEmail", "max": 1, "severity": "warning"},
        ]
    }
)
TRACE = Trace.model_validate(
    {
        "trace_id": "contract-1",
        "calls": [
            {"tool_name": "DeleteCustomer", "arguments": {"id": "C-5"}},
            {"tool_name": "VerifyIdentity", "arguments": {"id": "C-5"}},
            {"tool_name": "SendEmail", "arguments": {"to": "c5@example.com"}},
        ],
    }
)
VALID: dict[str, Any] = {
    "sequence_correctness_score": 0.0,
    "total_rules_checked": 2,
    "rules_passed": 1,
    "rules_failed": 1,
    "violations": [
        {
            "rule_id": "verify_first",
            "rule_description": "VerifyIdentity must succeed before DeleteCustomer is called",
            "violation_type": "out_of_order",
            "expected_order": "VerifyIdentity, then DeleteCustomer",
            "actual_order": "DeleteCustomer (call 0), then VerifyIdentity (call 1)",
            "offending_call_index": 0,
            "severity": "critical",
            "explanation": "The customer was deleted before their identity was verified.",
        }
    ],
    "missing_prerequisites": [],
    "summary": "verify_first failed; one_email passed.",
}


def with_violation(**changes: Any) -> dict[str, Any]:
    return {**VALID, "violations": [{**VALID["violations"][0], **changes}]}


SEMANTICALLY_WRONG = {
    "critical_but_perfect": (
        {**VALID, "sequence_correctness_score": 1.0},
        "rule 'verify_first' has a critical violation, so sequence_correctness_score must be 0.0, not 1.0",
    ),
    "unknown_rule": (
        with_violation(rule_id="verify_before_delete"),
        "violations[0].rule_id 'verify_before_delete' is not one of the given rules; "
        "use one of: verify_first, one_email",
    ),
    "index_out_of_range": (
        with_violation(offending_call_index=7),
        "violations[0].offending_call_index is 7, but the trace has indices 0 to 2",
    ),
}


@dataclass
class Wire:
    """One provider's side of the wire: how the fake answers and where a re-ask shows up in a request."""

    name: str
    model: str
    key_env: str
    path: str
    ok: Callable[..., FakeReply]
    cut: Callable[[str], FakeReply]
    refusal: Callable[[str], FakeReply]
    error: Callable[[int, str, dict[str, str]], FakeReply]
    base_url: Callable[[FakeLLMServer], str]
    # messages after the original prompt
    reask: Callable[[dict[str, Any]], list[dict[str, Any]]]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


OPENAI = Wire(
    name="openai",
    model="gpt-4o",
    key_env="OPENAI_API_KEY",
    path="/v1/chat/completions",
    ok=lambda content, **kw: openai_chat(content, **kw),
    cut=lambda text: openai_chat(text, finish_reason="length"),
    refusal=lambda why: openai_chat(None, refusal=why),
    error=lambda status, message, headers: openai_error(
        status, message, headers, type="rate_limit_error" if status == 429 else "server_error"
    ),
    base_url=lambda server: server.openai_base_url,
    reask=lambda body: [{"role": m["role"], "content": _text(m["content"])} for m in body["messages"][2:]],
)
ANTHROPIC = Wire(
    name="anthropic",
    model="claude-sonnet-5-5",
    key_env="ANTHROPIC_API_KEY",
    path="/v1/messages",
    ok=lambda content, **kw: anthropic_message(content, **kw),
    cut=lambda text: anthropic_message(text, stop_reason="max_tokens"),
    refusal=lambda why: anthropic_message(None, stop_reason="refusal", refusal_explanation=why),
    error=lambda status, message, headers: anthropic_error(
        status, "rate_limit_error" if status == 429 else "api_error", message, headers
    ),
    base_url=lambda server: server.anthropic_base_url,
    reask=lambda body: [{"role": m["role"], "content": _text(m["content"])} for m in body["messages"][1:]],
)
WIRES = [pytest.param(OPENAI, id="openai"), pytest.param(ANTHROPIC, id="anthropic")]
FAST_RETRY = {"retry-after": "0.01"}


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-contract-0000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-contract-0000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


async def judge(wire: Wire, server: FakeLLMServer, **options: Any) -> JudgeResult:
    provider = get_provider(
        f"{wire.name}:{wire.model}", base_url=wire.base_url(server), strict_response_validation=True
    )
    try:
        return await judge_trace(TRACE, RULES, provider, **options)
    finally:
        await provider.aclose()  # type: ignore[attr-defined]


def bodies(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests]


# ----------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("wire", WIRES)
async def test_valid_reply(wire: Wire, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(wire.ok(VALID))
    result = await judge(wire, fake_llm)
    assert len(fake_llm.requests) == 1 and fake_llm.paths() == [wire.path]
    assert result.status == "scored" and result.report is not None
    assert result.rule_outcomes() == {"verify_first": "failed", "one_email": "passed"}
    assert [(a.n, a.error, a.finish_reason, a.cached) for a in result.attempts] == [(1, None, "stop", False)]
    assert result.attempts[0].usage.output_tokens == 20 and result.usage.input_tokens >= 100
    body = fake_llm.requests[0].body
    assert wire.reask(body) == []
    if wire is OPENAI:
        assert body["response_format"]["json_schema"] == {
            "name": "sequence_judge_report",
            "schema": json_schema(),
            "strict": True,
        }
        assert body["temperature"] == 0.0 and "seed" in body
        assert result.fingerprint.system_fingerprint == "fp_test" and result.fingerprint.sampling_controlled
        rendered = render(TRACE, RULES)
        assert body["messages"] == [
            {"role": "system", "content": rendered.system},
            {"role": "user", "content": rendered.user},  # exactly what `seqjudge prompt` prints
        ]
    else:
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert "# OUTPUT SCHEMA" in body["system"][-1]["text"]
        assert _text(body["messages"][0]["content"]).startswith("# AGENT TRACE")
        assert "temperature" not in body and result.fingerprint.sampling_controlled is False
    assert result.fingerprint.model_version and result.fingerprint.attempts_used == 1


@pytest.mark.parametrize("wire", WIRES)
async def test_malformed_json_then_valid(wire: Wire, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(wire.ok('{"sequence_correctness_score": 0.0, "total_rules'), wire.ok(VALID))
    result = await judge(wire, fake_llm)
    assert len(fake_llm.requests) == 2 and result.status == "scored"
    first, second = bodies(fake_llm)
    reask = wire.reask(second)
    assert [t["role"] for t in reask] == ["assistant", "user"]
    assert reask[0]["content"] == '{"sequence_correctness_score": 0.0, "total_rules'
    assert reask[1]["content"].startswith("Your previous reply (above) was not accepted.")
    assert "the reply is not valid JSON" in reask[1]["content"]
    assert wire.reask(first) == []
    assert [(a.error_stage, a.reasked) for a in result.attempts] == [("parse", False), (None, True)]


@pytest.mark.parametrize("case", sorted(SEMANTICALLY_WRONG))
@pytest.mark.parametrize("wire", WIRES)
async def test_schema_valid_but_semantically_wrong_then_valid(
    wire: Wire, case: str, fake_llm: FakeLLMServer
) -> None:
    wrong, problem = SEMANTICALLY_WRONG[case]
    fake_llm.enqueue(wire.ok(wrong), wire.ok(VALID))
    result = await judge(wire, fake_llm)
    assert len(fake_llm.requests) == 2 and result.status == "scored"
    reask = wire.reask(bodies(fake_llm)[1])
    assert json.loads(reask[0]["content"]) == wrong
    assert f"- {problem}\n" in reask[1]["content"]
    assert result.attempts[0].error_stage == "semantic" and problem in (result.attempts[0].error or "")
    assert result.report is not None and result.report.model_dump(exclude_unset=True) == VALID


@pytest.mark.parametrize("wire", WIRES)
async def test_three_bad_replies_give_unscored(wire: Wire, fake_llm: FakeLLMServer) -> None:
    wrong = SEMANTICALLY_WRONG["critical_but_perfect"][0]
    fake_llm.enqueue(wire.ok("I think it is fine."), wire.ok({"score": 1}), wire.ok(wrong), wire.ok(VALID))
    result = await judge(wire, fake_llm)
    assert len(fake_llm.requests) == 3 and fake_llm.pending == 1
    assert result.status == "unscored" and result.report is None and result.rule_outcomes() == {}
    assert [a.error_stage for a in result.attempts] == ["parse", "schema", "semantic"]
    third = wire.reask(bodies(fake_llm)[2])
    assert len(third) == 2 and json.loads(third[0]["content"]) == {"score": 1}  # only the last bad reply
    assert "sequence_correctness_score is missing" in third[1]["content"]


@pytest.mark.parametrize("wire", WIRES)
async def test_429_with_retry_after_then_success(wire: Wire, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(wire.error(429, "slow down", FAST_RETRY), wire.ok(VALID))
    result = await judge(wire, fake_llm)
    assert len(fake_llm.requests) == 2  # one SDK retry, no judge re-ask
    assert [r.headers["x-stainless-retry-count"] for r in fake_llm.requests] == ["0", "1"]
    assert fake_llm.requests[0].body == fake_llm.requests[1].body
    assert result.status == "scored" and len(result.attempts) == 1 and not result.attempts[0].reasked


@pytest.mark.parametrize("wire", WIRES)
async def test_500s_are_retried_by_the_sdk_only(wire: Wire, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(wire.error(500, "boom", FAST_RETRY), wire.error(500, "boom", FAST_RETRY), wire.ok(VALID))
    result = await judge(wire, fake_llm)
    assert len(fake_llm.requests) == 3 and result.status == "scored" and len(result.attempts) == 1


@pytest.mark.parametrize("wire", WIRES)
async def test_persistent_500s_raise_a_provider_error_without_multiplying_calls(
    wire: Wire, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(*[wire.error(500, "boom", FAST_RETRY) for _ in range(5)])
    with pytest.raises(ProviderError) as info:
        await judge(wire, fake_llm)
    assert len(fake_llm.requests) == 3  # the SDK's 1 + 2 retries, never 3 x 3
    assert info.value.kind == "server" and info.value.exit_code == 3
    assert info.value.attempts == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("wire", WIRES)
async def test_length_cutoff_is_retried_once_with_more_tokens(wire: Wire, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(wire.cut('{"sequence_correctness_score": 0.0, "total_ru'), wire.ok(VALID))
    result = await judge(wire, fake_llm, max_tokens=2048)
    assert len(fake_llm.requests) == 2 and result.status == "scored"
    first, second = bodies(fake_llm)
    assert (first["max_tokens"], second["max_tokens"]) == (2048, 4096)
    assert wire.reask(second) == []  # the same prompt, not a re-ask of a truncated reply
    assert [(a.finish_reason, a.error_stage, a.max_tokens) for a in result.attempts] == [
        ("length", "length", 2048),
        ("stop", None, 4096),
    ]


@pytest.mark.parametrize("wire", WIRES)
async def test_a_second_cutoff_ends_unscored(wire: Wire, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(wire.cut("{"), wire.cut("{"), wire.ok(VALID))
    result = await judge(wire, fake_llm, max_tokens=2048)
    assert len(fake_llm.requests) == 2 and result.status == "unscored"
    assert "cut off at max_tokens=4096" in (result.reason or "")


@pytest.mark.parametrize("wire", WIRES)
async def test_refusal_is_not_reasked(wire: Wire, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(wire.refusal("I can't help with that request."), wire.ok(VALID))
    result = await judge(wire, fake_llm)
    assert len(fake_llm.requests) == 1 and fake_llm.pending == 1
    assert result.status == "unscored" and "refused" in (result.reason or "")
    assert "I can't help with that request." in (result.reason or "")
    assert [(a.finish_reason, a.error_stage) for a in result.attempts] == [("refusal", "refusal")]
