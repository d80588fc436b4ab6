"""`/v1/approvals`, `/v1/runs` and `/v1/audit`: people decide, runs go on, actions are
accounted for.

- `GET /v1/approvals?status=pending`: the approvals the caller may see (its own requests,
  those it may decide; everyone's for an admin key), newest first; `limit` (up to 1000)
  and `after` (the previous page's `last_id`) page through any number
- `GET /v1/approvals/{id}`: one approval
- `POST /v1/approvals/{id}`: `{"decision": "approve" | "deny", "reason": "..."}` (or the
  Responses API's `{"approve": true}`)
- `GET /v1/runs/{id}`: a run's status, steps and pending approvals (its owner, admin keys)
- `POST /v1/runs/{id}/resume`: continue a run once its approvals are decided; answers in
  the protocol of the door the run started on (a chat completion, a Messages message, a
  Responses response continuing the paused one; `{"stream": true}` for its stream).
  Tools run with the owner's scopes whoever resumes, and the resume is audited
  (`outcome: run_resumed`)
- `GET /v1/audit`: the audit log (admin keys); filters `tool`, `key`, `outcome`, `run_id`,
  `since`, `until`; pages with `after` (the last id seen) and `limit`

Who may do what is `toolwire.server.keys.access` (the table is in docs/runs.md): a caller
gets 404 for what it may not see and 403 for what it sees but may not decide. Arguments
are shown redacted (`toolwire.runner.audit.redact_arguments`). Deciding is a
compare-and-set in the store: of two decisions at the same moment (through two replicas),
exactly one wins; the other gets 409.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.agent.journal import read_status
from toolwire.server.gateway import Gateway
from toolwire.server.http.errors import GatewayError, store_error
from toolwire.server.http.request_id import request_id_of
from toolwire.server.http.requests import read_json, validate_body
from toolwire.server.http.responses import json_response
from toolwire.server.keys.access import (
    decide,
    list_visible,
    may_decide,
    may_see,
    may_see_run,
)
from toolwire.server.keys.caller import Caller, authenticate, gateway_of
from toolwire.server.protocols import anthropic_messages as messages_door
from toolwire.server.protocols import chat_completions as chat_door
from toolwire.server.protocols.responses import handler as responses_door
from toolwire.server.session import Door, Reply, Session, resume
from toolwire.store.base import (
    ApprovalRecord,
    ApprovalStatus,
    AuditQuery,
    AuditRecord,
    RunRecord,
    StoreError,
)

__all__ = ["routes"]

_STATUSES = ("pending", "approved", "denied", "expired", "used")


def approval_body(gateway: Gateway, record: ApprovalRecord, now: float) -> dict[str, Any]:
    return {
        "object": "approval",
        "id": record.id,
        "type": "mcp_approval_request",
        "status": record.effective_status(now),
        "run_id": record.run_id,
        "call_id": record.call_id,
        "name": record.tool,
        "arguments": gateway.shown_arguments(record.tool, record.arguments),
        "arguments_hash": record.arguments_hash,
        "effects": record.effects,
        "reason": record.reason,
        "requested_by": record.requested_by,
        "approver": record.approver,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "decided_by": record.decided_by,
        "decided_at": record.decided_at,
        "decision_reason": record.decision_reason,
        "used_at": record.used_at,
        # Filled in by `_for_caller` (listings and gets).
        "last_user_message": None,
        "may_decide": None,
    }


async def _for_caller(
    gateway: Gateway, caller: Caller, records: list[ApprovalRecord], bodies: list[dict[str, Any]]
) -> None:
    """Add to each approval body whether the caller may decide it, and the run's last user
    message (what was asked) for callers who may see the run or decide the approval: a
    person deciding needs to know what the call is for. The rest of someone else's
    conversation stays with its owner and admin keys (docs/runs.md)."""
    asked: dict[str, str | None] = {}
    for record, body in zip(records, bodies, strict=True):
        deciding = may_decide(caller, record) is None
        body["may_decide"] = deciding
        if not (deciding or caller.admin or record.requested_by == caller.name):
            continue  # the run is not read at all
        if record.run_id not in asked:
            run = await gateway.store.get_run(record.run_id)
            seen = run is not None and (deciding or may_see_run(caller, run.owner))
            asked[record.run_id] = _last_user_message(run) if seen and run else None
        body["last_user_message"] = asked[record.run_id]


def _last_user_message(run: RunRecord) -> str | None:
    for message in reversed(run.state.get("messages", [])):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content[:1000] if isinstance(content, str) else None
    return None


async def _store(request: Request) -> tuple[Gateway, Caller]:
    caller = authenticate(request)
    gateway = gateway_of(request)
    try:
        await gateway.ready()
    except StoreError as exc:
        raise store_error(exc) from None
    return gateway, caller


def _not_found(kind: str, ident: str) -> GatewayError:
    return GatewayError(404, f"{kind} {ident!r} does not exist.", code=f"{kind.lower()}_not_found")


def _page(
    data: list[dict[str, Any]], records: list[ApprovalRecord] | list[AuditRecord], limit: int
) -> Response:
    """A page of a listing: `has_more` when it is full, `last_id` to ask for the next."""
    return json_response(
        {
            "object": "list",
            "data": data,
            "has_more": len(records) == limit,
            "last_id": records[-1].id if records else None,
        }
    )


# --- approvals ------------------------------------------------------------------------------


async def _list_approvals(request: Request) -> Response:
    gateway, caller = await _store(request)
    params = request.query_params
    status = params.get("status")
    if status is not None and status not in _STATUSES:
        raise GatewayError(
            400,
            f"status must be one of {', '.join(_STATUSES)}, not {status!r}.",
            param="status",
        )
    limit = _int_param(params.get("limit"), "limit", 100, 1, 1000)
    after = params.get("after")
    now = time.time()
    try:
        before = None
        if after is not None:
            # Pages go newest first: `after` is the last id of the previous page.
            seen = await gateway.store.get_approval(after)
            if seen is None or not may_see(caller, seen):
                raise GatewayError(
                    400,
                    f"after must be the id of an approval listed on the previous page "
                    f"(its last_id), not {after[:100]!r}.",
                    param="after",
                )
            before = (seen.created_at, seen.id)
        records = await list_visible(
            gateway.store,
            caller,
            status=cast("ApprovalStatus | None", status),
            run_id=params.get("run_id"),
            now=now,
            limit=limit,
            named=any(t.approver == caller.name for t in gateway.server_tool_list),
            before=before,
        )
        data = [approval_body(gateway, r, now) for r in records]
        await _for_caller(gateway, caller, records, data)
    except StoreError as exc:
        raise store_error(exc) from None
    return _page(data, records, limit)


async def _visible_approval(gateway: Gateway, caller: Caller, ident: str) -> ApprovalRecord:
    """The approval `ident`, or a 404 when there is none or the caller may not see it."""
    try:
        record = await gateway.store.get_approval(ident)
    except StoreError as exc:
        raise store_error(exc) from None
    if record is None or not may_see(caller, record):
        raise _not_found("Approval", ident)
    return record


async def _get_approval(request: Request) -> Response:
    gateway, caller = await _store(request)
    record = await _visible_approval(gateway, caller, request.path_params["id"])
    body = approval_body(gateway, record, time.time())
    try:
        await _for_caller(gateway, caller, [record], [body])
    except StoreError as exc:
        raise store_error(exc) from None
    return json_response(body)


class DecisionRequest(BaseModel):
    """`{"decision": "approve" | "deny", "reason": ...}`, or the Responses API's
    `mcp_approval_response` fields `{"approve": true | false, "reason": ...}`."""

    model_config = ConfigDict(
        extra="forbid",
        # `_one` in JSON Schema, for the OpenAPI document: exactly one of the two forms.
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["decision"],
                    "properties": {"decision": {"enum": ["approve", "deny"]}},
                },
                {"required": ["approve"], "properties": {"approve": {"type": "boolean"}}},
            ]
        },
    )

    decision: Literal["approve", "deny"] | None = None
    approve: bool | None = None
    reason: str | None = Field(default=None, max_length=2000)
    type: Literal["mcp_approval_response"] | None = None
    approval_request_id: str | None = None

    @model_validator(mode="after")
    def _one(self) -> DecisionRequest:
        if (self.decision is None) == (self.approve is None):
            raise ValueError(
                'give "decision": "approve" or "deny" (or "approve": true/false), not both'
            )
        return self

    @property
    def approved(self) -> bool:
        return self.decision == "approve" if self.decision is not None else bool(self.approve)


async def _decide(request: Request) -> Response:
    gateway, caller = await _store(request)
    ident: str = request.path_params["id"]
    body = validate_body(DecisionRequest, await read_json(request, limit=64 * 1024))
    now = time.time()
    record = await _visible_approval(gateway, caller, ident)
    try:
        decided = await decide(
            gateway.store,
            record,
            caller,
            approve=body.approved,
            reason=body.reason,
            # The id `assign_request_id` kept or made, never the client's header as sent.
            request_id=request_id_of(request.scope),
            now=now,
        )
    except StoreError as exc:
        raise store_error(exc) from None
    return json_response(approval_body(gateway, decided, now))


# --- runs -----------------------------------------------------------------------------------


def run_summary(record: RunRecord, now: float) -> dict[str, Any]:
    """A run as listings show it; `run_body` adds its output, steps and approvals."""
    return {
        "object": "run",
        "id": record.id,
        "status": read_status(record, now),
        "model": record.model,
        "owner": record.owner,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def run_body(gateway: Gateway, record: RunRecord, now: float) -> dict[str, Any]:
    state = record.state
    steps = []
    for step in state.get("steps", []):
        message = step.get("message", {})
        steps.append(
            {
                "content": message.get("content"),
                "tool_calls": [_shown_call(gateway, c) for c in message.get("tool_calls", [])],
                "tool_results": step.get("tool_results", []),
                "finish_reason": step.get("finish_reason"),
            }
        )
    return {
        **run_summary(record, now),
        "output": state.get("output"),
        "steps": steps,
        "pending_approvals": [_shown_call(gateway, a) for a in state.get("approvals", [])],
    }


def _shown_call(gateway: Gateway, item: Any) -> Any:
    """A stored call or pending approval (`name` or `tool`, JSON `arguments`) with its
    arguments redacted."""
    if not isinstance(item, dict) or not isinstance(item.get("arguments"), str):
        return item
    name = item.get("name", item.get("tool"))
    tool = name if isinstance(name, str) else ""
    return {**item, "arguments": gateway.shown_arguments(tool, item["arguments"])}


async def _visible_run(gateway: Gateway, caller: Caller, ident: str) -> RunRecord:
    """The run `ident`, or a 404 when there is none or the caller may not see it."""
    try:
        record = await gateway.store.get_run(ident)
    except StoreError as exc:
        raise store_error(exc) from None
    if record is None or not may_see_run(caller, record.owner):
        raise _not_found("Run", ident)
    return record


async def _get_run(request: Request) -> Response:
    gateway, caller = await _store(request)
    record = await _visible_run(gateway, caller, request.path_params["id"])
    return json_response(run_body(gateway, record, time.time()))


class ResumeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stream: bool = False
    stream_options: dict[str, Any] | None = None


async def _resume(request: Request) -> Response:
    gateway, caller = await _store(request)
    ident: str = request.path_params["id"]
    data = await read_json(request, limit=64 * 1024, allow_empty=True)
    body = validate_body(ResumeRequest, data if data is not None else {})
    record = await _visible_run(gateway, caller, ident)
    door = str(record.state.get("door", ""))
    if door == responses_door.DOOR:
        return await responses_door.resume_answer(
            request, gateway, caller, record, stream=body.stream
        )
    not_routed = GatewayError(
        409,
        f"Run {ident!r} was made with the model {record.model!r}, which this gateway no "
        "longer routes; it cannot be resumed here.",
        code="run_not_resumable",
    )
    run = await resume(gateway, caller, record, stream=body.stream, not_routed=not_routed)
    # Runs stored before a run kept its door were all made on Chat Completions.
    target = _DOORS.get(door, chat_door.DOOR)
    reply = Reply(
        model=record.model or "",
        stream=body.stream,
        include_usage=bool((body.stream_options or {}).get("include_usage")),
    )
    writer = target.writer(gateway.shown_arguments, reply)
    return await Session(gateway, run, writer).respond(request, {}, target.shutdown_event)


_DOORS: dict[str, Door[Any]] = {d.name: d for d in (chat_door.DOOR, messages_door.DOOR)}
"""The doors whose runs resume through the session as they started (Responses keeps its
chain of stored responses: `resume_answer`)."""


# --- audit ----------------------------------------------------------------------------------


def audit_body(gateway: Gateway, record: AuditRecord) -> dict[str, Any]:
    return {
        "object": "audit.record",
        "id": record.id,
        "time": record.time,
        "event": record.event,
        "request_id": record.request_id,
        "run_id": record.run_id,
        "call_id": record.call_id,
        "key_name": record.key_name,
        "tool": record.tool,
        "effects": record.effects,
        "arguments_hash": record.arguments_hash,
        # Records written before nested redaction existed are shown redacted too.
        "arguments": gateway.shown_object(record.tool, record.arguments),
        "outcome": record.outcome,
        "duration_ms": record.duration_ms,
        "approval_wait_ms": record.approval_wait_ms,
        "approval_id": record.approval_id,
        "approved_by": record.approved_by,
        "approved_at": record.approved_at,
    }


async def _audit(request: Request) -> Response:
    gateway, caller = await _store(request)
    if not caller.admin:
        raise GatewayError(
            403, "The audit log needs an admin key (keys[].admin: true).", code="admin_only"
        )
    params = request.query_params
    query = AuditQuery(
        tool=params.get("tool"),
        key_name=params.get("key"),
        outcome=params.get("outcome"),
        run_id=params.get("run_id"),
        since=_float_param(params.get("since"), "since"),
        until=_float_param(params.get("until"), "until"),
        after_id=_int_param(params.get("after"), "after", 0, 0, 2**62),
        limit=_int_param(params.get("limit"), "limit", 100, 1, 1000),
    )
    try:
        records = await gateway.store.list_audit(query)
    except StoreError as exc:
        raise store_error(exc) from None
    return _page([audit_body(gateway, r) for r in records], records, query.limit)


# --- parameters -----------------------------------------------------------------------------


def _int_param(value: str | None, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if not low <= number <= high:
        raise GatewayError(
            400, f"{name} must be an integer from {low} to {high}, not {value!r}.", param=name
        )
    return number


def _float_param(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    # float() reads "nan" and "inf" too: no time, and nan would match no record silently.
    if not math.isfinite(number):
        raise GatewayError(
            400, f"{name} must be a Unix time in seconds, not {value!r}.", param=name
        )
    return number


routes = [
    Route("/v1/approvals", _list_approvals, methods=["GET"]),
    Route("/v1/approvals/{id}", _get_approval, methods=["GET"]),
    Route("/v1/approvals/{id}", _decide, methods=["POST"]),
    Route("/v1/runs/{id}", _get_run, methods=["GET"]),
    Route("/v1/runs/{id}/resume", _resume, methods=["POST"]),
    Route("/v1/audit", _audit, methods=["GET"]),
]
