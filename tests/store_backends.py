"""Every store backend over one set of data, for the tests that run on each of them.

`StoreData(name, tmp, url)` stands for one database of a backend (a SQLite file, a Redis
key prefix, a PostgreSQL schema); `make()` gives a new store on it, as another process
would open it (the memory store is one object: there is no other process); `cleanup()`
removes what the tests wrote. The `redis_url` and `postgres_url` fixtures of
tests/conftest.py give the servers (skipped when none answers, failing under `CI=true`).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolwire.store import MemoryStore, SqliteStore, Store

BACKENDS = ("memory", "sqlite", "redis", "postgres")
SERVERS = {"redis": "redis_url", "postgres": "postgres_url"}
"""The backends that need a server, and the fixture that finds it."""


def with_schema(url: str, schema: str) -> str:
    """A PostgreSQL store URL whose tables live in `schema`."""
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


class StoreData:
    """One database of the backend `name`, under `tmp` (SQLite) or at `url`."""

    def __init__(self, name: str, tmp: Path, url: str = "") -> None:
        self.name = name
        self.tmp = tmp
        self.url = url
        self.prefix = f"toolwire-test:{uuid.uuid4().hex}:"
        self.schema = f"toolwire_test_{uuid.uuid4().hex[:12]}"
        self.memory = MemoryStore()
        self.made: list[Store] = []

    def make(self) -> Store:
        store: Store
        if self.name == "memory":
            store = self.memory
        elif self.name == "sqlite":
            store = SqliteStore(self.tmp / "state.db")
        elif self.name == "postgres":
            from toolwire.store.postgres import PostgresStore

            store = PostgresStore(with_schema(self.url, self.schema))
        else:
            from toolwire.store.redis import RedisStore

            # The test Redis runs without persistence: the tests opt in, as a deployment must.
            store = RedisStore(self.url, prefix=self.prefix, allow_volatile=True)
        self.made.append(store)
        return store

    async def cleanup(self) -> None:
        for store in self.made:
            await store.aclose()
        if self.name == "redis":
            import redis.asyncio as aioredis

            client = aioredis.Redis.from_url(self.url)
            try:
                keys = [k async for k in client.scan_iter(match=f"{self.prefix}*", count=1000)]
                if keys:
                    await client.delete(*keys)
            finally:
                await client.aclose()
        if self.name == "postgres":
            import psycopg

            async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


@contextlib.contextmanager
def shared_store_url(request: pytest.FixtureRequest, tmp: Path) -> Iterator[str]:
    """A store URL of the backend `request.param` (`sqlite`, `redis`, `postgres`) for a
    gateway: a file under `tmp`, a key prefix, a schema; removed afterwards."""
    name: str = request.param
    if name == "sqlite":
        yield f"sqlite:///{tmp / 'state.db'}"
        return
    data = StoreData(name, tmp, request.getfixturevalue(SERVERS[name]))
    if name == "redis":
        # The test Redis keeps nothing on disk: the gateway must be told that is allowed.
        yield f"{data.url}?prefix={data.prefix}&allow_volatile=true"
    else:
        yield with_schema(data.url, data.schema)
    asyncio.run(data.cleanup())
