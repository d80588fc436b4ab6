"""Who may see and decide an approval, see and resume a run, and taking a decision.

The one rule (docs/runs.md has it as a table), used by every door that lists, shows or
decides approvals, or shows or resumes runs (`/v1/approvals`, `/v1/runs`, the Responses
door's `mcp_approval_response`, `/mcp`):

- Deciding: a tool's named `approver` key is the only key that may decide its calls
  (not even an admin: naming one is a separation of duties). Without a named approver,
  an admin key decides any call, an `approve: any` key any call, an `approve: own` key
  the calls of its own runs, an `approve: none` key none.
- Seeing (list and get): whoever may decide, the key whose run asked (it always sees its
  own requests, even those only another key may decide) and admin keys.
- Runs (get and resume): their owner and admin keys. An approver sees the approval
  (tool, redacted arguments, reason, who asked), not the conversation of someone else's
  run. A resume runs with the owner's scopes whoever resumes it.
- An open gateway (no keys) has no one to tell apart: every caller is admin and decides
  everything, named approver or not (`toolwire check` warns about such tools).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Final

from toolwire.server.http.errors import GatewayError
from toolwire.server.keys.caller import Caller
from toolwire.server.keys.keyring import Keyring
from toolwire.store.base import ApprovalRecord, ApprovalStatus, AuditRecord, RunRecord, Store
from toolwire.tools import ToolContext

__all__ = [
    "decide",
    "decision_audit",
    "list_visible",
    "may_decide",
    "may_see",
    "may_see_run",
    "resume_audit",
    "run_context",
]

_SCAN: Final = 1000
"""Approvals read to fill one listing for a key that may see other keys' approvals: the
store filters by requester only, so the rest is filtered here."""


def may_decide(caller: Caller, record: ApprovalRecord) -> str | None:
    """Why the caller may not decide `record`, or `None` when it may."""
    key = caller.key
    if key is None:
        return None  # an open gateway: nobody to tell apart
    if record.approver is not None:
        if key.name != record.approver:
            return (
                f"Tool {record.tool!r} must be approved by the key {record.approver!r}; "
                f"the key {key.name!r} may not decide it."
            )
        if key.approve == "none":
            return f"The key {key.name!r} has approve: none; it decides no approval."
        return None
    if key.admin or key.approve == "any":
        return None
    if key.approve == "own" and record.requested_by == key.name:
        return None
    return (
        f"The key {key.name!r} may not decide this approval (its setting is "
        f"approve: {key.approve}); ask a key allowed to approve."
    )


def may_see(caller: Caller, record: ApprovalRecord) -> bool:
    """Whether the caller may list and get `record`: its own request, one it may decide,
    or any as admin."""
    return (
        caller.admin
        or (caller.name is not None and record.requested_by == caller.name)
        or may_decide(caller, record) is None
    )


def may_see_run(caller: Caller, owner: str | None) -> bool:
    """Whether the caller may get and resume a run owned by `owner`."""
    return caller.admin or (caller.name is not None and owner == caller.name)


async def list_visible(
    store: Store,
    caller: Caller,
    *,
    status: ApprovalStatus | None,
    run_id: str | None,
    now: float,
    limit: int,
    named: bool,
    before: tuple[float, str] | None = None,
) -> list[ApprovalRecord]:
    """The approvals the caller may see, newest first.

    Args:
        named: Some server tool names the caller's key as its approver.
        before: The page's cursor: `(created_at, id)` of the last approval already seen.

    Raises:
        StoreError: The store failed.
    """
    key = caller.key
    # Only admin, `any` and named-approver keys see other keys' requests; every other
    # listing is the store's indexed one by requester.
    others = key is not None and key.approve != "none" and (key.approve == "any" or named)
    if caller.admin or not others:
        records = await store.list_approvals(
            status=status,
            requested_by=None if caller.admin else caller.name,
            run_id=run_id,
            now=now,
            limit=limit,
            before=before,
        )
    else:
        records = await store.list_approvals(
            status=status, run_id=run_id, now=now, limit=max(limit, _SCAN), before=before
        )
    return [r for r in records if may_see(caller, r)][:limit]


def run_context(keyring: Keyring, caller: Caller, owner: str | None) -> ToolContext:
    """The context a resumed run's tools run in: the owner's principal and scopes, so an
    admin resuming someone's run cannot widen what runs. The caller's forwarded token is
    passed on only when the caller is the owner (it is nobody else's to use)."""
    ctx = caller.ctx
    if caller.key is None or owner == caller.name:
        ctx.principal = owner
        return ctx
    key = keyring.get(owner) if owner is not None else None
    ctx.principal = owner
    ctx.scopes = key.scopes if key is not None else frozenset()
    ctx.auth_token = None
    return ctx


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


def resume_audit(run: RunRecord, caller: Caller, ctx: ToolContext) -> AuditRecord:
    """The audit record of a resume (`outcome: run_resumed`), written before it is tried:
    who resumed (`key_name`), when, and the run. The tools it runs are recorded as the
    run's owner's, with the same `request_id`; a resume refused with 409 has none."""
    return AuditRecord(
        time=time.time(),
        event="finished",
        tool="",
        effects="",
        arguments_hash="",
        arguments=None,
        call_id="",
        outcome="run_resumed",
        run_id=run.id,
        key_name=caller.name,
        request_id=ctx.metadata.get("request_id"),
    )
