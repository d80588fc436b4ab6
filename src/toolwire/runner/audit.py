"""Audit records of tool executions: who ran what, with which outcome.

The runner writes a `started` record before a write or destructive tool runs (committed
before the side effect) and a `finished` record after every call, so a crash between the
two leaves a `started` without its `finished`. Records hold the arguments' hash and the
arguments a tool allows to be logged; never a key, a caller token or a secret-looking
argument.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Final, Protocol

from toolwire.store.base import AuditEvent, AuditRecord, arguments_hash
from toolwire.tools import Tool, ToolCall, ToolContext, ToolResult

__all__ = ["AuditLog", "Grant", "audit_arguments", "audit_record"]

_SECRET: Final = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[_-]?key|apikey|auth|credential|private[_-]?key|"
    r"session|cookie",
    re.IGNORECASE,
)
REDACTED: Final = "[redacted]"


class AuditLog(Protocol):
    """Where audit records go (every `Store` is one)."""

    async def append_audit(self, record: AuditRecord) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """The approval a call runs under, for its audit record."""

    approval_id: str
    approved_by: str | None
    approved_at: float | None
    requested_at: float | None = None
    """When the approval was asked for: with `approved_at`, the time a person took."""

    @property
    def wait_ms(self) -> float:
        """Milliseconds between the request and the decision (0 when either is unknown)."""
        if self.requested_at is None or self.approved_at is None:
            return 0.0
        return max(0.0, (self.approved_at - self.requested_at) * 1000.0)


def audit_arguments(tool: Tool | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as they may be logged: the tool's `audit_arguments` allowlist when it
    declares one, else every argument whose name does not look like a secret."""
    allowed = tool.audit_arguments if tool is not None else None
    if allowed is not None:
        return {k: (v if k in allowed else REDACTED) for k, v in arguments.items()}
    return {k: (REDACTED if _SECRET.search(k) else v) for k, v in arguments.items()}


def audit_record(
    event: AuditEvent,
    call: ToolCall,
    tool: Tool | None,
    arguments: dict[str, Any] | None,
    ctx: ToolContext,
    *,
    result: ToolResult | None = None,
    grant: Grant | None = None,
) -> AuditRecord:
    outcome: str | None = None
    if result is not None:
        outcome = "ok" if result.success or result.error is None else result.error.code
    return AuditRecord(
        time=time.time(),
        event=event,
        tool=tool.name if tool is not None else call.name,
        effects=tool.effects if tool is not None else "unknown",
        arguments_hash=arguments_hash(arguments) if arguments is not None else "",
        arguments=audit_arguments(tool, arguments) if arguments is not None else None,
        call_id=call.id,
        outcome=outcome,
        duration_ms=round(result.duration_ms, 3) if result is not None else None,
        approval_wait_ms=(
            round(result.approval_wait_ms, 3)
            if result is not None and result.approval_wait_ms
            else None
        ),
        request_id=ctx.metadata.get("request_id"),
        run_id=ctx.run_id,
        key_name=ctx.principal,
        approval_id=grant.approval_id if grant is not None else None,
        approved_by=grant.approved_by if grant is not None else None,
        approved_at=grant.approved_at if grant is not None else None,
    )
