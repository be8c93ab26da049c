"""The loopback fake of the OpenAI and Anthropic APIs ships in the library (``seqjudge.judge.fake_server``),
so that ``benchmarks/judge_replay.py`` and the tests use one server; this name stays for existing imports."""

from seqjudge.judge.fake_server import (
    DEFAULT_ROUTES,
    FakeLLMServer,
    FakeReply,
    RecordedRequest,
    Responder,
    anthropic_error,
    anthropic_message,
    openai_chat,
    openai_error,
)

__all__ = [
    "DEFAULT_ROUTES",
    "FakeLLMServer",
    "FakeReply",
    "RecordedRequest",
    "Responder",
    "anthropic_error",
    "anthropic_message",
    "openai_chat",
    "openai_error",
]
