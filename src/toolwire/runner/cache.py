"""Result cache for read tools with a `cache_ttl`.

The runner talks to a `ResultCache` only through `get` / `set` of serialized JSON bytes, so a
SQLite or Redis store can replace the in-memory one without touching the runner.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import orjson

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


def cache_key(tool_name: str, arguments: dict[str, Any], principal: str | None) -> str:
    """A key from the tool, its canonical arguments and the caller.

    The caller is part of the key because a read tool may answer with the caller's own data
    (for example through the forwarded auth token); one caller must never get another's.
    """
    canonical = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    return f"{tool_name}\x1f{principal or ''}\x1f{canonical}"
