"""`transition_run`, `put_run(approvals=…)` and `renew_lease` on every backend: one atomic
step each, fenced by status, version and holder, all of it or nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import replace

import pytest
from store_support import NOW, Backend, approval_record, audit_record, run_record

from toolwire.store import ApprovalRecord, RunRecord, Store, StoreConflict


async def _paused(store: Store, *statuses: str) -> tuple[RunRecord, list[ApprovalRecord]]:
    """A run awaiting approval with one approval per status given, stored; as stored."""
    run = run_record(status="awaiting_approval", holder=None, lease_until=None)
    approvals = [approval_record(run_id=run.id, status=s) for s in statuses]
    await store.put_run(run, approvals=approvals)
    stored = await store.get_run(run.id)
    assert stored is not None
    return stored, approvals


def _used(approval: ApprovalRecord, at: float = NOW + 100) -> ApprovalRecord:
    return replace(approval, status="used", used_at=at)


async def test_put_run_stores_the_run_and_its_approvals(store: Store) -> None:
    run, approvals = await _paused(store, "pending", "pending")
    assert run.version == 1
    assert await store.list_approvals(run_id=run.id, now=NOW) == approvals[::-1]


async def test_put_run_with_a_taken_approval_id_writes_nothing(store: Store) -> None:
    existing = approval_record()
    await store.add_approvals([existing])
    run = run_record()
    fresh = approval_record(run_id=run.id)
    with pytest.raises(StoreConflict):
        await store.put_run(run, approvals=[fresh, replace(existing, reason="again")])
    assert await store.get_run(run.id) is None
    assert await store.get_approval(fresh.id) is None
    assert await store.get_approval(existing.id) == existing


async def test_claim_and_use_approvals_at_once(store: Store) -> None:
    run, (a, b) = await _paused(store, "approved", "approved")
    taken = replace(run, status="running", holder="h:1")
    assert await store.transition_run(
        run.id,
        expect=["awaiting_approval"],
        run=taken,
        version=run.version,
        approvals=[(_used(a), ["approved"]), (_used(b), ["approved"])],
    )
    assert await store.get_run(run.id) == replace(taken, version=2)
    assert await store.get_approval(a.id) == _used(a)
    assert await store.get_approval(b.id) == _used(b)
    assert await store.list_approvals(status="used", run_id=run.id, now=NOW) == [_used(b), _used(a)]
    assert await store.list_approvals(status="approved", now=NOW) == []


async def test_one_failed_approval_check_writes_nothing(store: Store) -> None:
    # The review's first finding: a refused resume (B still pending) consumed A.
    run, (a, b) = await _paused(store, "approved", "pending")
    taken = replace(run, status="running", holder="h:1", state={"changed": True})
    refused = await store.transition_run(
        run.id,
        expect=["awaiting_approval"],
        run=taken,
        approvals=[(_used(a), ["approved"]), (_used(b), ["approved"])],
        new_approvals=[approval_record(run_id=run.id, id="appr_never")],
    )
    assert refused is False
    assert await store.get_run(run.id) == run
    assert await store.get_approval(a.id) == a
    assert await store.get_approval(b.id) == b
    assert await store.get_approval("appr_never") is None
    assert await store.list_approvals(status="approved", now=NOW) == [a]
    assert await store.list_approvals(status="used", now=NOW) == []

    # A missing approval, or one with no acceptable status, fails the same way.
    for check in ([(_used(a), ["approved"]), (approval_record(), ["pending"])], [(a, [])]):
        assert not await store.transition_run(
            run.id, expect=["awaiting_approval"], run=taken, approvals=check
        )
        assert await store.get_run(run.id) == run
        assert await store.get_approval(a.id) == a


async def test_a_failed_run_check_writes_no_approval(store: Store) -> None:
    run, (a,) = await _paused(store, "approved")
    taken = replace(run, status="running")
    for fence in ({"expect": ["running"]}, {"version": 7}, {"holder": "someone"}):
        args = {"expect": ["awaiting_approval"]} | fence
        assert not await store.transition_run(
            run.id,
            run=taken,
            approvals=[(_used(a), ["approved"])],
            **args,  # type: ignore[arg-type]
        )
        assert await store.get_run(run.id) == run
        assert await store.get_approval(a.id) == a


async def test_version_fences_a_stale_writer(store: Store) -> None:
    run = run_record(status="running", holder="h:1")
    await store.put_run(run)
    read = await store.get_run(run.id)
    assert read is not None
    assert read.version == 1

    first = replace(read, state={"step": 1})
    assert await store.transition_run(run.id, expect=["running"], run=first, version=1)
    # A writer that read version 1 loses now, whatever status it expects.
    stale = replace(read, state={"step": "stale"})
    assert not await store.transition_run(run.id, expect=["running"], run=stale, version=1)
    assert await store.get_run(run.id) == replace(first, version=2)
    assert not await store.transition_run(run.id, expect=["running"], run=stale, version=0)
    second = replace(read, state={"step": 2})
    assert await store.transition_run(run.id, expect=["running"], run=second, version=2)
    assert await store.get_run(run.id) == replace(second, version=3)


async def test_holder_fences_another_claim(store: Store) -> None:
    run = run_record(status="running", holder="host:1:a:claim1")
    await store.put_run(run)
    mine = replace(run, state={"written by": "claim2"}, holder="host:1:a:claim2")
    assert not await store.transition_run(
        run.id, expect=["running"], run=mine, holder="host:1:a:claim2"
    )
    assert await store.get_run(run.id) == replace(run, version=1)
    # Without the holder set the record reads as someone else's: still refused.
    unheld = run_record(status="running", holder=None)
    await store.put_run(unheld)
    assert not await store.transition_run(unheld.id, expect=["running"], run=unheld, holder="h")

    done = replace(run, status="completed", holder=None, lease_until=None)
    assert await store.transition_run(
        run.id, expect=["running"], run=done, holder="host:1:a:claim1"
    )
    assert await store.get_run(run.id) == replace(done, version=2)


async def test_pause_writes_the_run_and_its_new_approvals_in_one_step(store: Store) -> None:
    run = run_record(status="running", holder="h:1")
    await store.put_run(run)
    fresh = [approval_record(run_id=run.id), approval_record(run_id=run.id)]
    paused = replace(run, status="awaiting_approval", holder=None, lease_until=None)
    assert await store.transition_run(
        run.id, expect=["running"], run=paused, holder="h:1", new_approvals=fresh
    )
    assert await store.get_run(run.id) == replace(paused, version=2)
    assert await store.list_approvals(status="pending", run_id=run.id, now=NOW) == fresh[::-1]


async def test_a_taken_new_approval_id_writes_nothing(store: Store) -> None:
    run, (a,) = await _paused(store, "approved")
    existing = approval_record()
    await store.add_approvals([existing])
    fresh = approval_record(run_id=run.id)
    taken = replace(run, status="running", holder="h:1")
    for batch in ([fresh, replace(existing, run_id=run.id)], [fresh, replace(fresh)]):
        with pytest.raises(StoreConflict):
            await store.transition_run(
                run.id,
                expect=["awaiting_approval"],
                run=taken,
                approvals=[(_used(a), ["approved"])],
                new_approvals=batch,
            )
        assert await store.get_run(run.id) == run
        assert await store.get_approval(a.id) == a
        assert await store.get_approval(fresh.id) is None
        assert await store.get_approval(existing.id) == existing


async def test_renew_lease_only_for_the_holder(store: Store) -> None:
    run = run_record(status="running", holder="host:1:a:claim1", lease_until=NOW + 30)
    await store.put_run(run)
    stored = await store.get_run(run.id)
    assert stored is not None

    # A renewal left over from an earlier claim: refused, and nothing at all changes.
    assert not await store.renew_lease(run.id, holder="host:1:a:claim0", lease_until=NOW + 99)
    assert await store.get_run(run.id) == stored
    assert not await store.renew_lease("missing", holder="host:1:a:claim1", lease_until=NOW)
    assert await store.get_run("missing") is None

    assert await store.renew_lease(run.id, holder="host:1:a:claim1", lease_until=NOW + 60)
    # Only the lease: not the state, not the version.
    assert await store.get_run(run.id) == replace(stored, lease_until=NOW + 60)

    paused = replace(stored, status="awaiting_approval", lease_until=None)
    assert await store.transition_run(run.id, expect=["running"], run=paused)
    assert not await store.renew_lease(run.id, holder="host:1:a:claim1", lease_until=NOW + 90)
    assert await store.get_run(run.id) == replace(paused, version=2)


async def test_two_stores_racing_a_claim_have_one_winner(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    for round_ in range(25):
        run, (a, b) = await _paused(first, "approved", "approved")
        claims = [
            replace(run, status="running", holder=f"h:{round_}:{i}", state={"claim": i})
            for i in range(8)
        ]
        won = await asyncio.gather(
            *(
                (first if i % 2 else second).transition_run(
                    run.id,
                    expect=["awaiting_approval"],
                    run=claim,
                    version=run.version,
                    approvals=[
                        (_used(a, NOW + i), ["approved"]),
                        (_used(b, NOW + i), ["approved"]),
                    ],
                )
                for i, claim in enumerate(claims)
            )
        )
        assert won.count(True) == 1, won
        i = won.index(True)
        assert await second.get_run(run.id) == replace(claims[i], version=2)
        assert await first.get_approval(a.id) == _used(a, NOW + i)
        assert await second.get_approval(b.id) == _used(b, NOW + i)


async def test_a_claim_racing_a_denial_is_all_or_nothing(backend: Backend) -> None:
    # Either the resume wins and both approvals are used, or the denial wins and the
    # resume changed nothing: never A used with B denied.
    first, second = await backend.open(), await backend.open()
    for round_ in range(30):
        run, (a, b) = await _paused(first, "approved", "approved")
        claim = first.transition_run(
            run.id,
            expect=["awaiting_approval"],
            run=replace(run, status="running", holder=f"h:{round_}"),
            approvals=[(_used(a), ["approved"]), (_used(b), ["approved"])],
        )
        denial = second.update_approval(
            replace(b, status="denied", decided_by="ops"), expect=["approved"]
        )
        if round_ % 2:
            claimed, denied = await asyncio.gather(claim, denial)
        else:
            denied, claimed = await asyncio.gather(denial, claim)
        assert claimed != denied
        stored_a, stored_b = await second.get_approval(a.id), await second.get_approval(b.id)
        stored_run = await second.get_run(run.id)
        assert stored_a is not None
        assert stored_b is not None
        assert stored_run is not None
        if claimed:
            assert (stored_a.status, stored_b.status, stored_run.status) == (
                "used",
                "used",
                "running",
            )
        else:
            assert (stored_a.status, stored_b.status) == ("approved", "denied")
            assert stored_run == run


async def test_a_refused_transition_takes_no_other_write_with_it(store: Store) -> None:
    # On SQLite a transaction spans several awaits on the one connection: a statement of
    # another coroutine issued in between must not join it and be rolled back with it.
    async def later(ticks: int, write: Awaitable[object]) -> None:
        for _ in range(ticks):
            await asyncio.sleep(0)
        await write

    for _ in range(5):
        run, (a, b) = await _paused(store, "approved", "pending")
        refused = store.transition_run(
            run.id,
            expect=["awaiting_approval"],
            run=replace(run, status="running"),
            approvals=[(_used(a), ["approved"]), (_used(b), ["approved"])],
        )
        fresh = [approval_record(run_id="other") for _ in range(12)]
        other = run_record()
        results = await asyncio.gather(
            refused,
            *(later(i, store.add_approvals([f])) for i, f in enumerate(fresh)),
            later(3, store.put_run(other)),
        )
        assert results[0] is False
        for f in fresh:
            assert await store.get_approval(f.id) == f
        assert await store.get_run(other.id) == replace(other, version=1)
        assert await store.get_approval(a.id) == a


async def test_a_cancelled_transition_is_all_or_nothing(store: Store) -> None:
    for delay in range(12):
        run, (a, b) = await _paused(store, "approved", "approved")
        taken = replace(run, status="running", holder="h:1")
        task = asyncio.ensure_future(
            store.transition_run(
                run.id,
                expect=["awaiting_approval"],
                run=taken,
                approvals=[(_used(a), ["approved"]), (_used(b), ["approved"])],
            )
        )
        for _ in range(delay):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):  # unless it had finished
            await task
        await asyncio.sleep(0.05)  # a shielded transaction may still be finishing
        # The store still works, and holds all of the transition or none of it.
        await store.append_audit(audit_record())
        stored = await store.get_run(run.id)
        states = {(await store.get_approval(x.id) or x).status for x in (a, b)}
        assert stored is not None
        if stored.status == "running":
            assert states == {"used"}
        else:
            assert stored == run
            assert states == {"approved"}


async def test_a_failed_check_wins_over_a_taken_new_approval_id(store: Store) -> None:
    # Returns False (someone else won), not StoreConflict, and writes nothing.
    run, _ = await _paused(store)
    existing = approval_record()
    await store.add_approvals([existing])
    taken = replace(run, status="running", holder="h:1")
    assert not await store.transition_run(
        run.id, expect=["running"], run=taken, new_approvals=[approval_record(), existing]
    )
    assert await store.get_run(run.id) == run
