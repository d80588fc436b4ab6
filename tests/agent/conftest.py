"""The agent's tests that need a store run on every backend (see `any_store`)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from toolwire.store import MemoryStore, SqliteStore, Store

StoreFactory = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    """Makes stores over one shared set of data, as separate processes would see it (the
    memory store is one object: there is no other process)."""
    name: str = request.param
    memory = MemoryStore()
    prefix = f"toolwire-test:{uuid.uuid4().hex}:"
    url: str = request.getfixturevalue("redis_url") if name == "redis" else ""
    made: list[Store] = []

    def make() -> Store:
        store: Store
        if name == "memory":
            store = memory
        elif name == "sqlite":
            store = SqliteStore(tmp_path / "state.db")
        else:
            from toolwire.store.redis import RedisStore

            store = RedisStore(url, prefix=prefix)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.aclose()
    if name == "redis":
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(url)
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


@pytest.fixture
async def any_store(store_factory: StoreFactory) -> Store:
    store = store_factory()
    await store.open()
    return store
