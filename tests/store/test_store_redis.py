"""What only the Redis store does: fail fast without leaking a password, check its layout."""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import NOW, approval_record, audit_record, run_record

from toolwire.store import AuditQuery, StoreError, StoreUnavailable, open_store
from toolwire.store.redis import SCHEMA_VERSION, RedisStore


@pytest.fixture
async def prefix(redis_url: str) -> AsyncIterator[str]:
    """A fresh key prefix, its keys deleted afterwards."""
    import redis.asyncio as aioredis

    prefix = f"toolwire-test:{uuid.uuid4().hex}:"
    yield prefix
    client = aioredis.Redis.from_url(redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2@127.0.0.1:1/0",
        "redis://admin:hunter2@127.0.0.1:1/0",
        "unix:///nonexistent/redis.sock?db=0&password=hunter2",
    ],
)
async def test_unreachable_redis_fails_fast_without_the_password(url: str) -> None:
    store = open_store(url)
    assert "hunter2" not in store.url
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        await store.open()
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "hunter2" not in message
    assert "\n" not in message
    assert message.startswith(f"Redis at {store.url} is unreachable: ")
    await store.aclose()


async def test_url_keeps_user_host_and_database() -> None:
    store = RedisStore("rediss://admin:s3cret@cache.internal:6380/2")
    assert store.url == "rediss://admin@cache.internal:6380/2"


async def test_refuses_a_newer_layout(redis_url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url)
    await client.set(f"{prefix}schema", SCHEMA_VERSION + 1)
    await client.aclose()
    store = RedisStore(redis_url, prefix=prefix, allow_volatile=True)
    with pytest.raises(StoreError, match="newer toolwire") as caught:
        await store.open()
    assert "\n" not in str(caught.value)


async def test_writes_its_layout_version(redis_url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    store = RedisStore(redis_url, prefix=prefix, allow_volatile=True)
    await store.open()
    await store.aclose()
    client = aioredis.Redis.from_url(redis_url)
    assert await client.get(f"{prefix}schema") == str(SCHEMA_VERSION).encode()
    await client.aclose()


async def test_prefixes_keep_deployments_apart(redis_url: str, prefix: str) -> None:
    one = RedisStore(redis_url, prefix=f"{prefix}one:", allow_volatile=True)
    two = RedisStore(redis_url, prefix=f"{prefix}two:", allow_volatile=True)
    await one.open()
    await two.open()
    run = run_record()
    await one.put_run(run)
    await one.set("k", b"v", 30)
    assert await two.get_run(run.id) is None
    assert await two.list_runs() == []
    assert await two.get("k") is None
    await one.aclose()
    await two.aclose()


async def test_use_before_open_is_a_clear_error() -> None:
    store = RedisStore("redis://127.0.0.1:1/0")
    with pytest.raises(StoreError, match=r"not open; await store\.open\(\)"):
        await store.get("x")
    with pytest.raises(StoreError, match=r"not open; await store\.open\(\)"):
        await store.put_run(run_record())


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary")
async def test_a_redis_that_dies_fails_requests_fast(unused_tcp_port: int) -> None:
    server = await asyncio.create_subprocess_exec(
        "redis-server",
        "--port",
        str(unused_tcp_port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        stdout=asyncio.subprocess.DEVNULL,
    )
    store = RedisStore(f"redis://127.0.0.1:{unused_tcp_port}/0", allow_volatile=True)
    try:
        for _ in range(100):  # until it accepts connections
            try:
                await store.open()
                break
            except StoreUnavailable:
                await asyncio.sleep(0.05)
        await store.set("k", b"v", 30)
        server.kill()
        await server.wait()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="is unreachable"):
            await store.get("k")
        assert time.monotonic() - started < 5
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
        await store.aclose()


# --- durability at open ----------------------------------------------------------------


async def test_refuses_a_redis_without_persistence(redis_url: str, prefix: str) -> None:
    # The test Redis runs with appendonly no, as a default Redis does.
    import redis.asyncio as aioredis

    store = RedisStore(redis_url, prefix=prefix)
    with pytest.raises(StoreError) as caught:
        await store.open()
    message = str(caught.value)
    assert "\n" not in message
    assert "appendonly is no" in message
    for needed in ("appendonly yes", "appendfsync everysec or always", "noeviction"):
        assert needed in message
    assert "allow_volatile=true" in message
    assert "everysec may lose the last second" in message
    client = aioredis.Redis.from_url(redis_url)
    assert await client.exists(f"{prefix}schema") == 0  # refused before writing anything
    await client.aclose()


async def test_allow_volatile_opens_with_one_warning(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(f"{redis_url}?prefix={prefix}&allow_volatile=true")
    assert isinstance(store, RedisStore)
    assert store.allow_volatile
    for _ in range(3):
        await store.open()
        await store.aclose()
    warnings = [r for r in caplog.records if "allow_volatile" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelname == "WARNING"
    assert "appendonly is no" in warnings[0].getMessage()


async def _private_redis(port: int, directory: Path, *settings: str) -> asyncio.subprocess.Process:
    binary = shutil.which("redis-server")
    assert binary is not None
    server = await asyncio.create_subprocess_exec(
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--dir",
        str(directory),
        *settings,
        stdout=asyncio.subprocess.DEVNULL,
    )
    for _ in range(200):  # until it accepts connections
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        await writer.wait_closed()
        break
    return server


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary")
@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        (("--appendonly", "yes", "--appendfsync", "everysec"), None),
        (
            (
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--maxmemory-policy",
                "volatile-lru",
            ),
            None,
        ),
        (("--appendonly", "yes", "--appendfsync", "no"), "appendfsync is no"),
        (
            ("--appendonly", "yes", "--maxmemory-policy", "allkeys-lru"),
            "maxmemory-policy is allkeys-lru",
        ),
        (("--appendonly", "yes", "--rename-command", "CONFIG", ""), "cannot be read"),
    ],
)
async def test_checks_the_servers_persistence_settings(
    unused_tcp_port: int,
    tmp_path: Path,
    settings: tuple[str, ...],
    problem: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await _private_redis(unused_tcp_port, tmp_path, *settings)
    url = f"redis://127.0.0.1:{unused_tcp_port}/0"
    try:
        store = RedisStore(url)
        if problem is None:
            await store.open()
            await store.put_run(run_record())
            await store.aclose()
            assert "could lose writes" not in caplog.text
        else:
            with pytest.raises(StoreError, match=problem):
                await store.open()
            allowed = RedisStore(url, allow_volatile=True)
            await allowed.open()
            await allowed.aclose()
            assert problem in caplog.text
    finally:
        server.kill()
        await server.wait()


# --- per-key indexes ---------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary")
async def test_one_keys_listing_reads_none_of_anothers_records(
    unused_tcp_port: int, tmp_path: Path
) -> None:
    # The review measured 3.3 s for one key's pending list beside another key's 20k
    # approvals: the status index held everyone's. A Redis of the test's own, so the
    # command counts are this test's alone.
    import redis.asyncio as aioredis

    server = await _private_redis(unused_tcp_port, tmp_path)
    url = f"redis://127.0.0.1:{unused_tcp_port}/0"
    store = RedisStore(url, allow_volatile=True)
    client = aioredis.Redis.from_url(url)
    try:
        await store.open()
        busy = [approval_record(requested_by="bob") for _ in range(3000)]
        for start in range(0, len(busy), 500):
            await store.add_approvals(busy[start : start + 500])
        mine = [approval_record(requested_by="alice", created_at=NOW + i) for i in range(3)]
        await store.add_approvals(mine)
        await store.put_run(run_record(owner="alice", status="completed"))
        for _ in range(300):
            await store.put_run(run_record(owner="bob", status="completed"))

        await client.config_resetstat()
        pending = await store.list_approvals(requested_by="alice", status="pending", now=NOW)
        runs = await store.list_runs(owner="alice", status="completed")
        stats = await client.info("commandstats")
        assert [a.id for a in pending] == [a.id for a in mine[::-1]]
        assert len(runs) == 1
        assert stats["cmdstat_hgetall"]["calls"] == len(mine) + len(runs)
    finally:
        await store.aclose()
        await client.aclose()
        server.kill()
        await server.wait()


async def test_a_layout_1_database_gets_the_combined_indexes(redis_url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    store = RedisStore(redis_url, prefix=prefix, allow_volatile=True)
    await store.open()
    approval = approval_record(requested_by="alice")
    await store.add_approvals([approval])
    run = run_record(owner="alice", status="completed")
    await store.put_run(run)
    await store.aclose()
    # As toolwire with layout 1 left it: no combined indexes, no index by updated_at.
    client = aioredis.Redis.from_url(redis_url)
    combined = [k async for k in client.scan_iter(match=f"{prefix}*-status:*")]
    assert len(combined) == 2
    await client.delete(*combined, f"{prefix}runs:updated")
    await client.set(f"{prefix}schema", 1)

    again = RedisStore(redis_url, prefix=prefix, allow_volatile=True)
    await again.open()
    assert await client.get(f"{prefix}schema") == str(SCHEMA_VERSION).encode()
    assert await again.list_approvals(requested_by="alice", status="pending", now=NOW) == [approval]
    assert [r.id for r in await again.list_runs(owner="alice", status="completed")] == [run.id]
    assert (await again.prune(runs_before=run.updated_at + 1, now=NOW)).runs == 1
    await again.aclose()
    await client.aclose()


async def test_an_audit_entry_deleted_by_hand_is_reported(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    import redis.asyncio as aioredis

    store = RedisStore(redis_url, prefix=prefix, allow_volatile=True)
    await store.open()
    ids = [await store.append_audit(audit_record(time=float(t))) for t in range(1, 5)]
    await store.prune(audit_before=2.0, now=5.0)  # retention's deletions are not reported
    await store.aclose()
    await store.open()
    await store.aclose()
    assert "lacks" not in caplog.text

    client = aioredis.Redis.from_url(redis_url)
    await client.xdel(f"{prefix}audit", f"0-{ids[2]}")
    await client.aclose()
    await store.open()
    await store.aclose()
    assert "lacks 1 records that retention did not remove" in caplog.text


async def test_a_lost_audit_counter_does_not_stop_appends(redis_url: str, prefix: str) -> None:
    # The issue: a lost audit head breaks every later write tool (XADD refuses an id not
    # above the stream's last).
    import redis.asyncio as aioredis

    store = RedisStore(redis_url, prefix=prefix, allow_volatile=True)
    await store.open()
    first = [await store.append_audit(audit_record()) for _ in range(3)]
    client = aioredis.Redis.from_url(redis_url)
    await client.delete(f"{prefix}audit:last")
    await client.aclose()
    later = [await store.append_audit(audit_record()) for _ in range(2)]
    assert later == [first[-1] + 1, first[-1] + 2]
    assert [r.id for r in await store.list_audit(AuditQuery())] == first + later
    await store.aclose()
