"""The request side of `POST /v1/chat/completions`: a parsed JSON body → `ChatRequest`.

Everything a client can get wrong is refused here with an OpenAI-shaped 400 naming the
field and what to send instead, so a bad request never reaches the upstream. The scalar
fields go through one strict pydantic validation; the messages (see `transcript`) and the
tools are checked by hand in one pass each, which is both faster and gives sharper messages
than pydantic's union errors.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolwire.models.base import ModelSettings, ToolChoice
from toolwire.models.messages import Message
from toolwire.server.configuration.config import Dialect, LimitsConfig
from toolwire.server.http.requests import validate_body
from toolwire.server.protocols.chat_completions.transcript import parse_messages
from toolwire.server.protocols.checks import field_error as _bad
from toolwire.server.protocols.checks import (
    function_entries,
    function_tool,
    json_object,
    json_type,
    message_array,
    openai_tool_choice,
)
from toolwire.server.protocols.checks import shown as _shown
from toolwire.tools.tool import Tool

if TYPE_CHECKING:
    from toolwire.server.gateway import Gateway

__all__ = ["ChatRequest", "parse_chat_request", "read_chat_request"]

_TOOL_CHOICES: Final = ("auto", "none", "required")
_NAMED_CHOICE: Final = '{"type": "function", "function": {"name": "<tool name>"}}'
_CONSUMED: Final = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "n",
    }
)
"""Fields toolwire interprets; every other field goes to `ModelSettings.extra` as sent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """A checked Chat Completions request, in toolwire's terms."""

    model: str
    """The public model id as sent."""
    messages: tuple[Message, ...]
    """The conversation, orphan tool results removed."""
    tools: tuple[Tool, ...]
    """The client's tools: definitions only, never executed by the gateway."""
    settings: ModelSettings
    stream: bool
    include_usage: bool
    """`stream_options.include_usage`: end the stream with a usage chunk."""
    dropped_results: tuple[str, ...]
    """The `tool_call_id` (or, for `tool_result` messages, the name) of each orphan tool
    result dropped; the gateway reports them in a response header."""


def parse_chat_request(
    data: Any,
    *,
    limits: LimitsConfig,
    strict_tool_results: bool,
    dialect: Dialect,
    server_tools: Collection[str],
) -> ChatRequest:
    """Check a Chat Completions request body and convert it.

    Args:
        data: The request body, parsed JSON.
        limits: The gateway's limits (`max_messages`, `max_tools`).
        strict_tool_results: Refuse orphan tool results instead of dropping them.
        dialect: `tool_request` also accepts the strict whole-message JSON tool dialect.
        server_tools: Names of the gateway's own tools: a client tool may not reuse one,
            and `tool_choice` may name one.

    Raises:
        GatewayError: 400 with the field at fault in `param` and advice in the message.
    """
    if isinstance(data, dict):
        _refuse_legacy(data)
    body = validate_body(_Body, data)
    if body.n is not None and body.n != 1:
        raise _bad(
            "n",
            f"toolwire returns one choice per request; omit 'n' or send 1 (got {body.n}).",
            code="unsupported_parameter",
        )
    raw_messages = message_array(body.messages, limits.max_messages)
    tools = _tools(body.tools, limits.max_tools, server_tools)
    tool_choice = _tool_choice(body.tool_choice, tools, server_tools)
    transcript = parse_messages(
        raw_messages, strict_tool_results=strict_tool_results, dialect=dialect
    )
    extra = {k: v for k, v in data.items() if v is not None and k not in _CONSUMED}
    settings = ModelSettings(
        temperature=body.temperature,
        max_tokens=body.max_completion_tokens
        if body.max_completion_tokens is not None
        else body.max_tokens,
        tool_choice=tool_choice,
        parallel_tool_calls=body.parallel_tool_calls,
        extra=extra,
    )
    options = body.stream_options
    return ChatRequest(
        model=body.model,
        messages=transcript.messages,
        tools=tools,
        settings=settings,
        stream=bool(body.stream),
        include_usage=bool(options is not None and options.include_usage),
        dropped_results=transcript.dropped_results,
    )


# --- the scalar fields ---------------------------------------------------------------------


class _Strict(BaseModel):
    # Strict: a temperature of "0.5" or a stream of 1 is refused, as OpenAI does.
    model_config = ConfigDict(strict=True, extra="allow")


class _StreamOptions(_Strict):
    include_usage: bool | None = None


class _ResponseFormat(_Strict):
    type: str


class _Body(_Strict):
    model: str = Field(min_length=1)
    messages: Any
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    stream: bool | None = None
    stream_options: _StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int | None = None
    stop: Any = None
    seed: int | None = None
    user: str | None = None
    response_format: _ResponseFormat | None = None
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    metadata: dict[str, str] | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None
    store: bool | None = None
    modalities: list[str] | None = None

    @field_validator("stop")
    @classmethod
    def _stop(cls, value: Any) -> Any:
        if value is None or type(value) is str:
            return value
        if type(value) is list and all(type(v) is str for v in value):
            return value
        raise ValueError(f"must be a string or an array of strings, not {json_type(value)}")


def _refuse_legacy(data: dict[str, Any]) -> None:
    if data.get("functions") is not None:
        raise _bad(
            "functions",
            "the legacy 'functions' field is not supported; send 'tools': "
            '[{"type": "function", "function": {"name": ..., "description": ..., '
            '"parameters": {...}}}] instead.',
            code="unsupported_parameter",
        )
    if data.get("function_call") is not None:
        raise _bad(
            "function_call",
            "the legacy 'function_call' field is not supported; send 'tool_choice' "
            '("auto", "none", "required" or {"type": "function", "function": '
            '{"name": ...}}) instead.',
            code="unsupported_parameter",
        )


# --- tools ---------------------------------------------------------------------------------


def _tools(raw: Any, max_tools: int, server_tools: Collection[str]) -> tuple[Tool, ...]:
    tools: list[Tool] = []
    seen: dict[str, str] = {}
    need = (
        "only function tools are supported: "
        '{"type": "function", "function": {"name": ..., "parameters": {...}}}'
    )
    for where, entry in function_entries(raw, max_tools, need, code=None):
        function = json_object(
            entry.get("function"),
            f"{where}.function",
            '{"name": ..., "description": ..., "parameters": {...}}',
        )
        tools.append(function_tool(function, f"{where}.function", where, seen, server_tools))
    return tuple(tools)


# --- tool_choice ---------------------------------------------------------------------------


def _tool_choice(
    raw: Any, tools: Sequence[Tool], server_tools: Collection[str]
) -> ToolChoice | None:
    if type(raw) is str and raw not in _TOOL_CHOICES:
        raise _bad(
            "tool_choice",
            f"{_shown(raw)} is not a tool choice; use 'auto', 'none', 'required' or "
            f"{_NAMED_CHOICE}.",
            code="invalid_tool_choice",
        )
    return openai_tool_choice(
        raw, tools, server_tools, shape=_NAMED_CHOICE, name_path=("function", "name")
    )


def read_chat_request(data: Any, gateway: Gateway) -> ChatRequest:
    """`parse_chat_request` with the gateway's settings: the door's reader."""
    return parse_chat_request(
        data,
        limits=gateway.config.limits,
        strict_tool_results=gateway.config.strict_tool_results,
        dialect=gateway.config.dialect,
        server_tools=gateway.server_tool_names,
    )
