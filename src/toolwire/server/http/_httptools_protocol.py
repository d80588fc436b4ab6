"""The gateway's HTTP/1.1 server protocol: requests parsed by httptools (llhttp, the parser
uvicorn and Node.js use), served to the ASGI app, under uvicorn's `Server` (its sockets,
lifespan, signals, graceful shutdown and `Date` header).

uvicorn's own httptools protocol, with the header deadline, the JSON 400, write batching
and the disconnect signal added on top, cost ~150k instructions per request, more than a
third of what the Starlette mock spends answering one; a bare protocol doing the same
HTTP work costs ~55k. This one keeps every behaviour the tests pin, and does per request
only what a request needs:

- **One timer per connection**, not two per request. uvicorn arms a keep-alive timer
  after each response and cancels it at the next bytes; the header deadline armed and
  cancelled one more. Here each state change stores a timestamp, and one timer, when it
  fires, checks what the connection is waiting for: the first request's headers
  (`header_timeout`, closed quietly), a next request's headers once some of it arrived
  (`header_timeout`, a 408), or a next request at all (`timeout_keep_alive`, closed
  quietly). While a request is served no timer runs.
- **Write batching** (see `write_batching`): the head and the body messages of one pass of
  the event loop go out in one `write`; the last body message sends at once.
- **The disconnect signal** (see `disconnect`): each request's scope carries its
  connection's `Disconnect`, whose callbacks run when the connection is lost.
- **A request's body** is handed to the app from the parser's buffers, with no event to
  wait on when it came with the head, as almost every API request's does.

Not served: protocol upgrades (WebSocket; no route of the gateway takes one: the request
is answered as plain HTTP and the connection closes after it) and uvicorn's
`limit_concurrency` (the gateway's own limits apply per key and in total).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import re
import urllib.parse
from collections import deque
from collections.abc import Callable
from typing import Any, Final, cast

import httptools
import uvicorn
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.utils import get_local_addr, get_remote_addr, is_ssl
from uvicorn.server import ServerState

from toolwire.server.http.disconnect import EXTENSION, Disconnect
from toolwire.server.http.header_deadline import (
    REQUEST_TIMEOUT,
    header_timeout,
    send_bad_request,
)
from toolwire.server.http.write_batching import BatchedWrites

__all__ = ["GatewayHttpProtocol"]

logger = logging.getLogger("uvicorn.error")

_HIGH_WATER: Final = 64 * 1024
"""Bytes of request body held unread before the connection stops reading."""
_BAD_NAME: Final = re.compile(b'[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"]')
_BAD_VALUE: Final = re.compile(b"[\x00-\x08\x0a-\x1f\x7f]")
"""What a response header's name or value must not hold (uvicorn's rules: no response
splitting through a header an app copied from its input)."""
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
_LAST_CHUNK: Final = b"0\r\n\r\n"
_SERVER_ERROR: Final = (
    b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 21\r\n\r\nInternal Server Error"
)


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


_STATUS_LINES: Final = {status: _status_line(status) for status in range(100, 600)}

# The server's default headers (`Date`, `Server`) encoded once per list: uvicorn's main
# loop replaces the list each second. One tuple, swapped whole: servers in several threads
# (tests) may share it.
_defaults: tuple[list[tuple[bytes, bytes]] | None, bytes] = (None, b"")


def _default_headers(state: ServerState) -> bytes:
    global _defaults
    headers = state.default_headers
    cached = _defaults
    if cached[0] is not headers:
        cached = (headers, b"".join(b"%s: %s\r\n" % (name, value) for name, value in headers))
        _defaults = cached
    return cached[1]


class GatewayHttpProtocol(asyncio.Protocol):
    """One HTTP/1.1 connection (see the module's text). uvicorn's `Server` makes one per
    connection, as it would its own protocol class (`uvicorn.Config(http=...)`)."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not config.loaded:
            config.load()
        self.config = config
        self.app = config.loaded_app
        # uvicorn's proxy-headers middleware changes nothing in a request that carries no
        # `x-forwarded-*` header: such a request (almost every one) goes past it.
        self._plain_app = self.app.app if isinstance(self.app, ProxyHeadersMiddleware) else self.app
        self._forwarded = False
        self.loop = _loop or asyncio.get_event_loop()
        self.server_state = server_state
        self.app_state = app_state
        self.root_path = config.root_path
        self._raw_root = config.root_path.encode("ascii")
        self._keep_alive_timeout = float(config.timeout_keep_alive)
        self._header_timeout = header_timeout(config)
        self.parser = httptools.HttpRequestParser(self)
        # Answer the first of pipelined requests sent after `Connection: close`.
        with contextlib.suppress(AttributeError):  # httptools < 0.6.3
            self.parser.set_dangerous_leniencies(lenient_data_after_close=True)

        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.writes: BatchedWrites = None  # type: ignore[assignment]
        self.cycle: _Cycle | None = None
        """The request parsed last (served, being served, or waiting in `_pipeline`)."""
        self._pipeline: deque[_Cycle] = deque()
        self._read_paused = False
        self._write_paused = False
        self._writable: asyncio.Event | None = None
        self._disconnect = Disconnect()
        self._extension: dict[object, object] = {"signal": self._disconnect}
        self._asgi = {"version": config.asgi_version, "spec_version": "2.3"}
        self._server: tuple[str, int | None] | None = None
        self._client: tuple[str, int] | None = None
        self._scheme = "http"

        # The next request's head: its parts, and when its first byte came.
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._expect_100 = False
        self._head_started = False
        self._head_since = 0.0
        self._served_one = False
        self._idle_since = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # --- the connection ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not `asyncio.Transport` subclasses, only alike.)
        # The writes of one pass of the loop go out together (see `write_batching`).
        self.writes = BatchedWrites(cast(asyncio.Transport, transport), self.loop)
        self.transport = cast(asyncio.Transport, self.writes)
        self.server_state.connections.add(self)  # type: ignore[arg-type]
        self._server = get_local_addr(self.transport)
        self._client = get_remote_addr(self.transport)
        self._scheme = "https" if is_ssl(self.transport) else "http"
        self._idle_since = self.loop.time()
        self._arm()

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Not served: the head is answered as plain HTTP, and what follows it belongs
            # to another protocol, so the connection ends with that answer.
            cycle = self.cycle
            if cycle is not None:
                cycle.keep_alive = False
                if cycle.more_body:
                    cycle.more_body = False
                    cycle.wake()
            self.pause_reading()
        except httptools.HttpParserError:  # a callback's error too (HttpParserCallbackError)
            logger.warning("Invalid HTTP request received.")
            send_bad_request(self.transport)

    def eof_received(self) -> None:
        return None  # the transport closes: a half-closed client has left

    def connection_lost(self, exc: Exception | None) -> None:
        self.server_state.connections.discard(self)
        for cycle in (self.cycle, *self._pipeline):
            if cycle is not None and not cycle.complete:
                cycle.disconnected = True
                cycle.wake()
        self._pipeline.clear()
        self._write_paused = False
        if self._writable is not None:
            self._writable.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if exc is None:
            self.transport.close()
        self._disconnect.connection_lost()
        self.parser = None  # type: ignore[assignment]

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: close when idle, else after the current response."""
        cycle = self.cycle
        if cycle is None or cycle.complete:
            self.transport.close()
        else:
            cycle.keep_alive = False
            for queued in self._pipeline:
                queued.keep_alive = False

    # --- flow control --------------------------------------------------------------------

    def pause_writing(self) -> None:
        self._write_paused = True
        if self._writable is None:
            self._writable = asyncio.Event()
        self._writable.clear()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._writable is not None:
            self._writable.set()

    async def drain(self) -> None:
        if self._write_paused and self._writable is not None:
            await self._writable.wait()

    def pause_reading(self) -> None:
        if not self._read_paused:
            self._read_paused = True
            if not self.transport.is_closing():
                self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self._read_paused:
            self._read_paused = False
            if not self.transport.is_closing():
                self.transport.resume_reading()

    # --- the deadlines -------------------------------------------------------------------

    def _arm(self) -> None:
        """Make sure the timer fires by the deadline of what the connection waits for (one
        timer: one that fires early finds what is left and waits again)."""
        due = self._due()
        timer = self._timer
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        self._timer = self.loop.call_at(due, self._expire)

    def _due(self) -> float:
        if self._head_started:
            return self._head_since + self._header_timeout
        if self._served_one:
            return self._idle_since + self._keep_alive_timeout
        return self._idle_since + self._header_timeout

    def _busy(self) -> bool:
        cycle = self.cycle
        return cycle is not None and (not cycle.complete or bool(self._pipeline))

    def _expire(self) -> None:
        self._timer = None
        transport = self.transport
        if self._busy() or transport.is_closing():
            return  # the response's end arms it again
        if self.loop.time() < (due := self._due()):
            self._timer = self.loop.call_at(due, self._expire)
            return
        if self._head_started:  # part of a request came, but not its whole head
            transport.write(REQUEST_TIMEOUT)
        transport.close()

    # --- the parser's callbacks ----------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = []
        self._expect_100 = False
        self._forwarded = False
        self._head_started = True
        self._head_since = self.loop.time()
        self._arm()

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self._expect_100 = True
        elif name == b"x-forwarded-for" or name == b"x-forwarded-proto":
            self._forwarded = True
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._head_started = False
        parser = self.parser
        version = parser.get_http_version()
        url = httptools.parse_url(self._url)
        raw_path = url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        scope = {
            "type": "http",
            "asgi": self._asgi,
            "http_version": version,
            "server": self._server,
            "client": self._client,
            "scheme": self._scheme,
            "method": parser.get_method().decode("ascii"),
            "root_path": self.root_path,
            "path": self.root_path + path,
            "raw_path": self._raw_root + raw_path,
            "query_string": url.query or b"",
            "headers": self._headers,
            "state": self.app_state.copy(),
            "extensions": {EXTENSION: self._extension},
        }
        keep_alive = version != "1.0" and parser.should_keep_alive()
        previous = self.cycle
        app = self.app if self._forwarded else self._plain_app
        self.cycle = cycle = _Cycle(self, app, scope, keep_alive, self._expect_100)
        if previous is None or previous.complete:
            self._start(cycle)
        else:  # pipelined: served once the one before it has been answered
            self._pipeline.append(cycle)
            self.pause_reading()

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if cycle is None or cycle.complete:
            return  # answered already: the rest of its body is read and dropped
        cycle.body.append(body)
        cycle.size += len(body)
        if cycle.size > _HIGH_WATER:
            self.pause_reading()
        cycle.wake()

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if cycle is None or cycle.complete:
            return
        cycle.more_body = False
        cycle.wake()

    # --- requests ------------------------------------------------------------------------

    def _start(self, cycle: _Cycle) -> None:
        task = self.loop.create_task(cycle.run())
        tasks = self.server_state.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def response_complete(self) -> None:
        self.server_state.total_requests += 1
        self._served_one = True
        if self.transport.is_closing():
            return
        self.resume_reading()
        if self._pipeline:
            self._start(self._pipeline.popleft())
            return
        self._idle_since = self.loop.time()
        self._arm()


class _Cycle:
    """One request and its response."""

    __slots__ = (
        "app",
        "body",
        "chunked",
        "complete",
        "disconnected",
        "expect_100",
        "head_only",
        "keep_alive",
        "left",
        "more_body",
        "protocol",
        "read",
        "scope",
        "size",
        "started",
        "waiter",
    )

    def __init__(
        self,
        protocol: GatewayHttpProtocol,
        app: Callable[..., Any],
        scope: dict[str, Any],
        keep_alive: bool,
        expect_100: bool,
    ) -> None:
        self.protocol = protocol
        self.app = app
        self.scope = scope
        self.keep_alive = keep_alive
        self.expect_100 = expect_100
        self.body: list[bytes] = []
        self.size = 0
        self.more_body = True
        self.read = False
        """The whole body was handed to the app."""
        self.head_only = scope["method"] == "HEAD"
        self.waiter: asyncio.Future[None] | None = None
        self.disconnected = False
        self.started = False
        self.complete = False
        self.chunked = False
        self.left = -1
        """Body bytes the response may still send (its `content-length`; -1 when chunked)."""

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def run(self) -> None:
        try:
            result = await self.app(self.scope, self.receive, self.send)
        except BaseException as exc:  # uvicorn's rule: logged, never out of the task
            logger.error("Exception in ASGI application\n", exc_info=exc)
            if not self.started and not self.disconnected:
                self._fail()
            else:
                self.protocol.transport.close()
            return
        if result is not None:
            logger.error("ASGI callable should return None, but returned '%s'.", result)
            self.protocol.transport.close()
        elif not self.started and not self.disconnected:
            logger.error("ASGI callable returned without starting response.")
            self._fail()
        elif not self.complete and not self.disconnected:
            logger.error("ASGI callable returned without completing response.")
            self.protocol.transport.close()

    def _fail(self) -> None:
        transport = self.protocol.transport
        if not transport.is_closing():
            transport.write(_SERVER_ERROR)
            transport.close()

    async def receive(self) -> dict[str, Any]:
        protocol = self.protocol
        if self.expect_100:
            self.expect_100 = False
            if not protocol.transport.is_closing():
                protocol.transport.write(_CONTINUE)
        # Body bytes, the body's end, or (all of it handed over) the client leaving or the
        # response ending: whichever comes first is what ASGI's `receive` says next.
        while not (
            self.body or self.disconnected or self.complete or not (self.more_body or self.read)
        ):
            protocol.resume_reading()
            self.waiter = protocol.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        if self.disconnected or self.complete:
            return {"type": "http.disconnect"}
        body = self.body
        data = body[0] if len(body) == 1 else b"".join(body)
        self.body = []
        self.size = 0
        more = self.more_body
        self.read = not more
        return {"type": "http.request", "body": data, "more_body": more}

    async def send(self, message: dict[str, Any]) -> None:
        protocol = self.protocol
        if protocol._write_paused and not self.disconnected:
            await protocol.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(
                    f"Expected ASGI message 'http.response.start', but got '{kind}'."
                )
            self.started = True
            self.expect_100 = False
            self._head(message["status"], message.get("headers", ()))
            return
        if self.complete:
            raise RuntimeError(
                f"Unexpected ASGI message '{kind}' sent, after response already completed."
            )
        if kind != "http.response.body":
            raise RuntimeError(f"expected ASGI message 'http.response.body', got '{kind}'")
        body: bytes = message.get("body", b"")
        more = message.get("more_body", False)
        if self.head_only:
            self.left = 0
        elif self.chunked:
            if body:
                protocol.transport.write(b"%x\r\n%b\r\n" % (len(body), body))
            if not more:
                protocol.transport.write(_LAST_CHUNK)
        elif body:
            if len(body) > self.left:
                raise RuntimeError("Response content longer than Content-Length")
            self.left -= len(body)
            protocol.transport.write(body)
        if more:
            return
        if self.left > 0:
            raise RuntimeError("Response content shorter than Content-Length")
        self.complete = True
        protocol.writes.flush()  # the answer's last bytes go now, not after the loop's pass
        self.wake()
        if not self.keep_alive:
            protocol.transport.close()
        protocol.response_complete()

    def _head(self, status: int, headers: Any) -> None:
        head = [_STATUS_LINES.get(status) or _status_line(status)]
        head.append(_default_headers(self.protocol.server_state))
        closing = False
        for name, value in headers:
            if _BAD_NAME.search(name):
                raise RuntimeError("Invalid HTTP header name.")
            if _BAD_VALUE.search(value):
                raise RuntimeError("Invalid HTTP header value.")
            name = name.lower()
            if name == b"content-length":
                if self.left < 0 and not self.chunked:
                    self.left = int(value.decode())
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self.left = -1
                self.chunked = True
            elif name == b"connection" and b"close" in (
                token.strip() for token in value.lower().split(b",")
            ):
                self.keep_alive = False
                closing = True
            head.append(b"%s: %s\r\n" % (name, value))
        if not self.keep_alive and not closing:
            head.append(b"connection: close\r\n")
        if self.left < 0 and not self.chunked:
            if self.head_only or status in (204, 304):
                self.left = 0  # no body
            else:
                self.chunked = True
                head.append(b"transfer-encoding: chunked\r\n")
        head.append(b"\r\n")
        self.protocol.transport.write(b"".join(head))
