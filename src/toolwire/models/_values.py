"""Small readers of untrusted JSON values and one-line texts, shared by the wire modules
and the model clients."""

from __future__ import annotations

from typing import Any

__all__ = ["as_int", "json_type", "one_line", "snippet", "str_or_none"]


def str_or_none(value: Any) -> str | None:
    """`value` if it is a non-empty string, else `None`."""
    return value if isinstance(value, str) and value else None


def as_int(value: Any) -> int:
    """`value` if it is an integer (not a boolean), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def json_type(value: Any) -> str:
    """What kind of JSON value `value` is, for error messages ("a string", "null", ...)."""
    if value is None:
        return "null"
    return {
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def one_line(text: str, limit: int = 300) -> str:
    """`text` with its whitespace collapsed, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def snippet(content: bytes, limit: int = 200) -> str:
    """The start of a body, quoted on one line, for error messages."""
    text = content.decode("utf-8", "replace")
    return repr(one_line(text, limit)) if text.strip() else "(empty)"
