"""Where sync tools run: a pool of their own, and a per-tool bound so no tool exhausts it.

`asyncio.to_thread` uses the loop's default executor, `min(32, cpus + 4)` threads — six on
a two-core machine — shared with everything else that uses it. Eight callers of one slow
sync tool then delayed an unrelated 70 ms tool by seconds. Sync tools get a dedicated pool
instead, and each tool may hold at most `per_tool` of its threads at once: the others wait
for that tool's turn, never for another tool's.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

__all__ = ["POOL_THREADS", "TOOL_THREADS", "run_sync"]

T = TypeVar("T")

POOL_THREADS: Final = 64
"""Threads of the shared pool of sync tools."""
TOOL_THREADS: Final = 8
"""Threads one sync tool may use at the same time (unless it declares its own bound)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
# One semaphore per event loop and tool: asyncio primitives belong to one loop.
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="toolwire-tool")
    return _pool


def _gate(name: str, limit: int) -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    gates = _gates.setdefault(loop, {})
    gate = gates.get(name)
    if gate is None:
        gate = gates[name] = asyncio.Semaphore(limit)
    return gate


async def run_sync(
    name: str, fn: Callable[..., T], /, *args: Any, limit: int = TOOL_THREADS, **kwargs: Any
) -> T:
    """Run the sync tool `name` (`fn(*args, **kwargs)`) on the tools' pool, at most `limit`
    calls of it at once. Context variables are carried into the thread, as `to_thread`
    does."""
    async with _gate(name, limit):
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(_executor(), call)
