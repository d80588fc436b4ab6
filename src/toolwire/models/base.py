"""The `Model` protocol every upstream client implements, and its request/response records."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from toolwire.models.events import ModelDelta
from toolwire.models.messages import AssistantMessage, Message, Usage
from toolwire.tools.call import ToolArguments, ToolCall
from toolwire.tools.tool import Tool

__all__ = [
    "FinishReason",
    "Model",
    "ModelError",
    "ModelErrorKind",
    "ModelResponse",
    "ModelSettings",
    "ModelStreamEvent",
    "ToolChoice",
]

ToolChoice = Literal["auto", "none", "required"] | str
"""`auto`, `none`, `required`, or the name of one tool the model must call."""

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    temperature: float | None = None
    max_tokens: int | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Request fields toolwire does not interpret (`top_p`, `stop`, `seed`,
    `response_format`, ...), sent as they are to OpenAI-compatible upstreams; other
    upstreams map the ones they know and ignore the rest."""


@dataclass(slots=True, kw_only=True)
class ModelResponse:
    """One complete model turn. Tool calls in `message` are fully assembled."""

    message: AssistantMessage
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str | None = None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The message's calls as the provider-protocol seed's loop reads them.

        `provider.execute_tool(call.name, call.arguments)` runs as written: each call's
        `arguments` is a `ToolArguments`, the raw text that also answers `get`, `[key]`,
        `keys()` and `items()`. The message itself keeps plain text (what the agent,
        the stores and the wire encoders read with orjson, which takes exact `str`s only).
        """
        return tuple(
            replace(c, arguments=ToolArguments(c.arguments, c.name))
            for c in self.message.tool_calls
        )


ModelStreamEvent = ModelDelta | ModelResponse
"""What `Model.stream` yields: deltas as they arrive, then exactly one `ModelResponse` last.

`ModelToolCallStart` / `ModelToolCallArgsDelta` are informational (for showing progress); the
authoritative calls are the ones in the final `ModelResponse`.
"""


ModelErrorKind = Literal["unreachable", "timeout", "status", "malformed", "too_large", "ended"]


class ModelError(Exception):
    """The model endpoint failed or could not be reached. `str(err)` is one readable line."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        body: Mapping[str, Any] | None = None,
        kind: ModelErrorKind | None = None,
    ) -> None:
        self.status = status
        self.retryable = retryable
        self.kind: ModelErrorKind | None = (
            kind if kind is not None else ("status" if status is not None else None)
        )
        """What went wrong, for a gateway that must not show the detail (which names the
        upstream's address) to its own clients."""
        self.body = body
        """The upstream's own error object (`message`, `type`, `param`, `code`) when it sent
        one, so a gateway can relay a 4xx in OpenAI's shape."""
        super().__init__(message)


class Model(Protocol):
    """An upstream model. Implementations: OpenAIChatModel, OfflineModel, ScriptedModel, ..."""

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse: ...

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]: ...
