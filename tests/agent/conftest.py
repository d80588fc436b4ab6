"""The agent's tests that need a store run on every backend (see `store_factory`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from store_backends import BACKENDS, SERVERS, StoreData
from toolwire.store import Store


@pytest.fixture(params=BACKENDS)
async def store_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], Store]]:
    """Makes stores over one shared set of data, as separate processes would see it."""
    name: str = request.param
    url: str = request.getfixturevalue(SERVERS[name]) if name in SERVERS else ""
    data = StoreData(name, tmp_path, url)
    yield data.make
    await data.cleanup()


@pytest.fixture
async def any_store(store_factory: Callable[[], Store]) -> Store:
    store = store_factory()
    await store.open()
    return store
