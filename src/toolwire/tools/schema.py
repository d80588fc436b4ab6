"""Function → schema record: what a model is shown, and how its arguments become Python values.

`function_schema(fn)` inspects a function's signature, type hints and docstring and returns
a `FunctionSchema`. It knows nothing of execution: `@tool` (decorator.py) builds on it.
Every problem in the signature is collected first and reported in one
`ToolDefinitionError`, so a developer fixes them all in one pass.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import inspect
import sys
import types
import typing
import uuid
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typing_extensions
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import PydanticJsonSchemaWarning
from pydantic_core import PydanticSerializationError, to_jsonable_python

from toolwire.tools.context import ToolContext
from toolwire.tools.docstrings import parse_docstring
from toolwire.tools.errors import ToolDefinitionError, ToolParameterError

__all__ = ["FunctionSchema", "function_schema", "result_fields_of"]

_SCALARS: frozenset[Any] = frozenset(
    {
        str,
        int,
        float,
        bool,
        type(None),
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        uuid.UUID,
        decimal.Decimal,
    }
)
_SEQUENCES: frozenset[Any] = frozenset(
    {
        list,
        tuple,
        set,
        frozenset,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Set,
        collections.abc.MutableSet,
    }
)
_MAPPINGS: frozenset[Any] = frozenset(
    {dict, collections.abc.Mapping, collections.abc.MutableMapping}
)
_UNIONS: frozenset[Any] = frozenset({Union, types.UnionType})
_TYPEDDICT_WRAPPERS: frozenset[Any] = frozenset(
    {
        typing.Required,
        typing.NotRequired,
        typing_extensions.Required,
        typing_extensions.NotRequired,
        typing_extensions.ReadOnly,
    }
)
_SUPPORTED_HINT = (
    "use str, int, float, bool, a Literal[...], an Enum, list[...] / dict[str, ...] of "
    "those, or a pydantic model, TypedDict or dataclass"
)


@dataclass(frozen=True, kw_only=True)
class FunctionSchema:
    """Everything a tool needs to know about a function, without running it."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments: `type: object` with `properties` and `required`."""
    parameter_descriptions: dict[str, str]
    context_param: str | None
    """Name of the parameter that receives the `ToolContext`, if any."""
    is_async: bool
    result_fields: tuple[str, ...] | None
    """Fields of the declared return type (pydantic model / TypedDict / dataclass), if any."""
    arguments_model: type[BaseModel] = field(repr=False)
    """Pydantic model that turns JSON arguments into the Python values the function expects."""
    _order: tuple[tuple[str, bool], ...] = field(repr=False, default=())
    # (parameter name, positional-only) in signature order, the context parameter included.
    _internal: tuple[tuple[str, str], ...] = field(repr=False, default=())
    # (internal field name, parameter name); internal names avoid pydantic's reserved ones.

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate JSON arguments and convert them to Python values, defaults applied.

        Nested models, TypedDicts and dataclasses become instances of their types.

        Args:
            arguments: The decoded JSON object the model sent.

        Raises:
            ToolParameterError: What is wrong with which argument, written for the model.
        """
        try:
            model = self.arguments_model.model_validate(arguments)
        except ValidationError as exc:
            raise _parameter_error(self.name, exc, [n for _, n in self._internal]) from None
        return {name: getattr(model, internal) for internal, name in self._internal}

    def call_args(
        self, arguments: Mapping[str, Any], ctx: ToolContext | None
    ) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments for the function, with the context injected.

        Args:
            arguments: The decoded JSON object the model sent.
            ctx: Handed to the function's `ToolContext` parameter, if it has one.
        """
        values = self.validate(arguments)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for name, positional_only in self._order:
            value = ctx if name == self.context_param else values[name]
            if positional_only:
                args.append(value)
            else:
                kwargs[name] = value
        return args, kwargs


def function_schema(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> FunctionSchema:
    """Build the schema record of a function from its signature, type hints and docstring.

    Args:
        fn: A sync or async function, bound method or callable object.
        name: The tool name; defaults to the function's `__name__`.
        description: Overrides the docstring's description.

    Raises:
        ToolDefinitionError: Naming the function and every parameter at fault.
    """
    label = _label(fn)
    tool_name = _tool_name(fn, name, label)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"Cannot make a tool from {label}: {exc}.") from None

    doc = parse_docstring(getattr(fn, "__doc__", None))
    globalns = _globals_of(fn)
    params = _Parameters()
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        params.problems.append("generator functions are not supported; return a list instead")
    for index, param in enumerate(signature.parameters.values()):
        _read_parameter(params, index, param, doc.parameters, globalns)
    model, raw_schema = _arguments_model(tool_name, label, params)

    return FunctionSchema(
        name=tool_name,
        description=description if description is not None else doc.description,
        parameters=clean_schema(raw_schema),
        parameter_descriptions=params.descriptions,
        context_param=params.context_param,
        is_async=_is_async(fn),
        result_fields=result_fields_of(_return_annotation(fn, globalns)),
        arguments_model=model,
        _order=tuple(params.order),
        _internal=tuple(params.internal),
    )


@dataclass(slots=True)
class _Parameters:
    """What a signature's parameters make, gathered one parameter at a time."""

    fields: dict[str, Any] = field(default_factory=dict)
    """The arguments model's fields, by internal name (`p<index>`)."""
    internal: list[tuple[str, str]] = field(default_factory=list)
    """(internal name, parameter name) of each model field."""
    order: list[tuple[str, bool]] = field(default_factory=list)
    """(parameter name, positional-only) of each parameter a call passes, context included."""
    descriptions: dict[str, str] = field(default_factory=dict)
    context_param: str | None = None
    problems: list[str] = field(default_factory=list)
    """Everything wrong, collected so that one error names each fault."""


_SKIP: Any = object()
"""`_annotation`'s answer for a parameter that cannot be a field (its problem is noted)."""


def _tool_name(fn: Callable[..., Any], name: str | None, label: str) -> str:
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name or tool_name == "<lambda>":
        raise ToolDefinitionError(
            f"Cannot make a tool from {label}: it has no usable name; pass name=... to @tool."
        )
    return str(tool_name)


def _read_parameter(
    params: _Parameters,
    index: int,
    param: inspect.Parameter,
    doc_params: Mapping[str, str],
    globalns: dict[str, Any],
) -> None:
    """Add one parameter to `params`: a field, the context, or a problem."""
    pname = param.name
    annotation = _annotation(param, globalns, params.problems)
    if annotation is _SKIP:
        return
    positional_only = param.kind is param.POSITIONAL_ONLY
    if _is_context(annotation):
        if params.context_param is not None:
            params.problems.append(
                f"parameters {params.context_param!r} and {pname!r} are both ToolContext; keep one"
            )
        params.context_param = pname
        params.order.append((pname, positional_only))
        return
    if pname.startswith("_"):
        # Leading underscores mark private names in most providers' tool schemas.
        params.problems.append(f"parameter {pname!r}: names starting with '_' are not allowed")
        return
    if not _field_fits(pname, annotation, param.default, params.problems):
        return

    annotated_desc = _annotated_description(annotation, param.default)
    desc = annotated_desc or doc_params.get(pname)
    if desc:
        params.descriptions[pname] = desc
    info_kwargs: dict[str, Any] = {"alias": pname}
    if desc and not annotated_desc:
        info_kwargs["description"] = desc
    if isinstance(param.default, FieldInfo):
        field_annotation: Any = Annotated[annotation, param.default]
    else:
        field_annotation = annotation
        if param.default is not param.empty:
            info_kwargs["default"] = param.default
    internal_name = f"p{index}"
    params.fields[internal_name] = (field_annotation, Field(**info_kwargs))
    params.internal.append((internal_name, pname))
    params.order.append((pname, positional_only))


def _annotation(param: inspect.Parameter, globalns: dict[str, Any], problems: list[str]) -> Any:
    """The parameter's resolved annotation, or `_SKIP` (and a problem) when it has none."""
    pname = param.name
    if param.kind is param.VAR_POSITIONAL:
        problems.append(f"*{pname} is not supported; declare each argument as a named parameter")
        return _SKIP
    if param.kind is param.VAR_KEYWORD:
        problems.append(f"**{pname} is not supported; declare each argument as a named parameter")
        return _SKIP
    if param.annotation is param.empty:
        problems.append(f"parameter {pname!r} has no type annotation; add one, e.g. `{pname}: str`")
        return _SKIP
    try:
        return _resolve(param.annotation, globalns)
    except Exception as exc:
        problems.append(
            f"parameter {pname!r}: cannot resolve annotation {param.annotation!r} "
            f"({type(exc).__name__}: {exc}); define or import it at module level"
        )
        return _SKIP


def _field_fits(pname: str, annotation: Any, default: Any, problems: list[str]) -> bool:
    """Whether the type can be a field; notes its problems and a default's, if any."""
    type_problems = _type_problems(annotation, set())
    problems.extend(f"parameter {pname!r}: {p}" for p in type_problems)
    if default is not inspect.Parameter.empty and not isinstance(default, FieldInfo):
        try:
            to_jsonable_python(default)
        except PydanticSerializationError:
            problems.append(
                f"parameter {pname!r}: default {default!r} is not JSON-serialisable; "
                "use a JSON value or None"
            )
    # A bad default is reported but the field is still built: its type may be fine.
    return not type_problems


def _arguments_model(
    tool_name: str, label: str, params: _Parameters
) -> tuple[type[BaseModel], dict[str, Any]]:
    """The arguments model and its raw JSON Schema, or the one error naming every problem."""
    problems = params.problems
    model: type[BaseModel] | None = None
    raw_schema: dict[str, Any] = {}
    if not problems:
        model, raw_schema, build_problems = _build_model(tool_name, params.fields, params.internal)
        problems.extend(build_problems)
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise ToolDefinitionError(f"Cannot make a tool from {label}:\n{listed}")
    assert model is not None
    return model, raw_schema


def result_fields_of(annotation: Any) -> tuple[str, ...] | None:
    """Field names of a pydantic model, TypedDict or dataclass type, as they appear in JSON.

    `Optional[...]` and `Annotated[...]` are looked through; anything else gives `None`.
    """
    tp = _strip_optional(annotation)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        names = [f.serialization_alias or f.alias or n for n, f in tp.model_fields.items()]
        return (*names, *tp.model_computed_fields)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return tuple(f.name for f in dataclasses.fields(tp))
    if typing_extensions.is_typeddict(tp):
        return tuple(tp.__annotations__)
    return None


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Make a pydantic JSON Schema tidy for models.

    Drops `title`s, inlines every `$ref` except recursive ones (which stay under `$defs`),
    and makes sure the root has `properties` and `required`.
    """
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    graph = {n: _refs_in(d) for n, d in defs.items()}
    recursive = {n for n in defs if _reaches(graph, n, n)}

    def resolve(node: Any) -> Any:
        if isinstance(node, list):
            return [resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = ref.removeprefix("#/$defs/")
            if target in defs and target not in recursive:
                out.update(resolve(defs[target]))
                node = {k: v for k, v in node.items() if k != "$ref"}
        for key, value in node.items():
            if key in ("$defs", "title"):
                continue
            if key in ("properties", "patternProperties"):
                out[key] = {k: resolve(v) for k, v in value.items()}
            elif key in ("default", "enum", "const", "examples", "required"):
                out[key] = value
            else:
                out[key] = resolve(value)
        return out

    cleaned: dict[str, Any] = resolve(schema)
    cleaned.setdefault("properties", {})
    cleaned.setdefault("required", [])
    if recursive:
        cleaned["$defs"] = {n: resolve(defs[n]) for n in sorted(recursive)}
    return cleaned


def _build_model(
    tool_name: str, fields: dict[str, Any], internal: list[tuple[str, str]]
) -> tuple[type[BaseModel] | None, dict[str, Any], list[str]]:
    problems: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PydanticJsonSchemaWarning)
            model = create_model(
                f"{tool_name}_arguments",
                __config__=ConfigDict(extra="forbid"),
                **fields,
            )
            raw = model.model_json_schema()
        problems.extend(
            str(w.message) for w in caught if issubclass(w.category, PydanticJsonSchemaWarning)
        )
        return model, raw, problems
    except Exception:
        pass
    # Find which parameters pydantic could not handle, to name them.
    for internal_name, pname in internal:
        try:
            TypeAdapter(fields[internal_name][0]).json_schema()
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            problems.append(f"parameter {pname!r}: {first}")
    if not problems:
        problems.append("pydantic could not build a schema from the signature")
    return None, {}, problems


def _parameter_error(tool: str, exc: ValidationError, valid: list[str]) -> ToolParameterError:
    parts: list[str] = []
    first_field: str | None = None
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = ".".join(str(p) for p in err["loc"])
        if first_field is None and loc:
            first_field = str(err["loc"][0])
        if not loc:
            parts.append("the arguments must be a JSON object")
        elif err["type"] == "extra_forbidden":
            names = ", ".join(repr(n) for n in valid) or "none"
            parts.append(f"{loc!r}: unknown argument (valid arguments: {names})")
        elif err["type"] == "missing":
            parts.append(f"{loc!r}: missing required argument")
        else:
            parts.append(f"{loc!r}: {err['msg']}")
    message = f"Invalid arguments for tool {tool!r}: " + "; ".join(parts) + "."
    return ToolParameterError(message, field=first_field)


def _type_problems(tp: Any, seen: set[int]) -> list[str]:
    origin = get_origin(tp)
    if tp is Any or tp in _SCALARS:
        return []
    if origin is Annotated:
        return _type_problems(get_args(tp)[0], seen)
    if origin in _TYPEDDICT_WRAPPERS:
        return _type_problems(get_args(tp)[0], seen)
    if _is_context(tp) or (origin in _UNIONS and any(_is_context(a) for a in get_args(tp))):
        return ["ToolContext can only be a parameter's whole annotation (or Optional of it)"]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return []
    if origin is Literal or origin is typing_extensions.Literal:
        bad = [v for v in get_args(tp) if not isinstance(v, str | int | bool | enum.Enum | None)]
        return [f"Literal values must be str, int or bool, not {bad!r}"] if bad else []
    if origin in _UNIONS:
        return [p for arg in get_args(tp) for p in _type_problems(arg, seen)]
    if isinstance(tp, typing.NewType):
        return _type_problems(tp.__supertype__, seen)
    if tp in _SEQUENCES:
        return []
    if origin in _SEQUENCES:
        return [p for a in get_args(tp) if a is not Ellipsis for p in _type_problems(a, seen)]
    if tp in _MAPPINGS:
        return []
    if origin in _MAPPINGS:
        key, value = get_args(tp) or (str, Any)
        problems = _type_problems(value, seen)
        if not _is_string_key(key):
            problems.insert(0, f"dict keys must be str, not {_type_name(key)}")
        return problems
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return []  # pydantic checked its fields when the class was defined
    if isinstance(tp, type) and (
        dataclasses.is_dataclass(tp) or typing_extensions.is_typeddict(tp)
    ):
        return _container_problems(tp, seen)
    return [f"unsupported type {_type_name(tp)}; {_SUPPORTED_HINT}"]


def _container_problems(tp: type, seen: set[int]) -> list[str]:
    if id(tp) in seen:
        return []
    seen.add(id(tp))
    if (
        typing_extensions.is_typeddict(tp)
        and sys.version_info < (3, 12)
        and type(tp).__module__ == "typing"
    ):
        return [
            f"TypedDict {tp.__qualname__} comes from `typing`; on Python < 3.12 pydantic "
            "needs `from typing_extensions import TypedDict`"
        ]
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception as exc:
        return [f"cannot resolve the field types of {tp.__qualname__} ({exc})"]
    problems = []
    for fname, fhint in hints.items():
        if dataclasses.is_dataclass(tp) and fname not in {f.name for f in dataclasses.fields(tp)}:
            continue  # ClassVar and other non-fields
        for p in _type_problems(fhint, seen):
            problems.append(f"field {tp.__qualname__}.{fname}: {p}")
    return problems


def _is_string_key(key: Any) -> bool:
    if key is str or key is Any:
        return True
    if get_origin(key) is Literal:
        return all(isinstance(v, str) for v in get_args(key))
    return isinstance(key, type) and issubclass(key, str)


def _is_context(tp: Any) -> bool:
    if tp is ToolContext:
        return True
    if get_origin(tp) is Annotated:
        return _is_context(get_args(tp)[0])
    if get_origin(tp) in _UNIONS:
        args = [a for a in get_args(tp) if a is not type(None)]
        return len(args) == 1 and args[0] is ToolContext
    return False


def _annotated_description(tp: Any, default: Any) -> str | None:
    if isinstance(default, FieldInfo) and default.description:
        return default.description
    if get_origin(tp) is Annotated:
        for meta in reversed(get_args(tp)[1:]):
            if isinstance(meta, FieldInfo) and meta.description:
                return meta.description
    return None


def _strip_optional(tp: Any) -> Any:
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
            continue
        if get_origin(tp) in _UNIONS:
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp


def _resolve(annotation: Any, globalns: dict[str, Any]) -> Any:
    # get_type_hints on a one-entry namespace resolves string annotations (and forward
    # references inside them) one parameter at a time, so a failure names its parameter.
    holder = types.SimpleNamespace(__annotations__={"x": annotation})
    return typing.get_type_hints(holder, globalns=globalns, include_extras=True)["x"]


def _return_annotation(fn: Callable[..., Any], globalns: dict[str, Any]) -> Any:
    try:
        annotation = inspect.signature(fn).return_annotation
        if annotation is inspect.Signature.empty:
            return None
        return _resolve(annotation, globalns)
    except Exception:
        return None  # an unresolvable return type only loses the default allowlist


def _globals_of(fn: Callable[..., Any]) -> dict[str, Any]:
    target: Any = inspect.unwrap(fn)
    while True:
        if isinstance(target, types.MethodType):
            target = target.__func__
        elif hasattr(target, "func") and callable(target.func):  # functools.partial
            target = target.func
        else:
            break
    if isinstance(target, types.FunctionType):
        return target.__globals__
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    return dict(vars(module)) if module else {}


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - callable objects
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def _label(fn: Callable[..., Any]) -> str:
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None)
    return f"function {module}.{qualname}" if module else f"function {qualname}"


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def _refs_in(node: Any) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                found.add(ref.removeprefix("#/$defs/"))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    stack, seen = list(graph.get(start, ())), set()
    while stack:
        current = stack.pop()
        if current == goal:
            return True
        if current not in seen:
            seen.add(current)
            stack.extend(graph.get(current, ()))
    return False
