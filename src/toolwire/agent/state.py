"""`RunState`: everything a paused run needs to continue, as plain JSON.

A run that stops for a person's approval is serialised (`RunState.to_json()`), kept in a
store or by the caller, and continued later with `Agent.resume` — in the same process or
in another one after a restart. The JSON holds no secret: no key, no caller token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolwire.agent.result import PendingApproval, RunStatus, Step
from toolwire.models.base import ModelResponse, ModelSettings
from toolwire.models.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolwire.tools.call import ToolCall, ToolErrorInfo, ToolResult
from toolwire.tools.tool import Tool

__all__ = [
    "STATE_VERSION",
    "ApprovalDecision",
    "Decision",
    "PendingApproval",
    "RunState",
    "decision_of",
    "message_from_json",
    "message_to_json",
    "result_from_json",
    "result_to_json",
]

STATE_VERSION = 1
"""Bumped when the JSON form changes; older forms are read, newer ones refused."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """A decision on one pending approval (the Responses API's `mcp_approval_response`)."""

    approve: bool
    reason: str | None = None
    """Shown to the model with a denial."""
    decided_by: str | None = None
    decided_at: float | None = None


Decision = bool | Literal["approve", "deny"] | ApprovalDecision
"""What `Agent.resume` accepts per approval id or call id."""


@dataclass(slots=True, kw_only=True)
class RunState:
    """A run between two `Agent` calls: the conversation, the steps so far, and what it
    waits for."""

    run_id: str
    status: RunStatus
    output: str
    messages: list[Message]
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    approvals: list[PendingApproval] = field(default_factory=list)
    """Pending approvals, one per entry of `pending_calls`."""
    pending_calls: list[ToolCall] = field(default_factory=list)
    """The calls as the model made them (raw arguments), waiting for their approval."""
    client_calls: list[ToolCall] = field(default_factory=list)
    client_tools: list[Tool] = field(default_factory=list)
    settings: ModelSettings | None = None
    unknown_calls_to_client: bool = False
    """Calls to tools the agent does not have go back to the caller as client calls
    (the gateway's `tool_request` dialect: the client owns every other tool)."""
    input_messages: int = 0
    """How many of `messages` the run started with (the caller's, and the instructions);
    the rest are the run's own turns and server-tool results."""
    door: str = ""
    """The gateway front door the run started on (`"chat_completions"`, `"messages"`,
    `"responses"`): a resume answers in its protocol. Empty outside a gateway."""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (no secret): store it anywhere, resume from it anywhere."""
        return {
            "version": STATE_VERSION,
            "run_id": self.run_id,
            "status": self.status,
            "output": self.output,
            "messages": [message_to_json(m) for m in self.messages],
            "steps": [_step_to_json(s) for s in self.steps],
            "usage": _usage_to_json(self.usage),
            "approvals": [a.to_json() for a in self.approvals],
            "pending_calls": [_call_to_json(c) for c in self.pending_calls],
            "client_calls": [_call_to_json(c) for c in self.client_calls],
            "client_tools": [_tool_to_json(t) for t in self.client_tools],
            "settings": _settings_to_json(self.settings),
            "unknown_calls_to_client": self.unknown_calls_to_client,
            "input_messages": self.input_messages,
            "door": self.door,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunState:
        """Rebuild a state written by `to_json`.

        Raises:
            ValueError: The JSON is not a run state, or a newer toolwire wrote it.
        """
        version = data.get("version")
        if not isinstance(version, int) or version > STATE_VERSION:
            raise ValueError(
                f"Run state version {version!r} is not supported by this toolwire "
                f"(it reads versions up to {STATE_VERSION}); upgrade toolwire to resume it."
            )
        try:
            return cls(
                run_id=data["run_id"],
                status=data["status"],
                output=data.get("output", ""),
                messages=[message_from_json(m) for m in data["messages"]],
                steps=[_step_from_json(s) for s in data.get("steps", [])],
                usage=_usage_from_json(data.get("usage") or {}),
                approvals=[PendingApproval.from_json(a) for a in data.get("approvals", [])],
                pending_calls=[_call_from_json(c) for c in data.get("pending_calls", [])],
                client_calls=[_call_from_json(c) for c in data.get("client_calls", [])],
                client_tools=[_tool_from_json(t) for t in data.get("client_tools", [])],
                settings=_settings_from_json(data.get("settings")),
                unknown_calls_to_client=bool(data.get("unknown_calls_to_client", False)),
                input_messages=int(data.get("input_messages", 0)),
                door=str(data.get("door", "")),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"Not a toolwire run state: missing or wrong field {exc}.") from None


# --- messages -------------------------------------------------------------------------------


def message_to_json(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        out: dict[str, Any] = {"role": "user", "content": message.content}
        if message.parts is not None:
            out["parts"] = [dict(p) for p in message.parts]
        return out
    if isinstance(message, AssistantMessage):
        out = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [_call_to_json(c) for c in message.tool_calls]
        if message.reasoning is not None:
            out["reasoning"] = message.reasoning
        return out
    return {
        "role": "tool",
        "call_id": message.call_id,
        "name": message.name,
        "content": message.content,
        "is_error": message.is_error,
    }


def message_from_json(data: Mapping[str, Any]) -> Message:
    role = data["role"]
    if role == "system":
        return SystemMessage(content=data["content"])
    if role == "user":
        parts = data.get("parts")
        return UserMessage(
            content=data["content"], parts=tuple(parts) if parts is not None else None
        )
    if role == "assistant":
        return AssistantMessage(
            content=data.get("content"),
            tool_calls=tuple(_call_from_json(c) for c in data.get("tool_calls", ())),
            reasoning=data.get("reasoning"),
        )
    if role == "tool":
        return ToolMessage(
            call_id=data["call_id"],
            name=data["name"],
            content=data["content"],
            is_error=bool(data.get("is_error", False)),
        )
    raise ValueError(f"Unknown message role {role!r} in a run state.")


def _call_to_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _call_from_json(data: Mapping[str, Any]) -> ToolCall:
    return ToolCall(id=data["id"], name=data["name"], arguments=data["arguments"])


# --- steps and results ----------------------------------------------------------------------


def result_to_json(result: ToolResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "call_id": result.call_id,
        "name": result.name,
        "success": result.success,
        "duration_ms": round(result.duration_ms, 3),
    }
    if result.success:
        out["result"] = result.result
    elif result.error is not None:
        out["error"] = {"code": result.error.code, "message": result.error.message}
    if result.approval_wait_ms:
        out["approval_wait_ms"] = round(result.approval_wait_ms, 3)
    if result.cached:
        out["cached"] = True
    return out


def result_from_json(data: Mapping[str, Any]) -> ToolResult:
    error = data.get("error")
    return ToolResult(
        call_id=data["call_id"],
        name=data["name"],
        success=bool(data["success"]),
        result=data.get("result"),
        error=ToolErrorInfo(code=error["code"], message=error["message"]) if error else None,
        duration_ms=float(data.get("duration_ms", 0.0)),
        approval_wait_ms=float(data.get("approval_wait_ms", 0.0)),
        cached=bool(data.get("cached", False)),
    )


def _step_to_json(step: Step) -> dict[str, Any]:
    response = step.response
    return {
        "message": message_to_json(response.message),
        "finish_reason": response.finish_reason,
        "usage": _usage_to_json(response.usage),
        "model": response.model,
        "tool_results": [result_to_json(r) for r in step.tool_results],
    }


def _step_from_json(data: Mapping[str, Any]) -> Step:
    message = message_from_json(data["message"])
    if not isinstance(message, AssistantMessage):
        raise ValueError("A run state step must hold an assistant message.")
    return Step(
        response=ModelResponse(
            message=message,
            finish_reason=data.get("finish_reason", "stop"),
            usage=_usage_from_json(data.get("usage") or {}),
            model=data.get("model"),
        ),
        tool_results=[result_from_json(r) for r in data.get("tool_results", [])],
    )


def _usage_to_json(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "requests": usage.requests,
    }


def _usage_from_json(data: Mapping[str, Any]) -> Usage:
    return Usage(
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        requests=int(data.get("requests", 0)),
    )


# --- client tools and settings --------------------------------------------------------------


def _tool_to_json(tool: Tool) -> dict[str, Any]:
    return tool.to_openai()["function"]  # type: ignore[no-any-return]


def _tool_from_json(data: Mapping[str, Any]) -> Tool:
    return Tool(
        name=data["name"],
        description=data.get("description", ""),
        input_schema=data.get("parameters") or {"type": "object", "properties": {}},
        strict=data.get("strict"),
    )


def _settings_to_json(settings: ModelSettings | None) -> dict[str, Any] | None:
    if settings is None:
        return None
    return {
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "tool_choice": settings.tool_choice,
        "parallel_tool_calls": settings.parallel_tool_calls,
        "extra": dict(settings.extra),
    }


def _settings_from_json(data: Mapping[str, Any] | None) -> ModelSettings | None:
    if data is None:
        return None
    return ModelSettings(
        temperature=data.get("temperature"),
        max_tokens=data.get("max_tokens"),
        tool_choice=data.get("tool_choice"),
        parallel_tool_calls=data.get("parallel_tool_calls"),
        extra=dict(data.get("extra") or {}),
    )


def decision_of(value: Decision) -> ApprovalDecision:
    """Any accepted decision form as an `ApprovalDecision`."""
    if isinstance(value, ApprovalDecision):
        return value
    if value is True or value == "approve":
        return ApprovalDecision(approve=True)
    if value is False or value == "deny":
        return ApprovalDecision(approve=False)
    raise ValueError(
        f"Decision {value!r} is not understood: use True/False, 'approve'/'deny' or "
        "an ApprovalDecision."
    )
