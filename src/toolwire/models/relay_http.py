"""The gateway's upstream HTTP/1.1 client: pooled keep-alive connections on asyncio,
responses read by httptools' C parser (llhttp, the parser uvicorn and Node.js use).

A gateway relays one upstream request per request it serves, so the client's own cost per
request is a large part of the gateway's. Measured against the same Starlette mock,
aiohttp's request machinery (its request and response objects, multidicts, URL objects,
timers, tracing hooks and three Python calls per body chunk) cost about as much CPU as the
whole mock answering; httpcore costs more (a syscall per pooled connection per request to
check its expiry, a pure-Python parser). This client does what a relay needs and nothing
else: one `write` per request, one parser callback per body chunk, whatever arrived handed
on in one piece, no cookies, no redirects, no decompression, no proxies from the
environment. Errors are httpx's exception classes, so the model clients report them the
same way whichever client sends.

`pooled_client()` builds the client: on this transport when httptools is installed (the
`server` extra), plain httpx otherwise. The model clients send through it without httpx
(`raw_transport`, `RelayTransport.send`); other callers (the readiness probe) go through
httpx as usual.
"""

from __future__ import annotations

import asyncio
import os
import re
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Final, NamedTuple, TypeVar, cast, overload
from urllib.parse import quote, urlsplit

import httpx

try:
    import httptools
except ImportError:  # without the `server` extra the gateway's client is plain httpx
    _PARSER = False
else:
    _PARSER = True

__all__ = ["RawResponse", "RelayTransport", "pooled_client", "raw_transport"]

_HIGH_WATER: Final = 256 * 1024
"""Bytes of body held unread before the connection stops reading (back-pressure)."""
_MAX_HEAD: Final = 64 * 1024
"""The most bytes of status line and headers accepted from an upstream."""


def pooled_client(*, timeout: float, max_connections: int = 1024) -> httpx.AsyncClient:
    """A pooled client for many concurrent upstream requests.

    Args:
        timeout: Seconds to wait for a connection and between bytes received.
        max_connections: Most requests in flight at once (all hosts); more wait for one
            to end, for up to `timeout` seconds.
    """
    timeouts = httpx.Timeout(timeout, connect=min(timeout, 10.0))
    if not _PARSER:
        return _RelayClient(
            timeout=timeouts,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=256),
        )
    from toolwire import __version__

    transport = RelayTransport(
        max_connections=max_connections, user_agent=f"toolwire/{__version__}"
    )
    client = _RelayClient(timeout=timeouts, transport=transport)
    client.raw = transport
    return client


def raw_transport(client: httpx.AsyncClient) -> RelayTransport | None:
    """The transport of a client from `pooled_client`, to send without httpx; None for
    any other client (one a user passed: its hooks, auth and headers must apply)."""
    return client.raw if type(client) is _RelayClient else None


class _NoCookies(httpx.Cookies):
    def extract_cookies(self, response: httpx.Response) -> None:
        return None


_NO_COOKIES = _NoCookies()


class _RelayClient(httpx.AsyncClient):
    """A client that keeps no cookies: upstream cookies must not leak from one gateway
    caller to the next, and reading them cost ~7% of the CPU of a relayed request."""

    raw: RelayTransport | None = None
    """Its transport, when it is a `RelayTransport` (see `raw_transport`)."""

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, value: object) -> None:
        return None


# --- where a URL goes ----------------------------------------------------------------------


class _Target(NamedTuple):
    origin: tuple[str, str, int]
    """(scheme, host, port): the connections that can carry the request."""
    host: str
    """The Host header."""
    path: str
    """The request target: path and query."""


_TARGETS: dict[str, _Target] = {}
"""Parsed URLs: a gateway sends to a handful, again and again."""


def _target(url: str) -> _Target:
    found = _TARGETS.get(url)
    if found is not None:
        return found
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise httpx.InvalidURL(f"invalid URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise httpx.UnsupportedProtocol(f"URL {url!r} is not http or https")
    host = parts.hostname
    if not host:
        raise httpx.InvalidURL(f"URL {url!r} has no host")
    default = 443 if scheme == "https" else 80
    named = f"[{host}]" if ":" in host else host
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    if not path.isascii() or any(c in path for c in " \r\n\t"):
        path = quote(path, safe="/%:@!$&'()*+,;=?~-._")
    found = _Target(
        origin=(scheme, host, port or default),
        host=named if port in (None, default) else f"{named}:{port}",
        path=path,
    )
    if len(_TARGETS) >= 256:
        _TARGETS.clear()
    _TARGETS[url] = found
    return found


def _head(
    method: str,
    target: _Target,
    headers: Iterable[tuple[str, str]],
    length: int | None,
    user_agent: str,
) -> bytes:
    """The request line and headers: Host, User-Agent and Content-Length are added unless
    given (a given Content-Length or Transfer-Encoding is replaced: the body is sent
    whole)."""
    lines = [f"{method} {target.path} HTTP/1.1\r\n"]
    named: set[str] = set()
    for name, value in headers:
        lowered = name.lower()
        if lowered in ("content-length", "transfer-encoding"):
            continue
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            # A line break would let a value write headers of its own.
            raise httpx.LocalProtocolError(f"invalid header {name!r}: a name or value spans lines")
        named.add(lowered)
        lines.append(f"{name}: {value}\r\n")
    if "host" not in named:
        lines.insert(1, f"Host: {target.host}\r\n")
    if "user-agent" not in named:
        lines.append(f"User-Agent: {user_agent}\r\n")
    if length is not None:
        lines.append(f"Content-Length: {length}\r\n")
    lines.append("\r\n")
    return "".join(lines).encode()


# --- one connection ------------------------------------------------------------------------


class _Connection(asyncio.Protocol):
    """One keep-alive connection, carrying one request at a time: httptools' callbacks
    fill in the response, the reader waits on `waiter`."""

    def __init__(
        self, origin: tuple[str, str, int], pool: dict[tuple[str, str, int], list[_Connection]]
    ) -> None:
        self.origin = origin
        self.pool = pool
        """The idle lists it returns to: a pool closed or rebound since drops it."""
        self.transport: asyncio.Transport | None = None
        self.body: list[bytes] = []
        # httptools looks its callbacks up once: the body's is the list's own `append`,
        # so a stream of many small chunks costs no Python call per chunk.
        self.on_body = self.body.append
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.reset(no_body=False)

    def reset(self, *, no_body: bool) -> None:
        """Ready for the next request's response."""
        self.no_body = no_body
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.head_size = 0
        self.headed = False
        self.until_close = False
        self.informational = False
        self.body.clear()
        self.buffered = 0
        self.paused = False
        self.complete = False
        self.keep_alive = False
        self.broken = False
        self.error: httpx.HTTPError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.in_use = False

    # --- asyncio ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.in_use or self.complete:
            # Bytes nobody asked for: the connection can no longer be trusted.
            self.broken = True
            self._close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            # A callback's own error (headers too large) was kept first; `_fail` keeps it.
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP response from upstream: {exc}"))
            self._close()
        if self.body:
            if self.no_body:
                self.body.clear()
                return
            self.buffered += len(data)
            if self.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
                self.paused = True
                self.transport.pause_reading()
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.in_use and not self.complete:
            if self.headed and self.until_close:
                self.complete = True  # a body without a length ends where the connection does
                self._wake()
            elif self.headed:
                self._fail(httpx.RemoteProtocolError("incomplete response body"))
            else:
                self._fail(httpx.RemoteProtocolError("the server closed the connection"))

    # --- httptools ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            self.broken = True  # a second response to one request

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_size += len(name) + len(value)
        if self.head_size > _MAX_HEAD:
            error = httpx.RemoteProtocolError("the upstream's response headers are too large")
            self._fail(error)
            raise error  # stops the parser
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # An interim response (103 Early Hints): the real one follows.
            self.informational = True
            self.raw_headers = []
            self.head_size = 0
            return
        self.status = status
        self.headed = True
        if self.no_body:
            self.complete = True  # HEAD: no body, whatever the headers say
            self.broken = True
        else:
            framed = any(
                name.lower() in (b"content-length", b"transfer-encoding")
                for name, _ in self.raw_headers
            )
            self.until_close = not framed and status not in (204, 304)
        self._wake()

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
            return
        self.keep_alive = self.parser.should_keep_alive()
        self.complete = True
        self._wake()

    # --- for the transport -------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: httpx.HTTPError) -> None:
        if self.error is None:
            self.error = error
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def take(self) -> bytes:
        """The body received since the last call, in one piece."""
        body = self.body
        data = body[0] if len(body) == 1 else b"".join(body)
        body.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    def reusable(self) -> bool:
        return (
            self.complete
            and self.keep_alive
            and not self.broken
            and not self.closed
            and self.error is None
            and self.transport is not None
            and not self.transport.is_closing()
        )


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.ReadTimeout("read timeout"))


# --- the pool ------------------------------------------------------------------------------


class RelayTransport(httpx.AsyncBaseTransport):
    """Sends requests over pooled HTTP/1.1 keep-alive connections, one request per
    connection at a time; also an httpx transport for callers that use httpx.

    Args:
        max_connections: Most requests in flight at once, all hosts together.
        keepalive: Seconds an idle connection is kept for reuse.
        ssl_context: For https upstreams; the system's trust store by default (it honours
            `SSL_CERT_FILE` and `SSL_CERT_DIR`).
        user_agent: The User-Agent header of requests that name none.
    """

    def __init__(
        self,
        *,
        max_connections: int = 1024,
        keepalive: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        user_agent: str = "toolwire",
    ) -> None:
        self._user_agent = user_agent
        self._max_connections = max_connections
        self._keepalive = keepalive
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None

    async def send(
        self,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        limits: httpx.Timeout,
    ) -> RawResponse:
        """POST `content` and return the response once its headers are in (body unread).

        Raises:
            httpx.HTTPError: The request failed (httpx's exception classes).
        """
        target = _target(url)
        head = _head("POST", target, headers.items(), len(content), self._user_agent)
        return await self._exchange(target, head, content, limits, no_body=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = _target(str(request.url))
        content = await request.aread()
        method = request.method
        length = len(content) if content or method in ("POST", "PUT", "PATCH") else None
        head = _head(method, target, request.headers.multi_items(), length, self._user_agent)
        limits = request.extensions.get("timeout", {})
        timeouts = httpx.Timeout(
            None,
            connect=limits.get("connect"),
            read=limits.get("read"),
            write=limits.get("write"),
            pool=limits.get("pool"),
        )
        try:
            response = await self._exchange(
                target, head, content, timeouts, no_body=method == "HEAD"
            )
        except httpx.HTTPError as exc:
            exc.request = request
            raise
        return httpx.Response(
            status_code=response.status_code,
            headers=response._conn.raw_headers,
            stream=_ResponseStream(response, request),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        """Close the idle connections; those in use close when their response is done.
        The transport stays usable: a later request opens new connections."""
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for conn in connections:
                conn._close()

    # --- one exchange ------------------------------------------------------------------

    async def _exchange(
        self,
        target: _Target,
        head: bytes,
        content: bytes,
        limits: httpx.Timeout,
        *,
        no_body: bool,
    ) -> RawResponse:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._bind(loop)
        slots = self._slots
        assert slots is not None
        if slots.locked():
            try:
                async with asyncio.timeout(limits.pool):
                    await slots.acquire()
            except TimeoutError:
                raise httpx.PoolTimeout(
                    f"all {self._max_connections} upstream connections stayed busy"
                ) from None
        else:
            await slots.acquire()
        conn: _Connection | None = None
        try:
            conn = self._pooled(target.origin) or await self._connect(target.origin, limits)
            conn.reset(no_body=no_body)
            conn.in_use = True
            transport = conn.transport
            assert transport is not None
            if len(content) < 65536:
                transport.write(head + content)
            else:
                transport.writelines((head, content))
            while not conn.headed:
                if conn.error is not None:
                    raise conn.error
                await _wait(conn, limits.read)
        except BaseException:
            if conn is not None:
                conn._close()
                conn.in_use = False
            slots.release()
            raise
        return RawResponse(self, conn, limits.read)

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        # Connections belong to the loop that opened them: another loop (a test's next
        # one, a worker's) starts a pool of its own.
        for connections in self._idle.values():
            for conn in connections:
                conn.closed = True
        self._idle = {}
        self._loop = loop
        self._slots = asyncio.Semaphore(self._max_connections)

    def _pooled(self, origin: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        expired = time.monotonic() - self._keepalive
        while idle:
            conn = idle.pop()
            if conn.closed or conn.idle_since < expired or conn.transport is None:
                conn._close()
                continue
            if conn.transport.is_closing():
                conn.closed = True
                continue
            return conn
        return None

    async def _connect(self, origin: tuple[str, str, int], limits: httpx.Timeout) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls: ssl.SSLContext | None = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            tls = self._ssl
        try:
            async with asyncio.timeout(limits.connect):
                _, conn = await loop.create_connection(
                    lambda: _Connection(origin, self._idle),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout("connect timeout") from None
        except (ssl.SSLError, ssl.CertificateError) as exc:
            raise httpx.ConnectError(f"SSL: {exc}") from exc
        except OSError as exc:
            raise httpx.ConnectError(_reason(exc)) from exc
        return conn

    def _release(self, conn: _Connection) -> None:
        if not conn.in_use:
            return
        conn.in_use = False
        slots = self._slots
        if conn.reusable() and conn.pool is self._idle:
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.origin, []).append(conn)
        else:
            conn._close()
        if slots is not None:
            slots.release()


async def _wait(conn: _Connection, seconds: float | None) -> None:
    """Until the connection has news (headers, body, the end, a failure), at most
    `seconds` (httpx.ReadTimeout)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    conn.waiter = waiter
    timer = loop.call_later(seconds, _expire, waiter) if seconds is not None else None
    try:
        await waiter
    finally:
        conn.waiter = None
        if timer is not None:
            timer.cancel()


_ERRNO = re.compile(r"\[Errno (\d+)\]")


def _reason(exc: OSError) -> str:
    """Why a connection failed, in words ("Connection refused")."""
    if isinstance(exc.errno, int) and exc.errno > 0:
        return os.strerror(exc.errno)
    if exc.strerror:
        return exc.strerror
    text = str(exc)
    # Several addresses failed (IPv6 and IPv4): asyncio joins their messages.
    found = _ERRNO.search(text)
    return os.strerror(int(found.group(1))) if found else text or type(exc).__name__


_T = TypeVar("_T")


class _Headers(Mapping[str, str]):
    """Response headers by lower-case name (repeated ones joined with ", ")."""

    __slots__ = ("_items",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        items: dict[str, str] = {}
        for name, value in raw:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            items[key] = f"{items[key]}, {text}" if key in items else text
        self._items = items

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    @overload
    def get(self, name: str, /) -> str | None: ...
    @overload
    def get(self, name: str, /, default: str | _T) -> str | _T: ...
    def get(self, name: str, /, default: object = None) -> object:
        # Mapping's own `get` would raise and catch a KeyError for every absent header.
        return self._items.get(name.lower(), default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class RawResponse:
    """What the model clients read of an upstream response: the status, the headers
    (case-insensitive), the body in pieces, and `aclose` (which returns a fully read
    connection to the pool and closes any other)."""

    __slots__ = ("_conn", "_read", "_transport", "headers", "status_code")

    def __init__(self, transport: RelayTransport, conn: _Connection, read: float | None) -> None:
        self._transport = transport
        self._conn = conn
        self._read = read
        self.status_code: int = conn.status
        self.headers: Mapping[str, str] = _Headers(conn.raw_headers)

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives: everything received since the last piece, in one."""
        # An iterator of its own, not an async generator: asyncio keeps every async
        # generator in a weak set from its first step (its shutdown hook), a cost per
        # response that a body read in one piece, most of them, would notice.
        return _Pieces(self._conn, self._read)

    async def aclose(self) -> None:
        self._transport._release(self._conn)


class _Pieces:
    __slots__ = ("_conn", "_read")

    def __init__(self, conn: _Connection, read: float | None) -> None:
        self._conn = conn
        self._read = read

    def __aiter__(self) -> _Pieces:
        return self

    async def __anext__(self) -> bytes:
        conn = self._conn
        while True:
            if conn.body:
                return conn.take()
            if conn.complete:
                raise StopAsyncIteration
            if conn.error is not None:
                raise conn.error
            if not conn.in_use:
                raise httpx.StreamClosed()
            await _wait(conn, self._read)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, response: RawResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self._response.aiter_bytes():
                yield piece
        except httpx.HTTPError as exc:
            exc.request = self._request
            raise

    async def aclose(self) -> None:
        await self._response.aclose()
