"""`Tool`: a provider-neutral tool definition, and `ToolParameter` for declaring one by hand.

A tool has two views of its arguments, always in step:

- `parameters`: name → `ToolParameter` (`type`, `description`, `required`, `default`,
  `enum`), as the provider-protocol seed declares them and reads them back;
- `input_schema`: the JSON Schema object models are shown (the name Anthropic and MCP use).

Give either one; the other is derived. `@tool` functions give the schema (from type hints),
so their `ToolParameter`s carry each property's full schema in `json_schema`.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from toolwire.tools.context import ToolContext
from toolwire.tools.errors import ToolDefinitionError, ToolExecutionError
from toolwire.tools.threads import run_sync

__all__ = ["Effects", "Invoker", "Tool", "ToolParameter"]

Effects = Literal["read", "write", "destructive"]
"""What running a tool does to the world. `destructive` tools need approval (see `Policy`)."""

Invoker = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
"""Runs a tool with validated JSON arguments; returns the tool's raw Python result."""

_JSON_TYPES: Final = ("string", "integer", "number", "boolean", "array", "object", "null")
_NAME: Final = re.compile(r"[\w.-]+")
"""A tool name: what `str.isalnum` takes (the pattern's word class is that and `_`), `_`,
`-` and `.`. One regex, not a Python step per character: a gateway builds its clients'
tools on every request."""


@dataclass(frozen=True, kw_only=True)
class ToolParameter:
    """One parameter of a tool, as the provider-protocol seed declares it.

    ```python
    ToolParameter(type="string", description="Temperature units", required=False,
                  default="celsius", enum=["celsius", "fahrenheit", "kelvin"])
    ```
    """

    type: str = "string"
    """A JSON Schema type name: string, integer, number, boolean, array, object (or null)."""
    description: str | None = None
    required: bool = False
    """Whether the model must send it (the seed's default: optional)."""
    default: Any = None
    """Used when the argument is left out; `None` means no default."""
    enum: Sequence[Any] | None = None
    """The allowed values."""
    items: Mapping[str, Any] | None = None
    """JSON Schema of the items, for `type="array"`."""
    name: str | None = None
    """Needed only in `Tool.from_parameters([...])`; in `Tool(parameters={...})` the key
    names the parameter."""
    json_schema: Mapping[str, Any] | None = None
    """The parameter's complete JSON Schema, when it says more than the fields above can
    (nested objects, unions, bounds, formats). Models are shown exactly this (with
    `description` added if it has none). Filled in for tools whose parameters come from a
    JSON Schema: `@tool` functions and `Tool(input_schema=...)`."""

    def __post_init__(self) -> None:
        if self.type not in _JSON_TYPES:
            label = f"Parameter {self.name!r}" if self.name else "ToolParameter"
            raise ToolDefinitionError(
                f"{label} has type {self.type!r}; use one of {', '.join(_JSON_TYPES)}."
            )

    def to_schema(self) -> dict[str, Any]:
        """This parameter's JSON Schema, as models see it."""
        if self.json_schema is not None:
            schema = dict(self.json_schema)
            if self.description and "description" not in schema:
                schema["description"] = self.description
            return schema
        schema = {"type": self.type}
        if self.description:
            schema["description"] = self.description
        if self.enum is not None:
            schema["enum"] = list(self.enum)
        if self.items is not None:
            schema["items"] = dict(self.items)
        if not self.required and self.default is not None:
            schema["default"] = self.default
        return schema

    @classmethod
    def from_schema(cls, name: str, schema: Any, *, required: bool) -> ToolParameter:
        """The `ToolParameter` view of one property of a JSON Schema (kept whole in
        `json_schema`, so nothing is lost)."""
        node: dict[str, Any] = dict(schema) if isinstance(schema, Mapping) else {}
        enum, items, description = node.get("enum"), node.get("items"), node.get("description")
        return cls(
            name=name,
            type=_summary_type(node),
            description=description if isinstance(description, str) else None,
            required=required,
            default=node.get("default"),
            enum=list(enum) if isinstance(enum, list) else None,
            items=dict(items) if isinstance(items, Mapping) else None,
            json_schema=node,
        )


class _Unset(dict[str, Any]):
    """The default of `Tool.input_schema`: derive it from `parameters`."""


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A tool: what a model is shown (`name`, `description`, its arguments) and how it runs.

    Build one with `@tool` from a function, declare it as the provider-protocol seed does
    (`Tool(name=..., description=..., parameters={"city": ToolParameter(...)})`), with
    `Tool.from_parameters(...)`, or from a JSON Schema (`input_schema=`). A `Tool` without
    an invoker is a definition only (a client's tool, or one a provider executes).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, ToolParameter] = field(default_factory=dict)
    """The arguments, by name; `{}` for a tool without any. Derived from `input_schema`
    when that is given instead."""
    input_schema: dict[str, Any] = field(default_factory=_Unset)
    """The JSON Schema object models are shown (OpenAI's `function.parameters`, Anthropic's
    and MCP's `input_schema`). Derived from `parameters` when not given."""
    effects: Effects = "read"
    timeout: float | None = None
    """Seconds before the runner gives up (`timeout`); `None` uses the policy default."""
    cache_ttl: float | None = None
    """Seconds a result may be reused for identical arguments; read tools only."""
    cache_shared: bool = False
    """The result is the same for every caller, so the cache may hand one caller's result
    to another. By default a cached result is reused only for the same caller (key name,
    forwarded token and scopes)."""
    allow: tuple[str, ...] | None = None
    """Result fields that may reach the model; `None` means the declared result fields, if any."""
    result_fields: tuple[str, ...] | None = None
    """Fields of the declared result type (pydantic model / TypedDict / dataclass), if any."""
    scopes: tuple[str, ...] = ()
    """Permissions the caller must hold (`ToolContext.scopes`)."""
    approver: str | None = None
    """The gateway key (by name) that must approve calls of this destructive tool; any key
    allowed to approve when `None`."""
    audit_arguments: tuple[str, ...] | None = None
    """Arguments whose values records and answers may show (the audit log, approvals,
    run views); the others read `[redacted]`. Dotted paths reach into objects
    (`settings.region`; arrays add no segment). `None`: everything except values whose
    name, at any depth, looks like a secret."""
    strict: bool | None = None
    """OpenAI's structured-outputs flag for the arguments; sent as `function.strict` when
    set (a client's tool keeps the flag it was declared with)."""
    invoker: Invoker | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:
            raise ToolDefinitionError(
                f"Tool name {self.name!r} is invalid: use letters, digits, '_', '-' or '.'."
            )
        given = self.parameters
        schema: dict[str, Any] | None = (
            None if isinstance(self.input_schema, _Unset) else self.input_schema
        )
        if _is_json_schema(given):
            if schema is not None:
                raise ToolDefinitionError(
                    f"Tool {self.name!r}: parameters= is a JSON Schema and input_schema= is "
                    "given too; pass the schema as input_schema= only."
                )
            warnings.warn(
                f"Tool {self.name!r}: passing a JSON Schema as parameters= is deprecated; "
                "use input_schema= (parameters= takes name -> ToolParameter).",
                DeprecationWarning,
                stacklevel=3,
            )
            schema, given = dict(given), {}
        params: Mapping[str, ToolParameter] = _check_parameters(self.name, given)
        if schema is None:
            schema = _schema_of(params)
        elif not isinstance(schema, dict) or schema.get("type") != "object":
            raise ToolDefinitionError(
                f"Tool {self.name!r}: input_schema must be a JSON Schema with type 'object'."
            )
        elif not params:
            # Derived on first use: a gateway builds the client's tools on every request
            # and only ever needs their schema.
            params = _SchemaParameters(schema)
        elif not _agree(params, schema):
            raise ToolDefinitionError(
                f"Tool {self.name!r}: parameters= and input_schema= describe different "
                "arguments; give one of them (the other is derived)."
            )
        object.__setattr__(self, "parameters", params)
        object.__setattr__(self, "input_schema", schema)
        if self.cache_shared and self.cache_ttl is None:
            raise ToolDefinitionError(
                f"Tool {self.name!r}: cache_shared only matters with cache_ttl; set both."
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
        """Declare a tool from named `ToolParameter`s; `handler(**arguments)` runs it (sync or
        async). Optional parameters the model leaves out are passed as their `default`."""
        by_name: dict[str, ToolParameter] = {}
        for p in parameters:
            if not p.name:
                raise ToolDefinitionError(
                    f"Tool {name!r}: every ToolParameter in from_parameters() needs a name=, "
                    f"or declare Tool(parameters={{'name': ToolParameter(...)}})."
                )
            if p.name in by_name:
                raise ToolDefinitionError(f"Tool {name!r}: parameter {p.name!r} is declared twice.")
            by_name[p.name] = p
        defaults = {p.name: p.default for p in parameters if p.name and not p.required}
        invoker = _handler_invoker(handler, defaults) if handler is not None else None
        return cls(
            name=name, description=description, parameters=by_name, invoker=invoker, **options
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
            "parameters": self.input_schema,
        }
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic Messages API `tools` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


def _is_json_schema(value: Mapping[str, Any]) -> bool:
    # The pre-`input_schema` call style: `parameters={"type": "object", "properties": ...}`.
    # A parameter named "type" would map to a ToolParameter, never to the string "object".
    return isinstance(value, Mapping) and value.get("type") == "object"


def _check_parameters(tool: str, given: Mapping[str, Any]) -> dict[str, ToolParameter]:
    if not isinstance(given, Mapping):
        raise ToolDefinitionError(
            f"Tool {tool!r}: parameters must map names to ToolParameter, "
            f"not {type(given).__name__}."
        )
    params: dict[str, ToolParameter] = {}
    wrong: list[str] = []
    for key, p in given.items():
        if not isinstance(p, ToolParameter):
            wrong.append(f"{key!r} is {type(p).__name__}")
        elif p.name is not None and p.name != key:
            raise ToolDefinitionError(
                f"Tool {tool!r}: parameter {key!r} is declared with name={p.name!r}; "
                "drop name= or make them match."
            )
        else:
            params[key] = p if p.name == key else dataclasses.replace(p, name=key)
    if wrong:
        raise ToolDefinitionError(
            f"Tool {tool!r}: parameters must map names to ToolParameter ({'; '.join(wrong)}). "
            "To give a JSON Schema, use input_schema=."
        )
    return params


def _schema_of(params: Mapping[str, ToolParameter]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: p.to_schema() for name, p in params.items()},
    }
    required = [name for name, p in params.items() if p.required]
    if required:
        schema["required"] = required
    return schema


def _parameters_of(schema: Mapping[str, Any]) -> dict[str, ToolParameter]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return {}
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    return {
        str(name): ToolParameter.from_schema(str(name), prop, required=name in needed)
        for name, prop in props.items()
    }


class _SchemaParameters(Mapping[str, ToolParameter]):
    """The `ToolParameter` view of an `input_schema`, built when first read."""

    __slots__ = ("_built", "_schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = schema
        self._built: dict[str, ToolParameter] | None = None

    def _params(self) -> dict[str, ToolParameter]:
        if self._built is None:
            self._built = _parameters_of(self._schema)
        return self._built

    def __getitem__(self, name: str) -> ToolParameter:
        return self._params()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params())

    def __len__(self) -> int:
        return len(self._params())

    def __eq__(self, other: object) -> bool:
        return dict(self._params()) == other if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._params())


def _agree(params: Mapping[str, ToolParameter], schema: Mapping[str, Any]) -> bool:
    derived = _schema_of(params)
    return derived["properties"] == (schema.get("properties") or {}) and set(
        derived.get("required", [])
    ) == set(schema.get("required") or [])


def _summary_type(schema: Mapping[str, Any]) -> str:
    """One JSON type name for a property schema (its `ToolParameter.type`)."""
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _JSON_TYPES:
        return kind
    if isinstance(kind, list):
        named = [k for k in kind if k in _JSON_TYPES]
        return next((k for k in named if k != "null"), named[0] if named else "object")
    values = schema.get("enum") if isinstance(schema.get("enum"), list) else None
    if values is None and "const" in schema:
        values = [schema["const"]]
    if values:
        return _value_type(values[0])
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            kinds = [_summary_type(o) for o in options if isinstance(o, Mapping)]
            # Optional[X] is X; of a union of several types, the first one is named.
            kinds = [k for k in kinds if k != "null"] or kinds
            return kinds[0] if kinds else "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return "object"


def _value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _handler_invoker(handler: Callable[..., Any], defaults: dict[str, Any]) -> Invoker:

    is_async = inspect.iscoroutinefunction(handler)
    gate = f"{getattr(handler, '__module__', '')}.{getattr(handler, '__qualname__', id(handler))}"

    async def invoke(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        kwargs = {**defaults, **arguments}
        if is_async:
            return await handler(**kwargs)
        return await run_sync(gate, handler, **kwargs)

    return invoke
