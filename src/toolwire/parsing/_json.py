"""Strict JSON helpers shared by the format parsers."""

from __future__ import annotations

import json
from typing import Any

import orjson
from pydantic_core import from_json

__all__ = ["JsonEndScanner", "dumps", "loads", "loads_object"]


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


class JsonEndScanner:
    """Finds where a JSON value that starts with `{` or `[` ends, fed piece by piece.

    Tracks only nesting depth and string/escape state, so each character is looked at
    once. `feed` returns the offset just past the closing bracket within the piece, or
    -1 while the value is still open. It does not validate; parse the text afterwards.
    """

    __slots__ = ("_depth", "_escape", "_in_string", "_started")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._started = False

    def feed(self, piece: str) -> int:
        depth, in_string, escape, started = (
            self._depth,
            self._in_string,
            self._escape,
            self._started,
        )
        i = 0
        n = len(piece)
        while i < n:
            if in_string:
                # Jump to the next quote or backslash instead of stepping per character.
                if escape:
                    escape = False
                    i += 1
                    continue
                q = piece.find('"', i)
                b = piece.find("\\", i)
                if q < 0 and b < 0:
                    i = n
                    break
                if b >= 0 and (q < 0 or b < q):
                    escape = True
                    i = b + 1
                    continue
                in_string = False
                i = q + 1
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
                    self._depth, self._in_string, self._escape, self._started = (
                        0,
                        False,
                        False,
                        True,
                    )
                    return i + 1
            i += 1
        self._depth, self._in_string, self._escape, self._started = (
            depth,
            in_string,
            escape,
            started,
        )
        return -1
