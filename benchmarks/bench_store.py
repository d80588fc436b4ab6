"""Store benchmarks: operations per second of each backend, one operation at a time.

Run: `python benchmarks/bench_store.py` (prints one table, a column per backend; no
assertions). Redis is measured when one answers at `$TOOLWIRE_BENCH_REDIS_URL` (default
`redis://127.0.0.1:6379/15`), under a random key prefix that is deleted afterwards;
PostgreSQL when one answers at `$TOOLWIRE_BENCH_POSTGRES` (default
`postgresql://postgres@127.0.0.1:5432/test`), in a random schema dropped afterwards.

For each backend, the median over several rounds of sequential calls (the latency a
request sees, not a throughput ceiling) of:

- `put_run` of a run with a ~2 KB state, and `get_run` of it;
- approval CAS: `add_approvals` of one approval then `update_approval` to approve it
  (two writes, counted as one operation);
- `append_audit`;
- cache `set` and `get` of a ~200-byte value;
- the approval round trip a resumed run makes in the store: `put_run` of a paused run
  with its approval, `update_approval` to approve it, `transition_run` claiming the run
  and using the approval in one step, `transition_run` fenced by the holder to finish
  (four writes, counted as one operation).

`python benchmarks/bench_store.py listing` prints only the per-key listing figures (see
`bench_listing`); `python benchmarks/bench_store.py prune` only the retention figures (see
`bench_prune`).

SQLite runs with `synchronous=FULL` and PostgreSQL with `synchronous_commit=on` (an fsync
per commit, see their modules), so their write figures are those of the disk under them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from toolwire.store import (
    ApprovalRecord,
    AuditRecord,
    MemoryStore,
    PruneCounts,
    RunRecord,
    SqliteStore,
    Store,
    StoreError,
    arguments_hash,
)

ROUNDS = 5
STATE = {"messages": [{"role": "user", "content": "x" * 60} for _ in range(25)]}
ROUND_TRIP = "approval round trip (4 writes)"
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


async def bench(store: Store, n: int) -> dict[str, float | str]:
    """Operations per second of each measured operation (a reason where it cannot run)."""
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

    async def round_trip(i: int) -> None:
        paused = replace(run, id=f"rt_{tag}_{i}", status="awaiting_approval")
        pending = replace(approval, id=f"rt_appr_{tag}_{i}", run_id=paused.id)
        await store.put_run(paused, approvals=[pending])
        approved = replace(pending, status="approved", decided_by="bob", decided_at=now)
        if not await store.update_approval(approved, expect=["pending"]):
            raise RuntimeError("the decision lost with no contender")
        holder = f"bench:{i}"
        claimed = replace(paused, status="running", holder=holder, lease_until=now + 30)
        used = replace(approved, status="used", used_at=now)
        if not await store.transition_run(
            paused.id, expect=["awaiting_approval"], run=claimed, approvals=[(used, ["approved"])]
        ):
            raise RuntimeError("the claim lost with no contender")
        finished = replace(claimed, status="completed", holder=None, lease_until=None)
        if not await store.transition_run(
            paused.id, expect=["running"], run=finished, holder=holder
        ):
            raise RuntimeError("the finishing write lost with no contender")

    operations = {
        "put_run": put_run,
        "get_run": get_run,
        "add_approvals + update_approval": approve,
        "append_audit": append_audit,
        "cache set": cache_set,
        "cache get": cache_get,
        ROUND_TRIP: round_trip,
    }
    rates: dict[str, float | str] = {}
    for label, op in operations.items():
        try:
            rates[label] = await _ops_per_second(n, op)
        except (TypeError, StoreError) as e:  # a backend not updated to the newer interface
            rates[label] = f"n/a ({type(e).__name__}: {e})"
    return rates


def print_table(results: dict[str, dict[str, float | str]], calls: dict[str, int]) -> None:
    names = list(results)
    print(f"{'ops/s (µs each)':<34}" + "".join(f"{name:>20}" for name in names))
    print(f"{'calls x rounds':<34}" + "".join(f"{f'{calls[n]} x {ROUNDS}':>20}" for n in names))
    for label in results[names[0]]:
        cells = []
        for name in names:
            rate = results[name][label]
            text = f"{rate:,.0f} ({1e6 / rate:,.0f})" if isinstance(rate, float) else "n/a"
            cells.append(f"{text:>20}")
        print(f"{label:<34}" + "".join(cells))
    for name in names:
        for label, rate in results[name].items():
            if isinstance(rate, str):
                print(f"   {name} {label}: {rate}")


async def _delete_keys(url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        for start in range(0, len(keys), 1000):
            await client.delete(*keys[start : start + 1000])
    finally:
        await client.aclose()


async def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.asynccontextmanager
async def _redis() -> AsyncIterator[Store]:
    from toolwire.store.redis import RedisStore

    url = os.environ.get("TOOLWIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
    prefix = f"toolwire-bench:{uuid.uuid4().hex}:"
    store = RedisStore(url, prefix=prefix, allow_volatile=True)  # figures, not durability
    try:
        await store.open()
        yield store
    finally:
        await store.aclose()
        await _delete_keys(url, prefix)


@contextlib.asynccontextmanager
async def _postgres() -> AsyncIterator[Store]:
    from toolwire.store.postgres import PostgresStore

    url = os.environ.get("TOOLWIRE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"toolwire_bench_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(f"{url}{'&' if '?' in url else '?'}schema={schema}")
    try:
        await store.open()
        yield store
    finally:
        await store.aclose()
        with contextlib.suppress(Exception):
            await _drop_schema(url, schema)


async def bench_listing(name: str, store: Store, others: int = 20_000) -> None:
    """One key's 10 pending approvals listed alone, then beside `others` of another key's
    (issue 22 measured 3.3 s on Redis, whose status index held every key's)."""
    now = time.time()
    tag = uuid.uuid4().hex[:8]

    def approval(who: str, i: int) -> ApprovalRecord:
        return ApprovalRecord(
            id=f"appr_{tag}_{who}_{i}",
            run_id=f"run_{tag}_{who}",
            call_id=f"call_{i}",
            tool="delete_file",
            arguments='{"path":"/tmp/x"}',
            arguments_hash=arguments_hash({"path": "/tmp/x"}),
            requested_by=f"{who}_{tag}",
            created_at=now - i,
            expires_at=now + 3600,
        )

    async def list_mine() -> float:
        await store.list_approvals(requested_by=f"alice_{tag}", status="pending", now=now)
        times = []
        for _ in range(20):
            start = time.perf_counter()
            found = await store.list_approvals(
                requested_by=f"alice_{tag}", status="pending", now=now
            )
            times.append(time.perf_counter() - start)
            assert len(found) == 10, len(found)
        return statistics.median(times) * 1000

    await store.add_approvals([approval("alice", i) for i in range(10)])
    alone = await list_mine()
    for start in range(0, others, 500):
        await store.add_approvals([approval("bob", i) for i in range(start, start + 500)])
    beside = await list_mine()
    print(
        f"{name:<8} one key's 10 pending approvals: {alone:7.2f} ms alone, "
        f"{beside:7.2f} ms beside another key's {others:,}"
    )


async def bench_prune(name: str, store: Store) -> None:
    """`prune` of 2 000 final runs, 10 000 used approvals and 5 000 audit records, all past
    retention, beside as many of each that are kept; the time of the whole prune, and of a
    second one that finds nothing."""
    now = time.time()
    old, new = now - 100 * 86400, now - 60
    tag = uuid.uuid4().hex[:8]
    for at, kind in ((old, "old"), (new, "new")):
        for i in range(2000):
            run = RunRecord(
                id=f"run_{tag}_{kind}_{i}",
                status="completed",
                state={},
                created_at=at,
                updated_at=at,
            )
            approvals = [
                ApprovalRecord(
                    id=f"appr_{tag}_{kind}_{i}_{j}",
                    run_id=run.id,
                    call_id=f"call_{j}",
                    tool="delete_file",
                    arguments="{}",
                    arguments_hash=arguments_hash({}),
                    status="used",
                    created_at=at,
                    expires_at=at + 600,
                )
                for j in range(5)
            ]
            await store.put_run(run, approvals=approvals)
        for i in range(5000):
            await store.append_audit(
                AuditRecord(
                    time=at,
                    event="finished",
                    tool="delete_file",
                    effects="destructive",
                    arguments_hash="sha256:00",
                    arguments=None,
                    call_id=f"call_{i}",
                )
            )
    cut = now - 30 * 86400

    async def prune() -> tuple[PruneCounts, float]:
        start = time.perf_counter()
        counts = await store.prune(runs_before=cut, approvals_before=cut, audit_before=cut, now=now)
        return counts, (time.perf_counter() - start) * 1000

    (counts, first), (_, again) = await prune(), await prune()
    print(
        f"{name:<8} prune deleted {counts.runs:,} runs, {counts.approvals:,} approvals and "
        f"{counts.audit:,} audit records in {first:7.1f} ms; again, deleting nothing: "
        f"{again:5.1f} ms"
    )


async def each_backend(measure: Callable[[str, Store], Awaitable[None]]) -> None:
    """`measure(name, store)` on a fresh store of every backend that answers."""
    await measure("memory", MemoryStore())
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SqliteStore(Path(tmp) / "state.db")
        await sqlite.open()
        try:
            await measure("sqlite", sqlite)
        finally:
            await sqlite.aclose()
    for name, opener in (("redis", _redis), ("postgres", _postgres)):
        try:
            async with opener() as store:
                await measure(name, store)
        except (ModuleNotFoundError, StoreError) as e:
            print(f"{name} skipped: {e}")


async def listing() -> None:
    await each_backend(bench_listing)


async def main() -> None:
    print(f"Python {sys.version.split()[0]} on {sys.platform}")
    if sys.argv[1:] == ["listing"]:
        await listing()
        return
    if sys.argv[1:] == ["prune"]:
        await each_backend(bench_prune)
        return
    results: dict[str, dict[str, float | str]] = {}
    calls = {"memory": 5000, "sqlite": 300, "redis": 1000, "postgres": 300}
    results["memory"] = await bench(MemoryStore(), calls["memory"])

    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SqliteStore(Path(tmp) / "state.db")
        await sqlite.open()
        try:
            results["sqlite"] = await bench(sqlite, calls["sqlite"])
        finally:
            await sqlite.aclose()

    for name, opener, extra in (("redis", _redis, "redis"), ("postgres", _postgres, "postgres")):
        try:
            async with opener() as store:
                results[name] = await bench(store, calls[name])
        except ModuleNotFoundError:
            print(f"{name} skipped: its driver is not installed (pip install 'toolwire[{extra}]')")
        except StoreError as e:
            print(f"{name} skipped: {e}")
    print_table(results, calls)


if __name__ == "__main__":
    asyncio.run(main())
