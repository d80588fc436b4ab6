"""One store suite, every backend: the `backend` fixture runs each test on memory, SQLite,
Redis and PostgreSQL (each skipped when no server answers, see `redis_url` and
`postgres_url` in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import Backend

from store_backends import BACKENDS, SERVERS, StoreData
from toolwire.store import Store


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name: str = request.param
    url: str = request.getfixturevalue(SERVERS[name]) if name in SERVERS else ""
    data = StoreData(name, tmp_path, url)

    async def open_store() -> Store:
        store = data.make()
        await store.open()
        return store

    yield Backend(name, open_store)
    await data.cleanup()


@pytest.fixture
async def store(backend: Backend) -> Store:
    return await backend.open()
