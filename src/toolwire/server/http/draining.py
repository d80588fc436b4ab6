"""Ending open requests cleanly when a shutdown's drain deadline passes.

On SIGTERM the HTTP server stops accepting connections and lets requests in flight run
for the drain period; past it, it cancels them, which would cut a stream mid-event. The
server calls `Drain.expire()` just before that: each stream registered here is
interrupted and ends with its protocol's error event, and a request still waiting for
its answer gets a 503 the client can retry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Final

from starlette.requests import Request

__all__ = ["SHUTDOWN_MESSAGE", "Drain", "drain_of"]

SHUTDOWN_MESSAGE: Final = (
    "The gateway is shutting down and ended this request before it finished; retry it."
)
_CANCEL_MSG: Final = "toolwire: drain deadline passed"


class Drain:
    """The requests a shutdown must end before the server cancels them."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()
        self.expired = False

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Register the current task for the duration of the block."""
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - always inside a task under ASGI
            yield
            return
        self._tasks.add(task)
        try:
            yield
        finally:
            self._tasks.discard(task)

    def interrupted(self, exc: asyncio.CancelledError) -> bool:
        """Whether `exc` is this drain's interruption; if so the current task is
        un-cancelled so it can still send its final event."""
        if not self.expired or _CANCEL_MSG not in exc.args:
            return False
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return True

    def expire(self) -> int:
        """Interrupt every registered request; returns how many there were."""
        self.expired = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel(msg=_CANCEL_MSG)
        return len(tasks)

    def __len__(self) -> int:
        return len(self._tasks)


_NO_DRAIN: Final = Drain()


def drain_of(request: Request | None) -> Drain:
    """The app's drain (a never-expiring one for apps built without it)."""
    if request is None:
        return _NO_DRAIN
    drain = getattr(request.app.state, "drain", None)
    return drain if isinstance(drain, Drain) else _NO_DRAIN
