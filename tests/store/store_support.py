"""Record builders shared by the store tests."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolwire.store import (
    ApprovalRecord,
    AuditRecord,
    RunRecord,
    Store,
    arguments_hash,
    canonical_json,
)

NOW = 1_700_000_000.0
"""The `now` the tests pass in: store decisions never read the clock themselves."""

_ids = itertools.count(1)


@dataclass
class Backend:
    """What the `backend` fixture (tests/store/conftest.py) gives a test."""

    name: str
    """`memory`, `sqlite`, `redis` or `postgres`."""
    open: Callable[[], Awaitable[Store]]
    """Open one more store on the same data, as another process would."""


async def drop_schema(url: str, schema: str) -> None:
    """Drop a test's PostgreSQL schema and everything in it."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_record(**fields: Any) -> RunRecord:
    n = next(_ids)
    values: dict[str, Any] = {
        "id": f"run_{n}",
        "status": "running",
        "state": {"messages": [{"role": "user", "content": f"hello {n}"}], "n": n},
        "owner": "alice",
        "model": "fake-model",
        "created_at": NOW + n,
        "updated_at": NOW + n,
        "lease_until": NOW + n + 30.0,
        "holder": "host:123:abc",
    }
    return RunRecord(**(values | fields))


def approval_record(**fields: Any) -> ApprovalRecord:
    n = next(_ids)
    arguments = {"path": f"/tmp/file{n}", "force": True}
    values: dict[str, Any] = {
        "id": f"appr_{n}",
        "run_id": "run_x",
        "call_id": f"call_{n}",
        "tool": "delete_file",
        "arguments": canonical_json(arguments),
        "arguments_hash": arguments_hash(arguments),
        "reason": "deletes a file",
        "effects": "destructive",
        "requested_by": "alice",
        "approver": None,
        "created_at": NOW + n,
        "expires_at": NOW + n + 600.0,
    }
    return ApprovalRecord(**(values | fields))


def audit_record(**fields: Any) -> AuditRecord:
    n = next(_ids)
    values: dict[str, Any] = {
        "time": NOW + n,
        "event": "finished",
        "tool": "delete_file",
        "effects": "destructive",
        "arguments_hash": "sha256:00",
        "arguments": {"path": f"/tmp/file{n}"},
        "call_id": f"call_{n}",
        "outcome": "ok",
        "duration_ms": 1.5,
        "request_id": f"req_{n}",
        "run_id": "run_x",
        "key_name": "alice",
    }
    return AuditRecord(**(values | fields))
