"""Noticing that a client went away, without a task per request.

ASGI tells an app that its client left only through `receive()`, so an app that stops
work for a client that left keeps a task waiting on it for every request: a task, its
first step, a future and a cancellation, 3% of a pass-through request's instructions.
On the gateway's own server protocol (`GatewayHttpProtocol`) the connection
says so itself: each request's scope carries its connection's `Disconnect`
(`scope["extensions"]["toolwire.disconnect"]["signal"]`), whose callbacks run when the
connection is lost. `on_disconnect` uses it where it is there, and a task waiting on `receive()`
on any other server (uvicorn's h11 protocol, another ASGI server, a test's transport).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Final

from starlette.types import Receive, Scope

__all__ = ["EXTENSION", "Disconnect", "on_disconnect"]

EXTENSION: Final = "toolwire.disconnect"
"""The scope extension whose `signal` is the request's connection's `Disconnect`."""


class Disconnect:
    """What runs when a connection is lost: each callback once, from the event loop."""

    __slots__ = ("_callbacks", "lost")

    def __init__(self) -> None:
        self._callbacks: set[Callable[[], object]] = set()
        self.lost = False

    def add(self, callback: Callable[[], object]) -> None:
        self._callbacks.add(callback)

    def discard(self, callback: Callable[[], object]) -> None:
        self._callbacks.discard(callback)

    def connection_lost(self) -> None:
        """The protocol's `connection_lost`: runs (and forgets) every callback."""
        self.lost = True
        callbacks, self._callbacks = self._callbacks, set()
        for callback in callbacks:
            callback()


def on_disconnect(
    scope: Scope, receive: Receive, callback: Callable[[], object]
) -> Callable[[], object]:
    """Call `callback` once if the request's client goes away, from the event loop (never
    inside the caller's task step); returns what stops watching.

    `receive` is the request's: read, where the server gives no `Disconnect`, until it says
    `http.disconnect` (anything else it yields is dropped: call this after the body was
    read).
    """
    extensions = scope.get("extensions")
    info = extensions.get(EXTENSION) if extensions else None
    signal = info.get("signal") if type(info) is dict else None
    loop = asyncio.get_running_loop()
    if isinstance(signal, Disconnect):
        if signal.lost:  # gone already: at the loop's next pass, as a listener would
            return loop.call_soon(callback).cancel
        signal.add(callback)
        return functools.partial(signal.discard, callback)

    async def listen() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        callback()

    return loop.create_task(listen()).cancel
