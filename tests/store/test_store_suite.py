"""The store contract, run against every backend (see the `backend` fixture)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from store_support import NOW, Backend, approval_record, audit_record, run_record

from toolwire.store import AuditQuery, Store, StoreConflict


def test_durable_and_url(backend: Backend, store: Store) -> None:
    assert store.durable is (backend.name != "memory")
    schemes = {"memory": "memory", "sqlite": "sqlite", "postgres": "postgresql"}
    assert store.url.split(":", 1)[0] == schemes.get(backend.name, "redis")


async def test_ping(store: Store) -> None:
    await store.ping()


# --- runs -----------------------------------------------------------------------------


async def test_run_round_trip_and_replace(store: Store) -> None:
    run = run_record(state={"messages": [{"role": "user", "content": "héllo ✓"}], "x": 1.25})
    await store.put_run(replace(run, version=7))  # the store sets the version, not the caller
    assert await store.get_run(run.id) == replace(run, version=1)
    assert await store.get_run("missing") is None

    changed = replace(run, status="completed", state={"done": True}, owner=None, holder=None)
    await store.put_run(changed)
    assert await store.get_run(run.id) == replace(changed, version=2)


async def test_records_come_back_as_copies(store: Store) -> None:
    run = run_record()
    await store.put_run(run)
    run.state["n"] = "changed after put"
    got = await store.get_run(run.id)
    assert got is not None
    got.state["n"] = "changed after get"
    again = await store.get_run(run.id)
    assert again is not None
    assert again.state["n"] not in ("changed after put", "changed after get")


async def test_transition_run_is_a_compare_and_set(store: Store) -> None:
    run = run_record(status="awaiting_approval", version=1)
    await store.put_run(run)
    claimed = replace(run, status="running", holder="other:1:x", updated_at=NOW + 500)

    assert await store.transition_run(run.id, expect=["completed", "error"], run=claimed) is False
    assert await store.get_run(run.id) == replace(run, version=1)
    assert await store.transition_run(run.id, expect=[], run=claimed) is False
    assert await store.transition_run("missing", expect=["running"], run=claimed) is False

    assert await store.transition_run(run.id, expect=["awaiting_approval"], run=claimed) is True
    assert await store.get_run(run.id) == replace(claimed, version=2)
    assert await store.transition_run(run.id, expect=["awaiting_approval"], run=claimed) is False


async def test_concurrent_claims_of_a_run_have_one_winner(store: Store) -> None:
    run = run_record(status="awaiting_approval")
    await store.put_run(run)
    claims = [replace(run, status="running", holder=f"h:{i}", version=2) for i in range(20)]
    won = await asyncio.gather(
        *(store.transition_run(run.id, expect=["awaiting_approval"], run=c) for c in claims)
    )
    assert won.count(True) == 1
    stored = await store.get_run(run.id)
    assert stored == replace(claims[won.index(True)], version=2)


async def test_list_runs_newest_first_with_filters(store: Store) -> None:
    a = run_record(status="running", owner="alice", created_at=NOW + 1, version=1)
    b = run_record(status="completed", owner="bob", created_at=NOW + 2, version=1)
    c = run_record(status="running", owner="bob", created_at=NOW + 3, version=1)
    d = run_record(status="completed", owner=None, created_at=NOW + 4, version=1)
    for run in (b, d, a, c):
        await store.put_run(run)

    assert await store.list_runs() == [d, c, b, a]
    assert await store.list_runs(limit=2) == [d, c]
    assert await store.list_runs(status="running") == [c, a]
    assert await store.list_runs(owner="bob") == [c, b]
    assert await store.list_runs(status="completed", owner="bob") == [b]
    assert await store.list_runs(status="error") == []
    assert await store.list_runs(owner="nobody") == []


async def test_list_runs_follows_status_and_owner_changes(store: Store) -> None:
    run = run_record(status="awaiting_approval", owner="alice")
    await store.put_run(run)
    done = replace(run, status="completed", version=2)
    assert await store.transition_run(run.id, expect=["awaiting_approval"], run=done)
    assert await store.list_runs(status="awaiting_approval") == []
    assert await store.list_runs(status="completed") == [done]

    moved = replace(done, owner="bob", version=3)
    await store.put_run(moved)
    assert await store.list_runs(owner="alice") == []
    assert await store.list_runs(owner="bob") == [moved]


async def test_same_created_at_orders_by_id(store: Store) -> None:
    runs = [run_record(id=f"same_{i}", created_at=NOW) for i in range(3)]
    for run in runs:
        await store.put_run(run)
    assert [r.id for r in await store.list_runs()] == ["same_2", "same_1", "same_0"]


# --- approvals ------------------------------------------------------------------------


async def test_approval_round_trip(store: Store) -> None:
    first = approval_record(reason="writes ✓", approver="ops")
    second = approval_record(requested_by=None)
    await store.add_approvals([first, second])
    assert await store.get_approval(first.id) == first
    assert await store.get_approval(second.id) == second
    assert await store.get_approval("missing") is None
    await store.add_approvals([])


async def test_add_approvals_is_all_or_nothing(store: Store) -> None:
    existing = approval_record()
    await store.add_approvals([existing])
    fresh = approval_record()
    with pytest.raises(StoreConflict):
        await store.add_approvals([fresh, replace(existing, reason="again")])
    assert await store.get_approval(fresh.id) is None
    assert await store.get_approval(existing.id) == existing


async def test_update_approval_decides_then_uses_once(store: Store) -> None:
    approval = approval_record()
    await store.add_approvals([approval])
    approved = replace(
        approval,
        status="approved",
        decided_by="bob",
        decided_at=NOW + 10,
        decision_reason="looks right",
    )
    assert await store.update_approval(approved, expect=["pending"]) is True
    assert await store.get_approval(approval.id) == approved
    assert await store.update_approval(approved, expect=["pending"]) is False
    assert await store.update_approval(approved, expect=[]) is False

    used = replace(approved, status="used", used_at=NOW + 20)
    assert await store.update_approval(used, expect=["approved"]) is True
    assert await store.update_approval(used, expect=["approved"]) is False
    assert await store.get_approval(approval.id) == used
    assert await store.update_approval(replace(used, id="missing"), expect=["used"]) is False


async def test_update_approval_never_rebinds_the_call(store: Store) -> None:
    approval = approval_record()
    await store.add_approvals([approval])
    tampered = replace(
        approval,
        status="approved",
        decided_by="bob",
        tool="other_tool",
        arguments='{"path":"/"}',
        arguments_hash="sha256:ff",
        run_id="run_other",
        requested_by="mallory",
    )
    assert await store.update_approval(tampered, expect=["pending"]) is True
    stored = await store.get_approval(approval.id)
    assert stored == replace(approval, status="approved", decided_by="bob")


async def test_concurrent_decisions_have_one_winner(store: Store) -> None:
    approval = approval_record()
    await store.add_approvals([approval])
    decisions = [
        replace(approval, status="approved" if i % 2 else "denied", decided_by=f"key{i}")
        for i in range(20)
    ]
    won = await asyncio.gather(*(store.update_approval(d, expect=["pending"]) for d in decisions))
    assert won.count(True) == 1
    assert await store.get_approval(approval.id) == decisions[won.index(True)]


async def test_concurrent_decisions_across_two_stores_have_one_winner(backend: Backend) -> None:
    if backend.name == "memory":
        pytest.skip("the memory store lives in one process")
    first, second = await backend.open(), await backend.open()
    approval = approval_record()
    await first.add_approvals([approval])
    decisions = [replace(approval, status="approved", decided_by=f"key{i}") for i in range(20)]
    won = await asyncio.gather(
        *(
            (first if i % 2 else second).update_approval(d, expect=["pending"])
            for i, d in enumerate(decisions)
        )
    )
    assert won.count(True) == 1
    winner = decisions[won.index(True)]
    assert await first.get_approval(approval.id) == winner
    assert await second.get_approval(approval.id) == winner


async def test_two_stores_see_each_others_writes(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    run, approval = run_record(version=1), approval_record()
    await first.put_run(run)
    await first.add_approvals([approval])
    record_id = await first.append_audit(audit_record())
    await first.set("k", b"v", 30)
    await first.remember("m", {"v": 1}, 30)
    assert await second.get_run(run.id) == replace(run, version=1)
    assert await second.get_approval(approval.id) == approval
    assert [r.id for r in await second.list_audit(AuditQuery())] == [record_id]
    assert await second.get("k") == b"v"
    assert await second.recall("m") == {"v": 1}


async def test_expiry_shows_in_effective_status(store: Store) -> None:
    pending = approval_record(created_at=NOW, expires_at=NOW + 60)
    approved = approval_record(created_at=NOW + 1, expires_at=NOW + 60, status="approved")
    denied = approval_record(created_at=NOW + 2, expires_at=NOW + 60, status="denied")
    await store.add_approvals([pending, approved, denied])

    before, after = NOW + 59.9, NOW + 60
    assert await store.list_approvals(status="pending", now=before) == [pending]
    assert await store.list_approvals(status="approved", now=before) == [approved]
    assert await store.list_approvals(status="expired", now=before) == []
    assert await store.list_approvals(status="pending", now=after) == []
    assert await store.list_approvals(status="approved", now=after) == []
    assert await store.list_approvals(status="expired", now=after) == [approved, pending]
    assert await store.list_approvals(status="denied", now=after) == [denied]
    got = await store.get_approval(pending.id)
    assert got is not None
    assert got.status == "pending"
    assert got.effective_status(after) == "expired"


async def test_list_approvals_newest_first_with_filters(store: Store) -> None:
    a = approval_record(run_id="r1", requested_by="alice", created_at=NOW + 1)
    b = approval_record(run_id="r1", requested_by="bob", created_at=NOW + 2, status="denied")
    c = approval_record(run_id="r2", requested_by="alice", created_at=NOW + 3)
    d = approval_record(run_id="r2", requested_by=None, created_at=NOW + 4, status="used")
    await store.add_approvals([c, a])
    await store.add_approvals([d, b])

    assert await store.list_approvals(now=NOW) == [d, c, b, a]
    assert await store.list_approvals(now=NOW, limit=3) == [d, c, b]
    assert await store.list_approvals(run_id="r1", now=NOW) == [b, a]
    assert await store.list_approvals(requested_by="alice", now=NOW) == [c, a]
    assert await store.list_approvals(status="pending", now=NOW) == [c, a]
    assert await store.list_approvals(status="pending", run_id="r2", now=NOW) == [c]
    assert await store.list_approvals(status="used", requested_by="alice", now=NOW) == []
    assert await store.list_approvals(status="denied", requested_by="bob", now=NOW) == [b]

    decided = replace(a, status="approved", decided_by="ops")
    assert await store.update_approval(decided, expect=["pending"])
    assert await store.list_approvals(status="pending", now=NOW) == [c]
    assert await store.list_approvals(status="approved", now=NOW) == [decided]


# --- audit ----------------------------------------------------------------------------


async def test_audit_appends_in_order(store: Store) -> None:
    records = [
        audit_record(event="started", outcome=None, duration_ms=None, arguments=None),
        audit_record(approval_id="appr_1", approved_by="bob", approved_at=NOW),
        audit_record(arguments={"nested": {"list": [1, "two", None]}, "text": "é"}),
    ]
    ids = [await store.append_audit(r) for r in records]
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    assert await store.list_audit(AuditQuery()) == [
        replace(r, id=i) for r, i in zip(records, ids, strict=True)
    ]


async def test_concurrent_appends_get_distinct_increasing_ids(store: Store) -> None:
    records = [audit_record(call_id=f"c{i}") for i in range(30)]
    ids = await asyncio.gather(*(store.append_audit(r) for r in records))
    assert len(set(ids)) == 30
    listed = await store.list_audit(AuditQuery(limit=100))
    assert [r.id for r in listed] == sorted(ids)
    by_call = {r.call_id: r.id for r in listed}
    assert [by_call[f"c{i}"] for i in range(30)] == ids


async def test_audit_filters(store: Store) -> None:
    a = audit_record(tool="read", key_name="alice", outcome="ok", run_id="r1", time=NOW + 1)
    b = audit_record(tool="write", key_name="bob", outcome="timeout", run_id="r1", time=NOW + 2)
    c = audit_record(tool="write", key_name="alice", outcome="ok", run_id=None, time=NOW + 3)
    d = audit_record(tool="read", key_name=None, outcome="ok", run_id="r2", time=NOW + 4)
    for r in (a, b, c, d):
        r.id = await store.append_audit(r)

    async def found(**filters: object) -> list[str]:
        records = await store.list_audit(AuditQuery(**filters))  # type: ignore[arg-type]
        return [r.call_id for r in records]

    assert await found() == [a.call_id, b.call_id, c.call_id, d.call_id]
    assert await found(tool="write") == [b.call_id, c.call_id]
    assert await found(key_name="alice") == [a.call_id, c.call_id]
    assert await found(outcome="timeout") == [b.call_id]
    assert await found(run_id="r1") == [a.call_id, b.call_id]
    assert await found(tool="read", outcome="ok", key_name="alice") == [a.call_id]
    assert await found(since=NOW + 2) == [b.call_id, c.call_id, d.call_id]
    assert await found(until=NOW + 2) == [a.call_id]
    assert await found(since=NOW + 2, until=NOW + 4) == [b.call_id, c.call_id]
    assert await found(tool="missing") == []
    assert await found(limit=0) == []


async def test_audit_pages_with_after_id(store: Store) -> None:
    records = [audit_record(tool="write" if i % 3 == 0 else "read") for i in range(25)]
    for r in records:
        r.id = await store.append_audit(r)

    seen: list[int] = []
    after = 0
    while page := await store.list_audit(AuditQuery(after_id=after, limit=10)):
        assert len(page) <= 10
        seen += [r.id for r in page]
        after = page[-1].id
    assert seen == [r.id for r in records]

    writes: list[int] = []
    after = 0
    while page := await store.list_audit(AuditQuery(tool="write", after_id=after, limit=3)):
        writes += [r.id for r in page]
        after = page[-1].id
    assert writes == [r.id for r in records if r.tool == "write"]
    assert await store.list_audit(AuditQuery(after_id=records[-1].id)) == []


# --- cache and memory -----------------------------------------------------------------


async def test_cache_round_trip_and_ttl(store: Store) -> None:
    assert await store.get("missing") is None
    await store.set("tool\x1falice\x1f{}", b'{"ok":true}', 30)
    assert await store.get("tool\x1falice\x1f{}") == b'{"ok":true}'
    await store.set("tool\x1falice\x1f{}", b"\x00\xffbinary", 30)
    assert await store.get("tool\x1falice\x1f{}") == b"\x00\xffbinary"

    await store.set("short", b"v", 0.2)
    assert await store.get("short") == b"v"
    await asyncio.sleep(0.3)
    assert await store.get("short") is None

    await store.set("gone", b"v", 30)
    await store.set("gone", b"v", 0)
    assert await store.get("gone") is None


async def test_memory_round_trip_and_ttl(store: Store) -> None:
    assert await store.recall("missing") is None
    value = {"steps": [{"id": "call_1", "result": {"temp": 21.5}}], "text": "é"}
    await store.remember("resp_1", value, 30)
    assert await store.recall("resp_1") == value

    await store.remember("short", {"v": 1}, 0.2)
    assert await store.recall("short") == {"v": 1}
    await asyncio.sleep(0.3)
    assert await store.recall("short") is None

    await store.remember("gone", {"v": 1}, 30)
    await store.remember("gone", {"v": 1}, -1)
    assert await store.recall("gone") is None


async def test_cache_and_memory_keys_do_not_collide(store: Store) -> None:
    await store.set("same", b"cache", 30)
    await store.remember("same", {"memory": True}, 30)
    assert await store.get("same") == b"cache"
    assert await store.recall("same") == {"memory": True}


# --- counters -------------------------------------------------------------------------


async def test_add_count_adds_takes_away_and_expires(store: Store) -> None:
    assert await store.add_count("rpm\x1falice\x1f1", 1, 30) == 1
    assert await store.add_count("rpm\x1falice\x1f1", 4, 30) == 5
    assert await store.add_count("rpm\x1fbob\x1f1", 1, 30) == 1
    assert await store.add_count("rpm\x1falice\x1f1", -2, 30) == 3
    await store.add_count("short", 7, 0.2)
    await asyncio.sleep(0.3)
    # Forgotten: it counts from 0 again.
    assert await store.add_count("short", 1, 30) == 1


async def test_add_count_is_atomic_under_concurrency(store: Store) -> None:
    values = await asyncio.gather(*(store.add_count("busy", 1, 30) for _ in range(50)))
    assert sorted(values) == list(range(1, 51))
    values = await asyncio.gather(*(store.add_count("busy", -1, 30) for _ in range(50)))
    assert sorted(values) == list(range(50))


async def test_counters_and_cache_keys_do_not_collide(store: Store) -> None:
    await store.set("same", b"cache", 30)
    assert await store.add_count("same", 2, 30) == 2
    assert await store.get("same") == b"cache"
