"""The header deadline: uvicorn times out idle keep-alive connections but not a client
that sends its request headers slowly or never (slowloris). The protocol classes here
close such a connection after `header_timeout` seconds, with a 408 when part of a request
had arrived, and answer a request the HTTP parser refuses with the gateway's JSON 400.
They also send the writes of one pass of the event loop together (`BatchedWrites`)."""

from __future__ import annotations

import asyncio
from typing import Any, Final, cast

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolwire.server.http.write_batching import BatchedWrites

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "REQUEST_TIMEOUT",
    "H11WithHeaderDeadline",
    "HeaderDeadline",
    "HeaderDeadlineMixin",
    "header_timeout",
    "send_bad_request",
]

DEFAULT_HEADER_TIMEOUT: Final = 10.0
_BAD_REQUEST_BODY: Final = (
    b'{"error": {"message": "Invalid HTTP request received (a malformed request line, '
    b"header or chunked body, or a URL or header over the server's limit).\", "
    b'"type": "invalid_request_error", "param": null, "code": "invalid_http"}}'
)
_BAD_REQUEST: Final = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: " + str(len(_BAD_REQUEST_BODY)).encode() + b"\r\n\r\n" + _BAD_REQUEST_BODY
)
"""What the server answers a request it cannot parse: JSON like every other error (uvicorn's
own answer is plain text), then the connection closes as uvicorn's does."""
REQUEST_TIMEOUT: Final = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: 112\r\n\r\n"
    b'{"error": {"message": "The request headers did not arrive in time.", '
    b'"type": "invalid_request_error", "code": "timeout"}}'
)


class HeaderDeadline:
    """Closes the connection when a request's headers take longer than `seconds`.

    Armed when a connection opens and when the first bytes of a next request arrive;
    disarmed when the protocol starts a new request cycle (headers complete).
    """

    def __init__(self, protocol: Any, seconds: float) -> None:
        self._protocol = protocol
        self._seconds = seconds
        self._timer: asyncio.TimerHandle | None = None
        self._partial = False

    def arm(self, *, partial: bool) -> None:
        self._partial = self._partial or partial
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._seconds, self._expired)

    def disarm(self) -> None:
        self._partial = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def after_data(self, cycle_before: Any) -> None:
        cycle: Any = self._protocol.cycle
        if cycle is not cycle_before and cycle is not None:
            self.disarm()  # a new request's headers are complete
        elif cycle is None or cycle.response_complete:
            self.arm(partial=True)  # between requests: part of a next one arrived

    def _expired(self) -> None:
        self._timer = None
        transport = self._protocol.transport
        if transport is None or transport.is_closing():
            return
        cycle = self._protocol.cycle
        if cycle is not None and not cycle.response_complete:
            return  # headers arrived; the request is being served
        if self._partial:
            transport.write(REQUEST_TIMEOUT)
        transport.close()


def header_timeout(config: uvicorn.Config) -> float:
    value = getattr(config, "header_timeout", DEFAULT_HEADER_TIMEOUT)
    return float(value)


class HeaderDeadlineMixin(asyncio.Protocol):
    """The header deadline and the JSON 400 for one of uvicorn's HTTP protocol classes
    (put first among the bases: `class P(HeaderDeadlineMixin, H11Protocol)`)."""

    config: uvicorn.Config
    transport: asyncio.Transport
    cycle: Any
    _deadline: HeaderDeadline
    _writes: BatchedWrites

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not `asyncio.Transport` subclasses, only alike.)
        self._writes = BatchedWrites(cast(asyncio.Transport, transport), asyncio.get_running_loop())
        super().connection_made(cast(asyncio.Transport, self._writes))
        self._deadline = HeaderDeadline(self, header_timeout(self.config))
        self._deadline.arm(partial=False)

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)
        self._deadline.after_data(before)

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline.disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        self._writes.flush()  # the response's last bytes go now, not after the loop's pass
        super().on_response_complete()  # type: ignore[misc]

    def send_400_response(self, msg: str) -> None:
        send_bad_request(self.transport)


class H11WithHeaderDeadline(HeaderDeadlineMixin, H11Protocol):
    """uvicorn's h11 protocol with the header deadline and the JSON 400."""


def send_bad_request(transport: asyncio.Transport) -> None:
    """Answer a request the HTTP parser refused with the gateway's JSON 400, and close."""
    if not transport.is_closing():
        transport.write(_BAD_REQUEST)
        transport.close()
