"""How a run looks in the `toolwire` extension, whichever front door serves it.

Chat Completions sends these payloads as extension chunks (or a top-level `toolwire`
field), Anthropic Messages as `event: toolwire` events (or the same field): one shape,
built here once, so a client reads server-tool activity and approvals the same way on
every endpoint.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

from toolwire.agent import AgentEvent, ApprovalRequired, ToolCallResult, ToolCallStart
from toolwire.agent.result import PendingApproval, RunResult
from toolwire.server.gateway import Gateway
from toolwire.tools import ToolResult

__all__ = [
    "TURN_SEPARATOR",
    "Shown",
    "approval_json",
    "event_payload",
    "result_json",
    "run_extension",
    "run_status",
    "wait_for_decisions",
]

Shown = Callable[[str, str], str]
"""A call's JSON arguments as an answer may show them, by tool name (redacted:
`Gateway.shown_arguments`); every payload here that holds arguments goes through it."""

TURN_SEPARATOR: Final = "\n\n"
"""Between the text of two model turns of one run (streamed and whole alike)."""

_DECISION_POLL: Final = 0.2
"""Seconds between two looks at the store while a stream waits for decisions."""


def result_json(result: ToolResult) -> dict[str, Any]:
    """A `ToolResult` as JSON; `content` is the text a model is given as the tool message."""
    error = result.error
    return {
        "call_id": result.call_id,
        "name": result.name,
        "success": result.success,
        "result": result.result if result.success else None,
        "error": {"code": error.code, "message": error.message} if error is not None else None,
        "content": result.to_model_text(),
        "duration_ms": round(result.duration_ms, 3),
        "approval_wait_ms": round(result.approval_wait_ms, 3),
        "cached": result.cached,
        "repaired": list(result.repaired),
    }


def approval_json(approval: PendingApproval, shown: Shown) -> dict[str, Any]:
    """A pending approval in the shape of the Responses API's `mcp_approval_request`
    (`id`, `name`, `arguments`), plus toolwire's binding fields."""
    return {
        "type": "approval_required",
        "id": approval.id,
        "call_id": approval.call_id,
        "name": approval.tool,
        "arguments": shown(approval.tool, approval.arguments),
        "arguments_hash": approval.arguments_hash,
        "effects": approval.effects,
        "reason": approval.reason,
    }


def event_payload(event: AgentEvent, shown: Shown) -> dict[str, Any] | None:
    """The extension payload of a server-tool event (`None` for text and the end)."""
    if isinstance(event, ToolCallStart):
        return {
            "type": "tool_call",
            "id": event.call_id,
            "name": event.name,
            "arguments": shown(event.name, event.arguments),
        }
    if isinstance(event, ToolCallResult):
        return {"type": "tool_result", **result_json(event.result)}
    if isinstance(event, ApprovalRequired):
        payload: dict[str, Any] = {
            "type": "approval_required",
            "call_id": event.call.id,
            "name": event.call.name,
            "arguments": shown(event.call.name, event.call.arguments),
        }
        if event.approval is not None:
            payload.update(approval_json(event.approval, shown))
        return payload
    return None


def run_status(result: RunResult, shown: Shown) -> dict[str, Any]:
    """How the run ended, with its id and what it waits for (the `run_status` payload)."""
    out: dict[str, Any] = {"status": result.status, "output": result.output}
    if result.run_id:
        out["run_id"] = result.run_id
    if result.approvals:
        out["pending_approvals"] = [approval_json(a, shown) for a in result.approvals]
    return out


def run_extension(result: RunResult, shown: Shown) -> dict[str, Any]:
    """The `toolwire` field of a whole answer: the status and the server tools that ran."""
    calls: list[dict[str, Any]] = []
    for step in result.steps:
        by_id = {r.call_id: r for r in step.tool_results}
        for call in step.response.message.tool_calls:
            done = by_id.get(call.id)
            if done is None:
                continue
            calls.append(
                {
                    "id": call.id,
                    "name": call.name,
                    "arguments": shown(call.name, call.arguments),
                    "result": result_json(done),
                }
            )
    return {**run_status(result, shown), "tool_calls": calls}


async def wait_for_decisions(gateway: Gateway, result: RunResult, wait: float) -> bool:
    """Wait up to `wait` seconds until every pending approval of the run is decided (by
    anyone, through any replica). Returns whether they all were."""
    deadline = time.monotonic() + wait
    ids = [a.id for a in result.approvals]
    while True:
        now = time.time()
        records = [await gateway.store.get_approval(i) for i in ids]
        if all(r is not None and r.effective_status(now) != "pending" for r in records):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_DECISION_POLL)
