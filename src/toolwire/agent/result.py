"""What an agent run produces: `RunResult` and its per-iteration `Step`s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from toolwire.models.base import ModelResponse
from toolwire.models.messages import Message, Usage
from toolwire.tools.call import ToolCall, ToolResult

__all__ = ["RunResult", "RunStatus", "Step"]

RunStatus = Literal[
    "completed", "max_iterations", "awaiting_approval", "client_tool_calls", "error"
]
"""How a run ended.

- `completed`: the model gave a final answer.
- `max_iterations`: the model was still calling tools when the iteration limit was reached.
- `awaiting_approval`: a tool needs a person's approval; `RunResult.pending_approvals` lists
  the calls. Resume by appending their results to `messages` and running again.
- `client_tool_calls`: the model called tools the caller owns (`client_tools=`);
  `RunResult.client_calls` lists them. Resume the same way with their results.
- `error`: only in the `Done` event of `Agent.run_stream` (the model failed); `Agent.run`
  raises the error instead.
"""


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
