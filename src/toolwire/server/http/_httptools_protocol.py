"""uvicorn's httptools protocol with the header deadline, the JSON 400 and the disconnect
signal (kept apart so that a missing `httptools` only makes
`toolwire.server.http.serving` fall back to h11)."""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolwire.server.http.disconnect import EXTENSION, Disconnect
from toolwire.server.http.header_deadline import HeaderDeadlineMixin

__all__ = ["HttpToolsWithHeaderDeadline"]


class HttpToolsWithHeaderDeadline(HeaderDeadlineMixin, HttpToolsProtocol):
    """uvicorn's httptools protocol with the header deadline, the JSON 400, and each
    request's scope carrying the connection's `Disconnect` (see
    `toolwire.server.http.disconnect`)."""

    _disconnect: Disconnect
    _extension: dict[object, object]
    """The extension's entry, made once per connection: every request on it shares it."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._disconnect = Disconnect()
        self._extension = {"signal": self._disconnect}
        super().connection_made(transport)

    def on_message_begin(self) -> None:
        super().on_message_begin()  # a new request's scope
        self.scope.setdefault("extensions", {})[EXTENSION] = self._extension

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._disconnect.connection_lost()
