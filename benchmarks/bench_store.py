"""Store benchmarks: operations per second of each backend, one operation at a time.

Run: `python benchmarks/bench_store.py` (prints figures; no assertions). Redis is measured
when one answers at `$TOOLWIRE_BENCH_REDIS_URL` (default `redis://127.0.0.1:6379/15`),
under a random key prefix that is deleted afterwards.

For each backend, the median over several rounds of sequential calls (the latency a
request sees, not a throughput ceiling) of:

- `put_run` of a run with a ~2 KB state, and `get_run` of it;
- approval CAS: `add_approvals` of one approval then `update_approval` to approve it
  (two writes, counted as one operation);
- `append_audit`;
- cache `set` and `get` of a ~200-byte value.

SQLite runs with `synchronous=FULL` (an fsync per commit, see `toolwire.store.sqlite`), so
its write figures are those of the disk the temporary directory is on.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from toolwire.store import (
    ApprovalRecord,
    AuditRecord,
    MemoryStore,
    RunRecord,
    SqliteStore,
    Store,
    StoreError,
    arguments_hash,
)

ROUNDS = 5
STATE = {"messages": [{"role": "user", "content": "x" * 60} for _ in range(25)]}
CACHED = b'{"city":"Lisbon","temp":21.5,"conditions":"sunny"}' * 4


async def _ops_per_second(n: int, op: Callable[[int], Awaitable[object]]) -> float:
    for i in range(min(n // 10, 50)):  # warm up
        await op(-1 - i)
    rates = []
    for r in range(ROUNDS):
        start = time.perf_counter()
        for i in range(n):
            await op(r * n + i)
        rates.append(n / (time.perf_counter() - start))
    return statistics.median(rates)


async def bench(name: str, store: Store, n: int) -> None:
    now = time.time()
    run = RunRecord(id="run", status="running", state=STATE, owner="alice", created_at=now)
    approval = ApprovalRecord(
        id="",
        run_id="run",
        call_id="call",
        tool="delete_file",
        arguments='{"path":"/tmp/x"}',
        arguments_hash=arguments_hash({"path": "/tmp/x"}),
        created_at=now,
        expires_at=now + 600,
    )
    audit = AuditRecord(
        time=now,
        event="finished",
        tool="delete_file",
        effects="destructive",
        arguments_hash=approval.arguments_hash,
        arguments={"path": "/tmp/x"},
        call_id="call",
        outcome="ok",
        duration_ms=1.2,
        key_name="alice",
    )
    tag = uuid.uuid4().hex[:8]

    async def put_run(i: int) -> None:
        await store.put_run(replace(run, id=f"run_{tag}_{i % 100}"))

    async def get_run(i: int) -> None:
        await store.get_run(f"run_{tag}_{i % 100}")

    async def approve(i: int) -> None:
        pending = replace(approval, id=f"appr_{tag}_{i}")
        await store.add_approvals([pending])
        decided = replace(pending, status="approved", decided_by="bob", decided_at=now)
        if not await store.update_approval(decided, expect=["pending"]):
            raise RuntimeError("the CAS lost with no contender")

    async def append_audit(i: int) -> None:
        await store.append_audit(audit)

    async def cache_set(i: int) -> None:
        await store.set(f"k{i % 100}", CACHED, 60)

    async def cache_get(i: int) -> None:
        await store.get(f"k{i % 100}")

    print(f"{name}  ({store.url}, {n} calls x {ROUNDS} rounds)")
    for label, op in (
        ("put_run", put_run),
        ("get_run", get_run),
        ("add_approvals + update_approval", approve),
        ("append_audit", append_audit),
        ("cache set", cache_set),
        ("cache get", cache_get),
    ):
        rate = await _ops_per_second(n, op)
        print(f"   {label:<34} {rate:>10,.0f} ops/s   {1e6 / rate:8.1f} µs each")


async def _delete_keys(url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        for start in range(0, len(keys), 1000):
            await client.delete(*keys[start : start + 1000])
    finally:
        await client.aclose()


async def main() -> None:
    print(f"Python {sys.version.split()[0]} on {sys.platform}")
    memory = MemoryStore()
    await bench("memory", memory, 5000)

    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SqliteStore(Path(tmp) / "state.db")
        await sqlite.open()
        try:
            await bench("sqlite", sqlite, 300)
        finally:
            await sqlite.aclose()

    url = os.environ.get("TOOLWIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        from toolwire.store.redis import RedisStore
    except ModuleNotFoundError:
        print("redis   skipped: redis-py is not installed (pip install 'toolwire[redis]')")
        return
    prefix = f"toolwire-bench:{uuid.uuid4().hex}:"
    redis = RedisStore(url, prefix=prefix)
    try:
        await redis.open()
    except StoreError as e:
        print(f"redis   skipped: {e}")
        return
    try:
        await bench("redis", redis, 1000)
    finally:
        await redis.aclose()
        await _delete_keys(url, prefix)


if __name__ == "__main__":
    asyncio.run(main())
