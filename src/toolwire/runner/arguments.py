"""Tool arguments: parse the model's JSON, repair common encoding mistakes, validate strictly.

One `ArgumentSpec` is compiled per tool and reused for every call: the jsonschema-rs
validator and the defaults plan are built once, so a valid call costs one JSON parse and one
`is_valid`. Repairs and error messages are only worked out when a call is invalid.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Sequence
from typing import Any, Final, Literal

import jsonschema_rs
import orjson

__all__ = ["ArgumentError", "ArgumentSpec"]

_MAX_DEPTH: Final = 16
_MAX_ERRORS: Final = 5
_INT_RE: Final = re.compile(r"[+-]?\d{1,300}")
_NUM_RE: Final = re.compile(r"[+-]?(\d{1,300}(\.\d*)?|\.\d+)([eE][+-]?\d{1,4})?")
_MISSING: Final[Any] = object()


class ArgumentError(Exception):
    """Arguments that cannot be used; `message` is written for the model."""

    def __init__(
        self,
        code: Literal["invalid_json", "invalid_arguments"],
        message: str,
        *,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code: Literal["invalid_json", "invalid_arguments"] = code
        self.message = message
        self.field = field


# A defaults plan: (property, default or _MISSING, plan for the property's own properties).
_Plan = tuple[tuple[str, Any, "_Plan | None"], ...]


class ArgumentSpec:
    """The compiled argument handling of one tool.

    Args:
        tool_name: Used in error messages.
        schema: The tool's `parameters` JSON Schema (an object schema).
    """

    __slots__ = ("_hint", "_is_valid", "_plan", "_validator", "schema", "tool_name")

    def __init__(self, tool_name: str, schema: dict[str, Any]) -> None:
        self.tool_name = tool_name
        self.schema = schema
        self._validator = jsonschema_rs.validator_for(_closed(schema))
        self._is_valid = self._validator.is_valid
        self._plan = _defaults_plan(schema, schema, 0)
        self._hint: str | None = None

    def prepare(self, raw: str, *, repair: bool = True) -> tuple[dict[str, Any], list[str]]:
        """Turn the model's raw argument text into validated arguments with defaults applied.

        Args:
            raw: The JSON text the model sent; empty means no arguments.
            repair: Fix common encoding mistakes before validating.

        Returns:
            The arguments, and a description of each repair made (empty when none).

        Raises:
            ArgumentError: `invalid_json` or `invalid_arguments`, with a message for the model.
        """
        args, repairs = self.parse(raw, repair=repair)
        try:
            if not self._is_valid(args):
                before = len(repairs)
                if repair:
                    args = _repair(args, self.schema, self.schema, "", repairs, 0)
                if len(repairs) == before or not self._is_valid(args):
                    raise self._invalid(args)
        except (ValueError, RecursionError):
            # The validator gives up on very deep values ("Recursion limit reached").
            raise ArgumentError(
                "invalid_arguments",
                f"The arguments for tool {self.tool_name!r} are nested too deeply to check. "
                f"Send flatter arguments. {self.hint()}",
            ) from None
        if self._plan is not None:
            _apply_defaults(args, self._plan)
        return args, repairs

    def parse(self, raw: str, *, repair: bool = True) -> tuple[dict[str, Any], list[str]]:
        """Parse `raw` as a JSON object (no schema check).

        Raises:
            ArgumentError: `invalid_json`; the message never repeats the raw text.
        """
        if not raw or raw.isspace():
            return {}, []
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ArgumentError(
                "invalid_json",
                f"The arguments for tool {self.tool_name!r} are not valid JSON "
                f"({exc.msg} at line {exc.lineno} column {exc.colno}). "
                f"Send the arguments as one JSON object. {self.hint()}",
            ) from None
        if type(value) is dict:
            return value, []
        # Some models encode the arguments object twice: "{\"city\": \"Lisbon\"}".
        if repair and isinstance(value, str):
            try:
                inner = orjson.loads(value)
            except orjson.JSONDecodeError:
                inner = None
            if type(inner) is dict:
                return inner, ["arguments: JSON string -> object"]
        raise ArgumentError(
            "invalid_json",
            f"The arguments for tool {self.tool_name!r} must be a JSON object, "
            f"not {_type_phrase(value, with_value=False)}. {self.hint()}",
        )

    def hint(self) -> str:
        """A one-line summary of the expected arguments, for error messages."""
        if self._hint is None:
            self._hint = _signature_hint(self.schema)
        return self._hint

    def _invalid(self, args: dict[str, Any]) -> ArgumentError:
        sentences: list[str] = []
        first_field: str | None = None
        for err in self._validator.iter_errors(args):
            sentence, field = _describe(err, self.schema)
            if sentence not in sentences:
                sentences.append(sentence)
                first_field = first_field or field
            if len(sentences) == _MAX_ERRORS:
                break
        if not sentences:  # defensive: is_valid and iter_errors disagree
            sentences.append("The arguments do not match the tool's schema.")
        return ArgumentError(
            "invalid_arguments",
            f"Invalid arguments for tool {self.tool_name!r}: "
            + " ".join(sentences)
            + " Fix the arguments and call the tool again.",
            field=first_field,
        )


# --- schema helpers -----------------------------------------------------------------------


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown top-level arguments refused, unless it says otherwise.

    An argument the tool does not declare would only fail later inside the function (or be
    silently ignored), so the model is told about it at validation time instead.
    """
    open_keys = ("additionalProperties", "patternProperties", "unevaluatedProperties")
    if "properties" not in schema or any(k in schema for k in open_keys):
        return schema
    return {**schema, "additionalProperties": False}


def _resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    """Follow local `$ref`s (and a single-item `allOf`, as older pydantic emits)."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(schema, dict):
            return {}
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            node: Any = root
            for part in ref[1:].lstrip("/").split("/") if ref != "#" else ():
                part = part.replace("~1", "/").replace("~0", "~")
                node = node.get(part) if isinstance(node, dict) else None
            schema = node
            continue
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and len(schema) <= 3:
            schema = all_of[0]
            continue
        return schema
    return {}


def _types(schema: Any, root: dict[str, Any], depth: int = 0) -> set[str] | None:
    """The JSON types a schema accepts; `None` when any type may do."""
    s = _resolve(schema, root)
    t = s.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)}
    for key in ("anyOf", "oneOf"):
        branches = s.get(key)
        if isinstance(branches, list) and depth < _MAX_DEPTH:
            out: set[str] = set()
            for branch in branches:
                bt = _types(branch, root, depth + 1)
                if bt is None:
                    return None
                out |= bt
            return out
    if "properties" in s:
        return {"object"}
    if "items" in s:
        return {"array"}
    values = (
        s["enum"] if isinstance(s.get("enum"), list) else [s["const"]] if "const" in s else None
    )
    if values:
        return {_json_type(v) for v in values}
    return None


def _branch(schema: Any, root: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The (sub)schema that describes values of JSON type `kind`, if there is one."""
    s = _resolve(schema, root)
    types = _types(s, root)
    if types is not None and kind not in types:
        return None
    for key in ("anyOf", "oneOf"):
        branches = s.get(key)
        if isinstance(branches, list):
            for b in branches:
                bt = _types(b, root)
                if bt is not None and kind in bt:
                    return _resolve(b, root)
            return None
    return s


def _json_type(value: Any) -> str:
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
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


# --- repair -------------------------------------------------------------------------------


def _repair(
    value: Any, schema: Any, root: dict[str, Any], path: str, repairs: list[str], depth: int
) -> Any:
    if depth > _MAX_DEPTH:
        return value
    s = _resolve(schema, root)
    if isinstance(value, str):
        allowed = _types(s, root)
        if allowed is not None and "string" not in allowed:
            converted = _convert_string(value, allowed)
            if converted is not _MISSING:
                repairs.append(f"{path or 'arguments'!r}: string -> {_json_type(converted)}")
                value = converted
    if isinstance(value, dict):
        obj = _branch(s, root, "object")
        if obj is not None:
            props = obj.get("properties")
            props = props if isinstance(props, dict) else {}
            extra = obj.get("additionalProperties")
            for key, item in list(value.items()):
                sub = props.get(key, extra if isinstance(extra, dict) else None)
                if sub is not None:
                    sub_path = f"{path}.{key}" if path else key
                    value[key] = _repair(item, sub, root, sub_path, repairs, depth + 1)
    elif isinstance(value, list):
        arr = _branch(s, root, "array")
        items = arr.get("items") if arr is not None else None
        if isinstance(items, dict):
            for i, item in enumerate(value):
                value[i] = _repair(item, items, root, f"{path}[{i}]", repairs, depth + 1)
    return value


def _convert_string(text: str, allowed: set[str]) -> Any:
    """`text` as a value of one of the `allowed` JSON types, or `_MISSING`."""
    t = text.strip()
    if t[:1] in ("{", "[") and ("object" in allowed or "array" in allowed):
        try:
            parsed = orjson.loads(t)
        except orjson.JSONDecodeError:
            parsed = None
        if (isinstance(parsed, dict) and "object" in allowed) or (
            isinstance(parsed, list) and "array" in allowed
        ):
            return parsed
    if "integer" in allowed:
        if _INT_RE.fullmatch(t):
            return int(t)
        if _NUM_RE.fullmatch(t):
            f = float(t)
            if math.isfinite(f) and f.is_integer():
                return int(f)
    if "number" in allowed and _NUM_RE.fullmatch(t):
        if _INT_RE.fullmatch(t):
            return int(t)
        f = float(t)
        if math.isfinite(f):
            return f
    if "boolean" in allowed and t.lower() in ("true", "false"):
        return t.lower() == "true"
    if "null" in allowed and t in ("null", "None"):
        return None
    return _MISSING


# --- defaults -----------------------------------------------------------------------------


def _defaults_plan(schema: Any, root: dict[str, Any], depth: int) -> _Plan | None:
    if depth > 6:  # recursive models: defaults deeper than this are left to the tool
        return None
    s = _resolve(schema, root)
    props = s.get("properties")
    if not isinstance(props, dict):
        return None
    entries: list[tuple[str, Any, _Plan | None]] = []
    for name, sub in props.items():
        default = _MISSING
        if isinstance(sub, dict) and "default" in sub:
            default = sub["default"]
        else:
            rs = _resolve(sub, root)
            if "default" in rs:
                default = rs["default"]
        obj = _branch(sub, root, "object")
        subplan = _defaults_plan(obj, root, depth + 1) if obj is not None else None
        if default is not _MISSING or subplan is not None:
            entries.append((name, default, subplan))
    return tuple(entries) or None


def _apply_defaults(args: dict[str, Any], plan: _Plan) -> None:
    for name, default, subplan in plan:
        if name not in args:
            if default is not _MISSING:
                mutable = isinstance(default, (dict, list))
                args[name] = copy.deepcopy(default) if mutable else default
        elif subplan is not None:
            value = args[name]
            if type(value) is dict:
                _apply_defaults(value, subplan)


# --- messages -----------------------------------------------------------------------------


def _describe(err: Any, root: dict[str, Any]) -> tuple[str, str | None]:
    """One sentence for the model about a jsonschema-rs error, and the field at fault."""
    path = _format_path(err.instance_path)
    kind = err.kind
    name = getattr(kind, "name", "")
    value = err.instance
    arg = f"Argument {path!r}"
    if name == "required":
        field = f"{path}.{kind.property}" if path else str(kind.property)
        return f"Missing required argument {field!r}.", field
    if name == "additionalProperties":
        unexpected = [f"{path}.{u}" if path else str(u) for u in kind.unexpected]
        parent = _resolve(_at(root, list(err.schema_path)[:-1]), root)
        valid = list(parent.get("properties") or {})
        names = ", ".join(repr(u) for u in unexpected)
        noun = "argument" if len(unexpected) == 1 else "arguments"
        choices = ", ".join(repr(v) for v in valid) or "none"
        where = f"keys of {path!r}" if path else "arguments"
        return f"Unexpected {noun} {names}. Valid {where}: {choices}.", unexpected[0]
    got = f"(got {_literal(value)})"
    if name == "enum":
        options = ", ".join(_literal(o) for o in kind.options)
        return f"{arg} must be one of {options} {got}.", path
    if name == "const":
        return f"{arg} must be {_literal(kind.expected_value)} {got}.", path
    if name == "type":
        return f"{arg} must be {_types_phrase(kind.types)} (got {_type_phrase(value)}).", path
    if name in ("anyOf", "oneOf"):
        types = _types(_at(root, list(err.schema_path)[:-1]), root)
        if types:
            wanted = _types_phrase(sorted(types))
            return f"{arg} must be {wanted} (got {_type_phrase(value)}).", path
        return f"{arg} does not match any of the allowed forms {got}.", path
    limits = {
        "minimum": "at least",
        "maximum": "at most",
        "exclusiveMinimum": "greater than",
        "exclusiveMaximum": "less than",
    }
    if name in limits:
        return f"{arg} must be {limits[name]} {_literal(kind.limit)} {got}.", path
    if name == "multipleOf":
        return f"{arg} must be a multiple of {_literal(kind.multiple_of)} {got}.", path
    if name in ("minLength", "maxLength"):
        bound = "at least" if name == "minLength" else "at most"
        return f"{arg} must be {bound} {kind.limit} characters long {got}.", path
    if name in ("minItems", "maxItems"):
        bound = "at least" if name == "minItems" else "at most"
        return f"{arg} must have {bound} {kind.limit} items.", path
    if name in ("minProperties", "maxProperties"):
        bound = "at least" if name == "minProperties" else "at most"
        return f"{arg} must have {bound} {kind.limit} keys.", path
    if name == "uniqueItems":
        return f"{arg} must not contain duplicate items.", path
    if name == "pattern":
        return f"{arg} must match the pattern {kind.pattern!r} {got}.", path
    if name == "format":
        return f"{arg} must be a valid {kind.format} {got}.", path
    if path:
        return f"{arg} is invalid: {err.message}.", path
    return f"The arguments are invalid: {err.message}.", None


def _at(root: dict[str, Any], schema_path: Sequence[Any]) -> Any:
    node: Any = root
    for key in schema_path:
        if isinstance(node, dict):
            node = node.get(key)
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return {}
    return node


def _format_path(parts: Sequence[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    text = orjson.dumps(value).decode()
    return text if len(text) <= 60 else text[:57] + "..."


_ARTICLES: Final = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def _types_phrase(types: Sequence[str]) -> str:
    words = [_ARTICLES.get(t, t) for t in types]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _type_phrase(value: Any, *, with_value: bool = True) -> str:
    kind = _ARTICLES.get(_json_type(value), _json_type(value))
    if not with_value or value is None or isinstance(value, (list, dict)):
        return kind
    return f"{kind} {_literal(value)}"


def _signature_hint(schema: dict[str, Any]) -> str:
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return "This tool takes no arguments: send {}."
    required = set(schema.get("required") or ())
    parts = []
    for name, sub in props.items():
        s = _resolve(sub, schema)
        if isinstance(s.get("enum"), list):
            desc = " | ".join(_literal(v) for v in s["enum"][:8])
        else:
            types = _types(s, schema)
            desc = "/".join(sorted(types)) if types else "any"
        parts.append(f"{name} ({desc}{', required' if name in required else ''})")
    return "Expected arguments: " + ", ".join(parts) + "."
