"""`open_store` URL parsing and `default_store_url`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolwire.store import MemoryStore, SqliteStore, StoreError, default_store_url, open_store
from toolwire.store.postgres import PostgresStore
from toolwire.store.redis import RedisStore


@pytest.mark.parametrize("url", ["memory", "memory://", " MEMORY "])
def test_memory(url: str) -> None:
    assert isinstance(open_store(url), MemoryStore)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///state.db", Path.cwd() / "state.db"),
        ("sqlite:///data/sub/state.db", Path.cwd() / "data/sub/state.db"),
        ("sqlite:////var/lib/toolwire/state.db", Path("/var/lib/toolwire/state.db")),
        ("sqlite:///~/state.db", Path.home() / "state.db"),
        ("state.db", Path.cwd() / "state.db"),
        ("./data/toolwire.sqlite", Path.cwd() / "data/toolwire.sqlite"),
        ("/srv/toolwire.sqlite3", Path("/srv/toolwire.sqlite3")),
    ],
)
def test_sqlite(url: str, path: Path) -> None:
    store = open_store(url)
    assert isinstance(store, SqliteStore)
    assert store.path == path
    assert store.url == f"sqlite:///{path}"


@pytest.mark.parametrize(
    ("url", "shown", "prefix"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0", "toolwire:"),
        ("redis://:pw@redis:6379/1", "redis://redis:6379/1", "toolwire:"),
        ("rediss://user:pw@redis:6380/2?prefix=app1:", "rediss://user@redis:6380/2", "app1:"),
        ("unix:///run/redis.sock?db=3&password=pw", "unix:///run/redis.sock?db=3", "toolwire:"),
    ],
)
def test_redis(url: str, shown: str, prefix: str) -> None:
    store = open_store(url)
    assert isinstance(store, RedisStore)
    assert store.url == shown
    assert store.prefix == prefix


def test_redis_allow_volatile() -> None:
    store = open_store("redis://:pw@redis:6379/1?allow_volatile=true&prefix=app:&db=1")
    assert isinstance(store, RedisStore)
    assert store.allow_volatile
    assert store.prefix == "app:"
    assert store.url == "redis://redis:6379/1?db=1"
    plain = open_store("redis://redis:6379/1?allow_volatile=false")
    assert isinstance(plain, RedisStore)
    assert not plain.allow_volatile
    with pytest.raises(StoreError, match="allow_volatile='maybe'") as caught:
        open_store("redis://:pw@redis:6379/1?allow_volatile=maybe")
    assert ":pw@" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown", "schema", "pool_size"),
    [
        ("postgresql://db/toolwire", "postgresql://db/toolwire", "toolwire", 10),
        ("postgres://u:pw@db:5433/app", "postgres://u@db:5433/app", "toolwire", 10),
        (
            "postgresql://u@db/app?schema=tw_a&pool_size=3&sslmode=require&password=pw",
            "postgresql://u@db/app?schema=tw_a&pool_size=3&sslmode=require",
            "tw_a",
            3,
        ),
    ],
)
def test_postgres(url: str, shown: str, schema: str, pool_size: int) -> None:
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    assert store.url == shown
    assert store.schema == schema
    assert store.pool_size == pool_size


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://u:pw@db/app?schema=Robert');DROP", "invalid schema"),
        ("postgresql://u:pw@db/app?pool_size=0", "invalid pool_size"),
        ("postgresql://u:pw@db/app?pool_size=many", "invalid pool_size"),
        ("postgresql://u:pw@db/app?bogus=1", "invalid PostgreSQL URL"),
    ],
)
def test_bad_postgres_urls_say_what_is_wrong(url: str, problem: str) -> None:
    with pytest.raises(StoreError, match=problem) as caught:
        open_store(url)
    assert "pw" not in str(caught.value)


def test_postgres_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "toolwire.store.postgres")
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError, match=r"pip install 'toolwire\[postgres\]'") as caught:
        open_store("postgresql://u:pw@localhost/app")
    assert ":pw@" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    ["postgresql+psycopg://u:pw@db/toolwire", "state.json", "sqlite://state.db", "sqlite:///"],
)
def test_unknown_urls_list_what_is_accepted(url: str) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(url)
    message = str(caught.value)
    assert ":pw@" not in message
    assert "sqlite:///" in message


def test_redis_without_redis_py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "toolwire.store.redis")
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(StoreError, match=r"pip install 'toolwire\[redis\]'") as caught:
        open_store("redis://:pw@localhost:6379/0")
    assert ":pw@" not in str(caught.value)


def test_default_is_the_user_state_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TOOLWIRE_STORE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_store_url() == f"sqlite:///{tmp_path / 'state' / 'toolwire' / 'state.db'}"

    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_url() == f"sqlite:///{tmp_path}/.local/state/toolwire/state.db"

    monkeypatch.setenv("XDG_STATE_HOME", "relative/is/ignored")
    assert default_store_url() == f"sqlite:///{tmp_path}/.local/state/toolwire/state.db"


def test_toolwire_store_overrides_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_STORE", "redis://redis:6379/0")
    assert default_store_url() == "redis://redis:6379/0"
    monkeypatch.setenv("TOOLWIRE_STORE", "")
    assert default_store_url().endswith("/toolwire/state.db")
