"""What goes on the wire, and what it costs: the body is encoded once (the bytes sent are the bytes the
request hash covers), large parts of it are encoded once per run, and the SDK's aiohttp transport is used
and closed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes.server import FakeLLMServer, openai_chat
from seqjudge.errors import ProviderError
from seqjudge.judge.providers import JudgeRequest, get_provider
from seqjudge.judge.providers import base as provider_base
from seqjudge.judge.providers.base import canonical_json, canonical_json_shared
from seqjudge.judge.providers.openai import OpenAIProvider

KEY = "sk-test-OPENAI-SECRET-0123456789abcdef"
SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def request(static: str = "STATIC " * 500, dynamic: str = "the trace") -> JudgeRequest:
    return JudgeRequest.model_validate(
        {
            "system": "You are a strict judge.",
            "static_prompt": static,
            "dynamic_prompt": dynamic,
            "schema": SCHEMA,
            "schema_name": "judgement",
        }
    )


PIECES = st.text(
    alphabet=st.sampled_from(["a", "é", '"', "\\", "\n", "\x01", "😀", " ", "\u2028"]), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(prefix=PIECES, rest=PIECES, repeat=st.integers(min_value=1, max_value=200))
def test_shared_encoding_is_canonical_json(prefix: str, rest: str, repeat: int) -> None:
    # A large string, then one that extends it: the second reuses the first's encoding.
    base = (prefix or "x") * (provider_base._LARGE // max(len(prefix), 1) + repeat)
    first = {"messages": [{"role": "user", "content": base}], "n": 1.5, "t": (1, None, True)}
    second = {"messages": [{"role": "user", "content": base + rest}], "z": {"b": 1, "a": [base]}}
    assert canonical_json_shared(first) == canonical_json(first)
    assert canonical_json_shared(second) == canonical_json(second)


def test_non_string_keys_fall_back() -> None:
    assert (
        canonical_json_shared({2: "a", 1: ["b"]})
        == canonical_json({2: "a", 1: ["b"]})
        == '{"1":["b"],"2":"a"}'
    )


async def test_the_bytes_sent_are_the_bytes_hashed(fake_llm: FakeLLMServer) -> None:
    provider = get_provider("openai:gpt-4o", base_url=fake_llm.openai_base_url)
    assert isinstance(provider, OpenAIProvider)
    fake_llm.enqueue(openai_chat({"score": 1}))
    req = request()
    reply = await provider.complete(req)
    await provider.aclose()
    body = provider.build_body(req)
    sent = fake_llm.requests[-1]
    assert sent.raw == canonical_json(body).encode("utf-8")
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == body
    url = fake_llm.openai_base_url.rstrip("/") + "/chat/completions"
    assert reply.request_hash == req.request_hash("openai", "gpt-4o", {"url": url, "body": body})
    assert reply.request_hash == provider.hash_request(req, body)


async def test_the_sdks_aiohttp_transport_is_used_and_closed(fake_llm: FakeLLMServer) -> None:
    import openai

    provider = get_provider("openai:gpt-4o", base_url=fake_llm.openai_base_url)
    fake_llm.enqueue(openai_chat({"score": 1}))
    await provider.complete(request())
    client = provider.sdk_client()  # type: ignore[attr-defined]
    assert isinstance(client._client, openai.DefaultAioHttpClient)  # the SDK's own aiohttp client class
    await provider.aclose()
    assert client._client.is_closed


async def test_async_with_closes_the_transport(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat({"score": 1}))
    openai_provider = get_provider("openai:gpt-4o", base_url=fake_llm.openai_base_url)
    assert isinstance(openai_provider, OpenAIProvider)
    async with openai_provider as provider:
        assert provider is openai_provider
        reply = await provider.complete(request())
        client = provider.sdk_client()
        assert not client._client.is_closed
    assert reply.text and json.loads(reply.text) == {"score": 1}
    assert client._client.is_closed


async def test_a_refused_connection_is_not_called_a_timeout() -> None:
    # The aiohttp transport reports a refused connection as a connect timeout; the cause chain says better.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = get_provider("openai:gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    await provider.aclose()
    assert caught.value.kind == "connection"
    assert "could not connect" in str(caught.value)


async def test_a_slow_server_is_still_a_timeout(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(openai_chat({"score": 1}, delay=1.0))
    provider = get_provider("openai:gpt-4o", base_url=fake_llm.openai_base_url, timeout=0.2, max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    await provider.aclose()
    assert caught.value.kind == "timeout"


def test_json_of_a_body_is_valid_json() -> None:
    body = OpenAIProvider("gpt-4o").build_body(request(dynamic='quote " and \\ and \n'))
    assert json.loads(canonical_json_shared(body)) == body


async def test_anthropic_sends_the_bytes_it_hashes(
    fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakes.server import anthropic_message

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    provider = get_provider("anthropic:claude-sonnet-4-5", base_url=fake_llm.base_url)
    fake_llm.enqueue(anthropic_message({"score": 1}))
    req = request()
    reply = await provider.complete(req)
    await provider.aclose()
    body = provider.build_body(req)  # type: ignore[attr-defined]
    sent = fake_llm.requests[-1]
    assert sent.path == "/v1/messages"
    assert sent.raw == canonical_json(body).encode("utf-8")
    assert sent.headers["content-type"] == "application/json"
    assert reply.parsed == {"score": 1}
    url = fake_llm.base_url.rstrip("/") + "/v1/messages"
    assert reply.request_hash == req.request_hash(
        "anthropic", "claude-sonnet-4-5", {"url": url, "body": body}
    )
