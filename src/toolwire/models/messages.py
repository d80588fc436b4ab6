"""The conversation as toolwire keeps it, independent of any provider's wire format."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from toolwire.tools.call import ToolCall

__all__ = [
    "AssistantMessage",
    "Message",
    "SystemMessage",
    "ToolMessage",
    "Usage",
    "UserMessage",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    content: str
    role: Literal["system"] = "system"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    content: str
    parts: tuple[Mapping[str, Any], ...] | None = None
    """The message's OpenAI content parts (`text`, `image_url`, `input_audio`, ...) when
    it was not plain text; `content` then holds its text parts joined. OpenAI-compatible
    upstreams receive the parts; others use what they can convert."""
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolMessage:
    """The result of one tool call, as the model will see it."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    role: Literal["tool"] = "tool"


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage


@dataclass(slots=True, kw_only=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.requests += other.requests
