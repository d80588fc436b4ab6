"""The `ToolProvider` protocol: anything that lists tools and executes them.

Two shapes of `execute_tool` are accepted wherever a provider is (`Toolbox`, `ToolRunner`,
`Agent`, the gateway's server tools):

- `execute_tool(name, arguments, ctx)`: toolwire's own; `ctx` is the caller's
  `ToolContext` (scopes, auth token);
- `execute_tool(tool_name, parameters)`: the provider-protocol seed's, with no context.

`as_provider` tells them apart once, when the provider is registered, and wraps the
second kind in a small adapter, so the runner always makes the same call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, runtime_checkable

from toolwire.tools.call import ToolResult
from toolwire.tools.context import ToolContext
from toolwire.tools.errors import ToolDefinitionError
from toolwire.tools.tool import Tool

__all__ = [
    "AnyToolProvider",
    "ContextFreeToolProvider",
    "ToolProvider",
    "ToolProviderProtocol",
    "as_provider",
    "unwrap_provider",
]


@runtime_checkable
class ToolProvider(Protocol):
    """Lists tools and executes them by name.

    `execute_tool` receives arguments the runner has already parsed and validated. It may
    return a `ToolResult` (without call id or name: the runner sets them) or raise
    `ToolNotFoundError`, `ToolParameterError` or `ToolExecutionError`; any other exception
    counts as an execution error too. A provider whose `execute_tool` takes only
    `(tool_name, parameters)`, as in the provider-protocol seed, is accepted as well (see
    `as_provider`). Code outside the runner should not call `execute_tool` directly; go
    through `ToolRunner` so validation, permissions and redaction apply.
    """

    async def list_tools(self) -> list[Tool]: ...

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext, /
    ) -> ToolResult: ...


ToolProviderProtocol = ToolProvider
"""The provider-protocol seed's name for `ToolProvider` (works with `isinstance`)."""


class ContextFreeToolProvider(Protocol):
    """A provider as the provider-protocol seed writes it: `execute_tool` takes no context."""

    async def list_tools(self) -> list[Tool]: ...

    async def execute_tool(self, name: str, arguments: dict[str, Any], /) -> ToolResult: ...


AnyToolProvider: TypeAlias = ToolProvider | ContextFreeToolProvider
"""What `Toolbox`, `ToolRunner` and `Agent` accept as a provider."""

_SHAPE = (
    "A tool provider defines `async def list_tools(self) -> list[Tool]` and "
    "`async def execute_tool(self, tool_name, parameters[, ctx]) -> ToolResult`."
)


def as_provider(provider: object) -> ToolProvider:
    """`provider` as a `ToolProvider` whose `execute_tool` takes the context.

    Returns the provider itself when its `execute_tool` takes a third argument, else a thin
    adapter that drops the context. Run once, when a provider is registered.

    Raises:
        ToolDefinitionError: It does not fit the protocol (a class instead of an instance,
            a missing or synchronous method, the wrong number of arguments); the message
            says what to change.
    """
    if isinstance(provider, _ContextFree):
        return provider
    label = _label(provider)
    if isinstance(provider, type):
        raise ToolDefinitionError(
            f"{label} is a class; pass an instance of it, e.g. {provider.__name__}(...)."
        )
    methods: dict[str, Callable[..., Any]] = {}
    for name in ("list_tools", "execute_tool"):
        method = getattr(provider, name, None)
        if not callable(method):
            raise ToolDefinitionError(
                f"{label} is not a tool provider: it has no {name}(). {_SHAPE}"
            )
        if not _is_async(method):
            raise ToolDefinitionError(
                f"{label}.{name} must be a coroutine function: write `async def {name}`."
            )
        methods[name] = method
    if _positional(methods["list_tools"], label, "list_tools")[1] > 0:
        raise ToolDefinitionError(f"{label}.list_tools must take no arguments. {_SHAPE}")
    count, required = _positional(methods["execute_tool"], label, "execute_tool")
    if count is None or count >= 3:
        if required > 3:
            raise ToolDefinitionError(
                f"{label}.execute_tool requires {required} arguments; it is called with "
                f"(tool_name, parameters, ctx). {_SHAPE}"
            )
        return provider  # type: ignore[return-value]  # shape checked above
    if count == 2:
        return _ContextFree(provider)
    raise ToolDefinitionError(
        f"{label}.execute_tool takes {count} argument{'s' if count != 1 else ''}; it must take "
        f"(tool_name, parameters) or (tool_name, parameters, ctx). {_SHAPE}"
    )


def unwrap_provider(provider: object) -> object:
    """The provider `as_provider` was given (for messages that name its class)."""
    return provider.inner if isinstance(provider, _ContextFree) else provider


class _ContextFree:
    """Adapts a seed-style provider: the runner's context is not passed on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def list_tools(self) -> list[Tool]:
        tools: list[Tool] = await self.inner.list_tools()
        return tools

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext | None = None, /
    ) -> ToolResult:
        result: ToolResult = await self.inner.execute_tool(name, arguments)
        return result

    def __repr__(self) -> str:
        return repr(self.inner)


def _positional(fn: Callable[..., Any], label: str, name: str) -> tuple[int | None, int]:
    """How many positional arguments `fn` takes (`None`: any number) and how many it needs."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None, 0  # a builtin or C method: trust it
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in params if p.kind in kinds]
    required = sum(p.default is p.empty for p in positional)
    keyword = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keyword:
        raise ToolDefinitionError(
            f"{label}.{name} has required keyword-only arguments ({', '.join(keyword)}); "
            f"give them defaults. {_SHAPE}"
        )
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None, required
    return len(positional), required


def _is_async(fn: Callable[..., Any]) -> bool:
    # A sync wrapper (functools.wraps) around a coroutine function still returns awaitables.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inspect.unwrap(fn))


def _label(provider: object) -> str:
    kind = provider if isinstance(provider, type) else type(provider)
    return (
        f"{kind.__module__}.{kind.__qualname__}"
        if kind.__module__ != "builtins"
        else kind.__qualname__
    )
