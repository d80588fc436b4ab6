"""Typing raw-text argument values by the tool's JSON Schema.

Qwen3-Coder/Qwen3.5+ XML, GLM and Kimi-K3 write argument values as bare text: a string
is written as is, other values as JSON (or, in some Qwen templates, as Python literals such
as `True`). Only the schema tells `3` (integer) from `"3"` (string), so these formats look
each value's type up here.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from toolwire.parsing._base import ToolSpecs
from toolwire.parsing._json import loads

__all__ = ["ArgSchemas", "coerce", "types_of"]

_TYPES = frozenset({"string", "integer", "number", "boolean", "null", "object", "array"})
_INTEGER = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_BOOLEANS = {"true": True, "false": False}


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _collect(schema: Any, into: set[str]) -> bool:
    """Add the JSON types `schema` allows to `into`; False when it does not say."""
    if not isinstance(schema, Mapping):
        return False
    known = False
    kind = schema.get("type")
    for t in [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else ():
        if t in _TYPES:
            into.add(t)
            known = True
    for values in (schema.get("enum"), [schema["const"]] if "const" in schema else None):
        if isinstance(values, list) and values:
            into.update(_value_type(v) for v in values)
            known = True
    for key in ("anyOf", "oneOf", "allOf"):
        subs = schema.get(key)
        if isinstance(subs, list):
            for sub in subs:
                known = _collect(sub, into) or known
    return known


def _json(text: str, kinds: Collection[str]) -> tuple[bool, Any]:
    try:
        value = loads(text)
    except ValueError:
        return False, None
    if isinstance(value, float) and not math.isfinite(value):
        return False, None  # `1e999` overflows to inf, which JSON cannot carry
    kind = _value_type(value)
    if kind in kinds or (kind == "integer" and "number" in kinds):
        return True, value
    if kind == "number" and "integer" in kinds and value.is_integer():
        return True, int(value)
    return False, None


def _plain(value: Any) -> Any:
    """`value` (from `ast.literal_eval`) as JSON data; ValueError when it has no JSON form."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
    elif isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v) for k, v in value.items()}
    raise ValueError("not JSON data")


def _python_container(text: str, kinds: Collection[str]) -> tuple[bool, Any]:
    """An object or array written as a Python literal (`{'k': 'v'}`, `True`), or as a JSON
    string holding one (`"{'k': 'v'}"`, from templates that ran `json.dumps(str(dict))`)."""
    try:
        inner = loads(text)
    except ValueError:
        inner = None
    if isinstance(inner, str):
        text = inner.strip()
        ok, value = _json(text, kinds)
        if ok:
            return ok, value
    if text[:1] not in ("{", "["):
        return False, None
    try:
        value = _plain(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    kind = _value_type(value)
    return (True, value) if kind in kinds else (False, None)


def coerce(text: str, types: Collection[str] | None, *, python: bool = False) -> Any:
    """The value `text` stands for, given the JSON types its schema allows.

    `types` None means the schema is unknown: valid JSON is taken as JSON, anything else
    stays a string. A value that fits none of the allowed types also stays the string the
    model wrote; schema validation downstream reports it.

    `python` is for templates that print arguments with Python's `str()` (Qwen3-Coder,
    Qwen3.5+): a nullable value written `None` is null even when a string is allowed, and
    an object or array may be a Python literal, or a JSON string holding one.
    """
    if types is None:
        ok, value = _json(text.strip(), _TYPES)
        return value if ok else text
    if not types or set(types) == {"string"}:
        return text
    s = text.strip()
    if "null" in types and (s == "null" or (s == "None" and (python or "string" not in types))):
        return None
    if "boolean" in types and s.lower() in _BOOLEANS:
        # Qwen3.5/Qwen3-Coder templates write Python literals (`True`) for booleans.
        return _BOOLEANS[s.lower()]
    if "integer" in types and _INTEGER.fullmatch(s):
        return int(s)
    if "number" in types and _NUMBER.fullmatch(s):
        ok, value = _json(s, ("number",))
        if ok:
            return value
    if {"object", "array"} & set(types):
        ok, value = _json(s, types)
        if not ok and python:
            ok, value = _python_container(s, types)
        if ok:
            return value
    return text


class ArgSchemas:
    """The allowed JSON types of every tool parameter, looked up by (tool, parameter)."""

    __slots__ = ("_params",)

    def __init__(self, tools: ToolSpecs) -> None:
        self._params: dict[str, Mapping[str, Any]] = {}
        for t in tools or ():
            fn = t.get("function", t)
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                continue
            params = fn.get("parameters")
            props = params.get("properties") if isinstance(params, Mapping) else None
            self._params[fn["name"]] = props if isinstance(props, Mapping) else {}

    def types(self, tool: str, key: str) -> set[str] | None:
        """The types `key` of `tool` may take, or None when the schema does not say."""
        props = self._params.get(tool)
        if props is None:
            return None
        found: set[str] = set()
        return found if _collect(props.get(key), found) else None

    def coerce(self, tool: str, key: str, text: str, *, python: bool = False) -> Any:
        return coerce(text, self.types(tool, key), python=python)

    def names(self, tool: str) -> frozenset[str] | None:
        """The parameter names `tool` declares, or None when it declares none (or is
        unknown)."""
        props = self._params.get(tool)
        return frozenset(props) if props else None


def types_of(names: Iterable[str]) -> set[str]:
    """Known JSON type names among `names` (a format's own type attribute, e.g. Kimi-K3)."""
    return {n for n in names if n in _TYPES}
