"""The content of one Responses input item → text (or a user message with parts).

Responses content parts (`input_text`, `input_image`, `input_file`, `output_text`)
become what toolwire's messages hold: text, and for a user message with images or files
the Chat Completions parts an OpenAI-compatible upstream takes (`image_url`, `file`).
Content that needs OpenAI's own storage (file ids) is refused with a 400 saying what to
send instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from toolwire.models.messages import UserMessage
from toolwire.server.protocols.checks import (
    field_error,
    json_type,
    part_text,
    part_type_error,
    string_or_parts,
    text_content,
    text_parts,
    user_parts,
)

__all__ = ["assistant_text", "output_text", "plain_text", "user_message"]

_USER_PARTS: Final = ("input_text", "input_image", "input_file")


def user_message(item: dict[str, Any], where: str) -> UserMessage:
    content = user_parts(item, where)
    if isinstance(content, str):
        return UserMessage(content=content)
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    plain = True
    for n, part in enumerate(content):
        at = f"{where}.content[{n}]"
        kind = part.get("type") if type(part) is dict else None
        if kind == "input_text":
            text = part_text(part, at)
            texts.append(text)
            parts.append({"type": "text", "text": text})
        elif type(kind) is str and kind in _MEDIA:
            parts.append(_media_part(part, at, _MEDIA[kind]))
            plain = False
        else:
            raise part_type_error(part, at, _USER_PARTS)
    # Text parts are separate blocks to the model: keep them apart when flattening.
    return UserMessage(content="\n".join(texts), parts=None if plain else tuple(parts))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Media:
    """How a Responses image or file part becomes a Chat Completions part."""

    source: str
    """The part's field holding the URL or data (required, a non-empty string)."""
    kind: str
    """The Chat Completions part's type, which is also the key of its object."""
    key: str
    """The name of `source` in that object."""
    option: str
    """An optional string field copied as it is."""
    advice: str
    """The 400's message when `source` is missing."""


_MEDIA: Final = {
    "input_image": _Media(
        source="image_url",
        kind="image_url",
        key="url",
        option="detail",
        advice="an input_image needs 'image_url' (an https or data: URL); file ids need "
        "OpenAI's file storage, which this gateway does not have.",
    ),
    "input_file": _Media(
        source="file_data",
        kind="file",
        key="file_data",
        option="filename",
        advice="an input_file needs 'file_data' (the file as a data: URL); file ids and URLs "
        "need OpenAI's file storage, which this gateway does not have.",
    ),
}


def _media_part(part: dict[str, Any], at: str, media: _Media) -> dict[str, Any]:
    value = part.get(media.source)
    if type(value) is not str or not value:
        raise field_error(f"{at}.{media.source}", media.advice)
    payload: dict[str, Any] = {media.key: value}
    option = part.get(media.option)
    if type(option) is str:
        payload[media.option] = option
    return {"type": media.kind, media.kind: payload}


def assistant_text(item: dict[str, Any], where: str) -> str | None:
    content = item.get("content")
    if content is None or type(content) is str:
        return content
    if type(content) is not list:
        raise field_error(
            f"{where}.content",
            f"must be a string or an array of output_text parts, not {json_type(content)}.",
        )
    return text_parts(
        content,
        f"{where}.content",
        ("output_text", "input_text"),
        'an assistant content part must be {"type": "output_text", "text": ...} '
        "(or a 'refusal' part)",
        skip="refusal",
    )


def plain_text(item: dict[str, Any], where: str, role: str) -> str:
    return text_content(item, where, role, part_type="input_text")


def output_text(item: dict[str, Any], where: str) -> str:
    return string_or_parts(
        item.get("output"),
        f"{where}.output",
        ("input_text", "output_text"),
        part_need="a function_call_output here takes text only: a string or "
        '{"type": "input_text", "text": ...} parts',
        need="must be the call's result as a string (or input_text parts)",
    )
