"""`Store.prune` on every backend: what retention deletes, what it always keeps."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from store_support import NOW, Backend, approval_record, audit_record, run_record

from toolwire.store import ApprovalRecord, AuditQuery, RunRecord, Store
from toolwire.store.base import PruneCounts

OLD, CUT, NEW = NOW - 1000, NOW - 500, NOW
"""Records written at OLD are older than the retention cut; those at NEW are not."""


async def test_nothing_is_deleted_without_a_cut(store: Store) -> None:
    await store.put_run(run_record(status="completed", updated_at=OLD, created_at=OLD))
    await store.add_approvals([approval_record(status="used", created_at=OLD)])
    await store.append_audit(audit_record(time=OLD))
    assert await store.prune(now=NOW) == PruneCounts()
    assert len(await store.list_runs()) == 1
    assert len(await store.list_approvals(now=NOW)) == 1
    assert len(await store.list_audit(AuditQuery())) == 1


async def test_runs_that_can_no_longer_change_are_deleted(store: Store) -> None:
    def old(status: str, **fields: Any) -> RunRecord:
        return run_record(status=status, created_at=OLD, updated_at=OLD, **fields)

    gone = [old("completed"), old("error", owner=None), old("max_iterations"), old("interrupted")]
    running = old("running")  # even with its lease out: recovery may still read it
    waiting = old("awaiting_approval")
    waited_out = old("awaiting_approval")
    empty = old("awaiting_approval")  # nothing left to wait for
    recent = run_record(status="completed", created_at=OLD, updated_at=NEW)
    for run in [*gone, running, waiting, waited_out, empty, recent]:
        await store.put_run(run)
    await store.add_approvals(
        [
            approval_record(run_id=waiting.id, expires_at=NOW + 1),
            approval_record(run_id=waiting.id, expires_at=OLD),
            approval_record(run_id=waited_out.id, expires_at=NOW),
            approval_record(
                run_id=waited_out.id,
                status="approved",
                expires_at=OLD,
            ),
            approval_record(run_id=waited_out.id, status="expired"),
        ]
    )

    counts = await store.prune(runs_before=CUT, now=NOW)
    assert counts == PruneCounts(runs=len(gone) + 2)
    kept = {r.id for r in await store.list_runs()}
    assert kept == {running.id, waiting.id, recent.id}
    assert await store.list_runs(owner=None, status="error") == []
    assert len(await store.list_approvals(now=NOW)) == 5  # approvals have their own cut
    assert await store.prune(runs_before=CUT, now=NOW) == PruneCounts()


async def test_approvals_that_can_no_longer_change_are_deleted(store: Store) -> None:
    running = run_record(status="running")
    paused = run_record(status="awaiting_approval")
    await store.put_run(running)
    await store.put_run(paused)

    def old(**fields: Any) -> ApprovalRecord:
        return approval_record(**({"created_at": OLD, "run_id": paused.id} | fields))

    gone = [
        old(status="denied"),
        old(status="used", requested_by=None),
        old(status="expired"),
        old(status="pending", expires_at=NOW),
        old(status="approved", expires_at=OLD + 1),
    ]
    kept = [
        old(status="pending", expires_at=NOW + 1),
        old(status="approved", expires_at=NOW + 1),
        old(status="used", run_id=running.id),  # its run is executing it
        approval_record(status="used", created_at=NEW, run_id=paused.id),
    ]
    await store.add_approvals([*gone, *kept])

    counts = await store.prune(approvals_before=CUT, now=NOW)
    assert counts == PruneCounts(approvals=len(gone))
    assert {a.id for a in await store.list_approvals(now=NOW)} == {a.id for a in kept}
    for approval in gone:
        assert await store.get_approval(approval.id) is None
    # The indexes forget them too.
    assert await store.list_approvals(status="denied", now=NOW) == []
    assert await store.list_approvals(requested_by="alice", status="expired", now=NOW) == []
    assert len(await store.list_approvals(run_id=paused.id, now=NOW)) == 3
    assert await store.prune(approvals_before=CUT, now=NOW) == PruneCounts()


async def test_audit_is_pruned_oldest_first_and_ids_are_never_reused(
    backend: Backend, store: Store, request: pytest.FixtureRequest
) -> None:
    times = [OLD + i / 10 for i in range(520)] + [NEW, OLD, NEW + 1]  # past one prune batch
    ids = [
        await store.append_audit(audit_record(time=t, call_id=f"c{i}")) for i, t in enumerate(times)
    ]

    counts = await store.prune(audit_before=CUT, now=NOW)
    # The OLD record after a NEW one stays: the log is cut at its head, never in between.
    assert counts == PruneCounts(audit=520)
    left = await store.list_audit(AuditQuery())
    assert [r.id for r in left] == ids[520:]
    assert await store.list_audit(AuditQuery(after_id=ids[520])) == left[1:]
    assert await store.list_audit(AuditQuery(after_id=ids[3], limit=1)) == left[:1]

    later = await store.append_audit(audit_record(time=NEW + 2))
    assert later > ids[-1]
    assert await store.prune(audit_before=CUT, now=NOW) == PruneCounts()
    assert await store.prune(audit_before=NEW + 1, now=NOW) == PruneCounts(audit=2)
    assert [r.id for r in await store.list_audit(AuditQuery())] == [ids[-1], later]


async def test_prunes_at_once_are_idempotent(backend: Backend) -> None:
    # Several gateway replicas prune on their own timers: together they delete each
    # record once, and neither fails.
    first, second = await backend.open(), await backend.open()
    runs = [run_record(status="completed", created_at=OLD, updated_at=OLD) for _ in range(30)]
    for run in runs:
        await first.put_run(run)
    approvals = [approval_record(status="used", created_at=OLD) for _ in range(30)]
    await first.add_approvals(approvals)
    for _ in range(30):
        await first.append_audit(audit_record(time=OLD))
    cuts = {"runs_before": CUT, "approvals_before": CUT, "audit_before": CUT, "now": NOW}
    counts = await asyncio.gather(*(s.prune(**cuts) for s in (first, second, first, second)))
    assert sum(c.runs for c in counts) == 30
    assert sum(c.approvals for c in counts) == 30
    assert sum(c.audit for c in counts) == 30
    assert await second.list_runs() == []
    assert await second.list_approvals(now=NOW) == []
    assert await second.list_audit(AuditQuery()) == []


async def test_a_run_written_again_is_kept(store: Store) -> None:
    run = run_record(status="completed", created_at=OLD, updated_at=OLD)
    await store.put_run(run)
    await store.put_run(replace(run, updated_at=NEW))
    assert await store.prune(runs_before=CUT, now=NOW) == PruneCounts()
