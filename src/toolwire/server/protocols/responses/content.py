"""The content of one Responses input item → text (or a user message with parts).

Responses content parts (`input_text`, `input_image`, `input_file`, `output_text`)
become what toolwire's messages hold: text, and for a user message with images or files
the Chat Completions parts an OpenAI-compatible upstream takes (`image_url`, `file`).
Content that needs OpenAI's own storage (file ids) is refused with a 400 saying what to
send instead.
"""

from __future__ import annotations

from typing import Any, Final

from toolwire.models.messages import UserMessage
from toolwire.server.protocols.checks import (
    field_error,
    json_type,
    part_text,
    part_type_error,
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
        elif kind == "input_image":
            parts.append(_image_part(part, at))
            plain = False
        elif kind == "input_file":
            parts.append(_file_part(part, at))
            plain = False
        else:
            raise part_type_error(part, at, _USER_PARTS)
    # Text parts are separate blocks to the model: keep them apart when flattening.
    return UserMessage(content="\n".join(texts), parts=None if plain else tuple(parts))


def _image_part(part: dict[str, Any], at: str) -> dict[str, Any]:
    url = part.get("image_url")
    if type(url) is not str or not url:
        raise field_error(
            f"{at}.image_url",
            "an input_image needs 'image_url' (an https or data: URL); file ids need "
            "OpenAI's file storage, which this gateway does not have.",
        )
    image: dict[str, Any] = {"url": url}
    detail = part.get("detail")
    if type(detail) is str:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _file_part(part: dict[str, Any], at: str) -> dict[str, Any]:
    data = part.get("file_data")
    if type(data) is not str or not data:
        raise field_error(
            f"{at}.file_data",
            "an input_file needs 'file_data' (the file as a data: URL); file ids and URLs "
            "need OpenAI's file storage, which this gateway does not have.",
        )
    file: dict[str, Any] = {"file_data": data}
    filename = part.get("filename")
    if type(filename) is str:
        file["filename"] = filename
    return {"type": "file", "file": file}


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
    output = item.get("output")
    if type(output) is str:
        return output
    if type(output) is list:
        return text_parts(
            output,
            f"{where}.output",
            ("input_text", "output_text"),
            "a function_call_output here takes text only: a string or "
            '{"type": "input_text", "text": ...} parts',
        )
    raise field_error(
        f"{where}.output",
        f"must be the call's result as a string (or input_text parts), not {json_type(output)}.",
    )
