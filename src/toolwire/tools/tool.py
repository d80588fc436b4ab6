"""`Tool`: a provider-neutral tool definition, and `ToolParameter` for declaring one by hand."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolwire.tools.context import ToolContext
from toolwire.tools.errors import ToolDefinitionError, ToolExecutionError

__all__ = ["Effects", "Invoker", "Tool", "ToolParameter"]

Effects = Literal["read", "write", "destructive"]
"""What running a tool does to the world. `destructive` tools need approval (see `Policy`)."""

Invoker = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
"""Runs a tool with validated JSON arguments; returns the tool's raw Python result."""

_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}


@dataclass(frozen=True, kw_only=True)
class ToolParameter:
    """One parameter of a tool declared without a function (the provider-protocol style)."""

    name: str
    type: str = "string"
    """A JSON Schema type name: string, integer, number, boolean, array, object."""
    description: str | None = None
    required: bool = True
    default: Any = None
    enum: Sequence[Any] | None = None
    items: Mapping[str, Any] | None = None
    """JSON Schema of the items, for `type="array"`."""

    def to_schema(self) -> dict[str, Any]:
        if self.type not in _JSON_TYPES:
            raise ToolDefinitionError(
                f"Parameter {self.name!r} has type {self.type!r}; use one of "
                f"{', '.join(sorted(_JSON_TYPES))}."
            )
        schema: dict[str, Any] = {"type": self.type}
        if self.description:
            schema["description"] = self.description
        if self.enum is not None:
            schema["enum"] = list(self.enum)
        if self.items is not None:
            schema["items"] = dict(self.items)
        if not self.required and self.default is not None:
            schema["default"] = self.default
        return schema


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A tool: what a model is shown (`name`, `description`, `parameters`) and how it runs.

    Build one with `@tool` from a function, with `Tool.from_parameters(...)`, or directly
    with a JSON Schema. A `Tool` without an invoker is a definition only (a client's tool).
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    """A JSON Schema object describing the arguments."""
    effects: Effects = "read"
    timeout: float | None = None
    """Seconds before the runner gives up (`timeout`); `None` uses the policy default."""
    cache_ttl: float | None = None
    """Seconds a result may be reused for identical arguments; read tools only."""
    allow: tuple[str, ...] | None = None
    """Result fields that may reach the model; `None` means the declared result fields, if any."""
    result_fields: tuple[str, ...] | None = None
    """Fields of the declared result type (pydantic model / TypedDict / dataclass), if any."""
    scopes: tuple[str, ...] = ()
    """Permissions the caller must hold (`ToolContext.scopes`)."""
    strict: bool | None = None
    """OpenAI's structured-outputs flag for the arguments; sent as `function.strict` when
    set (a client's tool keeps the flag it was declared with)."""
    invoker: Invoker | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-." for c in self.name):
            raise ToolDefinitionError(
                f"Tool name {self.name!r} is invalid: use letters, digits, '_', '-' or '.'."
            )
        if self.parameters.get("type") != "object":
            raise ToolDefinitionError(
                f"Tool {self.name!r}: parameters must be a JSON Schema with type 'object'."
            )
        if self.cache_ttl is not None and self.effects != "read":
            raise ToolDefinitionError(
                f"Tool {self.name!r}: cache_ttl is only allowed for read tools "
                f"(effects={self.effects!r})."
            )
        if self.effects not in ("read", "write", "destructive"):
            raise ToolDefinitionError(
                f"Tool {self.name!r}: effects must be 'read', 'write' or 'destructive', "
                f"not {self.effects!r}."
            )

    @classmethod
    def from_parameters(
        cls,
        name: str,
        description: str,
        parameters: Sequence[ToolParameter],
        *,
        handler: Callable[..., Any] | None = None,
        **options: Any,
    ) -> Tool:
        """Declare a tool from `ToolParameter`s; `handler(**arguments)` runs it (sync or async)."""
        props = {p.name: p.to_schema() for p in parameters}
        required = [p.name for p in parameters if p.required]
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            schema["required"] = required
        defaults = {p.name: p.default for p in parameters if not p.required}
        invoker = _handler_invoker(handler, defaults) if handler is not None else None
        return cls(
            name=name, description=description, parameters=schema, invoker=invoker, **options
        )

    @property
    def allowed_fields(self) -> tuple[str, ...] | None:
        """The effective result allowlist: `allow`, else the declared result fields."""
        return self.allow if self.allow is not None else self.result_fields

    async def invoke(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the tool with already validated arguments. Only the runner should call this."""
        if self.invoker is None:
            raise ToolExecutionError(f"Tool {self.name!r} has no implementation in this process.")
        return await self.invoker(arguments, ctx)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI Chat Completions `tools` entry."""
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic Messages API `tools` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.parameters,
        }


def _handler_invoker(handler: Callable[..., Any], defaults: dict[str, Any]) -> Invoker:
    import asyncio
    import functools
    import inspect

    is_async = inspect.iscoroutinefunction(handler)

    async def invoke(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        kwargs = {**defaults, **arguments}
        if is_async:
            return await handler(**kwargs)
        return await asyncio.to_thread(functools.partial(handler, **kwargs))

    return invoke
