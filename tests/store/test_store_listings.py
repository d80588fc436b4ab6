"""Listings by key and status on every backend, as records move between statuses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from store_support import NOW, Backend, approval_record, run_record

from toolwire.store import Store


async def test_one_keys_approvals_by_status_follow_every_change(store: Store) -> None:
    mine = [approval_record(requested_by="alice", run_id=f"r{i}") for i in range(3)]
    theirs = [approval_record(requested_by="bob") for _ in range(5)]
    await store.add_approvals([*mine, *theirs])

    async def alices(status: str) -> list[str]:
        found = await store.list_approvals(requested_by="alice", status=status, now=NOW)  # type: ignore[arg-type]
        return [a.id for a in found]

    assert await alices("pending") == [a.id for a in mine[::-1]]
    approved = replace(mine[0], status="approved", decided_by="ops")
    assert await store.update_approval(approved, expect=["pending"])
    denied = replace(mine[1], status="denied", decided_by="ops")
    assert await store.update_approval(denied, expect=["pending"])
    assert await alices("pending") == [mine[2].id]
    assert await alices("approved") == [mine[0].id]
    assert await alices("denied") == [mine[1].id]

    # Used through a transition, as a resume does.
    run = run_record(id=mine[0].run_id, status="awaiting_approval")
    await store.put_run(run)
    used = replace(approved, status="used", used_at=NOW)
    assert await store.transition_run(
        run.id,
        expect=["awaiting_approval"],
        run=replace(run, status="running"),
        approvals=[(used, ["approved"])],
    )
    assert await alices("approved") == []
    assert await alices("used") == [mine[0].id]
    assert await store.list_approvals(requested_by="bob", status="used", now=NOW) == []
    assert len(await store.list_approvals(requested_by="bob", status="pending", now=NOW)) == 5

    # And forgotten by retention.
    await store.prune(approvals_before=NOW + 10_000, now=NOW)
    assert await alices("denied") == []


async def test_one_owners_runs_by_status_follow_every_change(store: Store) -> None:
    run = run_record(owner="alice", status="running")
    other = run_record(owner="bob", status="running")
    await store.put_run(run)
    await store.put_run(other)

    async def alices(status: str) -> list[str]:
        return [r.id for r in await store.list_runs(owner="alice", status=status)]  # type: ignore[arg-type]

    assert await alices("running") == [run.id]
    done = replace(run, status="completed", updated_at=NOW - 10_000)
    assert await store.transition_run(run.id, expect=["running"], run=done)
    assert await alices("running") == []
    assert await alices("completed") == [run.id]
    moved = replace(done, owner="carol")
    await store.put_run(moved)
    assert await alices("completed") == []
    assert [r.id for r in await store.list_runs(owner="carol", status="completed")] == [run.id]
    await store.prune(runs_before=NOW, now=NOW)
    assert await store.list_runs(owner="carol", status="completed") == []
    assert [r.id for r in await store.list_runs(owner="bob", status="running")] == [other.id]


async def test_approvals_page_past_a_thousand_with_a_cursor(backend: Backend) -> None:
    store = await backend.open()
    # Three at each created_at: the cursor must split ties by id, in both directions.
    approvals = [
        approval_record(id=f"appr_{i:05d}", created_at=NOW + i // 3, requested_by="alice")
        for i in range(1100)
    ]
    approvals += [approval_record(requested_by="bob", created_at=NOW + 5)]
    for start in range(0, len(approvals), 250):
        await store.add_approvals(approvals[start : start + 250])
    newest_first = sorted(
        (a for a in approvals if a.requested_by == "alice"),
        key=lambda a: (a.created_at, a.id),
        reverse=True,
    )

    async def pages(**filters: Any) -> list[str]:
        seen: list[str] = []
        before = None
        while page := await store.list_approvals(now=NOW, limit=97, before=before, **filters):
            seen += [a.id for a in page]
            before = (page[-1].created_at, page[-1].id)
        return seen

    expected = [a.id for a in newest_first]
    assert await pages(requested_by="alice") == expected
    assert await pages(requested_by="alice", status="pending") == expected
    everyone = await pages()
    assert len(everyone) == len(approvals)
    assert len(set(everyone)) == len(approvals)
