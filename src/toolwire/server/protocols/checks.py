"""Request checks every front door shares: the shape of a 400 about one field, how values
are named in its message, the `messages` array, client tools and their schemas,
`tool_choice` against the tools on offer, the calls and text content of a transcript.
Protocol-neutral: each door's reader calls them with its own field names and wording.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Final

import jsonschema_rs
import orjson

from toolwire.models._values import json_type
from toolwire.models.base import ToolChoice
from toolwire.server.http.errors import GatewayError
from toolwire.server.http.json_depth import MAX_JSON_DEPTH, JsonTooDeep, loads_text, text_too_deep
from toolwire.tools.call import ToolCall
from toolwire.tools.tool import Tool

__all__ = [
    "arguments_text",
    "as_tool_request",
    "check_tool_choice",
    "deep_arguments",
    "field_error",
    "function_entries",
    "function_tool",
    "json_object",
    "json_type",
    "message_array",
    "openai_tool_choice",
    "optional_boolean",
    "optional_string",
    "part_text",
    "part_type_error",
    "required_string",
    "result_name",
    "shown",
    "string_or_parts",
    "text_content",
    "text_parts",
    "tool_array",
    "tool_name",
    "tool_object",
    "tool_parameters",
    "user_parts",
]

_TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")

_KNOWN_METASCHEMAS: Final = frozenset(
    {
        "http://json-schema.org/draft-04/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)

_CACHED_SCHEMA_BYTES: Final = 64 * 1024
"""Larger tool schemas are checked every time, so the cache's memory stays bounded."""


def field_error(param: str, message: str, *, code: str | None = None) -> GatewayError:
    """A 400 about one request field: `param` is named in the message and the error."""
    return GatewayError(400, f"{param}: {message}", param=param, code=code)


def deep_arguments(where: str) -> GatewayError:
    """The 400 for tool-call arguments that nest past the gateway's JSON depth rule."""
    return field_error(
        where,
        f"the arguments nest arrays and objects more than {MAX_JSON_DEPTH} levels deep; "
        "send flatter JSON.",
        code="json_too_deep",
    )


def shown(value: Any) -> str:
    """A value as quoted in an error message: a short string in quotes, else its type."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40] + "…")
    return json_type(value)


def required_string(value: Any, where: str, need: str) -> str:
    """A field that must be a non-empty string (an id, a name), else a 400 at `where`
    saying `need` and what was sent."""
    if type(value) is not str or not value:
        raise field_error(where, f"{need}; got {shown(value)}.")
    return value


def arguments_text(arguments: Any, where: str) -> str:
    """A tool call's `arguments` as the OpenAI doors send them: JSON text, a string, and
    within the gateway's JSON depth rule (a 400 at `where`)."""
    if type(arguments) is not str:
        raise field_error(
            where,
            f"must be the arguments as JSON text (a string), not {json_type(arguments)}; "
            'serialize the object, e.g. \'{"city": "Paris"}\'.',
        )
    if text_too_deep(arguments):
        raise deep_arguments(where)
    return arguments


def optional_string(value: Any, where: str) -> str | None:
    """An optional string field: absent (None) or a string, else a 400 at `where`."""
    if value is not None and type(value) is not str:
        raise field_error(where, f"must be a string, not {json_type(value)}.")
    return value


def optional_boolean(value: Any, where: str) -> bool | None:
    """An optional boolean field: absent (None) or a boolean, else a 400 at `where`."""
    if value is not None and type(value) is not bool:
        raise field_error(where, f"must be a boolean, not {json_type(value)}.")
    return value


def json_object(value: Any, where: str, shape: str) -> dict[str, Any]:
    """A field that must be an object, shown as `shape` in the 400 at `where`."""
    if type(value) is not dict:
        raise field_error(where, f"must be an object {shape}, not {json_type(value)}.")
    return value


def message_array(raw: Any, max_messages: int) -> list[Any]:
    """A request's `messages`: a non-empty array of at most `max_messages` entries (each
    entry is the door's to read)."""
    if type(raw) is not list or not raw:
        got = "an empty array" if raw == [] else json_type(raw)
        raise field_error("messages", f"must be a non-empty array of messages, not {got}.")
    if len(raw) > max_messages:
        raise field_error(
            "messages",
            f"{len(raw)} messages is more than this gateway's limit of "
            f"{max_messages} (limits.max_messages in its config); send fewer, e.g. "
            "by summarising or trimming older turns.",
            code="too_many_messages",
        )
    return raw


def tool_array(raw: Any, max_tools: int) -> list[Any]:
    """A request's `tools`: absent is none; else an array of at most `max_tools` entries
    (each entry is the door's to read)."""
    if raw is None:
        return []
    if type(raw) is not list:
        raise field_error("tools", f"must be an array of tools, not {json_type(raw)}.")
    if len(raw) > max_tools:
        raise field_error(
            "tools",
            f"{len(raw)} tools is more than this gateway's limit of {max_tools} "
            "(limits.max_tools in its config); send only the tools this turn needs.",
            code="too_many_tools",
        )
    return raw


def tool_object(entry: Any, where: str) -> dict[str, Any]:
    """One entry of `tools`, which must be an object (a 400 at `where`)."""
    if type(entry) is not dict:
        raise field_error(where, f"must be a tool object, not {json_type(entry)}.")
    return entry


def tool_name(
    name: Any,
    where: str,
    tool: str,
    seen: dict[str, str],
    server_tools: Collection[str],
    *,
    coded: bool = True,
) -> str:
    """A client tool's name, 400 at `where` unless it is a valid name, new in this request
    and not a gateway tool's; `seen` maps the names so far to their tool's path (`tool` is
    this one's), and gains this one. `coded`: the errors carry the OpenAI doors' codes."""
    if type(name) is not str or not _TOOL_NAME.fullmatch(name):
        raise field_error(
            where,
            f"a tool name is 1 to 64 letters, digits, '_' or '-'; got {shown(name)}.",
            code="invalid_tool_name" if coded else None,
        )
    if name in seen:
        raise field_error(
            where,
            f"{seen[name]} already has the name {name!r}; give each tool its own name.",
            code="duplicate_tool_name" if coded else None,
        )
    if name in server_tools:
        raise field_error(
            where,
            f"{name!r} clashes with a gateway tool of the same name, which this "
            "gateway runs itself; rename your tool.",
            code="tool_name_clash" if coded else None,
        )
    seen[name] = tool
    return name


def tool_parameters(schema: Any, where: str, name: str) -> dict[str, Any]:
    """A client tool's `parameters` checked as a JSON Schema object (400 at `where`);
    absent or `{}` is a tool without arguments. Shared by the front doors."""
    if schema is None or schema == {}:
        return {"type": "object", "properties": {}}
    if type(schema) is not dict:
        raise field_error(
            where,
            f"tool {name!r}: must be a JSON Schema object, not {json_type(schema)}.",
            code="invalid_tool_schema",
        )
    problem = _schema_problem(schema)
    if problem is not None:
        raise field_error(where, f"tool {name!r}: {problem}", code="invalid_tool_schema")
    kind = schema.get("type")
    if kind is None:
        # `{"properties": {...}}` without a type is common and unambiguous.
        return {"type": "object", **schema}
    if kind != "object":
        raise field_error(
            f"{where}.type",
            f"tool {name!r}: the arguments are an object, so the schema's type must be "
            f"'object', not {shown(kind)}; put the fields under 'properties'.",
            code="invalid_tool_schema",
        )
    return schema


def function_entries(
    raw: Any, max_tools: int, need: str, *, code: str | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each entry of an OpenAI door's `tools` (see `tool_array`) with its path,
    `tools[n]`; an entry whose `type` is not `function` is a 400 saying `need` and what
    was sent (with `code`)."""
    for n, raw_entry in enumerate(tool_array(raw, max_tools)):
        where = f"tools[{n}]"
        entry = tool_object(raw_entry, where)
        kind = entry.get("type")
        if kind != "function":
            raise field_error(f"{where}.type", f"{need}; got {shown(kind)}.", code=code)
        yield where, entry


def function_tool(
    fields: Mapping[str, Any],
    where: str,
    tool: str,
    seen: dict[str, str],
    server_tools: Collection[str],
) -> Tool:
    """An OpenAI function tool from `fields` (at `where`): its `name` (see `tool_name`;
    `tool` is the entry's path), `description`, `strict` and `parameters` (a JSON
    Schema, see `tool_parameters`)."""
    name = tool_name(fields.get("name"), f"{where}.name", tool, seen, server_tools)
    description = optional_string(fields.get("description"), f"{where}.description")
    strict = optional_boolean(fields.get("strict"), f"{where}.strict")
    parameters = tool_parameters(fields.get("parameters"), f"{where}.parameters", name)
    return Tool(name=name, description=description or "", input_schema=parameters, strict=strict)


def _schema_problem(schema: dict[str, Any]) -> str | None:
    try:
        serialized = orjson.dumps(schema)
    except (orjson.JSONEncodeError, TypeError):
        return _check_schema(schema)
    if len(serialized) > _CACHED_SCHEMA_BYTES:
        return _check_schema(schema)
    return _cached_check(serialized)


@functools.lru_cache(maxsize=512)
def _cached_check(serialized: bytes) -> str | None:
    # Clients resend the same tools every turn: keyed by the serialized schema, the
    # meta-validation runs once per distinct schema.
    return _check_schema(orjson.loads(serialized))


def _check_schema(schema: dict[str, Any]) -> str | None:
    declared = schema.get("$schema")
    if declared is not None and (
        type(declared) is not str or declared.rstrip("#") not in _KNOWN_METASCHEMAS
    ):
        # An unknown metaschema would be fetched over the network by the validator.
        return (
            f"'$schema' is {shown(declared)}, not a JSON Schema draft this gateway "
            "knows; omit it or use 'https://json-schema.org/draft/2020-12/schema'."
        )
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        at = "/".join(str(p) for p in exc.instance_path) or "(root)"
        return f"not a valid JSON Schema at {at}: {exc.message}."
    except jsonschema_rs.ReferencingError as exc:
        return f"not a valid JSON Schema: {exc}."
    return None


def check_tool_choice(
    choice: str, tools: Sequence[Tool], server_tools: Collection[str], *, name_field: str
) -> ToolChoice:
    """`auto`, `none`, `required` or a tool name, checked against the tools on offer (the
    client's and the gateway's); a 400 says what to send instead. Shared by the front
    doors; `name_field` is where their request names a tool."""
    if choice in ("auto", "none"):
        return choice
    # A client tool never shares a server tool's name (refused above), so no duplicates.
    names = [*(tool.name for tool in tools), *server_tools]
    if not names:
        raise field_error(
            "tool_choice",
            f"{shown(choice) if choice == 'required' else 'a named function'} needs "
            "tools, and this request has none (nor does the gateway); send 'tools' or "
            "use 'auto'.",
            code="invalid_tool_choice",
        )
    if choice != "required" and choice not in names:
        raise field_error(
            name_field,
            f"{choice!r} is not one of the tools; use one of {', '.join(repr(n) for n in names)}.",
            code="invalid_tool_choice",
        )
    return choice


def openai_tool_choice(
    raw: Any,
    tools: Sequence[Tool],
    server_tools: Collection[str],
    *,
    shape: str,
    name_path: tuple[str, ...],
) -> ToolChoice | None:
    """`tool_choice` as the OpenAI doors take it: absent, `auto`, `none`, `required`, or a
    named function `shape` (`{"type": "function", ...}`) with the name at `name_path`;
    checked against the tools on offer by `check_tool_choice`."""
    if raw is None:
        return None
    name_field = ".".join(("tool_choice", *name_path))
    if type(raw) is str and raw in ("auto", "none", "required"):
        choice: str = raw
    elif type(raw) is dict and raw.get("type") == "function":
        name: Any = raw
        for key in name_path:
            name = name.get(key) if type(name) is dict else None
        if type(name) is not str:
            raise field_error(
                name_field,
                f"a named tool choice is {shape}; the name is {shown(name)}.",
                code="invalid_tool_choice",
            )
        choice = name
    else:
        got = f"type {shown(raw.get('type'))}" if type(raw) is dict else shown(raw)
        raise field_error(
            "tool_choice",
            f"must be 'auto', 'none', 'required' or {shape}; got {got}.",
            code="invalid_tool_choice",
        )
    return check_tool_choice(choice, tools, server_tools, name_field=name_field)


def part_text(part: Mapping[str, Any], where: str, *, noun: str = "part") -> str:
    """The `text` of a text content part (`noun`: what the door calls a part), which must
    be a string (a 400 at `{where}.text`)."""
    text = part.get("text")
    if type(text) is not str:
        raise field_error(
            f"{where}.text", f"a text {noun} needs 'text', a string; got {shown(text)}."
        )
    return text


def user_parts(item: Mapping[str, Any], where: str) -> str | list[Any]:
    """A user message's `content`: a string, or an array of content parts (each the door's
    to read); anything else is a 400 at `{where}.content`."""
    content = item.get("content")
    if type(content) is not str and type(content) is not list:
        raise field_error(
            f"{where}.content",
            f"must be a string or an array of content parts, not {json_type(content)}.",
        )
    return content


def part_type_error(part: Any, at: str, types: Sequence[str]) -> GatewayError:
    """The 400 for a user content part (at `at`) that is not an object of one of `types`."""
    is_object = type(part) is dict
    return field_error(
        f"{at}.type" if is_object else at,
        "a user content part must be an object whose 'type' is one of "
        f"{', '.join(repr(t) for t in types)}; "
        f"got {shown(part.get('type')) if is_object else json_type(part)}.",
    )


def text_parts(
    parts: list[Any], where: str, types: tuple[str, ...], need: str, *, skip: str | None = None
) -> str:
    """The texts of an array of text parts (each an object whose `type` is one of
    `types`) joined by newlines; a part of type `skip` is left out, and any other part is
    a 400 at `{where}[n]` saying `need` and what was sent."""
    texts = []
    for n, part in enumerate(parts):
        kind = part.get("type") if type(part) is dict else None
        if skip is not None and kind == skip:
            continue
        if kind not in types:
            raise field_error(f"{where}[{n}]", f"{need}; got {shown(part)}.")
        texts.append(part_text(part, f"{where}[{n}]"))
    return "\n".join(texts)


def text_content(item: Mapping[str, Any], where: str, role: str, *, part_type: str) -> str:
    """A message's `content` as text: a string, or an array of `part_type` parts joined
    by newlines; anything else is a 400 under `where` (the message's path)."""
    return string_or_parts(
        item.get("content"),
        f"{where}.content",
        (part_type,),
        part_need=f'a {role} message takes only text parts {{"type": "{part_type}", "text": ...}}',
        need=f"a {role} message needs 'content': a string or an array of {part_type} parts",
    )


def string_or_parts(
    value: Any, where: str, types: tuple[str, ...], *, part_need: str, need: str
) -> str:
    """Text sent as a string, or as an array of text parts joined by newlines (a part not
    of `types` is a 400 saying `part_need`, see `text_parts`); anything else is a 400 at
    `where` saying `need` and what was sent."""
    if type(value) is str:
        return value
    if type(value) is list:
        return text_parts(value, where, types, part_need)
    raise field_error(where, f"{need}, not {json_type(value)}.")


def result_name(item: Mapping[str, Any], where: str) -> str:
    """The `name` of a `tool_result` message (the `tool_request` dialect), which names the
    call it answers (a 400 at `{where}.name`)."""
    return required_string(
        item.get("name"),
        f"{where}.name",
        "a tool_result message needs 'name': the name of the tool_request it answers",
    )


def as_tool_request(content: str, i: int) -> ToolCall | None:
    """The call of a `{"tool_request": {...}}` message, or None when it is plain text."""
    text = content.strip()
    # Cheap checks first: almost every assistant message is prose.
    if not (text.startswith("{") and text.endswith("}") and "tool_request" in text):
        return None
    try:
        data = loads_text(text)
    except JsonTooDeep:
        # Its arguments are written back out (as the call's JSON text): refused like any
        # other JSON past the gateway's depth rule.
        raise deep_arguments(f"messages[{i}].content") from None
    except orjson.JSONDecodeError:
        return None
    if type(data) is not dict or len(data) != 1:
        return None
    request = data.get("tool_request")
    if type(request) is not dict:
        return None
    name = request.get("name")
    arguments = request.get("arguments")
    if type(name) is not str or not name or type(arguments) is not dict:
        return None
    return ToolCall(id=f"toolreq_{i}", name=name, arguments=orjson.dumps(arguments).decode())
