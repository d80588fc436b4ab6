"""`MockTools`: a `ToolProvider` for tests that records its calls and fails on demand.

It also covers the provider-protocol seed's `MockToolProvider(tools, results)` (exported
under that name too): `Tool`s plus canned results by tool name, an `Exception` as a result
making that call fail with its message, and `call_history` as `(tool_name, parameters)`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from toolwire.tools.call import ErrorCode, ToolArguments, ToolErrorInfo, ToolResult
from toolwire.tools.context import ToolContext
from toolwire.tools.decorator import FunctionTool, tool
from toolwire.tools.errors import (
    ToolDefinitionError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameterError,
)
from toolwire.tools.tool import Tool
from toolwire.tools.toolbox import to_jsonable

__all__ = ["MockCall", "MockToolProvider", "MockTools"]

# Open, so the runner passes whatever the test sends instead of refusing undeclared names.
_ANY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


@dataclass(frozen=True, kw_only=True)
class MockCall:
    """One recorded `execute_tool` call."""

    name: str
    arguments: dict[str, Any]
    """A deep copy of the arguments, as they were when the call started."""
    ctx: ToolContext


@dataclass(kw_only=True)
class _Behaviour:
    kind: Literal["fail", "delay", "hang"]
    error: BaseException | None = None
    seconds: float = 0.0
    remaining: int | None = None


@dataclass(kw_only=True)
class _Entry:
    tool: Tool
    run: Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
    failure: BaseException | None = None
    """A canned exception: the call fails with its message."""
    check: bool = False
    """Validate arguments against the declared schema (a `Tool` declared by hand)."""
    validator: Any = None


@dataclass(kw_only=True)
class _Config:
    behaviours: dict[str, list[_Behaviour]] = field(default_factory=dict)


class MockTools:
    """A provider whose tools return canned values, for tests.

    Build it from `Tool`s (their invokers run, or the canned `results`) or from a mapping
    of names to return values or callables (called with the arguments as keywords; a
    function with type hints also gets a real schema). Every call is recorded in `calls`
    (and, as the provider-protocol seed has it, in `call_history`), and a tool can be told
    to fail, wait or hang.

    Configured behaviours queue up per tool: each call uses the first one, and one given
    `times=n` is dropped after n calls. `reset()` clears history and behaviours.

    Example:
        ```python
        tools = MockTools({"get_weather": {"temp": 21}, "search": lambda query: [query]})
        tools.fail("search", "Search backend unavailable.", times=1)
        ...
        tools.assert_called_with("get_weather", city="Lisbon")

        weather = Tool(name="get_weather", description="Weather.",
                       parameters={"city": ToolParameter(type="string", required=True)})
        seed_style = MockTools([weather], {"get_weather": {"temp": 21}})
        ```

    Args:
        items: `Tool`s, or a mapping of tool name to return value / callable / `Tool`.
        results: With `Tool`s: a canned result per tool name (an `Exception` makes calls
            fail with its message). Arguments are checked against the tool's declared
            parameters; a `Tool` left without a result fails as "not mocked".
    """

    def __init__(
        self,
        items: Iterable[Tool] | Mapping[str, Any] = (),
        results: Mapping[str, Any] | None = None,
    ) -> None:
        self.calls: list[MockCall] = []
        """Every call, in the order the calls started."""
        self._entries: dict[str, _Entry] = {}
        self._config = _Config()
        if isinstance(items, Mapping):
            if results is not None:
                raise ToolDefinitionError(
                    "MockTools: give canned results either as the mapping or as results= "
                    "beside a list of Tools, not both."
                )
            for name, value in items.items():
                self.add(name, value)
            return
        canned = dict(results or {})
        for item in items:
            if not isinstance(item, Tool):
                raise ToolDefinitionError(
                    f"MockTools takes Tools or a mapping of name to result, "
                    f"not {type(item).__name__}."
                )
            if item.name in canned:
                self._entries[item.name] = _canned_entry(item, canned.pop(item.name))
            else:
                self.add(item.name, item)
        if canned:
            listed = ", ".join(repr(n) for n in self._entries) or "none"
            raise ToolDefinitionError(
                f"MockTools: results for {', '.join(repr(n) for n in canned)}, which "
                f"{'is' if len(canned) == 1 else 'are'} not among the tools ({listed})."
            )

    # --- definition -------------------------------------------------------------------

    def add(self, name: str, value: Any) -> None:
        """Define (or redefine) a tool: a `Tool`, a callable, or a value to return."""
        if isinstance(value, Tool):
            if value.invoker is None:
                self._entries[name] = _canned_entry(value, _NOT_MOCKED)
            else:
                check = not isinstance(value, FunctionTool)  # @tool functions check their own
                self._entries[name] = _Entry(tool=value, run=value.invoke, check=check)
        elif isinstance(value, BaseException) or _is_exception_class(value):
            # The seed's habit: an exception as the canned result fails the call with its
            # message (not "returned a value that is not JSON-serialisable").
            definition = Tool(name=name, description=f"Mock tool {name}.", input_schema=_ANY_OBJECT)
            self._entries[name] = _canned_entry(definition, value)
        elif callable(value):
            self._entries[name] = _callable_entry(name, value)
        else:
            canned = value

            async def run(arguments: dict[str, Any], ctx: ToolContext) -> Any:
                return canned

            definition = Tool(name=name, description=f"Mock tool {name}.", input_schema=_ANY_OBJECT)
            self._entries[name] = _Entry(tool=definition, run=run)

    @property
    def tools(self) -> list[Tool]:
        """The tool definitions, available synchronously."""
        return [entry.tool for entry in self._entries.values()]

    @property
    def call_history(self) -> list[tuple[str, dict[str, Any]]]:
        """Every call as `(tool_name, parameters)`, in order (the seed's mock records this)."""
        return [(c.name, c.arguments) for c in self.calls]

    # --- behaviours ---------------------------------------------------------------------

    def fail(
        self,
        name: str,
        error: BaseException | type[BaseException] | str | None = None,
        *,
        times: int | None = None,
    ) -> None:
        """Make calls to `name` raise instead of returning.

        Args:
            name: The tool.
            error: An exception (instance or class) to raise, or a message for a
                `ToolExecutionError`; by default a `ToolExecutionError` saying it failed.
            times: Fail only the next `times` calls; `None` fails until `reset()`.
        """
        self._require(name)
        if error is None:
            exc: BaseException = ToolExecutionError(f"Tool {name!r} failed (MockTools).")
        elif isinstance(error, str):
            exc = ToolExecutionError(error)
        elif isinstance(error, type):
            exc = error()
        else:
            exc = error
        self._queue(name, _Behaviour(kind="fail", error=exc, remaining=times))

    def delay(self, name: str, seconds: float, *, times: int | None = None) -> None:
        """Make calls to `name` wait `seconds` before returning their result."""
        self._require(name)
        self._queue(name, _Behaviour(kind="delay", seconds=seconds, remaining=times))

    def hang(self, name: str, *, times: int | None = None) -> None:
        """Make calls to `name` never return (until cancelled, e.g. by a timeout)."""
        self._require(name)
        self._queue(name, _Behaviour(kind="hang", remaining=times))

    def reset(self) -> None:
        """Forget the call history and every configured behaviour."""
        self.calls.clear()
        self._config.behaviours.clear()

    # --- provider -----------------------------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        return self.tools

    async def execute_tool(
        self, name: str, arguments: dict[str, Any] | ToolArguments, ctx: ToolContext | None = None
    ) -> ToolResult:
        """Run a mocked tool; `ctx` may be left out, as the seed's tests call it.

        Raises:
            ToolNotFoundError: No tool of that name (the message lists them).
            ToolParameterError: The arguments do not fit a declared `Tool`'s parameters.
        """
        if ctx is None:
            ctx = ToolContext()
        if isinstance(arguments, ToolArguments):
            # Seed 002's loop hands a model's call straight over: record and check a dict.
            arguments = arguments.to_dict()
        entry = self._entries.get(name)
        if entry is None:
            raise ToolNotFoundError.unknown(name, list(self._entries))
        self.calls.append(MockCall(name=name, arguments=copy.deepcopy(arguments), ctx=ctx))
        if entry.check:
            _check_arguments(entry, arguments)
        behaviour = self._next_behaviour(name)
        if behaviour is not None:
            if behaviour.kind == "delay":
                await asyncio.sleep(behaviour.seconds)
            elif behaviour.kind == "hang":
                await asyncio.Event().wait()
            elif behaviour.error is not None:
                raise behaviour.error
        if entry.failure is not None:
            exc = entry.failure
            message = str(exc) or f"Tool {name!r} failed ({type(exc).__name__})."
            return ToolResult(
                name=name, success=False, error=ToolErrorInfo(message, code=_code_of(exc))
            )
        raw = await entry.run(arguments, ctx)
        return ToolResult.ok("", name, to_jsonable(raw, name))

    # --- inspection ---------------------------------------------------------------------

    def calls_to(self, name: str) -> list[MockCall]:
        """The recorded calls to one tool, in order."""
        return [c for c in self.calls if c.name == name]

    def call_count(self, name: str | None = None) -> int:
        """How many calls were made, to `name` or to any tool."""
        return len(self.calls if name is None else self.calls_to(name))

    def last_call(self, name: str | None = None) -> MockCall:
        """The most recent call (to `name`, if given); `AssertionError` when there is none."""
        calls = self.calls if name is None else self.calls_to(name)
        if not calls:
            raise AssertionError(f"No calls{_to(name)}. {self._history()}")
        return calls[-1]

    def assert_called(self, name: str, *, times: int | None = None) -> None:
        """Assert `name` was called (exactly `times` times, if given)."""
        count = self.call_count(name)
        if (times is None and count == 0) or (times is not None and count != times):
            expected = "at least once" if times is None else f"{times} time(s)"
            raise AssertionError(
                f"Expected {name!r} to be called {expected}, got {count}. {self._history()}"
            )

    def assert_not_called(self, name: str | None = None) -> None:
        """Assert `name` (or any tool) was never called."""
        if self.call_count(name):
            raise AssertionError(f"Expected no calls{_to(name)}. {self._history()}")

    def assert_called_with(self, name: str, /, **arguments: Any) -> None:
        """Assert the last call to `name` had exactly these arguments."""
        last = self.last_call(name)
        if last.arguments != arguments:
            raise AssertionError(
                f"Last call to {name!r} had arguments {last.arguments!r}, expected {arguments!r}."
            )

    def assert_any_call(self, name: str, /, **arguments: Any) -> None:
        """Assert some call to `name` had exactly these arguments."""
        if not any(c.arguments == arguments for c in self.calls_to(name)):
            raise AssertionError(
                f"No call to {name!r} with arguments {arguments!r}. {self._history()}"
            )

    def assert_calls(self, *names: str) -> None:
        """Assert the exact sequence of tool names called."""
        actual = tuple(c.name for c in self.calls)
        if actual != names:
            raise AssertionError(f"Expected calls {names!r}, got {actual!r}.")

    # --- internals ----------------------------------------------------------------------

    def _require(self, name: str) -> None:
        if name not in self._entries:
            raise ToolNotFoundError.unknown(name, list(self._entries))

    def _queue(self, name: str, behaviour: _Behaviour) -> None:
        if behaviour.remaining is not None and behaviour.remaining < 1:
            raise ValueError("times must be a positive number of calls, or None for always")
        self._config.behaviours.setdefault(name, []).append(behaviour)

    def _next_behaviour(self, name: str) -> _Behaviour | None:
        queue = self._config.behaviours.get(name)
        if not queue:
            return None
        current = queue[0]
        if current.remaining is not None:
            current.remaining -= 1
            if current.remaining == 0:
                queue.pop(0)
        return current

    def _history(self) -> str:
        if not self.calls:
            return "No tools were called."
        listed = ", ".join(f"{c.name}({c.arguments!r})" for c in self.calls)
        return f"Calls: {listed}."


MockToolProvider = MockTools
"""The provider-protocol seed's name for its test provider: `MockToolProvider(tools, results)`."""

_NOT_MOCKED: Final = object()


def _canned_entry(definition: Tool, value: Any) -> _Entry:
    """A declared `Tool` answering with a canned value (or failing with a canned exception).

    A tool that declares no parameters takes any, as the seed's mock does, so a test can
    pass what it likes and read it back from `call_history`; one that declares a schema
    is held to it.
    """
    name = definition.name
    if _is_exception_class(value):
        value = value()
    failure = value if isinstance(value, BaseException) else None

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        if value is _NOT_MOCKED:
            raise ToolExecutionError(
                f"Tool {name!r} is not mocked: give MockTools a result for it "
                f"(MockTools(tools, {{{name!r}: ...}}))."
            )
        return value

    if _declares_nothing(definition.input_schema):
        open_schema = {**definition.input_schema, "additionalProperties": True}
        # Listed open too: the runner validates against what the provider lists.
        definition = dataclasses.replace(definition, input_schema=open_schema)
        return _Entry(tool=definition, run=run, failure=failure)
    return _Entry(tool=definition, run=run, failure=failure, check=True)


def _declares_nothing(schema: Mapping[str, Any]) -> bool:
    """No parameters and no word on undeclared ones (`parameters={}` or left out)."""
    declared = ("properties", "required", "patternProperties")
    return not any(schema.get(k) for k in declared) and "additionalProperties" not in schema


def _is_exception_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def _check_arguments(entry: _Entry, arguments: dict[str, Any]) -> None:
    import jsonschema_rs

    if entry.validator is None:
        schema = entry.tool.input_schema
        # Undeclared arguments are refused, as the runner does, unless the schema allows more.
        if "properties" in schema and "additionalProperties" not in schema:
            schema = {**schema, "additionalProperties": False}
        entry.validator = jsonschema_rs.validator_for(schema)
    error = next(iter(entry.validator.iter_errors(arguments)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.instance_path)
        raise ToolParameterError(
            f"Invalid arguments for tool {entry.tool.name!r}"
            f"{f' at {where!r}' if where else ''}: {error.message}.",
            field=where or None,
        )


def _code_of(exc: BaseException) -> ErrorCode:
    if isinstance(exc, ToolNotFoundError):
        return "unknown_tool"
    if isinstance(exc, ToolParameterError):
        return "invalid_arguments"
    return "execution_error"


def _callable_entry(name: str, fn: Callable[..., Any]) -> _Entry:
    try:
        typed = tool(name=name)(fn) if _has_hints(fn) else None
    except ToolDefinitionError:
        typed = None
    if typed is not None:
        return _Entry(tool=typed, run=typed.invoke)

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        result = fn(**arguments)
        if inspect.isawaitable(result):
            result = await result
        return result

    definition = Tool(name=name, description=f"Mock tool {name}.", input_schema=_ANY_OBJECT)
    return _Entry(tool=definition, run=run)


def _has_hints(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.annotation is not p.empty for p in params)


def _to(name: str | None) -> str:
    return f" to {name!r}" if name else ""
