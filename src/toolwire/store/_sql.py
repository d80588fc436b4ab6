"""What the two SQL backends share: their columns, their rows as records, their reads
and listings.

SQLite and PostgreSQL differ in their parameter marks (`?` and `%s`), in how a column is
selected (PostgreSQL casts JSON to text) and in how they lock and commit, not in what a
read selects: each `Filters` here builds the `WHERE` clause of one listing for a given
mark, and `SqlReads` is every read, and the one-statement writes, written once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, Final

import orjson

from toolwire.store.base import (
    ApprovalRecord,
    ApprovalStatus,
    AuditQuery,
    AuditRecord,
    RunRecord,
    RunStatus,
)

__all__ = [
    "APPROVAL_COLUMNS",
    "AUDIT_COLUMNS",
    "RUN_COLUMNS",
    "SqlReads",
    "approval_filters",
    "approval_from_row",
    "audit_filters",
    "audit_from_row",
    "marks",
    "run_filters",
    "run_from_row",
]

RUN_COLUMNS: Final = tuple(f.name for f in dataclasses.fields(RunRecord))
APPROVAL_COLUMNS: Final = tuple(f.name for f in dataclasses.fields(ApprovalRecord))
AUDIT_COLUMNS: Final = tuple(f.name for f in dataclasses.fields(AuditRecord) if f.name != "id")
"""The audit columns written (the id is the database's)."""


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A `runs` row (selected as `RUN_COLUMNS`, `state` as JSON text) as its record."""
    fields = dict(zip(RUN_COLUMNS, row, strict=True))
    fields["state"] = orjson.loads(fields["state"])
    return RunRecord(**fields)


def approval_from_row(row: Sequence[Any]) -> ApprovalRecord:
    return ApprovalRecord(**dict(zip(APPROVAL_COLUMNS, row, strict=True)))


def audit_from_row(row: Sequence[Any]) -> AuditRecord:
    """An `audit` row (the id, then `AUDIT_COLUMNS`, `arguments` as JSON text)."""
    fields = dict(zip(("id", *AUDIT_COLUMNS), row, strict=True))
    if fields["arguments"] is not None:
        fields["arguments"] = orjson.loads(fields["arguments"])
    return AuditRecord(**fields)


class SqlReads:
    """The reads, listings and one-statement writes of a SQL store, over its `_fetch`,
    `_write` and `_put` and its parameter mark."""

    _mark: ClassVar[str]
    _run_select: ClassVar[str]
    """The `runs` columns as selected (`RUN_COLUMNS`, `state` as JSON text)."""
    _approval_select: ClassVar[str] = ", ".join(APPROVAL_COLUMNS)
    _audit_select: ClassVar[str]
    """The `audit` columns as selected (the id, then `AUDIT_COLUMNS`)."""

    async def _fetch(self, sql: str, params: Sequence[Any]) -> Sequence[Sequence[Any]]:
        raise NotImplementedError

    async def _write(self, sql: str, params: Sequence[Any]) -> int:
        raise NotImplementedError

    async def _put(self, table: str, key: str, value: bytes | str, ttl: float) -> None:
        raise NotImplementedError

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await self._fetch(
            f"SELECT {self._run_select} FROM runs WHERE id = {self._mark}", [run_id]
        )
        return run_from_row(rows[0]) if rows else None

    async def renew_lease(self, run_id: str, *, holder: str, lease_until: float) -> bool:
        m = self._mark
        changed = await self._write(
            f"UPDATE runs SET lease_until = {m} WHERE id = {m} AND status = 'running' "
            f"AND holder = {m}",
            [lease_until, run_id, holder],
        )
        return changed == 1

    async def list_runs(
        self, *, status: RunStatus | None = None, owner: str | None = None, limit: int = 100
    ) -> list[RunRecord]:
        where, params = run_filters(self._mark, status=status, owner=owner)
        rows = await self._fetch(
            f"SELECT {self._run_select} FROM runs {where} "
            f"ORDER BY created_at DESC, id DESC LIMIT {self._mark}",
            [*params, max(limit, 0)],
        )
        return [run_from_row(row) for row in rows]

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        rows = await self._fetch(
            f"SELECT {self._approval_select} FROM approvals WHERE id = {self._mark}",
            [approval_id],
        )
        return approval_from_row(rows[0]) if rows else None

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
        where, params = approval_filters(
            self._mark,
            status=status,
            requested_by=requested_by,
            run_id=run_id,
            now=now,
            before=before,
        )
        rows = await self._fetch(
            f"SELECT {self._approval_select} FROM approvals {where} "
            f"ORDER BY created_at DESC, id DESC LIMIT {self._mark}",
            [*params, max(limit, 0)],
        )
        return [approval_from_row(row) for row in rows]

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        where, params = audit_filters(self._mark, query)
        rows = await self._fetch(
            f"SELECT {self._audit_select} FROM audit {where} ORDER BY id LIMIT {self._mark}",
            [*params, max(query.limit, 0)],
        )
        return [audit_from_row(row) for row in rows]

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        await self._put("cache", key, value, ttl)

    async def remember(self, key: str, value: dict[str, Any], ttl: float) -> None:
        await self._put("memory", key, orjson.dumps(value).decode(), ttl)


Filters = tuple[str, list[Any]]
"""`WHERE …` (or `""`) and its parameters."""


def marks(mark: str, n: int) -> str:
    """`n` parameter marks, comma-separated."""
    return ", ".join([mark] * n)


def run_filters(mark: str, *, status: RunStatus | None, owner: str | None) -> Filters:
    return _where(*_equal(mark, {"status": status, "owner": owner}))


def approval_filters(
    mark: str,
    *,
    status: ApprovalStatus | None,
    requested_by: str | None,
    run_id: str | None,
    now: float,
    before: tuple[float, str] | None,
) -> Filters:
    clauses, params = _equal(mark, {"requested_by": requested_by, "run_id": run_id})
    if before is not None:  # the next page, newest first: what sorts after the cursor
        clauses.append(f"(created_at, id) < ({mark}, {mark})")
        params += [float(before[0]), before[1]]
    # The same rule as `ApprovalRecord.effective_status`.
    if status in ("pending", "approved"):
        clauses.append(f"status = {mark} AND expires_at > {mark}")
        params += [status, now]
    elif status == "expired":
        clauses.append(
            f"(status = 'expired' OR (status IN ('pending', 'approved') AND expires_at <= {mark}))"
        )
        params.append(now)
    elif status is not None:
        clauses.append(f"status = {mark}")
        params.append(status)
    return _where(clauses, params)


def audit_filters(mark: str, query: AuditQuery) -> Filters:
    clauses, params = _equal(
        mark,
        {
            "tool": query.tool,
            "key_name": query.key_name,
            "outcome": query.outcome,
            "run_id": query.run_id,
        },
    )
    clauses.append(f"id > {mark}")
    params.append(query.after_id)
    if query.since is not None:
        clauses.append(f"time >= {mark}")
        params.append(query.since)
    if query.until is not None:
        clauses.append(f"time < {mark}")
        params.append(query.until)
    return _where(clauses, params)


def _equal(mark: str, filters: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """`column = mark` clauses for the filters that are set, and their parameters."""
    used = {column: value for column, value in filters.items() if value is not None}
    return [f"{c} = {mark}" for c in used], list(used.values())


def _where(clauses: list[str], params: list[Any]) -> Filters:
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params
