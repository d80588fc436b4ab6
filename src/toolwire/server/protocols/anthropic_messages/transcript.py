"""Anthropic `system` and `messages` → toolwire messages, with the pairing rules of results.

A `tool_result` block is honoured only when it answers a `tool_use` of the assistant
message right before its user message, once. Any other result is an orphan (an unknown
id, a call of an earlier turn, a second answer): it is dropped and reported, or refused in
strict mode, exactly as on the chat endpoint. A `tool_use` left without a result in the
next user message is refused, since no upstream accepts such a transcript.

One user message holding tool results and text becomes the tool messages first, then a
user message with the rest, which is how every upstream expects to read it.

Field names in errors follow Anthropic's own (`messages.2.content.0.tool_use_id`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from toolwire.models.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.server.http.errors import GatewayError
from toolwire.server.protocols.checks import (
    field_error,
    json_type,
    part_text,
    required_string,
    shown,
)
from toolwire.tools.call import ToolCall

__all__ = ["Transcript", "parse_system", "parse_transcript"]

USER_BLOCKS: Final = ("text", "image", "document", "tool_result")
ASSISTANT_BLOCKS: Final = ("text", "tool_use", "thinking", "redacted_thinking")


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """The request's conversation as toolwire keeps it."""

    messages: tuple[Message, ...]
    """Every message in order (the system prompt first), orphan results removed."""
    dropped_results: tuple[str, ...]
    """The `tool_use_id` of each orphan `tool_result` dropped."""


def parse_system(raw: Any) -> SystemMessage | None:
    """`system`: a string or an array of text blocks (joined as paragraphs)."""
    if raw is None:
        return None
    if type(raw) is str:
        return SystemMessage(content=raw) if raw else None
    if type(raw) is not list:
        raise field_error(
            "system", f"must be a string or an array of text blocks, not {json_type(raw)}."
        )
    texts = []
    for n, block in enumerate(raw):
        if type(block) is not dict or block.get("type") != "text":
            raise field_error(
                f"system.{n}",
                f'a system block must be {{"type": "text", "text": ...}}; got {_kind(block)}.',
            )
        texts.append(part_text(block, f"system.{n}", noun="block"))
    text = "\n\n".join(t for t in texts if t)
    return SystemMessage(content=text) if text else None


def parse_transcript(system: Any, raw: Sequence[Any], *, strict_tool_results: bool) -> Transcript:
    """Check and convert `system` and `messages`.

    Raises:
        GatewayError: 400 naming the field at fault and what to send instead.
    """
    out: list[Message] = []
    prompt = parse_system(system)
    if prompt is not None:
        out.append(prompt)
    dropped: list[str] = []
    # The calls of the assistant message right before that still wait for their result.
    pending: dict[str, ToolCall] = {}
    opened_by = -1
    made_at: dict[str, tuple[int, int]] = {}
    answered_at: dict[str, tuple[int, int]] = {}
    last = len(raw) - 1
    for i, item in enumerate(raw):
        if type(item) is not dict:
            raise field_error(f"messages.{i}", f"must be a message object, not {json_type(item)}.")
        role = item.get("role")
        if role not in ("user", "assistant"):
            got = "is missing" if role is None else f"is {shown(role)}"
            raise field_error(
                f"messages.{i}.role",
                f"the role {got}; use 'user' or 'assistant' (the system prompt goes in the "
                "top-level 'system' field).",
            )
        blocks = _blocks(item.get("content"), i, empty_ok=role == "assistant" and i == last)
        if role == "assistant":
            if pending:
                raise _missing(pending, made_at, before=i)
            message = _assistant(blocks, i)
            pending = {call.id: call for call in message.tool_calls}
            opened_by = i
            for n, block in enumerate(blocks):
                if block["type"] == "tool_use":
                    made_at[block["id"]] = (i, n)
            if message.content is not None or message.tool_calls:
                # An empty (or thinking-only) turn says nothing; upstreams reject it.
                out.append(message)
            continue
        results: list[ToolMessage] = []
        rest: list[tuple[int, dict[str, Any]]] = []
        for n, block in enumerate(blocks):
            if block["type"] != "tool_result":
                rest.append((n, block))
                continue
            where = f"messages.{i}.content.{n}"
            call_id = required_string(
                block.get("tool_use_id"),
                f"{where}.tool_use_id",
                "a tool_result needs 'tool_use_id': the id of the tool_use it answers, "
                "from the assistant message right before",
            )
            content, is_error = _result_content(block, where)
            call = pending.pop(call_id, None)
            if call is None:
                if strict_tool_results:
                    raise _orphan(where, call_id, opened_by, made_at, answered_at)
                dropped.append(call_id)
                continue
            answered_at[call_id] = (i, n)
            results.append(
                ToolMessage(call_id=call.id, name=call.name, content=content, is_error=is_error)
            )
        if pending:
            raise _missing(pending, made_at, before=i)
        opened_by = -1
        out.extend(results)
        if rest:
            out.append(_user(rest, i))
    if pending:
        raise _missing(pending, made_at, before=None)
    return Transcript(messages=tuple(out), dropped_results=tuple(dropped))


# --- blocks --------------------------------------------------------------------------------


def _blocks(content: Any, i: int, *, empty_ok: bool) -> list[dict[str, Any]]:
    """A message's content as blocks, each an object with a string `type`."""
    where = f"messages.{i}.content"
    if type(content) is str:
        blocks = [{"type": "text", "text": content}] if content else []
    elif type(content) is list:
        blocks = content
        for n, block in enumerate(blocks):
            if type(block) is not dict or type(block.get("type")) is not str:
                raise field_error(
                    f"{where}.{n}",
                    f"must be a content block object with a 'type', not {_kind(block)}.",
                )
    else:
        raise field_error(
            where, f"must be a string or an array of content blocks, not {json_type(content)}."
        )
    if not blocks and not empty_ok:
        raise field_error(
            where,
            "must not be empty: every message needs content, except a final assistant "
            "message (a prefill).",
        )
    return blocks


def _assistant(blocks: list[dict[str, Any]], i: int) -> AssistantMessage:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for n, block in enumerate(blocks):
        where = f"messages.{i}.content.{n}"
        kind = block["type"]
        if kind == "text":
            texts.append(part_text(block, where, noun="block"))
        elif kind == "tool_use":
            calls.append(_tool_use(block, where, calls))
        elif kind not in ("thinking", "redacted_thinking"):
            # Thinking is not sent back upstream: only Anthropic takes it, signed.
            raise field_error(
                f"{where}.type",
                f"an assistant content block is one of {_choices(ASSISTANT_BLOCKS)}; got "
                f"{shown(kind)}.",
            )
    text = "\n".join(t for t in texts if t)
    return AssistantMessage(content=text or None, tool_calls=tuple(calls))


def _tool_use(block: dict[str, Any], where: str, earlier: Sequence[ToolCall]) -> ToolCall:
    call_id = required_string(
        block.get("id"), f"{where}.id", "must be the call's id, a non-empty string"
    )
    if any(c.id == call_id for c in earlier):
        raise field_error(
            f"{where}.id",
            f"the id {call_id!r} is used by two tool_use blocks of this message; give each "
            "its own id, so that each tool_result answers exactly one call.",
        )
    name = required_string(
        block.get("name"), f"{where}.name", "must be the tool's name, a non-empty string"
    )
    arguments = block.get("input", {})
    if type(arguments) is not dict:
        raise field_error(
            f"{where}.input", f"must be an object of arguments, not {json_type(arguments)}."
        )
    return ToolCall(id=call_id, name=name, arguments=orjson.dumps(arguments).decode())


def _user(rest: list[tuple[int, dict[str, Any]]], i: int) -> UserMessage:
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    plain = True
    for n, block in rest:
        where = f"messages.{i}.content.{n}"
        kind = block["type"]
        if kind == "text":
            text = part_text(block, where, noun="block")
            texts.append(text)
            parts.append({"type": "text", "text": text})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block, where)}})
            plain = False
        elif kind == "document":
            part = _document(block, where)
            if part["type"] == "text":
                texts.append(part["text"])
            else:
                plain = False
            parts.append(part)
        else:
            raise field_error(
                f"{where}.type",
                f"a user content block is one of {_choices(USER_BLOCKS)}; got {shown(kind)}.",
            )
    # Blocks are separate to the model: keep them apart when flattening.
    return UserMessage(content="\n".join(texts), parts=None if plain else tuple(parts))


def _result_content(block: dict[str, Any], where: str) -> tuple[str, bool]:
    is_error = block.get("is_error", False)
    if type(is_error) is not bool:
        raise field_error(f"{where}.is_error", f"must be a boolean, not {json_type(is_error)}.")
    content = block.get("content")
    if content is None:
        return "", is_error
    if type(content) is str:
        return content, is_error
    if type(content) is not list:
        raise field_error(
            f"{where}.content",
            f"must be a string or an array of text blocks, not {json_type(content)}.",
        )
    texts = []
    for n, part in enumerate(content):
        if type(part) is not dict or part.get("type") != "text":
            raise field_error(
                f"{where}.content.{n}",
                "this gateway passes tool results to the model as text: send "
                f'{{"type": "text", "text": ...}} blocks (got {_kind(part)}).',
            )
        texts.append(part_text(part, f"{where}.content.{n}", noun="block"))
    return "\n".join(texts), is_error


def _image_url(block: Mapping[str, Any], where: str) -> str:
    source = block.get("source")
    kind = source.get("type") if type(source) is dict else None
    if kind == "base64":
        assert type(source) is dict
        media, data = source.get("media_type"), source.get("data")
        if type(media) is str and type(data) is str:
            return f"data:{media};base64,{data}"
    elif kind == "url":
        assert type(source) is dict
        url = source.get("url")
        if type(url) is str and url.startswith(("http://", "https://")):
            return url
    raise field_error(
        f"{where}.source",
        'an image needs a source {"type": "base64", "media_type": ..., "data": ...} or '
        '{"type": "url", "url": "https://..."} (file ids are not supported here).',
    )


def _document(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A document as an OpenAI content part: a PDF as a `file` part, plain text as text."""
    source = block.get("source")
    kind = source.get("type") if type(source) is dict else None
    if type(source) is dict and kind == "base64":
        media, data = source.get("media_type"), source.get("data")
        if type(media) is str and type(data) is str:
            title = block.get("title")
            name = title if type(title) is str and title else "document.pdf"
            return {
                "type": "file",
                "file": {"filename": name, "file_data": f"data:{media};base64,{data}"},
            }
    elif type(source) is dict and kind == "text" and type(source.get("data")) is str:
        return {"type": "text", "text": source["data"]}
    raise field_error(
        f"{where}.source",
        'a document needs a source {"type": "base64", "media_type": "application/pdf", '
        '"data": ...} or {"type": "text", "media_type": "text/plain", "data": ...}.',
    )


# --- errors --------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    if type(value) is dict:
        return f"type {shown(value.get('type'))}"
    return json_type(value)


def _choices(values: Sequence[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _orphan(
    where: str,
    call_id: str,
    opened_by: int,
    made_at: Mapping[str, tuple[int, int]],
    answered_at: Mapping[str, tuple[int, int]],
) -> GatewayError:
    made = made_at.get(call_id)
    if call_id in answered_at and made is not None and made[0] == opened_by:
        i, n = answered_at[call_id]
        why = f"messages.{i}.content.{n} already answered that call"
    elif made is not None:
        why = (
            f"that tool_use is messages.{made[0]}.content.{made[1]}, and a result must be in "
            "the user message right after the assistant message that made the call"
        )
    else:
        why = "no assistant message before it has a tool_use with that id"
    return field_error(
        f"{where}.tool_use_id",
        f"the tool_result for {call_id!r} answers no pending call: {why}. Send each result "
        "once, in the user message right after the tool_use, or remove it "
        "(strict_tool_results is on, so orphan results are refused rather than dropped).",
        code="orphan_tool_result",
    )


def _missing(
    pending: Mapping[str, ToolCall],
    made_at: Mapping[str, tuple[int, int]],
    *,
    before: int | None,
) -> GatewayError:
    call = next(iter(pending.values()))
    i, n = made_at[call.id]
    where = f"by messages.{before}" if before is not None else "(the request ends after it)"
    return field_error(
        f"messages.{i}.content.{n}.id",
        f"the tool_use {call.id!r} of tool {call.name!r} has no tool_result {where}; every "
        'tool_use needs one: send {"type": "tool_result", "tool_use_id": '
        f'"{call.id}", "content": ...}} in the user message right after it (or remove '
        "the tool_use).",
        code="missing_tool_result",
    )
