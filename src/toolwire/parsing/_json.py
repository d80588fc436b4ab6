"""Strict JSON helpers shared by the format parsers."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from pydantic_core import from_json

__all__ = ["JsonEndScanner", "dumps", "loads", "loads_object", "string_run_end"]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str) -> Any:
    """Parse strict JSON (no NaN/Infinity); raises ValueError when it is not.

    pydantic-core's parser: as fast as orjson, and exact for integers beyond 64 bits
    (orjson turns them into floats, losing digits).
    """
    try:
        return from_json(text, allow_inf_nan=False)
    except ValueError:
        if "\\ud" not in text and "\\uD" not in text:
            raise
    # A lone surrogate escape ("\\ud800") is JSON the standard library accepts and
    # pydantic-core refuses; keep such an argument rather than lose the call.
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def loads_object(text: str) -> dict[str, Any] | None:
    """The JSON object in `text`, or None when `text` is not exactly one JSON object."""
    try:
        value = loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def dumps(value: Any) -> str:
    """Compact JSON text that `loads` turns back into `value`, types preserved."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_STRING_RUN = re.compile(r'(?:[^"\\]++|\\.)*+', re.DOTALL)


def string_run_end(text: str, i: int) -> int:
    """From `i` inside a JSON string (not right after a backslash): where the run of its
    characters ends, at its closing quote, at a backslash that ends the text (it escapes
    the first character of the next piece), or at `len(text)`.

    The one place the streaming scanners keep the string rules. Linear: without an escape
    before the closing quote (the common case) two searches decide; otherwise a pattern
    that never backtracks steps over the escape pairs (searching for the quote again past
    every escape would make a string of many escapes quadratic).
    """
    n = len(text)
    q = text.find('"', i)
    if text.find("\\", i, n if q < 0 else q) < 0:
        return n if q < 0 else q
    return _STRING_RUN.match(text, i).end()  # type: ignore[union-attr]  # matches ""


class JsonEndScanner:
    """Finds where a JSON value that starts with `{` or `[` ends, fed piece by piece.

    Tracks only nesting depth and string state, so each character is looked at once.
    `feed` returns the offset just past the closing bracket within the piece, or -1 while
    the value is still open. It does not validate; parse the text afterwards.
    """

    __slots__ = ("_depth", "_escape", "_in_string", "_started")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._started = False

    def feed(self, piece: str) -> int:
        depth, in_string, started = self._depth, self._in_string, self._started
        i = 0
        n = len(piece)
        while i < n:
            if in_string:
                if self._escape:
                    self._escape = False
                    i += 1
                    continue
                i = string_run_end(piece, i)
                if i < n:
                    in_string = piece[i] != '"'
                    self._escape = in_string
                    i += 1
                continue
            c = piece[i]
            if c == '"':
                in_string = True
            elif c in "{[":
                depth += 1
                started = True
            elif c in "}]":
                depth -= 1
                if started and depth <= 0:
                    self._depth, self._in_string, self._started = 0, False, True
                    return i + 1
            i += 1
        self._depth, self._in_string, self._started = depth, in_string, started
        return -1
