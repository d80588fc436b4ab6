"""The agent loop: model → tools → model, bounded, streamed as events."""

from toolwire.agent.agent import Agent
from toolwire.agent.claim import RunConflict
from toolwire.agent.events import (
    AgentEvent,
    ApprovalRequired,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.agent.result import PendingApproval, RunResult, RunStatus, Step
from toolwire.agent.state import ApprovalDecision, Decision, RunState

__all__ = [
    "Agent",
    "AgentEvent",
    "ApprovalDecision",
    "ApprovalRequired",
    "Decision",
    "Done",
    "PendingApproval",
    "ReasoningDelta",
    "RunConflict",
    "RunResult",
    "RunState",
    "RunStatus",
    "Step",
    "TextDelta",
    "ToolCallResult",
    "ToolCallStart",
]
