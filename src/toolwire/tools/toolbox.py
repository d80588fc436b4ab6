"""`Toolbox`: one `ToolProvider` built from functions, `Tool`s and other providers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import importlib.util
import inspect
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeAlias

from pydantic_core import PydanticSerializationError, to_jsonable_python

from toolwire.tools.call import ToolArguments, ToolResult
from toolwire.tools.context import ToolContext
from toolwire.tools.decorator import FunctionTool, tool
from toolwire.tools.errors import ToolDefinitionError, ToolExecutionError, ToolNotFoundError
from toolwire.tools.provider import AnyToolProvider, ToolProvider, as_provider, unwrap_provider
from toolwire.tools.tool import Tool

__all__ = ["Toolbox", "ToolboxItem", "to_jsonable"]

ToolboxItem: TypeAlias = Callable[..., Any] | Tool | AnyToolProvider
"""What a `Toolbox` is built from: a function (decorated or plain), a `Tool`, a provider
(its `execute_tool` with or without the context argument)."""

_LISTING_TIMEOUT = 30.0
"""Seconds `Toolbox.from_factory` waits for a provider to list its tools."""


class Toolbox:
    """A `ToolProvider` over functions, `Tool`s and other providers.

    Plain functions get `@tool` defaults. Tools of providers that list them synchronously
    (a `Toolbox`, `MockTools`) are known when the toolbox is built; other providers (HTTP,
    MCP, a seed-style provider) are asked on `list_tools()`. A name defined twice is a
    `ToolDefinitionError`, naming both sources; so is a provider that does not fit the
    protocol (see `as_provider`).

    Args:
        items: Functions, `Tool`s and providers, in the order tools should be listed.
    """

    def __init__(self, items: Iterable[ToolboxItem] | AnyToolProvider = ()) -> None:
        if not isinstance(items, Iterable):
            if not _looks_like_provider(items):
                raise ToolDefinitionError(
                    "Toolbox takes a list of functions, Tools and tool providers, "
                    f"not {type(items).__name__}: {items!r}."
                )
            items = [items]  # one provider; `as_provider` says what it lacks, if anything
        self._local: dict[str, Tool] = {}
        self._routes: dict[str, ToolProvider] = {}
        self._sources: dict[str, str] = {}
        self._static: dict[str, Tool] = {}
        self._dynamic: list[ToolProvider] = []
        self._dynamic_routes: dict[str, ToolProvider] = {}
        for item in items:
            self._add(item)

    @classmethod
    def from_module(cls, module: str | ModuleType) -> Toolbox:
        """Collect the module-level `Tool`s (`@tool` functions) of a module, and its
        module-level `HttpTools` and `McpTools` providers.

        Args:
            module: A dotted module name (`myapp.tools`), a path to a `.py` file, or a
                module object. The current directory is searched too, as `python -m` does.

        Raises:
            ToolDefinitionError: The module fails to import (naming the module and the
                error, in one line) or defines no tools.
        """
        from toolwire.tools.http import HttpTools
        from toolwire.tools.mcp import McpTools

        mod = module if isinstance(module, ModuleType) else _import(module)
        found: list[Tool | HttpTools | McpTools] = []
        for value in vars(mod).values():
            if isinstance(value, Tool | HttpTools | McpTools) and all(
                value is not t for t in found
            ):
                found.append(value)
        if not found:
            raise ToolDefinitionError(
                f"Tool module {mod.__name__!r} defines no tools; decorate its functions "
                "with @toolwire.tool (or define HttpTools / McpTools at module level)."
            )
        return cls(found)

    @classmethod
    def from_factory(cls, factory: str, config: Mapping[str, Any] | None = None) -> Toolbox:
        """Build a provider from a `module:name` factory and list its tools once.

        For configuration files (the gateway's `server_tools.providers`): the factory is a
        provider class or a callable returning a provider; it is called with `config` when
        it takes an argument, else with none. Its tools are listed now, so they are known
        when the toolbox is built; calls still go to the provider. The listing runs on a
        private event loop in a worker thread: a provider should open loop-bound
        resources (HTTP clients) when it executes a tool, not while listing.

        Args:
            factory: `module:name`, e.g. `myapp.weather:WeatherToolProvider`; the module is
                a dotted name or a path to a `.py` file, as in `from_module`.
            config: Passed to the factory (default `{}` for a factory that takes one).

        Raises:
            ToolDefinitionError: The factory cannot be imported or called, does not make a
                provider, or the provider fails to list its tools; in one line.
        """
        target = _import_factory(factory)
        provider = _call_factory(factory, target, config)
        try:
            adapted = as_provider(provider)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"Tool provider factory {factory!r}: {exc}") from None
        listed = _list_now(factory, adapted)
        box = cls()
        for t in listed:
            box._register(t, f"provider {factory}", provider=adapted)
        return box

    @property
    def tools(self) -> list[Tool]:
        """The tools known without asking a remote provider, in listing order."""
        return list(self._static.values())

    def get(self, name: str) -> Tool:
        """A tool known without asking a remote provider.

        Raises:
            ToolNotFoundError: Listing the available names.
        """
        found = self._static.get(name)
        if found is None:
            raise ToolNotFoundError.unknown(name, list(self._static))
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._sources

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self._static)

    def __repr__(self) -> str:
        names = ", ".join(self._static)
        extra = f" +{len(self._dynamic)} providers" if self._dynamic else ""
        return f"Toolbox([{names}]{extra})"

    async def list_tools(self) -> list[Tool]:
        """Every tool: local ones, then those of each provider."""
        listed = self.tools
        if not self._dynamic:
            return listed
        results = await asyncio.gather(*(p.list_tools() for p in self._dynamic))
        routes: dict[str, ToolProvider] = {}
        for provider, tools in zip(self._dynamic, results, strict=True):
            for t in tools:
                other = self._sources.get(t.name) or (
                    _describe(routes[t.name]) if t.name in routes else None
                )
                if other is not None:
                    raise ToolDefinitionError(
                        f"Duplicate tool name {t.name!r}: defined by {other} and by "
                        f"{_describe(provider)}. Rename one of them."
                    )
                routes[t.name] = provider
                listed.append(t)
        self._dynamic_routes = routes
        return listed

    async def execute_tool(
        self, name: str, arguments: dict[str, Any] | ToolArguments, ctx: ToolContext | None = None
    ) -> ToolResult:
        """Run a tool with validated arguments; its return value is made JSON-able.

        Raises:
            ToolNotFoundError: No tool of that name (the message lists the available ones).
            ToolParameterError: The arguments do not fit the function's parameters.
            ToolExecutionError: The tool failed or returned something not JSON-serialisable.
        """
        if ctx is None:
            ctx = ToolContext()
        if isinstance(arguments, ToolArguments):
            # Seed 002's loop hands a model's call straight over: read the text as a dict.
            arguments = arguments.to_dict()
        local = self._local.get(name)
        if local is not None:
            started = time.perf_counter()
            raw = await local.invoke(arguments, ctx)
            result = to_jsonable(raw, name)
            elapsed = (time.perf_counter() - started) * 1000
            return ToolResult.ok("", name, result, duration_ms=elapsed)
        provider = self._routes.get(name) or self._dynamic_routes.get(name)
        if provider is None and self._dynamic:
            await self.list_tools()  # a remote provider may have gained the tool since
            provider = self._dynamic_routes.get(name)
        if provider is None:
            names = [*self._static, *self._dynamic_routes]
            raise ToolNotFoundError.unknown(name, names)
        return await provider.execute_tool(name, arguments, ctx)

    def _add(self, item: ToolboxItem) -> None:
        if isinstance(item, Tool):
            self._register(item, _describe_tool(item), local=True)
        elif _looks_like_provider(item):
            provider = as_provider(item)  # refuses what does not fit, saying what to change
            static = _static_tools(item)
            if static is None:
                self._dynamic.append(provider)
                return
            for t in static:
                self._register(t, _describe(item), provider=provider)
        elif callable(item):
            self._add(tool(item))
        else:
            raise ToolDefinitionError(
                f"Toolbox items must be functions, Tools or tool providers, "
                f"not {type(item).__name__}: {item!r}."
            )

    def _register(
        self,
        definition: Tool,
        source: str,
        *,
        local: bool = False,
        provider: ToolProvider | None = None,
    ) -> None:
        name = definition.name
        if name in self._sources:
            raise ToolDefinitionError(
                f"Duplicate tool name {name!r}: defined by {self._sources[name]} and by "
                f"{source}. Rename one of them, e.g. with @tool(name=...)."
            )
        self._sources[name] = source
        self._static[name] = definition
        if local:
            self._local[name] = definition
        if provider is not None:
            self._routes[name] = provider


def to_jsonable(value: Any, tool_name: str) -> Any:
    """A tool's raw return value as JSON-able data (models, dataclasses, datetimes...).

    Raises:
        ToolExecutionError: The value (or something inside it) is not JSON-serialisable.
    """
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        culprit = _unserialisable(value)
        raise ToolExecutionError(
            f"Tool {tool_name!r} returned a value of type {type(culprit).__qualname__!r} "
            "that is not JSON-serialisable."
        ) from None


def _unserialisable(value: Any) -> Any:
    # Point at the innermost offender rather than the container holding it.
    children: Iterable[Any] = ()
    if isinstance(value, dict):
        children = value.values()
    elif isinstance(value, list | tuple | set | frozenset):
        children = value
    for child in children:
        try:
            to_jsonable_python(child)
        except PydanticSerializationError:
            return _unserialisable(child)
    return value


def _looks_like_provider(item: object) -> bool:
    # Anything with either method is meant as a provider; `as_provider` says what is wrong.
    if inspect.isfunction(item) or inspect.ismethod(item):
        return False
    return hasattr(item, "list_tools") or hasattr(item, "execute_tool")


def _import_factory(factory: str) -> Any:
    module, sep, attr = factory.rpartition(":")
    if not sep or not module or not attr:
        raise ToolDefinitionError(
            f"Tool provider factory {factory!r} must be 'module:name', "
            "e.g. 'myapp.weather:WeatherToolProvider'."
        )
    target: Any = _import(module, what="tool provider module")
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ToolDefinitionError(
                f"Tool provider factory {factory!r}: module {module!r} has no {attr!r}."
            )
        target = getattr(target, part)
    return target


def _call_factory(factory: str, target: Any, config: Mapping[str, Any] | None) -> Any:
    if not callable(target):
        raise ToolDefinitionError(
            f"Tool provider factory {factory!r} is a {type(target).__name__}, not a class "
            "or function."
        )
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = None
    takes_config = params is None or any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
    )
    if not takes_config and config:
        raise ToolDefinitionError(
            f"Tool provider factory {factory!r} takes no arguments, so it cannot use "
            "'config'; remove it or make the factory take a config dict."
        )
    try:
        return target(dict(config or {})) if takes_config else target()
    except Exception as exc:
        raise ToolDefinitionError(
            f"Tool provider factory {factory!r} failed: {_one_line(exc)}"
        ) from None


def _list_now(factory: str, provider: ToolProvider) -> list[Tool]:
    async def listing() -> list[Tool]:
        return await asyncio.wait_for(provider.list_tools(), _LISTING_TIMEOUT)

    # A private event loop in a worker thread: this may run inside a running loop (an app
    # built in an async test) or outside any (the CLI), and must disturb neither.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolwire-list") as pool:
        try:
            tools = pool.submit(asyncio.run, listing()).result()
        except TimeoutError:
            raise ToolDefinitionError(
                f"Tool provider {factory!r} did not list its tools within "
                f"{_LISTING_TIMEOUT:g} seconds."
            ) from None
        except Exception as exc:
            raise ToolDefinitionError(
                f"Tool provider {factory!r} failed to list its tools: {_one_line(exc)}"
            ) from None
    if not isinstance(tools, list) or not all(isinstance(t, Tool) for t in tools):
        raise ToolDefinitionError(
            f"Tool provider {factory!r}: list_tools() must return a list of Tool, "
            f"not {type(tools).__name__}."
        )
    return tools


def _one_line(exc: BaseException) -> str:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _static_tools(provider: object) -> Sequence[Tool] | None:
    if isinstance(provider, Toolbox) and provider._dynamic:
        return None  # its full list is only known asynchronously
    tools = getattr(provider, "tools", None)
    if isinstance(tools, list | tuple) and all(isinstance(t, Tool) for t in tools):
        return tools
    return None


def _describe(provider: object) -> str:
    inner = unwrap_provider(provider)
    label = getattr(inner, "label", None)
    if isinstance(label, str):
        return label
    return f"provider {type(inner).__qualname__}"


def _describe_tool(t: Tool) -> str:
    if isinstance(t, FunctionTool):
        fn = t.fn
        module = getattr(fn, "__module__", None)
        qualname = getattr(fn, "__qualname__", repr(fn))
        return f"function {module}.{qualname}" if module else f"function {qualname}"
    return f"Tool {t.name!r}"


def _import(target: str, *, what: str = "tool module") -> ModuleType:
    try:
        if target.endswith(".py") or os.sep in target or "/" in target:
            return _import_path(Path(target))
        cwd = os.getcwd()
        if "" not in sys.path and cwd not in sys.path:
            # Console scripts do not put the current directory on sys.path; `python -m`
            # does. Users expect `--tools myapp.tools` to work from their project root.
            sys.path.append(cwd)
        return importlib.import_module(target)
    except ToolDefinitionError as exc:
        # A bad @tool inside the module: keep its full list of problems.
        raise ToolDefinitionError(f"Could not import {what} {target!r}: {exc}") from None
    except (Exception, SystemExit) as exc:
        raise ToolDefinitionError(f"Could not import {what} {target!r}: {_one_line(exc)}") from None


def _import_path(path: Path) -> ModuleType:
    if not path.is_file():
        raise FileNotFoundError(f"No such file: '{path}'")
    name = f"toolwire_user_tools_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
