"""The request side of `POST /v1/messages`: a parsed JSON body → `MessagesRequest`.

Everything a client can get wrong is refused here with a 400 naming the field (in
Anthropic's dotted form, `tools.0.input_schema`) and what to send instead, so a bad
request never reaches the upstream. The scalar fields go through one strict pydantic
validation; `messages` (see `transcript`), `tools` and `tool_choice` are checked by hand.

Fields toolwire does not interpret (`service_tier`, `container`, newer ones) are ignored,
not refused: clients such as coding agents send them routinely, and they mean nothing to
the upstreams behind the gateway. The handler names them in a response header.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolwire.models.base import ModelSettings, ToolChoice
from toolwire.models.messages import Message
from toolwire.server.configuration.config import LimitsConfig
from toolwire.server.http.requests import validate_body
from toolwire.server.protocols.anthropic_messages.transcript import parse_transcript
from toolwire.server.protocols.checks import field_error as _bad
from toolwire.server.protocols.checks import (
    json_type,
    message_array,
    optional_string,
    tool_array,
    tool_name,
    tool_object,
    tool_parameters,
)
from toolwire.server.protocols.checks import shown as _shown
from toolwire.tools.tool import Tool

if TYPE_CHECKING:
    from toolwire.server.gateway import Gateway

__all__ = ["MessagesRequest", "parse_messages_request", "read_messages_request"]

_CHOICES: Final = ("auto", "any", "tool", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesRequest:
    """A checked Messages request, in toolwire's terms."""

    model: str
    """The public model id as sent."""
    messages: tuple[Message, ...]
    """The system prompt and the conversation, orphan tool results removed."""
    tools: tuple[Tool, ...]
    """The client's tools: definitions only, never executed by the gateway."""
    settings: ModelSettings
    stream: bool
    thinking: bool
    """The request enabled extended thinking: reasoning is shown as `thinking` blocks."""
    dropped_results: tuple[str, ...]
    """The `tool_use_id` of each orphan `tool_result` dropped."""
    ignored_fields: tuple[str, ...]
    """Top-level fields sent but not interpreted."""


def parse_messages_request(
    data: Any,
    *,
    limits: LimitsConfig,
    strict_tool_results: bool,
    server_tools: Collection[str],
    count_only: bool = False,
) -> MessagesRequest:
    """Check a Messages request body and convert it.

    Args:
        data: The request body, parsed JSON.
        limits: The gateway's limits (`max_messages`, `max_tools`).
        strict_tool_results: Refuse orphan tool results instead of dropping them.
        server_tools: Names of the gateway's own tools: a client tool may not reuse one,
            and `tool_choice` may name one.
        count_only: A `count_tokens` body: `max_tokens` is not required.

    Raises:
        GatewayError: 400 naming the field at fault, with advice in the message.
    """
    body = validate_body(_Body, data)
    if body.max_tokens is None and not count_only:
        raise _bad(
            "max_tokens",
            "required: the most tokens the answer may take, e.g. 1024.",
        )
    raw_messages = message_array(body.messages, limits.max_messages)
    tools = _tools(body.tools, limits.max_tools, server_tools)
    tool_choice, parallel = _tool_choice(body.tool_choice, tools, server_tools)
    transcript = parse_transcript(
        body.system, raw_messages, strict_tool_results=strict_tool_results
    )
    settings = ModelSettings(
        temperature=body.temperature,
        max_tokens=body.max_tokens,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        extra=_extra(body),
    )
    return MessagesRequest(
        model=body.model,
        messages=transcript.messages,
        tools=tools,
        settings=settings,
        stream=bool(body.stream),
        thinking=body.thinking is not None and body.thinking.type != "disabled",
        dropped_results=transcript.dropped_results,
        ignored_fields=tuple(sorted(body.model_extra or {})),
    )


# --- the scalar fields ---------------------------------------------------------------------


class _Strict(BaseModel):
    # Strict: a temperature of "0.5" or a stream of 1 is refused, as Anthropic does.
    model_config = ConfigDict(strict=True, extra="allow")


class _Thinking(_Strict):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(default=None, ge=0)


class _Metadata(_Strict):
    user_id: str | None = None


class _Body(_Strict):
    model: str = Field(min_length=1)
    messages: Any
    max_tokens: int | None = Field(default=None, ge=1)
    system: Any = None
    tools: Any = None
    tool_choice: Any = None
    stream: bool | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    stop_sequences: list[str] | None = None
    metadata: _Metadata | None = None
    thinking: _Thinking | None = None


def _extra(body: _Body) -> dict[str, Any]:
    """The sampling fields under the names `ModelSettings.extra` uses (OpenAI's, which the
    Anthropic upstream maps back)."""
    extra: dict[str, Any] = {}
    if body.stop_sequences:
        extra["stop"] = list(body.stop_sequences)
    if body.top_p is not None:
        extra["top_p"] = body.top_p
    if body.top_k is not None:
        extra["top_k"] = body.top_k
    if body.metadata is not None and body.metadata.user_id:
        extra["user"] = body.metadata.user_id
    return extra


# --- tools ---------------------------------------------------------------------------------


def _tools(raw: Any, max_tools: int, server_tools: Collection[str]) -> tuple[Tool, ...]:
    tools: list[Tool] = []
    seen: dict[str, str] = {}
    for n, raw_entry in enumerate(tool_array(raw, max_tools)):
        where = f"tools.{n}"
        entry = tool_object(raw_entry, where)
        kind = entry.get("type", "custom")
        if kind != "custom":
            raise _bad(
                f"{where}.type",
                f"{_shown(kind)} is one of Anthropic's own server tools, which this gateway "
                'does not run; declare client tools as {"name": ..., "description": ..., '
                '"input_schema": {...}} (the gateway runs its own server tools itself).',
            )
        name = tool_name(entry.get("name"), f"{where}.name", where, seen, server_tools, coded=False)
        description = optional_string(entry.get("description"), f"{where}.description")
        schema = _input_schema(entry.get("input_schema"), f"{where}.input_schema", name)
        tools.append(Tool(name=name, description=description or "", input_schema=schema))
    return tuple(tools)


def _input_schema(schema: Any, where: str, name: str) -> dict[str, Any]:
    # Required, as Anthropic has it; then checked as the other front doors check theirs.
    if schema is None:
        raise _bad(
            where,
            f"tool {name!r}: required, a JSON Schema object such as "
            '{"type": "object", "properties": {...}}.',
        )
    return tool_parameters(schema, where, name)


# --- tool_choice ---------------------------------------------------------------------------


def _tool_choice(
    raw: Any, tools: Sequence[Tool], server_tools: Collection[str]
) -> tuple[ToolChoice | None, bool | None]:
    """`tool_choice` as toolwire's choice and `parallel_tool_calls` (`False` when
    `disable_parallel_tool_use` is set, else unset)."""
    if raw is None:
        return None, None
    kind = raw.get("type") if type(raw) is dict else None
    if kind not in _CHOICES:
        got = f"type {_shown(kind)}" if type(raw) is dict else json_type(raw)
        raise _bad(
            "tool_choice",
            'must be {"type": "auto"}, {"type": "any"}, {"type": "none"} or '
            f'{{"type": "tool", "name": "<tool name>"}}; got {got}.',
        )
    assert type(raw) is dict
    disable = raw.get("disable_parallel_tool_use")
    if disable is not None and type(disable) is not bool:
        raise _bad(
            "tool_choice.disable_parallel_tool_use",
            f"must be a boolean, not {json_type(disable)}.",
        )
    parallel = False if disable else None
    if kind == "auto" or kind == "none":
        return kind, parallel
    names = [*(tool.name for tool in tools), *server_tools]
    if not names:
        raise _bad(
            "tool_choice",
            f"{_shown(kind)} needs tools, and this request has none (nor does the "
            'gateway); send \'tools\' or use {"type": "auto"}.',
        )
    if kind == "any":
        return "required", parallel
    name = raw.get("name")
    if type(name) is not str or name not in names:
        raise _bad(
            "tool_choice.name",
            f"{_shown(name)} is not one of the tools; use one of "
            f"{', '.join(repr(n) for n in names)}.",
        )
    return name, parallel


def read_messages_request(data: Any, gateway: Gateway) -> MessagesRequest:
    """`parse_messages_request` with the gateway's settings: the door's reader."""
    return parse_messages_request(
        data,
        limits=gateway.config.limits,
        strict_tool_results=gateway.config.strict_tool_results,
        server_tools=gateway.server_tool_names,
    )
