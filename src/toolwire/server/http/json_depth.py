"""The gateway's one rule for how deeply a request's JSON may nest.

orjson reads up to 1,024 levels but writes at most 254: a body it accepted could make
the gateway fail later, when it writes that data back out (to the upstream, the store,
a response, a log line). Each front door's body is checked here as soon as it is parsed,
so every door refuses it the same way, with a 400 in its own shape.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

__all__ = ["MAX_JSON_DEPTH", "JsonTooDeep", "loads_text", "text_too_deep", "too_deep"]

MAX_JSON_DEPTH: Final = 128
"""Arrays and objects inside each other, the body itself counting as one. Half of what
orjson can write (254): a value from a request is written back wrapped in the gateway's
own objects (a stored response, an upstream request, an audit record), and the room
left for that wrapping must not depend on where the value ends up. No real client
nests this deep; JSON Schemas of real tools stay under 20."""


def too_deep(value: Any, raw: bytes | None = None, *, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Where `value` nests deeper than `limit`: the top-level key or index under which
    it does (`""` for the value itself), or `None` when it does not.

    `raw`, the text `value` was parsed from, makes the usual case cheap: a text with at
    most `limit` opening brackets cannot nest deeper, and counting them is done in C.
    """
    if raw is not None and raw.count(b"[") + raw.count(b"{") <= limit:
        return None
    if not _deeper_than(value, limit):
        return None
    # Rare (a refusal): find the top-level member at fault.
    members = value.items() if type(value) is dict else enumerate(value)
    for key, child in members:
        if _deeper_than(child, limit - 1):
            return key if type(key) is str else f"[{key}]"
    return ""


def _deeper_than(value: Any, limit: int) -> bool:
    # Level by level, never recursing (Python's own limit is lower than orjson's), with
    # the per-node work in comprehensions: a body of a million small arrays takes tens
    # of milliseconds, not a second.
    if type(value) is not dict and type(value) is not list:
        return False
    level: list[Any] = [value]
    depth = 1
    while depth <= limit:
        below: list[Any] = []
        for node in level:
            children = node.values() if type(node) is dict else node
            below += [c for c in children if type(c) is dict or type(c) is list]
        if not below:
            return False
        level = below
        depth += 1
    return True


class JsonTooDeep(ValueError):
    """JSON text nests deeper than the gateway's rule (or than orjson reads at all)."""


def loads_text(text: str, *, limit: int = MAX_JSON_DEPTH) -> Any:
    """`text` read as JSON, held to the depth rule: JSON a client sent inside a string
    (a tool call's arguments, a `tool_request` message).

    Raises:
        JsonTooDeep: It nests deeper than `limit`.
        orjson.JSONDecodeError: It is not JSON.
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        # Past 1,024 levels orjson refuses to read it; the model layer reads arguments
        # with other parsers too (Python's json raises RecursionError there).
        if "depth" in str(exc):
            raise JsonTooDeep(str(exc)) from None
        raise
    brackets = text.count("[") + text.count("{")
    if brackets > limit and too_deep(value, limit=limit) is not None:
        raise JsonTooDeep(f"nests more than {limit} levels")
    return value


def text_too_deep(text: str, *, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `text` is JSON that nests deeper than `limit`. Text that is not JSON is not:
    whoever reads it says what is wrong with it, as before."""
    if text.count("[") + text.count("{") <= limit:
        return False
    try:
        loads_text(text, limit=limit)
    except JsonTooDeep:
        return True
    except orjson.JSONDecodeError:
        return False
    return False
