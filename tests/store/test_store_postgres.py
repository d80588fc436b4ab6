"""What is specific to the PostgreSQL store: replicas racing truly at once, migrations,
the audit log's commit order and its trigger, killed connections, connection errors.

The contract every backend shares is in test_store_suite.py and test_store_transitions.py
(the `backend` fixture includes PostgreSQL). `prune` has no other implementation yet and
is checked here on PostgreSQL alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from store_support import NOW, approval_record, audit_record, drop_schema, run_record

from store_backends import with_schema
from toolwire.store import (
    ApprovalRecord,
    AuditQuery,
    StoreError,
    StoreUnavailable,
)
from toolwire.store.postgres import MIGRATIONS, PostgresStore

Opener = Callable[..., Awaitable[PostgresStore]]


@pytest.fixture
async def schema(postgres_url: str) -> AsyncIterator[str]:
    """A fresh schema name, dropped after the test."""
    name = f"toolwire_test_{uuid.uuid4().hex[:12]}"
    yield name
    await drop_schema(postgres_url, name)


@pytest.fixture
async def open_pg(postgres_url: str, schema: str) -> AsyncIterator[Opener]:
    """Open one more store on the test's schema, as another replica would (its own pool)."""
    opened: list[PostgresStore] = []

    async def open_one(**params: str) -> PostgresStore:
        url = with_schema(postgres_url, schema)
        for key, value in params.items():
            url += f"&{key}={value}"
        store = PostgresStore(url)
        await store.open()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.aclose()


async def _sql(url: str, schema: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run raw SQL in `schema` on a connection of its own (not the store's)."""
    async with await psycopg.AsyncConnection.connect(
        url, autocommit=True, options=f"-c search_path={schema}"
    ) as conn:
        cursor = await conn.execute(sql, params)  # type: ignore[arg-type]
        return await cursor.fetchall() if cursor.description else []


def _approved(**fields: Any) -> ApprovalRecord:
    return approval_record(status="approved", decided_by="ops", decided_at=NOW, **fields)


def _used(approval: ApprovalRecord, by: str) -> ApprovalRecord:
    return replace(approval, status="used", used_at=NOW + 1, decision_reason=by)


# --- replicas racing truly at once ----------------------------------------------------


async def test_two_replicas_racing_resumes_have_one_winner(open_pg: Opener) -> None:
    first, second = await open_pg(pool_size="8"), await open_pg(pool_size="8")
    for round_ in range(25):
        run = run_record(status="awaiting_approval")
        a, b = _approved(run_id=run.id), _approved(run_id=run.id)
        await first.put_run(run, approvals=[a, b])
        claims = [replace(run, status="running", holder=f"h:{round_}:{i}") for i in range(8)]
        # Half of the contenders take the run with both approvals, in either order (locks
        # taken in id order never deadlock); a ninth expires b from the other replica.
        resumes = [
            (first if i % 2 else second).transition_run(
                run.id,
                expect=["awaiting_approval"],
                run=claim,
                approvals=[(_used(x, claim.holder or ""), ["approved"]) for x in (a, b)][
                    :: 1 if i % 4 < 2 else -1
                ],
            )
            for i, claim in enumerate(claims)
        ]
        expire = first.update_approval(replace(b, status="expired"), expect=["approved"])
        *won, expired = await asyncio.gather(*resumes, expire)
        assert won.count(True) + expired == 1, (round_, won, expired)
        stored_run, stored_a, stored_b = (
            await second.get_run(run.id),
            await second.get_approval(a.id),
            await second.get_approval(b.id),
        )
        assert stored_run is not None
        assert stored_a is not None
        assert stored_b is not None
        if expired:  # nothing of any resume was written
            assert stored_run == replace(run, version=1)
            assert (stored_a.status, stored_b.status) == ("approved", "expired")
        else:
            winner = claims[won.index(True)]
            assert stored_run == replace(winner, version=2)
            assert stored_a == _used(a, winner.holder or "")
            assert stored_b == _used(b, winner.holder or "")


async def test_two_replicas_racing_decisions_have_one_winner(open_pg: Opener) -> None:
    first, second = await open_pg(pool_size="8"), await open_pg(pool_size="8")
    for round_ in range(25):
        approval = approval_record()
        await first.add_approvals([approval])
        decisions = [
            replace(approval, status="approved" if i % 2 else "denied", decided_by=f"k{i}")
            for i in range(16)
        ]
        won = await asyncio.gather(
            *(
                (first if i % 2 else second).update_approval(d, expect=["pending"])
                for i, d in enumerate(decisions)
            )
        )
        assert won.count(True) == 1, round_
        assert await first.get_approval(approval.id) == decisions[won.index(True)]


async def test_lease_renewal_never_outlives_a_lost_claim(open_pg: Opener) -> None:
    first, second = await open_pg(), await open_pg()
    run = run_record(status="running", holder="h:old", lease_until=NOW + 30)
    await first.put_run(run)
    taken = replace(run, holder="h:new", lease_until=NOW + 100)
    renew, claim = await asyncio.gather(
        first.renew_lease(run.id, holder="h:old", lease_until=NOW + 60),
        second.transition_run(run.id, expect=["running"], run=taken, holder="h:old"),
    )
    assert claim
    stored = await first.get_run(run.id)
    assert stored is not None
    # Whichever came first, the new claim's lease stands and the old holder is out.
    assert (stored.holder, stored.lease_until, stored.version) == ("h:new", NOW + 100, 2)
    assert not await first.renew_lease(run.id, holder="h:old", lease_until=NOW + 200)
    assert renew in (True, False)


# --- migrations -----------------------------------------------------------------------


async def test_replicas_opening_at_once_migrate_once(
    postgres_url: str, schema: str, open_pg: Opener
) -> None:
    stores = await asyncio.gather(*(open_pg() for _ in range(4)))
    rows = await _sql(postgres_url, schema, "SELECT version FROM schema_version")
    assert rows == [(len(MIGRATIONS),)]
    run = run_record()
    await stores[0].put_run(run)
    assert await stores[3].get_run(run.id) == replace(run, version=1)


async def test_refuses_a_newer_schema_and_foreign_tables(
    postgres_url: str, schema: str, open_pg: Opener
) -> None:
    await open_pg()
    await _sql(postgres_url, schema, "UPDATE schema_version SET version = 99")
    with pytest.raises(StoreError, match="newer toolwire"):
        await open_pg()

    other = f"{schema}_other"
    try:
        await _sql(postgres_url, "public", f"CREATE SCHEMA {other}")
        await _sql(postgres_url, other, "CREATE TABLE runs (id int)")
        with pytest.raises(StoreError, match=r"not toolwire's \(runs\)"):
            await PostgresStore(with_schema(postgres_url, other)).open()
        assert await _sql(postgres_url, other, "SELECT count(*) FROM runs") == [(0,)]
    finally:
        await drop_schema(postgres_url, other)


# --- the audit log --------------------------------------------------------------------


async def test_audit_ids_are_visible_in_commit_order(open_pg: Opener) -> None:
    """A reader never sees id n before every smaller id: paging with `after_id` from any
    snapshot skips nothing. (With ids from a sequence, appends committing out of order
    show gaps here.)"""
    writers = [await open_pg(pool_size="6") for _ in range(2)]
    reader = await open_pg(pool_size="1")
    done = asyncio.Event()
    seen: list[int] = []
    snapshots = 0

    async def write(n: int) -> None:
        for i in range(n):
            await writers[i % 2].append_audit(audit_record())

    async def read() -> None:
        nonlocal snapshots
        while True:
            finished = done.is_set()
            everything = await reader.list_audit(AuditQuery(limit=10_000))
            ids = [r.id for r in everything]
            assert ids == list(range(1, len(ids) + 1)), "a gap: a smaller id not yet visible"
            page = await reader.list_audit(AuditQuery(after_id=seen[-1] if seen else 0))
            seen.extend(r.id for r in page)
            snapshots += 1
            if finished:
                return

    reading = asyncio.create_task(read())
    await asyncio.gather(*(write(25) for _ in range(12)))
    done.set()
    await reading
    assert seen == list(range(1, 12 * 25 + 1))
    assert snapshots > 3  # it read while the appends were going on


async def test_append_only_is_enforced_by_the_database(
    postgres_url: str, schema: str, open_pg: Opener
) -> None:
    store = await open_pg()
    old = await store.append_audit(audit_record(time=NOW))
    await store.append_audit(audit_record(time=NOW + 100))
    for sql in (
        "UPDATE audit SET outcome = 'tampered'",
        "DELETE FROM audit",
        "TRUNCATE audit",
        # Even retention's setting lets through only rows older than its cut-off.
        f"BEGIN; SET LOCAL toolwire.audit_before = '{NOW + 50}'; DELETE FROM audit; COMMIT",
    ):
        with pytest.raises(psycopg.Error, match="append-only"):
            await _sql(postgres_url, schema, sql)
    assert len(await store.list_audit(AuditQuery())) == 2

    counts = await store.prune(audit_before=NOW + 50, now=NOW + 1000)
    assert counts.audit == 1
    assert [r.time for r in await store.list_audit(AuditQuery())] == [NOW + 100]
    # Ids are never reused after a prune.
    assert await store.append_audit(audit_record()) > old + 1


async def test_prune_keeps_what_can_still_change(open_pg: Opener) -> None:
    store = await open_pg()
    now = NOW + 10_000
    old = {"created_at": NOW, "updated_at": NOW}
    done = run_record(status="completed", **old)
    running = run_record(status="running", **old)
    waiting = run_record(status="awaiting_approval", **old)
    stale = run_record(status="awaiting_approval", **old)
    recent = run_record(status="error", created_at=now, updated_at=now)
    expired = {"created_at": NOW, "expires_at": NOW + 60}
    live = {"created_at": NOW, "expires_at": now + 60}
    await store.put_run(done, approvals=[approval_record(run_id=done.id, status="used", **live)])
    await store.put_run(running, approvals=[_approved(run_id=running.id, **expired)])
    await store.put_run(waiting, approvals=[approval_record(run_id=waiting.id, **live)])
    await store.put_run(stale, approvals=[approval_record(run_id=stale.id, **expired)])
    await store.put_run(recent)
    denied_new = approval_record(status="denied", created_at=now, expires_at=now + 60)
    await store.add_approvals([denied_new])

    counts = await store.prune(runs_before=now - 1, approvals_before=now - 1, now=now)
    assert {r.id for r in await store.list_runs()} == {running.id, waiting.id, recent.id}
    left = {a.run_id for a in await store.list_approvals(now=now)}
    # The running run's approval stays; so do a live pending one and a new denial.
    assert left == {running.id, waiting.id, denied_new.run_id}
    assert (counts.runs, counts.approvals, counts.audit) == (2, 2, 0)
    assert await store.prune(now=now) == type(counts)()


# --- failures -------------------------------------------------------------------------


async def test_a_killed_connection_leaves_nothing_half_written(
    postgres_url: str, schema: str, open_pg: Opener
) -> None:
    store = await open_pg()
    run = run_record(status="awaiting_approval")
    a = _approved(run_id=run.id)
    await store.put_run(run, approvals=[a])
    fresh = approval_record(run_id=run.id)
    claim = replace(run, status="running", holder="h:1")

    # Another session inserts the same new approval id and does not commit: the store's
    # transaction, having already updated the run and used `a`, waits on that row.
    blocker = await psycopg.AsyncConnection.connect(
        postgres_url, options=f"-c search_path={schema}"
    )
    try:
        await blocker.execute(
            "INSERT INTO approvals (id, run_id, call_id, tool, arguments, arguments_hash, "
            "status, reason, effects, created_at, expires_at) "
            "VALUES (%s, 'r', 'c', 't', '{}', 'h', 'pending', '', 'read', 0, 0)",
            [fresh.id],
        )
        transition = asyncio.create_task(
            store.transition_run(
                run.id,
                expect=["awaiting_approval"],
                run=claim,
                approvals=[(_used(a, "h:1"), ["approved"])],
                new_approvals=[fresh],
            )
        )
        pid = await _blocked_by(postgres_url, blocker.info.backend_pid)
        killed = await _sql(postgres_url, schema, "SELECT pg_terminate_backend(%s)", pid)
        assert killed == [(True,)]
        with pytest.raises(StoreUnavailable, match="terminat"):
            await transition
    finally:
        await blocker.rollback()
        await blocker.close()

    assert await store.get_run(run.id) == replace(run, version=1)
    assert await store.get_approval(a.id) == a
    assert await store.get_approval(fresh.id) is None
    # The pool dropped the dead connection: the store carries on.
    assert await store.transition_run(
        run.id, expect=["awaiting_approval"], run=claim, approvals=[(_used(a, "h:1"), ["approved"])]
    )


async def _terminate_pool(url: str, schema: str) -> int:
    """End every backend of `schema`'s stores (see `_pooled`), as a PostgreSQL restart or
    an idle timeout would; how many it ended. Only those: other sessions on the test
    database (other tests, other processes) keep theirs."""
    # With a timeout it returns once each backend has exited (its farewell sent), not as
    # soon as it is signalled: the call that follows comes after the end, not during it.
    rows = await _sql(
        url,
        "public",
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
        "WHERE application_name = %s AND pid <> pg_backend_pid()",
        schema,
    )
    return int(rows[0][0])


async def _pooled(open_pg: Opener, schema: str, **params: str) -> PostgresStore:
    """A store whose sessions are named after the test's schema, for `_terminate_pool`."""
    return await open_pg(application_name=schema, **params)


async def test_the_call_after_the_server_ended_idle_connections_reads(
    postgres_url: str, schema: str, open_pg: Opener
) -> None:
    store = await _pooled(open_pg, schema)
    await store.remember("k", {"v": 1}, 60)
    run = run_record()
    await store.put_run(run)
    assert await store.recall("k") == {"v": 1}
    assert await _terminate_pool(postgres_url, schema) >= 1
    # Not a StoreUnavailable from the dead pooled connection: the pool hands out a live one.
    assert await store.recall("k") == {"v": 1}
    assert await store.get_run(run.id) == replace(run, version=1)


async def test_the_call_after_the_server_ended_idle_connections_writes(
    postgres_url: str, schema: str, open_pg: Opener
) -> None:
    store = await _pooled(open_pg, schema)
    await store.remember("k", {"v": 1}, 60)
    assert await _terminate_pool(postgres_url, schema) >= 1
    run = run_record()
    await store.put_run(run)
    await store.remember("k", {"v": 2}, 60)
    assert await store.get_run(run.id) == replace(run, version=1)
    assert await store.recall("k") == {"v": 2}


async def test_concurrent_calls_after_the_server_ended_many_idle_connections(
    postgres_url: str, schema: str, open_pg: Opener
) -> None:
    store = await _pooled(open_pg, schema, pool_size="8")
    runs = [run_record() for _ in range(8)]
    # Eight calls at once: the pool grows to (up to) eight connections, idle afterwards.
    await asyncio.gather(*(store.put_run(run) for run in runs))
    assert await _terminate_pool(postgres_url, schema) >= 2
    loop = asyncio.get_running_loop()
    started = loop.time()
    stored = await asyncio.gather(*(store.get_run(run.id) for run in runs))
    assert stored == [replace(run, version=1) for run in runs]
    more = [run_record() for _ in range(8)]
    await asyncio.gather(*(store.put_run(run) for run in more))
    # Dead connections are dropped at once, not retried after a back-off.
    assert loop.time() - started < 1
    # And one caller alone, meeting every dead connection left in turn, gets through too.
    await asyncio.gather(*(store.get_run(run.id) for run in runs))
    assert await _terminate_pool(postgres_url, schema) >= 2
    assert await store.get_run(runs[0].id) == replace(runs[0], version=1)


async def _blocked_by(url: str, blocker: int) -> int:
    """The pid of the session waiting for `blocker`'s lock (polls for up to 5 s)."""
    for _ in range(250):
        rows = await _sql(
            url,
            "public",
            "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            blocker,
        )
        if rows:
            return int(rows[0][0])
        await asyncio.sleep(0.02)
    raise AssertionError("the store's transaction never waited on the blocker")


@pytest.mark.parametrize(
    ("target", "error", "says"),
    [
        ("127.0.0.1:1/test", StoreUnavailable, "unreachable: .*refused"),
        ("127.0.0.1:5432/no_such_database", StoreError, 'database "no_such_database" does'),
    ],
)
async def test_connection_errors_are_one_clear_line(
    postgres_url: str, target: str, error: type[StoreError], says: str
) -> None:
    host = postgres_url.split("@", 1)[1].split("/", 1)[0]
    url = f"postgresql://postgres:sekrit@{target.replace('127.0.0.1:5432', host)}"
    store = PostgresStore(url, connect_timeout=2)
    with pytest.raises(error, match=says) as caught:
        await store.open()
    message = str(caught.value)
    assert "sekrit" not in message
    assert "\n" not in message
    assert (error is StoreUnavailable) == isinstance(caught.value, StoreUnavailable)


async def test_a_store_that_is_down_reads_as_unavailable(open_pg: Opener) -> None:
    store = await open_pg()
    await store.aclose()
    with pytest.raises(StoreError, match="not open"):
        await store.ping()


async def test_sessions_commit_synchronously_in_their_schema(schema: str, open_pg: Opener) -> None:
    # Even when the URL asks for asynchronous commit, the store's sessions do not.
    store = await open_pg(options="-csynchronous_commit%3Doff")
    async with store._connection() as conn:
        cursor = await conn.execute("SELECT current_setting('synchronous_commit'), current_schema")
        assert await cursor.fetchone() == ("on", schema)


async def test_expired_cache_and_memory_rows_are_swept(
    postgres_url: str, schema: str, open_pg: Opener
) -> None:
    store = await open_pg()
    await store.set("old", b"v", 0.05)
    await store.remember("old", {"v": 1}, 0.05)
    await asyncio.sleep(0.1)
    assert await store.get("old") is None
    store._next_purge = 0.0  # the next write sweeps (else at most once a minute)
    await store.set("new", b"v", 30)
    rows = await _sql(
        postgres_url, schema, "SELECT (SELECT count(*) FROM cache), (SELECT count(*) FROM memory)"
    )
    assert rows == [(1, 0)]


class _Proxy:
    """A TCP proxy to PostgreSQL that a test can take down (and bring back) like a server."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


async def test_a_server_that_goes_away_reads_as_unavailable_then_recovers(
    postgres_url: str, schema: str
) -> None:
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(postgres_url)
    proxy = _Proxy(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
    await proxy.start()
    database, user = params.get("dbname", "test"), params.get("user", "postgres")
    url = f"postgresql://{user}@127.0.0.1:{proxy.port}/{database}?schema={schema}"
    store = PostgresStore(url, connect_timeout=1, timeout=1)
    await store.open()
    try:
        run = run_record()
        await store.put_run(run)
        await proxy.stop()
        loop = asyncio.get_running_loop()
        for _ in range(2):  # the pooled connection is dropped, and no new one comes in time
            started = loop.time()
            with pytest.raises(StoreUnavailable, match=f"PostgreSQL at {re.escape(url)}"):
                await store.get_run(run.id)
            assert loop.time() - started < 3
        await proxy.start()  # the same port: the server is back
        for _ in range(100):
            with contextlib.suppress(StoreUnavailable):
                assert await store.get_run(run.id) == replace(run, version=1)
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the store never reconnected")
    finally:
        await store.aclose()
        await proxy.stop()


def test_a_server_without_fsync_is_named() -> None:
    from toolwire.store.postgres import _durability_problem

    assert _durability_problem("on") is None
    problem = _durability_problem("off")
    assert problem is not None
    assert "fsync = off" in problem
    assert "run twice" in problem


async def test_opening_a_durable_server_warns_of_nothing(
    open_pg: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="toolwire.store"):
        await open_pg()
    assert caplog.records == []
