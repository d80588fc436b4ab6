"""`@tool`: a sync or async Python function becomes a `Tool`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar, overload

from toolwire.tools.context import ToolContext
from toolwire.tools.errors import ToolDefinitionError
from toolwire.tools.schema import FunctionSchema, function_schema
from toolwire.tools.threads import run_sync
from toolwire.tools.tool import Effects, Invoker, Tool

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, kw_only=True)
class FunctionTool(Tool, Generic[P, R]):
    """A `Tool` made by `@tool`; calling it calls the original function directly.

    Calling it bypasses validation, the runner and its policy: it is for the function's
    own callers (and tests), not for executing a model's tool calls.
    """

    fn: Callable[P, R] = field(repr=False, compare=False)
    """The decorated function, unchanged."""
    schema: FunctionSchema = field(repr=False, compare=False)
    """The schema record the tool was built from."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effects: Effects = "read",
    timeout: float | None = None,
    cache_ttl: float | None = None,
    cache_shared: bool = False,
    allow: Sequence[str] | None = None,
    scopes: Sequence[str] = (),
    approver: str | None = None,
    audit_arguments: Sequence[str] | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effects: Effects = "read",
    timeout: float | None = None,
    cache_ttl: float | None = None,
    cache_shared: bool = False,
    allow: Sequence[str] | None = None,
    scopes: Sequence[str] = (),
    approver: str | None = None,
    audit_arguments: Sequence[str] | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Turn a sync or async function into a `Tool`; use bare (`@tool`) or with options.

    The name comes from the function, the description from its docstring, the JSON Schema
    of the parameters from its type hints and the per-parameter descriptions from the
    docstring's Args section (Google, NumPy or Sphinx style). A parameter annotated
    `ToolContext` receives the caller's context and is not shown to the model.

    Args:
        fn: The function, when used bare.
        name: Tool name shown to the model; defaults to the function's name.
        description: Overrides the docstring's description.
        effects: `"read"`, `"write"` or `"destructive"` (destructive tools need approval).
        timeout: Seconds before the runner stops waiting; `None` uses the policy default.
        cache_ttl: Seconds a result may be reused for identical arguments (read tools only).
        cache_shared: The result is the same for every caller: reuse it across callers.
            By default a result is reused only for the same caller (key, forwarded token,
            scopes).
        allow: Result fields that may reach the model; defaults to the fields of the
            declared return type when it is a pydantic model, TypedDict or dataclass.
        scopes: Permissions the caller needs (`ToolContext.scopes`).
        approver: For destructive tools: the one gateway key (by name) that may approve
            their calls; by default any key allowed to approve.
        audit_arguments: The arguments whose values the audit log, approvals and run views
            may show (the others read `[redacted]`); dotted paths reach into objects
            (`settings.region`). By default every value whose name, at any depth, does not
            look like a secret.

    Raises:
        ToolDefinitionError: The signature or an option is wrong; the message says what
            to change.
    """

    def build(func: Callable[P, R]) -> FunctionTool[P, R]:
        return _build(
            func,
            name=name,
            description=description,
            effects=effects,
            timeout=timeout,
            cache_ttl=cache_ttl,
            cache_shared=cache_shared,
            allow=allow,
            scopes=scopes,
            approver=approver,
            audit_arguments=audit_arguments,
        )

    if fn is not None:
        return build(fn)
    return build


def _build(
    fn: Callable[P, R],
    *,
    name: str | None,
    description: str | None,
    effects: Effects,
    timeout: float | None,
    cache_ttl: float | None,
    allow: Sequence[str] | None,
    scopes: Sequence[str],
    approver: str | None = None,
    audit_arguments: Sequence[str] | None = None,
    cache_shared: bool = False,
) -> FunctionTool[P, R]:
    if isinstance(fn, FunctionTool):
        fn = fn.fn
    elif isinstance(fn, Tool):
        raise ToolDefinitionError(
            f"@tool was applied to the Tool {fn.name!r}, which is already a tool; "
            "apply @tool to a function."
        )
    if not callable(fn):
        raise ToolDefinitionError(f"@tool needs a function, not {type(fn).__name__}.")
    label = getattr(fn, "__qualname__", repr(fn))
    for option, value in (
        ("allow", allow),
        ("scopes", scopes),
        ("audit_arguments", audit_arguments),
    ):
        if isinstance(value, str):
            raise ToolDefinitionError(
                f"@tool({option}=...) on {label}: pass a list of strings, e.g. "
                f"{option}=[{value!r}], not a single string."
            )
    for option, number in (("timeout", timeout), ("cache_ttl", cache_ttl)):
        if number is not None and not number > 0:
            raise ToolDefinitionError(
                f"@tool({option}={number!r}) on {label}: use a positive number of seconds."
            )
    schema = function_schema(fn, name=name, description=description)
    return FunctionTool(
        name=schema.name,
        description=schema.description,
        input_schema=schema.parameters,
        effects=effects,
        timeout=timeout,
        cache_ttl=cache_ttl,
        cache_shared=cache_shared,
        allow=tuple(allow) if allow is not None else None,
        result_fields=schema.result_fields,
        scopes=tuple(scopes),
        approver=approver,
        audit_arguments=tuple(audit_arguments) if audit_arguments is not None else None,
        invoker=_invoker(fn, schema),
        fn=fn,
        schema=schema,
    )


def _invoker(fn: Callable[..., Any], schema: FunctionSchema) -> Invoker:
    if schema.is_async:

        async def invoke_async(arguments: dict[str, Any], ctx: ToolContext) -> Any:
            args, kwargs = schema.call_args(arguments, ctx)
            return await fn(*args, **kwargs)

        return invoke_async

    gate = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', schema.name)}"

    async def invoke_sync(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        args, kwargs = schema.call_args(arguments, ctx)
        # A worker thread, so a slow sync tool never blocks the event loop; the tools' own
        # pool, so it never starves other tools either (see `toolwire.tools.threads`).
        result = await run_sync(gate, fn, *args, **kwargs)
        if inspect.isawaitable(result):  # a sync wrapper that returns a coroutine
            result = await result
        return result

    return invoke_sync
