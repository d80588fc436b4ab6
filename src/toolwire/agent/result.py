"""What an agent run produces: `RunResult` and its per-iteration `Step`s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from toolwire.models.base import ModelResponse
from toolwire.models.messages import Message, Usage
from toolwire.tools.call import ToolCall, ToolResult

if TYPE_CHECKING:
    from toolwire.agent.state import RunState

__all__ = ["PendingApproval", "RunResult", "RunStatus", "Step"]

RunStatus = Literal[
    "completed", "max_iterations", "awaiting_approval", "client_tool_calls", "error"
]
"""How a run ended.

- `completed`: the model gave a final answer.
- `max_iterations`: the model was still calling tools when the iteration limit was reached.
- `awaiting_approval`: a tool needs a person's approval; `RunResult.approvals` lists what
  waits for a decision. Continue with `Agent.resume(result, decisions)` (or by run id
  when the agent has a store).
- `client_tool_calls`: the model called tools the caller owns (`client_tools=`);
  `RunResult.client_calls` lists them. Resume the same way with their results.
- `error`: only in the `Done` event of `Agent.run_stream` (the model failed); `Agent.run`
  raises the error instead.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A call that waits for a person's decision (the Responses API's
    `mcp_approval_request`: `id`, `name`, `arguments`)."""

    id: str
    """The approval id (`apr_…`); decide it by this id or by `call_id`."""
    call_id: str
    tool: str
    arguments: str
    """The validated arguments as canonical JSON: exactly what runs if approved."""
    arguments_hash: str
    reason: str
    effects: str = "destructive"
    approver: str | None = None
    """A key name that must decide, when the tool names one."""
    requested_at: float | None = None
    """When the run paused for it (Unix time); the wait is reported apart from the call."""
    shown_arguments: str | None = None
    """`arguments` as people may see them (the tool's redaction): what the store keeps in
    the approval record, while the hash binds the real ones (kept in the run's state)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "arguments_hash": self.arguments_hash,
            "reason": self.reason,
            "effects": self.effects,
            "approver": self.approver,
            "requested_at": self.requested_at,
            "shown_arguments": self.shown_arguments,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingApproval:
        return cls(
            id=data["id"],
            call_id=data["call_id"],
            tool=data["tool"],
            arguments=data["arguments"],
            arguments_hash=data["arguments_hash"],
            reason=data.get("reason", ""),
            effects=data.get("effects", "destructive"),
            approver=data.get("approver"),
            requested_at=data.get("requested_at"),
            shown_arguments=data.get("shown_arguments"),
        )


@dataclass(slots=True, kw_only=True)
class Step:
    """One iteration of the loop: a model turn and the results of the tools it called."""

    response: ModelResponse
    """The model's turn as it sent it (tool-call arguments untouched)."""
    tool_results: list[ToolResult] = field(default_factory=list)
    """One result per tool call of the turn, in call order."""


@dataclass(slots=True, kw_only=True)
class RunResult:
    """The outcome of `Agent.run` (and the payload of the `Done` event)."""

    output: str
    """The final answer, or a plain explanation of why the run stopped without one."""
    messages: list[Message]
    """The whole conversation, ready to be passed to the next `run` to continue it."""
    steps: list[Step]
    status: RunStatus
    usage: Usage
    """Tokens and requests summed over every model turn of the run."""
    pending_approvals: list[ToolCall] = field(default_factory=list)
    """Calls waiting for approval (`status == "awaiting_approval"`, or alongside client
    calls)."""
    client_calls: list[ToolCall] = field(default_factory=list)
    """The caller's own tool calls to run when `status == "client_tool_calls"`."""
    run_id: str = ""
    """The run's id (`ToolContext.run_id`); resume a stored run by it."""
    approvals: list[PendingApproval] = field(default_factory=list)
    """What waits for a person's decision when `status == "awaiting_approval"`: one per
    call of `pending_approvals`, with the approval id to decide it by."""
    first_step: int = 0
    """Steps before this index came before a resume (their text was answered already);
    the text of `steps[first_step:]` is what this call of the run produced."""
    input_messages: int = 0
    """`messages[input_messages:]` are the run's own (its turns and server-tool results),
    across resumes: the part a client that only sees the final answer does not have."""
    state: RunState | None = field(default=None, repr=False)
    """Everything needed to continue the run (`Agent.resume(result.state, ...)`);
    `state.to_json()` is plain JSON. Set when the run paused (approvals, client calls)."""
