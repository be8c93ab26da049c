"""Contract tests: the real ``openai`` SDK client, built by our adapter, against the loopback fake server."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from fakes.server import FakeLLMServer, FakeReply, RecordedRequest, openai_chat, openai_error
from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.providers import JudgeRequest, get_provider
from seqjudge.judge.providers.openai import DEFAULT_SEED, OpenAIProvider, is_reasoning_model

KEY = "sk-test-OPENAI-SECRET-0123456789abcdef"
SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string"},
    },
    "required": ["score", "reason"],
    "additionalProperties": False,
}
GOOD = {"score": 0.75, "reason": "search before book"}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def make_request(**changes: object) -> JudgeRequest:
    fields: dict[str, object] = {
        "system": "You are a strict judge.",
        "static_prompt": "STATIC: rules and schema",
        "dynamic_prompt": "DYNAMIC: the trace",
        "schema": SCHEMA,
        "schema_name": "judgement",
    }
    fields.update(changes)
    return JudgeRequest.model_validate(fields)


def make_provider(server: FakeLLMServer, model: str = "gpt-4o", **options: object) -> OpenAIProvider:
    provider = get_provider(
        f"openai:{model}", base_url=server.openai_base_url, strict_response_validation=True, **options
    )
    assert isinstance(provider, OpenAIProvider)
    return provider


def fast_retry() -> dict[str, str]:
    # The SDK honours Retry-After for any retried status; 10 ms keeps the retry paths quick.
    return {"retry-after": "0.01"}


async def test_valid_reply_sends_exact_body(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(GOOD, fingerprint="fp_abc123"))
    provider = make_provider(fake_llm)
    request = make_request()

    reply = await provider.complete(request)

    assert len(fake_llm.requests) == 1
    method, path, headers, body, _raw = fake_llm.requests[0]
    assert (method, path) == ("POST", "/v1/chat/completions")
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["x-stainless-retry-count"] == "0"
    assert body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are a strict judge."},
            {"role": "user", "content": "STATIC: rules and schema\n\nDYNAMIC: the trace"},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "judgement", "schema": SCHEMA, "strict": True},
        },
        "max_tokens": 4096,
        "temperature": 0.0,
        "seed": DEFAULT_SEED,
    }
    user = body["messages"][1]["content"]
    assert user.index("STATIC") < user.index("DYNAMIC")  # the cacheable prefix leads

    assert reply.parsed == GOOD
    assert reply.text == '{"score": 0.75, "reason": "search before book"}'
    assert reply.model == "gpt-4o-2024-08-06"
    assert reply.finish_reason == "stop"
    assert reply.refusal is None
    assert reply.fingerprint == "fp_abc123"
    assert reply.sampling_sent == {"temperature": 0.0, "seed": DEFAULT_SEED}
    assert reply.sampling_controlled is True
    assert reply.provider == "openai"
    assert reply.transport_retries == 0
    assert reply.latency_s > 0
    assert reply.request_hash == provider.hash_request(request, provider.build_body(request))
    assert len(reply.request_hash) == 64


async def test_usage_maps_cached_tokens(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(GOOD, prompt_tokens=2048, completion_tokens=37, cached_tokens=1536))
    reply = await make_provider(fake_llm).complete(make_request())
    assert reply.usage.input_tokens == 2048
    assert reply.usage.output_tokens == 37
    assert reply.usage.cached_input_tokens == 1536
    assert reply.usage.cache_write_tokens == 0


async def test_reask_turns_follow_the_prompt(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(GOOD))
    reask = [
        {"role": "assistant", "content": '{"score": 2}'},
        {"role": "user", "content": "score must be in [0, 1]"},
    ]
    await make_provider(fake_llm).complete(make_request(reask=reask))
    messages = fake_llm.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2:] == reask


async def test_request_seed_and_provider_options(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(GOOD), openai_chat(GOOD))
    await make_provider(fake_llm).complete(make_request(seed=7))
    reply = await make_provider(fake_llm, temperature=0.3, seed=99).complete(make_request(seed=7))
    first, second = (r.body for r in fake_llm.requests)
    assert (first["temperature"], first["seed"]) == (0.0, 7)
    assert (second["temperature"], second["seed"]) == (0.3, 99)
    assert reply.sampling_sent == {"temperature": 0.3, "seed": 99}


async def test_temperature_none_is_not_sent(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(GOOD))
    reply = await make_provider(fake_llm).complete(make_request(temperature=None))
    assert "temperature" not in fake_llm.requests[0].body
    assert reply.sampling_controlled is False


@pytest.mark.parametrize(
    "model", ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5.4-mini", "gpt-6-sol"]
)
async def test_reasoning_models_get_no_sampling(fake_llm: FakeLLMServer, model: str) -> None:
    fake_llm.enqueue(openai_chat(GOOD, model=model))
    reply = await make_provider(fake_llm, model=model, temperature=0.0, seed=3).complete(make_request(seed=5))
    body = fake_llm.requests[0].body
    assert "temperature" not in body and "seed" not in body
    assert "max_tokens" not in body and body["max_completion_tokens"] == 4096
    assert reply.sampling_sent == {}
    assert reply.sampling_controlled is False


async def test_unknown_model_on_compatible_server_gets_temperature_and_seed(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(GOOD, model="llama3.1:8b", fingerprint=None))
    provider = make_provider(fake_llm, model="llama3.1:8b")  # the Ollama name keeps its colon
    reply = await provider.complete(make_request())
    body = fake_llm.requests[0].body
    assert body["model"] == "llama3.1:8b"
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.0, DEFAULT_SEED, 4096)
    assert reply.fingerprint is None
    assert reply.sampling_controlled is True


def test_reasoning_model_detection() -> None:
    assert is_reasoning_model("o3-2025-04-16")
    assert is_reasoning_model("openai/gpt-5-mini")
    assert not is_reasoning_model("gpt-4o-mini")
    assert not is_reasoning_model("ft:gpt-4o-mini-2024-07-18:org::abc")
    assert not is_reasoning_model("qwen2.5-coder:32b")


async def test_429_with_retry_after_then_success(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_error(429, "Rate limit reached", {"retry-after": "0.1"}), openai_chat(GOOD))
    started = time.perf_counter()
    reply = await make_provider(fake_llm).complete(make_request())
    elapsed = time.perf_counter() - started
    assert len(fake_llm.requests) == 2
    assert [r.headers["x-stainless-retry-count"] for r in fake_llm.requests] == ["0", "1"]
    assert reply.parsed == GOOD
    assert reply.transport_retries == 1
    assert elapsed >= 0.1  # the SDK waited as told


async def test_500s_exhaust_sdk_retries(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(*[openai_error(500, "boom", fast_retry(), type="server_error")] * 3, openai_chat(GOOD))
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm, max_retries=2).complete(make_request())
    assert caught.value.kind == "server"
    assert caught.value.status_code == 500
    assert caught.value.provider == "openai"
    assert len(fake_llm.requests) == 3  # 1 + 2 SDK retries, never multiplied
    assert [r.headers["x-stainless-retry-count"] for r in fake_llm.requests] == ["0", "1", "2"]
    assert "HTTP 500" in str(caught.value) and "boom" in str(caught.value)
    assert fake_llm.pending == 1  # the success was never fetched


async def test_max_retries_zero_makes_one_call(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_error(503, "unavailable", fast_retry()), openai_chat(GOOD))
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm, max_retries=0).complete(make_request())
    assert caught.value.kind == "server"
    assert len(fake_llm.requests) == 1


async def test_401_is_auth_after_one_call_without_the_key(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_error(401, f"Incorrect API key provided: {KEY}", type="invalid_api_key"))
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm).complete(make_request())
    error = caught.value
    assert error.kind == "auth" and error.status_code == 401
    assert len(fake_llm.requests) == 1
    assert "OPENAI_API_KEY" in str(error)
    assert KEY not in str(error) and KEY not in repr(error)


async def test_429_insufficient_quota_says_billing(fake_llm: FakeLLMServer) -> None:
    reply = openai_error(429, "You exceeded your current quota", fast_retry(), code="insufficient_quota")
    fake_llm.enqueue(reply, reply, reply)
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm).complete(make_request())
    assert caught.value.kind == "rate_limit"
    assert "billing" in str(caught.value)


async def test_connection_refused_is_connection_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = get_provider("openai:gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(make_request())
    assert caught.value.kind == "connection"
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert "base_url" in str(caught.value)


async def test_slow_server_is_timeout(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(GOOD, delay=1.0))
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm, timeout=0.2, max_retries=0).complete(make_request())
    assert caught.value.kind == "timeout"
    assert len(fake_llm.requests) == 1


async def test_dropped_connection_is_retried_by_the_sdk(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(FakeReply(drop=True), openai_chat(GOOD))
    reply = await make_provider(fake_llm).complete(make_request())
    assert reply.parsed == GOOD
    assert len(fake_llm.requests) == 2


async def test_missing_v1_in_base_url_says_so(fake_llm: FakeLLMServer) -> None:
    provider = get_provider("openai:gpt-4o", base_url=fake_llm.base_url)  # no /v1
    with pytest.raises(ProviderError) as caught:
        await provider.complete(make_request())
    assert caught.value.kind == "bad_request" and caught.value.status_code == 404
    assert "/v1" in str(caught.value)
    assert len(fake_llm.requests) == 1


async def test_unreadable_body_is_server_error(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(FakeReply(200, {"id": "x", "object": "chat.completion"}))  # no choices, no model
    with pytest.raises(ProviderError) as caught:
        await make_provider(fake_llm).complete(make_request())
    assert caught.value.kind == "server"
    assert "compatible" in str(caught.value)


async def test_length_cutoff_is_a_reply(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat('{"score": 0.7, "reas', finish_reason="length", completion_tokens=4096))
    reply = await make_provider(fake_llm).complete(make_request())
    assert reply.finish_reason == "length"
    assert reply.text == '{"score": 0.7, "reas'
    assert reply.parsed is None
    assert len(fake_llm.requests) == 1


async def test_refusal_is_a_reply(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(None, refusal="I can't help with that."))
    reply = await make_provider(fake_llm).complete(make_request())
    assert reply.finish_reason == "refusal"
    assert reply.refusal == "I can't help with that."
    assert reply.text == "" and reply.parsed is None


async def test_content_filter_is_a_refusal(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat(None, finish_reason="content_filter"))
    reply = await make_provider(fake_llm).complete(make_request())
    assert reply.finish_reason == "refusal"
    assert reply.refusal


async def test_fenced_json_from_a_compatible_server_is_parsed(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat('```json\n{"score": 1.0, "reason": "ok"}\n```'))
    reply = await make_provider(fake_llm, model="mistral").complete(make_request())
    assert reply.parsed == {"score": 1.0, "reason": "ok"}
    assert reply.text.startswith("```json")  # the raw text is kept as it came


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ProviderError) as caught:
        get_provider("openai:gpt-4o")
    assert caught.value.kind == "config"
    assert "OPENAI_API_KEY" in str(caught.value)
    monkeypatch.delenv("JUDGE_KEY", raising=False)
    with pytest.raises(ProviderError, match="JUDGE_KEY"):
        get_provider("openai:gpt-4o", api_key_env="JUDGE_KEY")


async def test_api_key_env_option_is_used(fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-other-key-000000")
    fake_llm.enqueue(openai_chat(GOOD))
    await make_provider(fake_llm, api_key_env="JUDGE_KEY").complete(make_request())
    assert fake_llm.requests[0].headers["authorization"] == "Bearer sk-other-key-000000"


@pytest.mark.parametrize(
    "reply",
    [
        openai_error(401, f"Incorrect API key provided: {KEY}"),
        openai_error(400, f"bad request from key {KEY}"),
        openai_error(403, f"key {KEY[:12]}...{KEY[-4:]} lacks access"),
        openai_error(500, f"internal error for {KEY}", fast_retry()),
    ],
    ids=["401", "400", "403-masked", "500"],
)
async def test_api_key_never_in_error_text(fake_llm: FakeLLMServer, reply: FakeReply) -> None:
    fake_llm.enqueue(reply, reply, reply)
    provider = make_provider(fake_llm)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(make_request())
    error = caught.value
    texts = [str(error), repr(error), *map(str, error.args), repr(provider)]
    for text in texts:
        assert KEY not in text
        assert KEY[:12] not in text  # not even the masked prefix the provider echoed
    # No chain back to the SDK exception (whose message and request carry the key).
    assert error.__cause__ is None and error.__context__ is None


def test_one_client_per_event_loop(fake_llm: FakeLLMServer) -> None:
    # The CLI may call asyncio.run() more than once with the same provider; pooled connections from a
    # closed loop must not be reused.
    fake_llm.enqueue(openai_chat(GOOD), openai_chat(GOOD))
    provider = make_provider(fake_llm)
    first = asyncio.run(provider.complete(make_request()))
    second = asyncio.run(provider.complete(make_request()))
    assert first.parsed == second.parsed == GOOD
    assert len(fake_llm.requests) == 2


@pytest.mark.parametrize(
    "options", [{"timeout": 0}, {"timeout": "soon"}, {"max_retries": -1}, {"deadline": 0}]
)
def test_invalid_transport_options_are_input_errors(options: dict[str, object]) -> None:
    with pytest.raises(InputError, match="timeout and deadline"):
        get_provider("openai:gpt-4o", **options)


def test_anthropic_only_option_is_rejected() -> None:
    with pytest.raises(InputError, match="output_mode"):
        get_provider("openai:gpt-4o", output_mode="tool")


async def test_responder_answers_dynamically() -> None:
    # The hook later used for batch endpoints and throughput runs: a function of the recorded request.
    def responder(request: RecordedRequest) -> FakeReply | None:
        if request.path == "/v1/chat/completions":
            trace = request.body["messages"][1]["content"].rsplit("\n\n", 1)[-1]
            return openai_chat({"score": 1.0, "reason": trace})
        return None

    with FakeLLMServer(responder=responder) as server:
        provider = make_provider(server)
        one = await provider.complete(make_request(dynamic_prompt="trace one"))
        two = await provider.complete(make_request(dynamic_prompt="trace two"))
    assert (one.parsed or {})["reason"] == "trace one"
    assert (two.parsed or {})["reason"] == "trace two"
    assert server.pending == 0 and len(server.requests) == 2
