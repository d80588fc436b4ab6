"""Result cache for read tools with a `cache_ttl`.

The runner talks to a `ResultCache` only through `get` / `set` of serialized JSON bytes, so a
SQLite, PostgreSQL or Redis store can replace the in-memory one without touching the runner.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from toolwire.tools.context import ToolContext

__all__ = ["MemoryResultCache", "ResultCache", "cache_key"]


class ResultCache(Protocol):
    """Where cached tool results live. Values are the result serialized as JSON."""

    async def get(self, key: str) -> bytes | None:
        """The stored value, or `None` when missing or expired."""
        ...

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        """Store `value` for `ttl` seconds."""
        ...


class MemoryResultCache:
    """A bounded in-process TTL cache (least recently used entries go first).

    Args:
        max_entries: How many results to keep at most.
        clock: Monotonic seconds; injectable so tests can move time forward.
    """

    def __init__(
        self, *, max_entries: int = 1024, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._entries: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._max_entries = max_entries
        self._clock = clock

    async def get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()


def cache_key(
    tool_name: str, arguments: dict[str, Any], ctx: ToolContext, *, shared: bool = False
) -> str:
    """A key from the tool, its canonical arguments and who is calling.

    A read tool may answer with the caller's own data: through the forwarded token (an
    HTTP tool with `forward_auth`), by the key's name, or by what the key's scopes allow.
    So unless the tool declares its results `cache_shared`, the key holds a digest of all
    of them: two callers, or one gateway key forwarding two end users' tokens, never get
    each other's result. The token itself is never part of the key (it may be stored in a
    shared cache), only its hash.
    """
    canonical = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    if shared:
        return f"{tool_name}\x1fshared\x1f{canonical}"
    who = "\x1f".join(
        (ctx.principal or "", ctx.auth_token or "", ",".join(sorted(ctx.scopes)))
    ).encode()
    return f"{tool_name}\x1f{hashlib.sha256(who).hexdigest()}\x1f{canonical}"
