"""Contract tests: the real ``anthropic`` SDK client, built by our adapter, against the loopback fake."""

from __future__ import annotations

import copy
import socket
import time

import pytest

from fakes.server import FakeLLMServer, FakeReply, anthropic_error, anthropic_message
from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.providers import JudgeRequest, get_provider
from seqjudge.judge.providers.anthropic import AnthropicProvider

KEY = "sk-ant-api03-ANTHROPIC-SECRET-0123456789"
MODEL = "claude-opus-4-7"  # a current id: deprecated ones make the SDK warn
SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string"},
    },
    "required": ["score", "reason"],
    "additionalProperties": False,
}
GOOD = {"score": 0.5, "reason": "refund before lookup"}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    for var in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_CUSTOM_HEADERS"):
        monkeypatch.delenv(var, raising=False)


def make_request(**changes: object) -> JudgeRequest:
    fields: dict[str, object] = {
        "system": "You are a strict judge.",
        "static_prompt": "STATIC: rules and schema",
        "dynamic_prompt": "DYNAMIC: the trace",
        "schema": copy.deepcopy(SCHEMA),
        "schema_name": "judgement",
    }
    fields.update(changes)
    return JudgeRequest.model_validate(fields)


def make_provider(server: FakeLLMServer, **options: object) -> AnthropicProvider:
    provider = get_provider(
        f"anthropic:{MODEL}", base_url=server.anthropic_base_url, strict_response_validation=True, **options
    )
    assert isinstance(provider, AnthropicProvider)
    return provider


def fast_retry() -> dict[str, str]:
    return {"retry-after": "0.01"}


SYSTEM_BLOCKS = [
    {"type": "text", "text": "You are a strict judge."},
    {"type": "text", "text": "STATIC: rules and schema", "cache_control": {"type": "ephemeral"}},
]
USER_TURN = {"role": "user", "content": [{"type": "text", "text": "DYNAMIC: the trace"}]}


async def test_valid_reply_sends_exact_body(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(anthropic_message(GOOD, model="claude-opus-4-7-20260101"))
    provider = make_provider(fake_llm)
    request = make_request()

    reply = await provider.complete(request)

    assert len(fake_llm.requests) == 1
    method, path, headers, body, _raw = fake_llm.requests[0]
    assert (method, path) == ("POST", "/v1/messages")
    assert headers["authorization"] == f"Bearer {KEY}" or headers.get("x-api-key") == KEY
    assert "anthropic-version" in headers
    assert body == {
        "model": MODEL,
        "max_tokens": 4096,
        "system": SYSTEM_BLOCKS,
        "messages": [USER_TURN],
        "output_config": {
            "format": {
                "type": "json_schema",
                # The SDK's transform: bounds the API does not enforce move into the description.
                "schema": {
                    "type": "object",
                    "properties": {
                        "score": {"type": "number", "description": "{minimum: 0, maximum: 1}"},
                        "reason": {"type": "string"},
                    },
                    "additionalProperties": False,
                    "required": ["score", "reason"],
                },
            }
        },
    }
    assert not {"temperature", "top_p", "top_k", "tools", "tool_choice"} & set(body)
    assert request.schema == SCHEMA  # the transform did not touch the caller's schema

    assert reply.parsed == GOOD
    assert reply.text == '{"score": 0.5, "reason": "refund before lookup"}'
    assert reply.model == "claude-opus-4-7-20260101"
    assert reply.finish_reason == "stop"
    assert reply.refusal is None
    assert reply.fingerprint is None
    assert reply.sampling_sent == {}
    assert reply.sampling_controlled is False
    assert reply.output_mode == "json_schema"
    assert reply.provider == "anthropic"
    assert reply.request_hash == provider.hash_request(request, provider.build_body(request))


async def test_sampling_options_are_accepted_but_never_sent(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(anthropic_message(GOOD))
    reply = await make_provider(fake_llm, temperature=0.0, seed=3).complete(make_request(seed=3))
    assert not {"temperature", "top_p", "top_k", "seed"} & set(fake_llm.requests[0].body)
    assert reply.sampling_controlled is False


async def test_usage_maps_cache_reads_and_writes(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        anthropic_message(GOOD, input_tokens=40, output_tokens=25, cache_write=3000),
        anthropic_message(GOOD, input_tokens=45, output_tokens=22, cache_read=3000),
    )
    provider = make_provider(fake_llm)
    first = await provider.complete(make_request())
    second = await provider.complete(make_request(dynamic_prompt="DYNAMIC: another trace"))
    assert first.usage.model_dump() == {
        "input_tokens": 3040,
        "output_tokens": 25,
        "cached_input_tokens": 0,
        "cache_write_tokens": 3000,
    }
    assert second.usage.model_dump() == {
        "input_tokens": 3045,
        "output_tokens": 22,
        "cached_input_tokens": 3000,
        "cache_write_tokens": 0,
    }
    # The cached prefix is byte-identical between the two traces; only the last user block differs.
    one, two = (r.body for r in fake_llm.requests)
    assert one["system"] == two["system"] == SYSTEM_BLOCKS
    assert one["messages"] != two["messages"]


async def test_reask_turns_follow_the_trace(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(anthropic_message(GOOD))
    reask = [
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "the reply was empty; answer with the JSON object"},
    ]
    await make_provider(fake_llm).complete(make_request(reask=reask))
    messages = fake_llm.requests[0].body["messages"]
    assert messages[0] == USER_TURN
    assert messages[1] == {"role": "assistant", "content": "(empty reply)"}  # the API rejects empty turns
    assert messages[2] == reask[1]


async def test_429_with_retry_after_then_success(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        anthropic_error(429, "rate_limit_error", "Number of requests exceeded", {"retry-after": "0.1"}),
        anthropic_message(GOOD),
    )
    started = time.perf_counter()
    reply = await make_provider(fake_llm).complete(make_request())
    assert time.perf_counter() - started >= 0.1
    assert len(fake_llm.requests) == 2
    assert [r.headers["x-stainless-retry-count"] for r in fake_llm.requests] == ["0", "1"]
    assert reply.transport_retries == 1
    assert reply.parsed == GOOD


async def test_overloaded_529_exhausts_sdk_retries(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(*[anthropic_error(529, "overloaded_error", "Overloaded", fast_retry())] * 3)
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm, max_retries=2).complete(make_request())
    assert caught.value.kind == "server" and caught.value.status_code == 529
    assert "overloaded" in str(caught.value)
    assert len(fake_llm.requests) == 3


async def test_500s_exhaust_sdk_retries(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(*[anthropic_error(500, "api_error", "Internal error", fast_retry())] * 3)
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm).complete(make_request())
    assert caught.value.kind == "server"
    assert len(fake_llm.requests) == 3


async def test_401_is_auth_after_one_call_without_the_key(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(anthropic_error(401, "authentication_error", f"invalid x-api-key {KEY}"))
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm).complete(make_request())
    error = caught.value
    assert error.kind == "auth" and error.status_code == 401
    assert len(fake_llm.requests) == 1
    assert "ANTHROPIC_API_KEY" in str(error)
    for text in (str(error), repr(error), *map(str, error.args)):
        assert KEY not in text
    assert error.__cause__ is None and error.__context__ is None


async def test_connection_refused_is_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = get_provider(f"anthropic:{MODEL}", base_url=f"http://127.0.0.1:{port}", max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(make_request())
    assert caught.value.kind == "connection"
    assert f"127.0.0.1:{port}" in str(caught.value)


async def test_long_retry_after_is_cut_by_the_deadline(fake_llm: FakeLLMServer) -> None:
    # Anthropic's SDK sleeps for any Retry-After it is given; the deadline keeps one call from stalling a run.
    fake_llm.enqueue(anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": "30"}))
    started = time.perf_counter()
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm, deadline=0.3).complete(make_request())
    assert time.perf_counter() - started < 5
    assert caught.value.kind == "timeout"
    assert "deadline" in str(caught.value)
    assert len(fake_llm.requests) == 1


async def test_max_tokens_cutoff_is_a_reply(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(anthropic_message('{"score": 0.5, "rea', stop_reason="max_tokens"))
    reply = await make_provider(fake_llm).complete(make_request())
    assert reply.finish_reason == "length"
    assert reply.parsed is None
    assert len(fake_llm.requests) == 1


async def test_refusal_is_a_reply(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        anthropic_message("", stop_reason="refusal", refusal_explanation="policy: general harms")
    )
    reply = await make_provider(fake_llm).complete(make_request())
    assert reply.finish_reason == "refusal"
    assert reply.refusal == "policy: general harms"
    assert reply.parsed is None


async def test_tool_use_fallback_when_native_output_is_rejected(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        anthropic_error(400, "invalid_request_error", "output_config.format: Extra inputs are not permitted"),
        anthropic_message(tool_input=GOOD, tool_name="judgement"),
        anthropic_message(tool_input=GOOD, tool_name="judgement"),
    )
    provider = make_provider(fake_llm)
    reply = await provider.complete(make_request())

    assert len(fake_llm.requests) == 2
    native, fallback = (r.body for r in fake_llm.requests)
    assert "output_config" in native and "tools" not in native
    assert "output_config" not in fallback
    assert fallback["tools"] == [
        {
            "name": "judgement",
            "description": fallback["tools"][0]["description"],
            "input_schema": SCHEMA,  # the full schema, bounds included
        }
    ]
    assert fallback["tool_choice"] == {"type": "tool", "name": "judgement"}
    assert fallback["system"] == SYSTEM_BLOCKS and fallback["messages"] == [USER_TURN]
    assert reply.parsed == GOOD
    assert reply.finish_reason == "stop"  # the forced tool call is the answer
    assert reply.output_mode == "tool"
    assert reply.request_hash == provider.hash_request(make_request(), fallback)

    # The provider remembers: the next call goes straight to tool use.
    await provider.complete(make_request())
    assert len(fake_llm.requests) == 3
    assert "tools" in fake_llm.requests[2].body


async def test_forced_tool_mode_and_other_tool_names(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        anthropic_message(tool_input=GOOD, tool_name="judgement"),
        anthropic_message(tool_input={"x": 1}, tool_name="something_else"),
    )
    provider = make_provider(fake_llm, output_mode="tool")
    assert (await provider.complete(make_request())).parsed == GOOD
    assert "tools" in fake_llm.requests[0].body and "output_config" not in fake_llm.requests[0].body
    stray = await provider.complete(make_request())
    assert stray.parsed is None and stray.finish_reason == "tool_use"


async def test_no_fallback_when_native_mode_is_forced(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        anthropic_error(400, "invalid_request_error", "output_config: not supported for this model")
    )
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm, output_mode="json_schema").complete(make_request())
    assert caught.value.kind == "bad_request" and caught.value.status_code == 400
    assert len(fake_llm.requests) == 1


async def test_unrelated_400_does_not_fall_back(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(anthropic_error(400, "invalid_request_error", "prompt is too long: 250000 tokens"))
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm).complete(make_request())
    assert caught.value.kind == "bad_request"
    assert "prompt is too long" in str(caught.value)
    assert len(fake_llm.requests) == 1


def test_invalid_output_mode_is_input_error() -> None:
    with pytest.raises(InputError, match="output_mode"):
        get_provider(f"anthropic:{MODEL}", output_mode="xml")


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ProviderError) as caught:
        get_provider("anthropic:claude-sonnet-5-5")
    assert caught.value.kind == "config"
    assert "ANTHROPIC_API_KEY" in str(caught.value)


@pytest.mark.parametrize(
    "reply",
    [
        anthropic_error(401, "authentication_error", f"invalid x-api-key: {KEY}"),
        anthropic_error(403, "permission_error", f"key {KEY[:14]}... may not use this model"),
        anthropic_error(400, "invalid_request_error", f"bad request (key {KEY})"),
        anthropic_error(529, "overloaded_error", f"overloaded for {KEY}", {"retry-after": "0.01"}),
    ],
    ids=["401", "403-masked", "400", "529"],
)
async def test_api_key_never_in_error_text(fake_llm: FakeLLMServer, reply: FakeReply) -> None:
    fake_llm.enqueue(reply, reply, reply)
    provider = make_provider(fake_llm)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(make_request())
    error = caught.value
    for text in (str(error), repr(error), *map(str, error.args), repr(provider)):
        assert KEY not in text and KEY[:14] not in text
    assert error.__cause__ is None and error.__context__ is None
