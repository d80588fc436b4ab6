"""Approval of destructive tool calls: the policy decision and ready-made approvers."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from toolwire.runner.policy import Approver, Policy
from toolwire.tools import Tool, ToolCall, ToolContext, ToolErrorInfo

__all__ = ["DecisionApprover", "approve_all", "decide", "deny_all"]

logger = logging.getLogger("toolwire.runner")


async def approve_all(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
    """An approver that approves every call."""
    return True


async def deny_all(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
    """An approver that denies every call."""
    return False


class DecisionApprover:
    """Answers from decisions already taken, keyed by tool-call id; `None` for the rest.

    Used to resume a run that stopped with `awaiting_approval` once a person has decided.

    Args:
        decisions: `True` (approved) or `False` (denied) per tool-call id.
    """

    def __init__(self, decisions: Mapping[str, bool]) -> None:
        self.decisions = dict(decisions)

    async def __call__(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
        return self.decisions.get(call.id)


async def decide(
    call: ToolCall,
    tool: Tool,
    ctx: ToolContext,
    *,
    policy: Policy,
    approver: Approver | None,
) -> ToolErrorInfo | None:
    """Apply the policy to a destructive call.

    Returns:
        `None` when the call may run, else the `denied` / `awaiting_approval` error.
    """
    if policy.approval == "auto":
        return None
    name = tool.name
    if policy.approval == "deny":
        return ToolErrorInfo(
            code="denied",
            message=f"Tool {name!r} was not run: the policy does not allow destructive tools. "
            "Do not call it again; tell the user it could not be done.",
        )
    decision: bool | None = None
    if approver is not None:
        try:
            decision = await approver(call, tool, ctx)
        except Exception:
            # A broken approver must never let a destructive call through.
            logger.exception("Approver failed for tool %r (call %s); denying", name, call.id)
            decision = False
    if decision is True:
        return None
    if decision is False:
        return ToolErrorInfo(
            code="denied",
            message=f"The user denied running tool {name!r}. Do not call it again with the "
            "same arguments; continue without it or ask the user what to do instead.",
        )
    return ToolErrorInfo(
        code="awaiting_approval",
        message=f"Tool {name!r} is destructive and needs a person's approval before it runs; "
        "the call is waiting for that decision.",
    )
