"""Events of `Agent.run_stream`: small tagged dataclasses, one per thing that happened.

A stream is any number of `TextDelta`, `ReasoningDelta`, `ToolCallStart`,
`ToolCallResult` and `ApprovalRequired` events followed by exactly one `Done`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from toolwire.agent.result import PendingApproval, RunResult
from toolwire.tools.call import ToolCall, ToolResult
from toolwire.tools.tool import Tool

__all__ = [
    "AgentEvent",
    "ApprovalRequired",
    "Done",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallResult",
    "ToolCallStart",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of the model's visible answer."""

    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta:
    """A piece of the model's reasoning (thinking) text."""

    text: str
    type: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStart:
    """The model asked for a tool; emitted once its call is complete, before it runs."""

    call_id: str
    name: str
    arguments: str
    """The raw JSON text the model sent (it may be invalid; the result will say so)."""
    type: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallResult:
    """A tool call finished (successfully or not)."""

    result: ToolResult
    type: Literal["tool_call_result"] = "tool_call_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequired:
    """A tool call needs approval; emitted before the approver is asked."""

    call: ToolCall
    """The call with its validated arguments (what runs if approved)."""
    tool: Tool
    approval: PendingApproval | None = None
    """The approval to decide (its id binds the decision to this exact call)."""
    type: Literal["approval_required"] = "approval_required"


@dataclass(frozen=True, slots=True, kw_only=True)
class Done:
    """The last event of every stream.

    `error` is `None` unless the run failed (the model endpoint was unreachable, the model
    misbehaved, a bug); then it is one readable line, `result.status` is `"error"` and
    `result` holds the conversation up to the failure.
    """

    result: RunResult
    error: str | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    """The exception behind `error`, for callers that want to re-raise it."""
    type: Literal["done"] = "done"


AgentEvent = TextDelta | ReasoningDelta | ToolCallStart | ToolCallResult | ApprovalRequired | Done
"""Any event `Agent.run_stream` yields."""
