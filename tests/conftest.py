"""Shared fixtures. Keep them small and generic; layer-specific ones live beside their tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fakes.openai_server import FakeOpenAIServer

# Gateways built by the tests keep their state in memory unless a test names a store: the
# suite must not write into the user's state directory (the default SQLite file).
os.environ.setdefault("TOOLWIRE_STORE", "memory")


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


_redis_skips: list[str] = []


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database tests may write to, each under its own key prefix.

    `$TOOLWIRE_TEST_REDIS_URL`, default `redis://127.0.0.1:6379/15`. When nothing answers
    there the tests using it are skipped (the reason is printed at the end), except with
    `CI=true`, where a missing Redis fails them.
    """
    from toolwire.store.base import redact_url

    url = os.environ.get("TOOLWIRE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    problem = _redis_problem(url)
    if problem is None:
        return url
    reason = f"no Redis at {redact_url(url)} ({problem}); start one or set TOOLWIRE_TEST_REDIS_URL"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true requires Redis)", pytrace=False)
    _redis_skips.append(reason)
    pytest.skip(reason)


def _redis_problem(url: str) -> str | None:
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ModuleNotFoundError:
        return "redis-py is not installed: pip install -e '.[dev]'"
    client = redis.Redis.from_url(
        url, socket_connect_timeout=1, socket_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    try:
        client.ping()
    except (redis.RedisError, OSError) as e:
        return str(e) or type(e).__name__
    finally:
        client.close()
    return None


_postgres_skips: list[str] = []


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A PostgreSQL database tests may write to, each test in a schema of its own.

    `$TOOLWIRE_TEST_POSTGRES`, default `postgresql://postgres@127.0.0.1:5432/test`. When
    nothing answers there the tests using it are skipped (the reason is printed at the
    end), except with `CI=true`, where a missing PostgreSQL fails them.
    """
    from toolwire.store.base import redact_url

    url = os.environ.get("TOOLWIRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    problem = _postgres_problem(url)
    if problem is None:
        return url
    reason = (
        f"no PostgreSQL at {redact_url(url)} ({problem}); start one or set TOOLWIRE_TEST_POSTGRES"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true requires PostgreSQL)", pytrace=False)
    _postgres_skips.append(reason)
    pytest.skip(reason)


def _postgres_problem(url: str) -> str | None:
    try:
        import psycopg
    except ModuleNotFoundError:
        return "psycopg is not installed: pip install -e '.[dev]'"
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.Error as e:
        return " ".join(str(e).split()) or type(e).__name__
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _redis_skips:
        terminalreporter.write_line(f"Redis tests skipped: {_redis_skips[0]}", yellow=True)
    if _postgres_skips:
        terminalreporter.write_line(f"PostgreSQL tests skipped: {_postgres_skips[0]}", yellow=True)
