"""`MemoryStore`: the store in plain dicts, for tests, demos and the library without a gateway.

Nothing survives the process (`durable = False`). Records go in and come out as copies, so
a caller mutating what it got back cannot change what is stored, as with the other
backends. Retention (`prune`) applies as on the others.
"""

from __future__ import annotations

import bisect
import copy
import time
from collections.abc import Sequence
from typing import Any

import orjson

from toolwire.store.base import (
    APPROVAL_DECISION_FIELDS,
    ApprovalRecord,
    ApprovalStatus,
    AuditQuery,
    AuditRecord,
    PruneCounts,
    RunRecord,
    RunStatus,
    StoreConflict,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    """The `Store` interface over dicts in this process."""

    url = "memory"
    durable = False

    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._approvals: dict[str, ApprovalRecord] = {}
        self._audit: list[AuditRecord] = []  # ids increasing, not positions: prune drops a head
        self._audit_last = 0
        # Expiry on the monotonic clock: a wall clock step must not revive or drop entries.
        self._cache: dict[str, tuple[float, bytes]] = {}
        self._memory: dict[str, tuple[float, bytes]] = {}
        self._counts: dict[str, tuple[float, int]] = {}
        self._writes = 0

    async def open(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def ping(self) -> None:
        pass

    # --- runs -------------------------------------------------------------------------

    async def put_run(self, run: RunRecord, *, approvals: Sequence[ApprovalRecord] = ()) -> None:
        self._check_new(approvals)
        stored = self._runs.get(run.id)
        self._write_run(run, (stored.version if stored is not None else 0) + 1)
        self._insert(approvals)

    async def get_run(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        return copy.deepcopy(run) if run is not None else None

    async def transition_run(
        self,
        run_id: str,
        *,
        expect: Sequence[RunStatus],
        run: RunRecord,
        version: int | None = None,
        holder: str | None = None,
        approvals: Sequence[tuple[ApprovalRecord, Sequence[ApprovalStatus]]] = (),
        new_approvals: Sequence[ApprovalRecord] = (),
    ) -> bool:
        stored = self._runs.get(run_id)
        if (
            stored is None
            or stored.status not in expect
            or (version is not None and stored.version != version)
            or (holder is not None and stored.holder != holder)
        ):
            return False
        for approval, wanted in approvals:
            current = self._approvals.get(approval.id)
            if current is None or current.status not in wanted:
                return False
        self._check_new(new_approvals)
        self._write_run(run, stored.version + 1)
        for approval, _ in approvals:
            self._decide(approval)
        self._insert(new_approvals)
        return True

    async def renew_lease(self, run_id: str, *, holder: str, lease_until: float) -> bool:
        stored = self._runs.get(run_id)
        if stored is None or stored.status != "running" or stored.holder != holder:
            return False
        stored.lease_until = lease_until
        return True

    def _write_run(self, run: RunRecord, version: int) -> None:
        stored = copy.deepcopy(run)
        stored.version = version
        self._runs[run.id] = stored

    async def list_runs(
        self, *, status: RunStatus | None = None, owner: str | None = None, limit: int = 100
    ) -> list[RunRecord]:
        found = [
            run
            for run in self._runs.values()
            if (status is None or run.status == status) and (owner is None or run.owner == owner)
        ]
        found.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return copy.deepcopy(found[: max(limit, 0)])

    # --- approvals --------------------------------------------------------------------

    async def add_approvals(self, approvals: Sequence[ApprovalRecord]) -> None:
        self._check_new(approvals)
        self._insert(approvals)

    def _check_new(self, approvals: Sequence[ApprovalRecord]) -> None:
        ids = [a.id for a in approvals]
        taken = [i for i in ids if i in self._approvals]
        if taken or len(set(ids)) != len(ids):
            raise StoreConflict(f"approval {(taken or ids)[0]!r} exists already")

    def _insert(self, approvals: Sequence[ApprovalRecord]) -> None:
        for approval in approvals:
            self._approvals[approval.id] = copy.deepcopy(approval)

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        approval = self._approvals.get(approval_id)
        return copy.deepcopy(approval) if approval is not None else None

    async def list_approvals(
        self,
        *,
        status: ApprovalStatus | None = None,
        requested_by: str | None = None,
        run_id: str | None = None,
        now: float,
        limit: int = 100,
        before: tuple[float, str] | None = None,
    ) -> list[ApprovalRecord]:
        found = [
            a
            for a in self._approvals.values()
            if (status is None or a.effective_status(now) == status)
            and (requested_by is None or a.requested_by == requested_by)
            and (run_id is None or a.run_id == run_id)
            and (before is None or (a.created_at, a.id) < before)
        ]
        found.sort(key=lambda a: (a.created_at, a.id), reverse=True)
        return copy.deepcopy(found[: max(limit, 0)])

    async def update_approval(
        self, approval: ApprovalRecord, *, expect: Sequence[ApprovalStatus]
    ) -> bool:
        stored = self._approvals.get(approval.id)
        if stored is None or stored.status not in expect:
            return False
        self._decide(approval)
        return True

    def _decide(self, approval: ApprovalRecord) -> None:
        stored = self._approvals[approval.id]
        for name in APPROVAL_DECISION_FIELDS:
            setattr(stored, name, getattr(approval, name))

    # --- audit ------------------------------------------------------------------------

    async def append_audit(self, record: AuditRecord) -> int:
        stored = copy.deepcopy(record)
        self._audit_last += 1
        stored.id = self._audit_last
        self._audit.append(stored)
        return stored.id

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        found: list[AuditRecord] = []
        if query.limit <= 0:
            return found
        start = bisect.bisect_right(self._audit, query.after_id, key=lambda r: r.id)
        for record in self._audit[start:]:
            if query.matches(record):
                found.append(copy.deepcopy(record))
                if len(found) >= query.limit:
                    break
        return found

    # --- retention --------------------------------------------------------------------

    async def prune(
        self,
        *,
        runs_before: float | None = None,
        approvals_before: float | None = None,
        audit_before: float | None = None,
        now: float,
    ) -> PruneCounts:
        approvals = runs = audit = 0
        if approvals_before is not None:
            for approval in list(self._approvals.values()):
                run = self._runs.get(approval.run_id)
                if (
                    approval.created_at < approvals_before
                    and approval.effective_status(now) in ("denied", "used", "expired")
                    and (run is None or run.status != "running")
                ):
                    del self._approvals[approval.id]
                    approvals += 1
        if runs_before is not None:
            for run in list(self._runs.values()):
                if run.updated_at < runs_before and self._finished(run, now):
                    del self._runs[run.id]
                    runs += 1
        if audit_before is not None:
            # Oldest first: the log stays one unbroken run of ids, with no hole inside it.
            while audit < len(self._audit) and self._audit[audit].time < audit_before:
                audit += 1
            del self._audit[:audit]
        return PruneCounts(runs=runs, approvals=approvals, audit=audit)

    def _finished(self, run: RunRecord, now: float) -> bool:
        """Final, or awaiting approvals that have all expired (none left: nothing to wait for)."""
        if run.status == "awaiting_approval":
            return all(
                a.effective_status(now) == "expired"
                for a in self._approvals.values()
                if a.run_id == run.id
            )
        return run.status != "running"

    # --- cache and memory -------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        if time.monotonic() >= entry[0]:
            del self._cache[key]
            return None
        return entry[1]

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        self._sweep()
        if ttl <= 0:
            self._cache.pop(key, None)
            return
        self._cache[key] = (time.monotonic() + ttl, value)

    async def remember(self, key: str, value: dict[str, Any], ttl: float) -> None:
        self._sweep()
        if ttl <= 0:
            self._memory.pop(key, None)
            return
        # Kept as the JSON the other stores keep (a copy, and the same types back).
        self._memory[key] = (time.monotonic() + ttl, orjson.dumps(value))

    async def recall(self, key: str) -> dict[str, Any] | None:
        entry = self._memory.get(key)
        if entry is None:
            return None
        if time.monotonic() >= entry[0]:
            del self._memory[key]
            return None
        value: dict[str, Any] = orjson.loads(entry[1])
        return value

    async def add_count(self, key: str, amount: int, ttl: float) -> int:
        self._sweep()
        now = time.monotonic()
        entry = self._counts.get(key)
        value = amount + (entry[1] if entry is not None and entry[0] > now else 0)
        self._counts[key] = (now + ttl, value)
        return value

    def _sweep(self) -> None:
        """Every 1000 writes, drop expired entries nobody read again (else they pile up)."""
        self._writes += 1
        if self._writes % 1000:
            return
        now = time.monotonic()
        for entries in (self._cache, self._memory, self._counts):
            for key in [k for k, (expires, _) in entries.items() if now >= expires]:
                del entries[key]
