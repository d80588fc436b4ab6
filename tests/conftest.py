"""Shared fixtures. Keep them small and generic; layer-specific ones live beside their tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.openai_server import FakeOpenAIServer


@pytest.fixture(scope="session")
def _openai_server_session() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def openai_server(_openai_server_session: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible server (see tests/fakes/openai_server.py), reset per test."""
    _openai_server_session.reset()
    yield _openai_server_session
    _openai_server_session.reset()
