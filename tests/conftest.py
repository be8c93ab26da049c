"""Shared pytest fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.server import FakeLLMServer
from pg_server import PgServer, PgUnavailable


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A started loopback fake of the OpenAI and Anthropic APIs; see tests/fakes/server.py."""
    with FakeLLMServer() as server:
        yield server


# -- PostgreSQL (tests/pg_server.py) ------------------------------------------------------------------------
@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for this test session; the tests that use it skip with the reason where it cannot
    run, and fail there when SEQJUDGE_REQUIRE_POSTGRES=1 (``make test``)."""
    try:
        server = PgServer().start()
    except PgUnavailable as exc:
        if os.environ.get("SEQJUDGE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here (SEQJUDGE_REQUIRE_POSTGRES=1) but: {exc}")
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a new empty database on the test server, dropped after the test."""
    with pg_server.database() as name:
        yield pg_server.url(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a store test keeps its store: a new SQLite file, then a new PostgreSQL database (one
    parametrised suite for both backends)."""
    if request.param == "sqlite":
        yield str(tmp_path / "s" / "seqjudge.db")
        return
    server: PgServer = request.getfixturevalue("pg_server")
    with server.database() as name:
        yield server.url(name)
