"""The filters of the listings, written once for both SQL backends.

SQLite and PostgreSQL differ in their parameter marks (`?` and `%s`) and in how they lock
and commit, not in what a listing selects: each `Filters` here builds the `WHERE` clause
of one listing for a given mark, and its parameters in order.
"""

from __future__ import annotations

from typing import Any

from toolwire.store.base import ApprovalStatus, AuditQuery, RunStatus

__all__ = ["approval_filters", "audit_filters", "marks", "run_filters"]

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
