"""One store suite, every backend: the `backend` fixture runs each test on memory, SQLite,
Redis and PostgreSQL (each skipped when no server answers, see `redis_url` and
`postgres_url` in tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import Backend, drop_schema, with_schema

from toolwire.store import MemoryStore, SqliteStore, Store


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name: str = request.param
    prefix = f"toolwire-test:{uuid.uuid4().hex}:"
    schema = f"toolwire_test_{uuid.uuid4().hex[:12]}"
    memory = MemoryStore()
    url: str = request.getfixturevalue(f"{name}_url") if name in ("redis", "postgres") else ""

    def make() -> Store:
        if name == "memory":
            return memory  # one process: "another store" is the same one
        if name == "sqlite":
            return SqliteStore(tmp_path / "state.db")
        if name == "postgres":
            from toolwire.store.postgres import PostgresStore

            return PostgresStore(with_schema(url, schema))
        from toolwire.store.redis import RedisStore

        return RedisStore(url, prefix=prefix)

    opened: list[Store] = []

    async def open_store() -> Store:
        store = make()
        await store.open()
        opened.append(store)
        return store

    yield Backend(name, open_store)
    for store in opened:
        await store.aclose()
    if name == "redis":
        await _delete_keys(url, prefix)
    if name == "postgres":
        await drop_schema(url, schema)


@pytest.fixture
async def store(backend: Backend) -> Store:
    return await backend.open()


async def _delete_keys(url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
