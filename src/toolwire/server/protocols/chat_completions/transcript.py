"""Chat Completions `messages` → toolwire messages, with the pairing rules of tool results.

A `tool` message is honoured only when it answers a call of the assistant message right
before it: it must belong to the run of tool messages that directly follows an assistant
message with `tool_calls`, and answer one of that message's calls not answered yet. Any
other tool message is an orphan (an unknown id, a call of an earlier assistant message, a
second answer, a result after a user message): it is dropped and reported, or refused in
strict mode. A call left without a result is refused, since no upstream accepts a
transcript with an unanswered call.

The `tool_request` dialect adds the strict whole-message JSON form of a call (an
assistant message whose content is exactly `{"tool_request": {"name", "arguments"}}`)
and `tool_result` messages answering a pending call by name.

This runs on every request, so the messages are checked by hand in one pass, which also
gives each error the exact field (`messages[3].tool_call_id`) and the advice to go with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolwire.models.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.server.configuration.config import Dialect
from toolwire.server.http.errors import GatewayError
from toolwire.server.protocols.checks import (
    arguments_text,
    as_tool_request,
    field_error,
    json_object,
    json_type,
    part_text,
    part_type_error,
    required_string,
    result_name,
    shown,
    text_content,
    text_parts,
    user_parts,
)
from toolwire.tools.call import ToolCall

__all__ = ["Transcript", "parse_messages"]

ROLES: Final = ("system", "developer", "user", "assistant", "tool")
USER_PART_TYPES: Final = ("text", "image_url", "input_audio", "file")
_PART_PAYLOADS: Final = {"image_url": "url", "input_audio": "data", "file": None}
"""The object each non-text user part carries under its type's key, and its required field."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """The request's messages as toolwire keeps them."""

    messages: tuple[Message, ...]
    """Every message in order, orphan tool results removed."""
    dropped_results: tuple[str, ...]
    """The `tool_call_id` (or, for a `tool_result` message, the name) of each orphan dropped."""


def parse_messages(
    raw: Sequence[Any], *, strict_tool_results: bool, dialect: Dialect
) -> Transcript:
    """Check and convert the `messages` of a Chat Completions request.

    Args:
        raw: The request's `messages` array (already parsed JSON).
        strict_tool_results: Refuse an orphan tool result with 400 instead of dropping it.
        dialect: `tool_request` also accepts the strict whole-message JSON tool calls and
            `tool_result` messages.

    Raises:
        GatewayError: 400 naming the field at fault (`param`) and what to send instead.
    """
    tool_request = dialect == "tool_request"
    out: list[Message] = []
    dropped: list[str] = []
    # Calls of the assistant message opening the current run of tool messages that are
    # still waiting for their result; empty outside such a run.
    pending: dict[str, ToolCall] = {}
    opened_by = -1
    made_by: dict[str, int] = {}
    answered_by: dict[str, int] = {}
    for i, item in enumerate(raw):
        if type(item) is not dict:
            raise field_error(
                f"messages[{i}]",
                f"must be an object with a 'role', not {json_type(item)}.",
            )
        role = item.get("role")
        if role == "tool" or (role == "tool_result" and tool_request):
            if role == "tool":
                key = _call_id(item, i)
                call = pending.pop(key, None)
            else:
                key = result_name(item, f"messages[{i}]")
                call = _pop_by_name(pending, key)
            content = text_content(item, f"messages[{i}]", role, part_type="text")
            if call is None:
                if strict_tool_results:
                    raise _orphan(i, role, key, opened_by, made_by, answered_by)
                dropped.append(key)
                continue
            answered_by[call.id] = i
            out.append(ToolMessage(call_id=call.id, name=call.name, content=content))
            continue
        if pending:
            raise _missing(pending, opened_by, raw[opened_by], before=i)
        if role == "user":
            out.append(_user(item, i))
        elif role == "assistant":
            message = _assistant(item, i, tool_request)
            if message.tool_calls:
                pending = {call.id: call for call in message.tool_calls}
                opened_by = i
                for call in message.tool_calls:
                    made_by[call.id] = i
            out.append(message)
        elif role == "system" or role == "developer":
            out.append(
                SystemMessage(content=text_content(item, f"messages[{i}]", role, part_type="text"))
            )
        else:
            raise _role_error(role, i, tool_request)
    if pending:
        raise _missing(pending, opened_by, raw[opened_by], before=None)
    return Transcript(messages=tuple(out), dropped_results=tuple(dropped))


# --- one message ---------------------------------------------------------------------------


def _user(item: dict[str, Any], i: int) -> UserMessage:
    content = user_parts(item, f"messages[{i}]")
    if isinstance(content, str):
        return UserMessage(content=content)
    texts: list[str] = []
    plain = True
    for n, part in enumerate(content):
        where = f"messages[{i}].content[{n}]"
        kind = part.get("type") if type(part) is dict else None
        if kind == "text":
            texts.append(part_text(part, where))
            continue
        if type(kind) is not str or kind not in _PART_PAYLOADS:
            raise part_type_error(part, where, USER_PART_TYPES)
        payload = part.get(kind)
        required = _PART_PAYLOADS[kind]
        if type(payload) is not dict or (
            required is not None and type(payload.get(required)) is not str
        ):
            shape = f'{{"{required}": "..."}}' if required else "an object"
            raise field_error(f"{where}.{kind}", f"a '{kind}' part needs '{kind}': {shape}.")
        plain = False
    # Text parts are separate blocks to the model: keep them apart when flattening.
    return UserMessage(content="\n".join(texts), parts=None if plain else tuple(content))


def _assistant(item: dict[str, Any], i: int, tool_request: bool) -> AssistantMessage:
    if item.get("function_call") is not None:
        raise field_error(
            f"messages[{i}].function_call",
            "the legacy 'function_call' field is not supported; send the call in "
            '\'tool_calls\': [{"id": ..., "type": "function", "function": '
            '{"name": ..., "arguments": "<JSON text>"}}].',
            code="unsupported_parameter",
        )
    content = item.get("content")
    if content is not None and type(content) is not str:
        content = _assistant_parts(content, i)
    raw_calls = item.get("tool_calls")
    calls: tuple[ToolCall, ...] = ()
    if raw_calls is not None:
        calls = _tool_calls(raw_calls, i)
    elif tool_request and content is not None:
        call = as_tool_request(content, i)
        if call is not None:
            return AssistantMessage(tool_calls=(call,))
    return AssistantMessage(content=content, tool_calls=calls)


def _assistant_parts(content: Any, i: int) -> str:
    if type(content) is not list:
        raise field_error(
            f"messages[{i}].content",
            f"must be a string, an array of text parts or null, not {json_type(content)}.",
        )
    return text_parts(
        content,
        f"messages[{i}].content",
        ("text",),
        'an assistant content part must be {"type": "text", "text": ...} (or a \'refusal\' part)',
        skip="refusal",
    )


def _tool_calls(raw: Any, i: int) -> tuple[ToolCall, ...]:
    if type(raw) is not list:
        raise field_error(
            f"messages[{i}].tool_calls",
            f"must be an array of tool calls, not {json_type(raw)}.",
        )
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for n, entry in enumerate(raw):
        where = f"messages[{i}].tool_calls[{n}]"
        if type(entry) is not dict:
            raise field_error(where, f"must be a tool call object, not {json_type(entry)}.")
        kind = entry.get("type", "function")
        if kind != "function":
            raise field_error(
                f"{where}.type",
                f"only 'function' tool calls are supported; got {shown(kind)}.",
            )
        call_id = required_string(
            entry.get("id"), f"{where}.id", "must be the call's id, a non-empty string"
        )
        if call_id in seen:
            raise field_error(
                f"{where}.id",
                f"the id {call_id!r} is used by two calls of this message; give each "
                "call its own id, so that each tool message answers exactly one call.",
                code="duplicate_tool_call_id",
            )
        seen.add(call_id)
        function = json_object(
            entry.get("function"), f"{where}.function", '{"name": ..., "arguments": "<JSON text>"}'
        )
        name = required_string(
            function.get("name"),
            f"{where}.function.name",
            "must be the tool's name, a non-empty string",
        )
        arguments = arguments_text(function.get("arguments", ""), f"{where}.function.arguments")
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return tuple(calls)


def _call_id(item: dict[str, Any], i: int) -> str:
    return required_string(
        item.get("tool_call_id"),
        f"messages[{i}].tool_call_id",
        "a tool message needs 'tool_call_id': the id of the call it answers, from "
        "the assistant message right before it",
    )


def _pop_by_name(pending: dict[str, ToolCall], name: str) -> ToolCall | None:
    for call_id, call in pending.items():
        if call.name == name:
            del pending[call_id]
            return call
    return None


# --- errors --------------------------------------------------------------------------------


def _choices(values: Sequence[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _role_error(role: Any, i: int, tool_request: bool) -> GatewayError:
    param = f"messages[{i}].role"
    if role == "function":
        return field_error(
            param,
            "the legacy 'function' role is not supported; answer a call with "
            '{"role": "tool", "tool_call_id": "<the call\'s id>", "content": ...} right '
            "after the assistant message that made it.",
            code="unsupported_role",
        )
    if role == "tool_result":
        return field_error(
            param,
            "'tool_result' messages belong to the tool_request dialect, which this "
            'gateway does not use; send {"role": "tool", "tool_call_id": ..., '
            '"content": ...}, or set `dialect: tool_request` in the gateway config.',
            code="unsupported_role",
        )
    roles = (*ROLES, "tool_result") if tool_request else ROLES
    got = "is missing" if role is None else f"is {shown(role)}"
    return field_error(param, f"the role {got}; use one of {_choices(roles)}.", code="invalid_role")


def _orphan(
    i: int,
    role: str,
    key: str,
    opened_by: int,
    made_by: Mapping[str, int],
    answered_by: Mapping[str, int],
) -> GatewayError:
    if role == "tool_result":
        param = f"messages[{i}].name"
        what = f"the tool_result for {key!r}"
        why = "no tool_request of that name is waiting for its result right before it"
    else:
        param = f"messages[{i}].tool_call_id"
        what = f"the tool result for call {key!r}"
        if key in answered_by and made_by.get(key) == opened_by:
            why = f"messages[{answered_by[key]}] already answered that call"
        elif key in made_by:
            why = (
                f"that call was made by messages[{made_by[key]}], and a result must "
                "directly follow the assistant message that made the call"
            )
        else:
            why = "no assistant message before it made a call with that id"
    return field_error(
        param,
        f"{what} answers no pending call: {why}. Send each result once, in the run of "
        "tool messages right after the assistant message with the call, or remove it "
        "(strict_tool_results is on, so orphan results are refused rather than dropped).",
        code="orphan_tool_result",
    )


def _missing(
    pending: Mapping[str, ToolCall], opened_by: int, opener: Any, *, before: int | None
) -> GatewayError:
    call = next(iter(pending.values()))
    where = f"before messages[{before}]" if before is not None else "at the end of the request"
    raw_calls = opener.get("tool_calls") if type(opener) is dict else None
    if raw_calls is None:
        # A tool_request message: it is answered by name.
        param = f"messages[{opened_by}].content"
        advice = (
            f'send {{"role": "tool_result", "name": "{call.name}", "content": ...}} right after it'
        )
    else:
        n = next(n for n, entry in enumerate(raw_calls) if entry.get("id") == call.id)
        param = f"messages[{opened_by}].tool_calls[{n}].id"
        advice = (
            f'send {{"role": "tool", "tool_call_id": "{call.id}", "content": ...}} in the '
            "tool messages right after it"
        )
    return field_error(
        param,
        f"the call {call.id!r} of tool {call.name!r} has no result {where}; every call "
        f"needs one: {advice} (or remove the call).",
        code="missing_tool_result",
    )
