"""The agent loop: model → tools → model, bounded, streamed as events."""

from toolwire.agent.agent import Agent
from toolwire.agent.events import (
    AgentEvent,
    ApprovalRequired,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.agent.result import RunResult, RunStatus, Step

__all__ = [
    "Agent",
    "AgentEvent",
    "ApprovalRequired",
    "Done",
    "ReasoningDelta",
    "RunResult",
    "RunStatus",
    "Step",
    "TextDelta",
    "ToolCallResult",
    "ToolCallStart",
]
