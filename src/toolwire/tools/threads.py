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
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final, TypeVar

__all__ = ["POOL_THREADS", "TOOL_THREADS", "Execution", "current_execution", "run_sync"]

T = TypeVar("T")

POOL_THREADS: Final = 64
"""Threads of the shared pool of sync tools."""
TOOL_THREADS: Final = 8
"""Threads one sync tool may use at the same time (unless it declares its own bound)."""


class Execution:
    """What the runner learns about one call's thread: a thread cannot be stopped, so a
    call that times out (or whose client went away) may go on, and finish late."""

    __slots__ = ("left_running", "on_late_finish")

    def __init__(self) -> None:
        self.left_running = False
        """The call was given up while its thread still ran."""
        self.on_late_finish: Callable[[bool], None] | None = None
        """Called on the event loop when such a thread ends (`True`: it succeeded)."""


current_execution: contextvars.ContextVar[Execution | None] = contextvars.ContextVar(
    "toolwire_execution", default=None
)
"""Set by the runner around a call, read by `run_sync`."""

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
        loop = asyncio.get_running_loop()
        work = _executor().submit(context.run, fn, *args, **kwargs)
        try:
            return await asyncio.wrap_future(work, loop=loop)
        except asyncio.CancelledError:
            execution = current_execution.get()
            if execution is not None and not work.done() and not work.cancel():
                # Running in its thread: it goes on. Say so, and tell whoever asked when it
                # is really over.
                execution.left_running = True
                work.add_done_callback(
                    lambda done: loop.call_soon_threadsafe(_late, execution, done)
                )
            raise


def _late(execution: Execution, work: Future[Any]) -> None:
    if execution.on_late_finish is not None:
        execution.on_late_finish(work.exception() is None)
