"""The request side of `POST /v1/responses`: a parsed JSON body → `ResponsesRequest`.

Every client mistake is an OpenAI-shaped 400 naming the field, before anything reaches
the store or the upstream. The scalar fields go through one strict pydantic validation;
the tools and `tool_choice` are checked by hand (the tools' JSON Schemas exactly as on
the chat endpoint); `input` is checked by `items`, once the previous response it may
continue is known.

The Responses parameters that have a Chat Completions counterpart reach the upstream as
that counterpart (`max_output_tokens` → `max_tokens`, `text.format` → `response_format`,
`reasoning.effort` → `reasoning_effort`, `top_p`, `user`); the ones that only tune
OpenAI's own service (`include`, `truncation`, `prompt_cache_key`, ...) are accepted and
ignored, so clients that always send them work unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolwire.models.base import ModelSettings, ToolChoice
from toolwire.server.configuration.config import LimitsConfig
from toolwire.server.http.requests import validate_body
from toolwire.server.protocols.checks import (
    field_error,
    function_entries,
    function_tool,
    json_type,
    openai_tool_choice,
)
from toolwire.tools.tool import Tool

__all__ = ["ResponsesRequest", "parse_responses_request"]

_UNSUPPORTED: Final = {
    "background": "background responses are not supported; send the request without "
    "'background' and keep the connection (or stream).",
    "conversation": "conversations are not supported; continue a conversation with "
    "'previous_response_id' instead.",
    "prompt": "stored prompt templates are not supported; send 'instructions' and 'input'.",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesRequest:
    """A checked Responses request, in toolwire's terms."""

    model: str
    input: str | list[Any]
    """As sent: `items.parse_input` checks it against the previous response."""
    instructions: str | None
    tools: tuple[Tool, ...]
    """The client's function tools: definitions only, never executed by the gateway."""
    settings: ModelSettings
    stream: bool
    store: bool
    """Keep the response (OpenAI's default is true) for `GET` and `previous_response_id`."""
    previous_response_id: str | None
    echo: dict[str, Any]
    """The request's parameters as the response object repeats them."""


def parse_responses_request(
    data: Any, *, limits: LimitsConfig, server_tools: Collection[str]
) -> ResponsesRequest:
    """Check a Responses request body and convert it.

    Args:
        data: The request body, parsed JSON.
        limits: The gateway's limits (`max_messages` bounds the input items,
            `max_tools` the tools).
        server_tools: Names of the gateway's own tools: a client tool may not reuse one,
            and `tool_choice` may name one.

    Raises:
        GatewayError: 400 with the field at fault in `param` and advice in the message.
    """
    body = validate_body(_Body, data)
    for name, advice in _UNSUPPORTED.items():
        if getattr(body, name) not in (None, False):
            raise field_error(name, advice, code="unsupported_parameter")
    raw_input = body.input
    if type(raw_input) is list:
        if not raw_input:
            raise field_error("input", "must be a string or a non-empty array of input items.")
        if len(raw_input) > limits.max_messages:
            raise field_error(
                "input",
                f"{len(raw_input)} input items is more than this gateway's limit of "
                f"{limits.max_messages} (limits.max_messages in its config); send fewer, "
                "e.g. by continuing with 'previous_response_id' instead of resending the "
                "whole conversation.",
                code="too_many_messages",
            )
    elif type(raw_input) is not str:
        raise field_error(
            "input",
            "must be a string or an array of input items (messages, function_call and "
            f"function_call_output items), not {json_type(raw_input)}.",
        )
    tools, tools_echo = _tools(body.tools, limits.max_tools, server_tools)
    tool_choice = _tool_choice(body.tool_choice, tools, server_tools)
    settings = ModelSettings(
        temperature=body.temperature,
        max_tokens=body.max_output_tokens,
        tool_choice=tool_choice,
        parallel_tool_calls=body.parallel_tool_calls,
        extra=_extra(body),
    )
    text = body.text.model_dump(by_alias=True, exclude_none=True) if body.text else {}
    echo: dict[str, Any] = {
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "metadata": body.metadata or {},
        "parallel_tool_calls": body.parallel_tool_calls is not False,
        "previous_response_id": body.previous_response_id,
        "reasoning": body.reasoning.model_dump() if body.reasoning else {"effort": None},
        "store": body.store is not False,
        "temperature": body.temperature,
        "text": {"format": {"type": "text"}, **text},
        "tool_choice": body.tool_choice if body.tool_choice is not None else "auto",
        "tools": tools_echo,
        "top_p": body.top_p,
        "truncation": body.truncation or "disabled",
        "user": body.user,
    }
    return ResponsesRequest(
        model=body.model,
        input=raw_input,
        instructions=body.instructions,
        tools=tools,
        settings=settings,
        stream=bool(body.stream),
        store=body.store is not False,
        previous_response_id=body.previous_response_id,
        echo=echo,
    )


# --- the scalar fields ---------------------------------------------------------------------


class _Strict(BaseModel):
    # Strict: a temperature of "0.5" or a stream of 1 is refused, as OpenAI does. Fields
    # this gateway does not know are ignored: they tune OpenAI's own service.
    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=True)


class _Format(_Strict):
    type: Literal["text", "json_schema", "json_object"]
    name: str | None = None
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class _Text(_Strict):
    format: _Format | None = None
    verbosity: str | None = None


class _Reasoning(_Strict):
    effort: str | None = None
    summary: str | None = None


class _Body(_Strict):
    model: str = Field(min_length=1)
    input: Any = None
    instructions: str | None = None
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    stream: bool | None = None
    store: bool | None = None
    previous_response_id: str | None = Field(default=None, min_length=1)
    metadata: dict[str, str] | None = None
    text: _Text | None = None
    reasoning: _Reasoning | None = None
    user: str | None = None
    include: list[str] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    background: bool | None = None
    conversation: Any = None
    prompt: Any = None


def _extra(body: _Body) -> dict[str, Any]:
    """The Chat Completions fields an OpenAI-compatible upstream gets besides the settings."""
    extra: dict[str, Any] = {}
    if body.top_p is not None:
        extra["top_p"] = body.top_p
    if body.user is not None:
        extra["user"] = body.user
    if body.reasoning is not None and body.reasoning.effort is not None:
        extra["reasoning_effort"] = body.reasoning.effort
    fmt = body.text.format if body.text is not None else None
    if fmt is not None and fmt.type == "json_object":
        extra["response_format"] = {"type": "json_object"}
    elif fmt is not None and fmt.type == "json_schema":
        if not fmt.name or fmt.json_schema is None:
            raise field_error(
                "text.format",
                'a json_schema format needs a "name" and a "schema": {"type": "json_schema", '
                '"name": "...", "schema": {...}, "strict": true}.',
            )
        schema: dict[str, Any] = {"name": fmt.name, "schema": fmt.json_schema}
        if fmt.strict is not None:
            schema["strict"] = fmt.strict
        if fmt.description is not None:
            schema["description"] = fmt.description
        extra["response_format"] = {"type": "json_schema", "json_schema": schema}
    return extra


# --- tools ---------------------------------------------------------------------------------


def _tools(
    raw: Any, max_tools: int, server_tools: Collection[str]
) -> tuple[tuple[Tool, ...], list[dict[str, Any]]]:
    """The client's function tools, and each as the response object repeats it."""
    tools: list[Tool] = []
    echo: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    need = (
        "only function tools are supported (the gateway's own tools run inside it): "
        '{"type": "function", "name": ..., "parameters": {...}}'
    )
    for where, entry in function_entries(raw, max_tools, need, code="unsupported_tool_type"):
        tool = function_tool(entry, where, where, seen, server_tools)
        tools.append(tool)
        echo.append(
            {
                "type": "function",
                "name": tool.name,
                # As sent (checked to be a string or absent): `Tool` keeps "" for absent.
                "description": entry.get("description"),
                "parameters": tool.input_schema,
                "strict": tool.strict,
            }
        )
    return tuple(tools), echo


def _tool_choice(
    raw: Any, tools: Sequence[Tool], server_tools: Collection[str]
) -> ToolChoice | None:
    return openai_tool_choice(
        raw,
        tools,
        server_tools,
        shape='{"type": "function", "name": "<tool name>"}',
        name_path=("name",),
    )
