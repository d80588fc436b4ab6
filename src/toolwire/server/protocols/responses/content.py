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
from toolwire.server.protocols.checks import field_error, json_type, part_text, shown, text_content

__all__ = ["assistant_text", "output_text", "plain_text", "user_message"]

_USER_PARTS: Final = ("input_text", "input_image", "input_file")


def user_message(item: dict[str, Any], where: str) -> UserMessage:
    content = item.get("content")
    if type(content) is str:
        return UserMessage(content=content)
    if type(content) is not list:
        raise field_error(
            f"{where}.content",
            f"must be a string or an array of content parts, not {json_type(content)}.",
        )
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
            got = shown(kind) if type(part) is dict else json_type(part)
            raise field_error(
                f"{at}.type" if type(part) is dict else at,
                "a user content part must be an object whose 'type' is one of "
                f"{', '.join(repr(t) for t in _USER_PARTS)}; got {got}.",
            )
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
    texts: list[str] = []
    for n, part in enumerate(content):
        kind = part.get("type") if type(part) is dict else None
        if kind in ("output_text", "input_text"):
            texts.append(part_text(part, f"{where}.content[{n}]"))
        elif kind != "refusal":
            raise field_error(
                f"{where}.content[{n}]",
                'an assistant content part must be {"type": "output_text", "text": ...} '
                f"(or a 'refusal' part); got {shown(part)}.",
            )
    return "\n".join(texts)


def plain_text(item: dict[str, Any], where: str, role: str) -> str:
    return text_content(item, where, role, part_type="input_text")


def output_text(item: dict[str, Any], where: str) -> str:
    output = item.get("output")
    if type(output) is str:
        return output
    if type(output) is list:
        texts = []
        for n, part in enumerate(output):
            if type(part) is not dict or part.get("type") not in ("input_text", "output_text"):
                raise field_error(
                    f"{where}.output[{n}]",
                    "a function_call_output here takes text only: a string or "
                    f'{{"type": "input_text", "text": ...}} parts; got {shown(part)}.',
                )
            texts.append(part_text(part, f"{where}.output[{n}]"))
        return "\n".join(texts)
    raise field_error(
        f"{where}.output",
        f"must be the call's result as a string (or input_text parts), not {json_type(output)}.",
    )
