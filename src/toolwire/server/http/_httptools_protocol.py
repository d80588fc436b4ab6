"""uvicorn's httptools protocol with the header deadline and the JSON 400 (kept apart so
that a missing `httptools` only makes `toolwire.server.http.serving` fall back to h11)."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolwire.server.http.header_deadline import HeaderDeadline, header_timeout, send_bad_request

__all__ = ["HttpToolsWithHeaderDeadline"]


class HttpToolsWithHeaderDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol with the header deadline and the JSON 400."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._deadline = HeaderDeadline(self, header_timeout(config))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline.arm(partial=False)

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)
        self._deadline.after_data(before)

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline.disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        send_bad_request(self.transport)
