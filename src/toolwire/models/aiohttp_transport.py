"""An httpx transport on aiohttp, for the gateway's upstream traffic.

The model clients speak httpx. Behind a busy gateway, httpcore's pool costs a syscall per
pooled connection on every request (its expiry check polls each socket) and its pure-Python
HTTP/1.1 parser handles every chunk of a stream on its own; aiohttp's connector and C
parser do neither, which roughly triples the requests per second one gateway process can
relay. Errors are mapped onto httpx's exception classes, so the model clients report them
the same way whichever transport is used.

`pooled_client()` builds the client: on aiohttp when it is installed (the `server`
extra), plain httpx otherwise. The model clients send through such a client without httpx
at all (`raw_transport`, `AiohttpTransport.send`): building httpx's request and response
objects was about a tenth of the gateway's CPU per relayed request.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AiohttpTransport", "RawResponse", "pooled_client", "raw_transport"]


def pooled_client(*, timeout: float, max_connections: int = 1024) -> httpx.AsyncClient:
    """A pooled client for many concurrent upstream requests.

    Args:
        timeout: Seconds to wait for a connection and between bytes received.
        max_connections: Most connections open at once (all hosts).
    """
    timeouts = httpx.Timeout(timeout, connect=min(timeout, 10.0))
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return _RelayClient(
            timeout=timeouts,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=256),
        )
    transport = AiohttpTransport(max_connections=max_connections)
    client = _RelayClient(timeout=timeouts, transport=transport)
    client.raw = transport
    return client


def raw_transport(client: httpx.AsyncClient) -> AiohttpTransport | None:
    """The aiohttp transport of a client from `pooled_client`, to send without httpx; None
    for any other client (one a user passed: its hooks, auth and headers must apply)."""
    return client.raw if type(client) is _RelayClient else None


class _NoCookies(httpx.Cookies):
    def extract_cookies(self, response: httpx.Response) -> None:
        return None


_NO_COOKIES = _NoCookies()


class _RelayClient(httpx.AsyncClient):
    """A client that keeps no cookies: upstream cookies must not leak from one gateway
    caller to the next, and reading them cost ~7% of the CPU of a relayed request."""

    raw: AiohttpTransport | None = None
    """Its transport, when it is aiohttp (see `raw_transport`)."""

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, value: object) -> None:
        return None


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Sends httpx requests with one shared `aiohttp.ClientSession` (created on first use,
    inside the running event loop)."""

    def __init__(self, *, max_connections: int = 1024, keepalive: float = 30.0) -> None:
        self._max_connections = max_connections
        self._keepalive = keepalive
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, keepalive_timeout=self._keepalive
            )
            # No cookies, no auto-decompression, no env proxies: a relay, not a browser.
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                trust_env=False,
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._open()
        timeout = request.extensions.get("timeout", {})
        with _mapped(request):
            response = await session.request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                data=request.content or None,
                allow_redirects=False,
                compress=False,
                timeout=_client_timeout(
                    timeout.get("connect"), timeout.get("read"), timeout.get("pool")
                ),
            ).__aenter__()
        return httpx.Response(
            status_code=response.status,
            headers=[(k, v) for k, v in response.raw_headers],
            stream=_ResponseStream(response, request),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def send(
        self,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        limits: httpx.Timeout,
    ) -> RawResponse:
        """POST `content` and return the response once its headers are in (body unread).

        Raises:
            httpx.HTTPError: The request failed (aiohttp's errors mapped as in `send`).
        """
        session = self._open()
        with _mapped(None):
            response = await session.request(
                "POST",
                url,
                headers=headers,
                data=content,
                allow_redirects=False,
                compress=False,
                skip_auto_headers=_SKIP_AUTO_HEADERS,
                timeout=_client_timeout(limits.connect, limits.read, limits.pool),
            ).__aenter__()
        return RawResponse(response)

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


# Bodies are read as sent (the session does not decompress): never ask for compression.
_SKIP_AUTO_HEADERS = ("Accept-Encoding",)
_TIMEOUTS: dict[tuple[float | None, ...], aiohttp.ClientTimeout] = {}


def _client_timeout(
    connect: float | None, read: float | None, pool: float | None
) -> aiohttp.ClientTimeout:
    """aiohttp's timeouts for httpx's (one object per distinct set, made once)."""
    key = (connect, read, pool)
    found = _TIMEOUTS.get(key)
    if found is None:
        import aiohttp

        found = _TIMEOUTS[key] = aiohttp.ClientTimeout(
            sock_connect=connect, sock_read=read, connect=pool
        )
    return found


class RawResponse:
    """What the model clients read of an upstream response, straight from aiohttp: the
    status, the headers (case-insensitive), the body in pieces, and `aclose`."""

    __slots__ = ("_response", "headers", "status_code")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code: int = response.status
        self.headers: Mapping[str, str] = response.headers

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        return _body(self._response, None)

    async def aclose(self) -> None:
        _release(self._response)


async def _body(
    response: aiohttp.ClientResponse, request: httpx.Request | None
) -> AsyncIterator[bytes]:
    with _mapped(request):
        # Whatever has arrived, up to 64 KB at a time: many small SSE events in one
        # piece rather than one Python round trip per HTTP chunk.
        async for data in response.content.iter_any():
            yield data


def _release(response: aiohttp.ClientResponse) -> None:
    # Release returns a fully read connection to the pool; a response left unread
    # (the client went away mid-stream) is closed instead.
    if response.content.at_eof():
        response.release()
    else:
        response.close()


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    def __aiter__(self) -> AsyncIterator[bytes]:
        return _body(self._response, self._request)

    async def aclose(self) -> None:
        _release(self._response)


@contextlib.contextmanager
def _mapped(request: httpx.Request | None) -> Iterator[None]:
    """aiohttp's exceptions as the httpx ones the model clients handle."""
    import aiohttp

    try:
        yield
    except (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError) as exc:
        raise httpx.ConnectError(f"SSL: {exc}", request=request) from exc
    except aiohttp.ClientConnectorError as exc:
        # aiohttp's own text names "ssl:default" even for plain HTTP; say what failed.
        cause = exc.os_error
        reason = os.strerror(cause.errno) if cause.errno else str(cause)
        raise httpx.ConnectError(reason, request=request) from exc
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(str(exc) or "connect timeout", request=request) from exc
    except aiohttp.SocketTimeoutError as exc:
        raise httpx.ReadTimeout(str(exc) or "read timeout", request=request) from exc
    except aiohttp.ServerTimeoutError as exc:
        raise httpx.ReadTimeout(str(exc) or "timeout", request=request) from exc
    except aiohttp.ServerDisconnectedError as exc:
        raise httpx.RemoteProtocolError(
            "the server closed the connection", request=request
        ) from exc
    except aiohttp.ClientPayloadError as exc:
        raise httpx.RemoteProtocolError(
            f"incomplete response body ({exc})", request=request
        ) from exc
    except aiohttp.InvalidURL as exc:
        raise httpx.UnsupportedProtocol(str(exc), request=request) from exc
    except aiohttp.ClientError as exc:
        raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
