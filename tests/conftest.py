"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.server import FakeLLMServer


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A started loopback fake of the OpenAI and Anthropic APIs; see tests/fakes/server.py."""
    with FakeLLMServer() as server:
        yield server
