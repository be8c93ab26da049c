"""Issue 15.9: a dropped or reset connection is named as such, never as "Request timed out". Both real SDK
clients against the loopback fake server."""

from __future__ import annotations

import asyncio

import pytest

from fakes.server import FakeLLMServer, FakeReply
from seqjudge.errors import ProviderError
from seqjudge.judge.providers.base import JudgeRequest, get_provider

REQUEST = JudgeRequest(
    system="s",
    static_prompt="a",
    dynamic_prompt="b",
    schema={"type": "object"},
    schema_name="j",
    max_tokens=256,
)


async def fail(kind: str, base_url: str) -> ProviderError:
    provider = get_provider(f"{kind}:some-model", base_url=base_url, max_retries=0)
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(REQUEST)
    finally:
        await provider.aclose()
    return caught.value


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("reply", [FakeReply(reset=True), FakeReply(drop=True)], ids=["reset", "hang-up"])
def test_a_dropped_connection_is_named(
    kind: str, reply: FakeReply, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-conn-0000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-conn-0000")
    fake_llm.enqueue(reply)
    base = fake_llm.openai_base_url if kind == "openai" else fake_llm.anthropic_base_url
    error = asyncio.run(fail(kind, base))
    text = str(error)
    assert error.kind == "connection"
    assert "timed out" not in text.lower() and "did not answer within" not in text
    assert "closed the connection without answering" in text
    assert ("Reset" in text or "reset" in text) if reply.reset else "Disconnected" in text


def test_a_refused_connection_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-conn-0000")
    with FakeLLMServer() as server:
        base = server.openai_base_url
    # the server is gone: nothing listens on its port any more
    error = asyncio.run(fail("openai", base))
    assert error.kind == "connection" and "could not connect" in str(error)
    assert "timed out" not in str(error).lower()
