"""Writes a connection makes in one pass of the event loop, sent with one system call.

uvicorn writes a response's status line and headers, then its body, then (chunked) each
body message, each with its own `transport.write`, and a transport with nothing queued
sends every write at once. A JSON answer went out as two TCP segments, and the events of
a stream that the upstream sent together as one segment per event: each a system call
for the gateway (on loopback, the receiver's TCP work runs in the sender's call too) and
a wake-up for the client.

`BatchedWrites` holds the writes and sends them together when the response is complete
(the protocol calls `flush`) or when the event loop has run everything else that was
ready, whichever comes first: no write waits for anything but code that was already
running. The bytes and their order are the same: each body message is still its own
HTTP chunk; only how they are cut into TCP segments changes, which HTTP leaves open.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["BatchedWrites"]


class BatchedWrites:
    """A transport whose writes are sent together at the end of the event loop's pass
    (or at `flush`); everything but writing goes to the transport itself."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._scheduled = False
        # Bound once: uvicorn's flow control and receive call these on every request.
        self.is_closing = transport.is_closing
        self.pause_reading = transport.pause_reading
        self.resume_reading = transport.resume_reading
        self.get_extra_info = transport.get_extra_info

    def write(self, data: bytes | bytearray | memoryview) -> None:
        # A transport's caller may reuse its buffer once `write` returns; bytes it cannot.
        self._held.append(data if type(data) is bytes else bytes(data))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._pass_ended)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Send what is held now (a response is complete)."""
        held = self._held
        if held:
            self._held = []
            # The client may have gone since these were written (uvicorn checks before
            # each write): uvloop raises for a write to a closed transport.
            if not self.transport.is_closing():
                self.transport.write(held[0] if len(held) == 1 else b"".join(held))

    def _pass_ended(self) -> None:
        self._scheduled = False
        self.flush()

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def abort(self) -> None:
        self._held = []
        self.transport.abort()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + sum(len(d) for d in self._held)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)
