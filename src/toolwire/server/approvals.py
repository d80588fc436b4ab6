"""Who may see and decide an approval, and taking a decision.

Shared by toolwire's approval API (`POST /v1/approvals/{id}`) and the Responses front
door (`mcp_approval_response` input items), so a decision follows the same rules and
leaves the same audit record whichever door it comes through.
"""

from __future__ import annotations

import time
from dataclasses import replace

from toolwire.server.caller import Caller
from toolwire.server.errors import GatewayError
from toolwire.store.base import ApprovalRecord, AuditRecord, Store

__all__ = ["can_see_all", "decide", "decision_audit", "may_decide", "visible"]


def visible(caller: Caller, owner: str | None) -> bool:
    """Whether the caller may see a record owned by `owner` (its own, or any as admin)."""
    return caller.admin or owner == caller.name


def can_see_all(caller: Caller) -> bool:
    """A key with `approve: any` may find (and decide) every caller's approvals."""
    return caller.key is not None and caller.key.approve == "any"


def may_decide(caller: Caller, record: ApprovalRecord) -> str | None:
    """Why the caller may not decide `record`, or `None` when it may."""
    if record.approver is not None and caller.key is not None and caller.name != record.approver:
        return f"Tool {record.tool!r} must be approved by the key {record.approver!r}."
    if caller.admin:
        return None
    assert caller.key is not None
    if caller.key.approve == "any":
        return None
    if caller.key.approve == "own" and record.requested_by == caller.name:
        return None
    return (
        f"The key {caller.name!r} may not decide this approval (its setting is "
        f"approve: {caller.key.approve}); ask a key allowed to approve."
    )


async def decide(
    store: Store,
    record: ApprovalRecord,
    caller: Caller,
    *,
    approve: bool,
    reason: str | None,
    request_id: str | None,
    now: float,
) -> ApprovalRecord:
    """Decide a pending approval and audit the decision; returns the decided record.

    The write is a compare-and-set on `pending`: of two decisions at the same moment
    (through two replicas), exactly one wins.

    Raises:
        GatewayError: 403 when the caller may not decide it, 409 when it is not pending
            (decided, expired, used, or decided by another request meanwhile).
        StoreError: The store failed.
    """
    refusal = may_decide(caller, record)
    if refusal is not None:
        raise GatewayError(403, refusal, code="approval_forbidden")
    status = record.effective_status(now)
    if status != "pending":
        hint = " (ask the model to call the tool again)" if status == "expired" else ""
        raise GatewayError(
            409,
            f"Approval {record.id!r} is {status}, not pending: it cannot be decided{hint}.",
            code="approval_not_pending",
        )
    decided = replace(
        record,
        status="approved" if approve else "denied",
        decided_by=caller.name or "anonymous",
        decided_at=now,
        decision_reason=reason,
    )
    if not await store.update_approval(decided, expect=("pending",)):
        raise GatewayError(
            409,
            f"Approval {record.id!r} was decided by another request at the same moment.",
            code="approval_not_pending",
        )
    await store.append_audit(decision_audit(decided, caller, request_id))
    return decided


def decision_audit(record: ApprovalRecord, caller: Caller, request_id: str | None) -> AuditRecord:
    """The audit record of a decision (`outcome: approval_approved | approval_denied`)."""
    return AuditRecord(
        time=record.decided_at or time.time(),
        event="finished",
        tool=record.tool,
        effects=record.effects,
        arguments_hash=record.arguments_hash,
        arguments=None,
        call_id=record.call_id,
        outcome=f"approval_{record.status}",
        run_id=record.run_id,
        key_name=caller.name,
        approval_id=record.id,
        approved_by=record.decided_by,
        approved_at=record.decided_at,
        request_id=request_id,
    )
