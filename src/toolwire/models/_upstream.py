"""What the HTTP model clients share: the client they send with, POST with retries before
the first byte, and failures as one-line `ModelError`s.

`OpenAIChatModel` and `AnthropicModel` each hold one `Upstream` and keep only what their
protocol adds: the request and answer formats, and how a started stream can fail.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final, Protocol

import httpx

from toolwire.models._values import one_line
from toolwire.models.base import ModelError, ModelResponse, ModelStreamEvent
from toolwire.models.events import (
    ModelContentDelta,
    ModelReasoningDelta,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.relay_http import raw_transport

__all__ = [
    "MAX_RESPONSE_BYTES",
    "MAX_RETRY_AFTER",
    "RETRY_TRANSPORT",
    "EndedMidAnswer",
    "Upstream",
    "UpstreamResponse",
    "as_events",
    "drain",
]

MAX_RESPONSE_BYTES: Final = 32 * 1024 * 1024
"""The default cap on an upstream answer: a whole body, or one event of a stream."""
MAX_ERROR_BODY: Final = 64 * 1024
"""Bytes of an error answer read (its message is at the start)."""

MAX_RETRY_AFTER: Final = 5.0
"""The longest `Retry-After` honoured (seconds); an upstream asking for more is not retried
and its error goes to the caller at once."""

_MAX_BACKOFF: Final = 8.0

RETRY_TRANSPORT: Final = (httpx.NetworkError, httpx.ConnectTimeout, httpx.RemoteProtocolError)
"""Failures before any response: the request can be sent again. A pooled keep-alive
connection the upstream closed just as it was reused shows up as one of these. Read timeouts
are not here: the upstream may still be working on the request."""


class EndedMidAnswer(Exception):
    """A stream ended before the protocol's end marker."""


class UpstreamResponse(Protocol):
    """What the model clients read of a response: an `httpx.Response`, or the gateway's
    `RawResponse` (sent without httpx, see `raw_transport`)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class Upstream:
    """One model endpoint: where to POST, with which client, how often to retry.

    Args:
        base_url: The API root, for messages.
        url: Where requests are POSTed.
        timeout: Seconds to wait for the server (connecting, and between bytes received).
        retries: How many times a failed request is sent again.
        retry_backoff: Seconds before the first retry; each later one waits twice as long.
        http_client: A client to use for every request, never closed here.
        hint: The advice appended to "could not reach" errors.
        secret: The API key, blanked out of every message should the upstream echo it.
        max_response_bytes: The largest answer read (a whole body, or one event of a
            stream); a larger one fails the request instead of filling the memory.
    """

    def __init__(
        self,
        *,
        base_url: str,
        url: str,
        timeout: float,
        retries: int,
        retry_backoff: float,
        http_client: httpx.AsyncClient | None,
        hint: str,
        secret: str | None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.base_url = base_url
        self.max_response_bytes = max_response_bytes
        self.url = url
        self.timeout = timeout
        self.retries = max(0, retries)
        self.retry_backoff = retry_backoff
        self.hint = hint
        self._secret = secret or ""
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._external_client = http_client
        self._client: httpx.AsyncClient | None = None

    # --- the client ------------------------------------------------------------------

    def client(self) -> tuple[httpx.AsyncClient, bool]:
        """The client to use and whether this request owns it (and must close it)."""
        client = self._external_client or self._client
        if client is not None:
            return client, False
        # Outside `async with model:` each request gets its own short-lived client, so
        # nothing is left open when the caller's event loop ends.
        return httpx.AsyncClient(timeout=self._timeout), True

    def open_pool(self) -> None:
        """Keep one pooled client until `aclose` (unless one was given)."""
        if self._external_client is None and self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)

    async def aclose(self) -> None:
        """Close the pooled client this object opened (never one it was given)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    # --- sending ---------------------------------------------------------------------

    async def post(
        self,
        client: httpx.AsyncClient,
        content: bytes,
        headers: Mapping[str, str],
        attempt: int,
        status_error: Callable[[int, bytes], ModelError],
    ) -> tuple[UpstreamResponse, int]:
        """POST until a response below 400 comes back (its body unread, to be closed by the
        caller), retrying connection failures, 429 and 5xx while `attempt < retries`.

        Args:
            status_error: The error of a status of 400 or more, from its body.

        Returns:
            The response and the attempt number reached.

        Raises:
            ModelError: Out of retries, or a failure that is not retried.
        """
        raw = raw_transport(client)
        request = (
            client.build_request(
                "POST", self.url, content=content, headers=headers, timeout=self._timeout
            )
            if raw is None
            else None
        )
        while True:
            try:
                response: UpstreamResponse
                if raw is not None:
                    response = await raw.send(self.url, content, headers, self._timeout)
                else:
                    assert request is not None
                    response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                if attempt < self.retries and isinstance(exc, RETRY_TRANSPORT):
                    await asyncio.sleep(self.backoff(attempt))
                    attempt += 1
                    continue
                raise self.transport_error(exc, attempt + 1) from None
            status = response.status_code
            if status < 400:
                return response, attempt
            try:
                body = await self.read(response, limit=MAX_ERROR_BODY, cut=True)
            except httpx.HTTPError:
                body = b""
            finally:
                await response.aclose()
            error = status_error(status, body)
            if error.retryable and attempt < self.retries:
                delay = self.retry_delay(attempt, response.headers)
                if delay is not None:
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
            raise error

    async def read(
        self, response: UpstreamResponse, *, limit: int | None = None, cut: bool = False
    ) -> bytes:
        """The body of `response`, read up to `limit` bytes (`max_response_bytes`).

        Raises:
            ModelError: The body is larger (unless `cut`: then its start is returned).
            httpx.HTTPError: Reading failed.
        """
        cap = self.max_response_bytes if limit is None else limit
        declared = response.headers.get("content-length", "")
        if not cut and declared.isdigit() and int(declared) > cap:
            raise self.too_large(cap)
        parts: list[bytes] = []
        size = 0
        async for piece in response.aiter_bytes():
            size += len(piece)
            if size > cap:
                if cut:
                    parts.append(piece[: len(piece) - (size - cap)])
                    break
                raise self.too_large(cap)
            parts.append(piece)
        return b"".join(parts)

    def too_large(self, cap: int) -> ModelError:
        return ModelError(
            f"The upstream's answer is larger than {cap // (1024 * 1024)} MiB, the limit "
            "(upstream.max_response_bytes); it was not read. Ask for a shorter answer.",
            kind="too_large",
        )

    def backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter, capped."""
        delay: float = self.retry_backoff * (2**attempt) * (0.5 + random.random())
        return min(delay, _MAX_BACKOFF)

    def retry_delay(self, attempt: int, headers: Mapping[str, str]) -> float | None:
        """Seconds to wait before the next attempt; `None` not to retry (the upstream said
        so with `x-should-retry: false`, or asked to wait too long)."""
        if headers.get("x-should-retry", "").lower() == "false":
            return None
        after = retry_after(headers)
        if after is None:
            return self.backoff(attempt)
        return after if after <= MAX_RETRY_AFTER else None

    # --- errors ----------------------------------------------------------------------

    def redact(self, text: str) -> str:
        # An upstream (or a proxy in front of it) may echo the key back; never pass it on.
        if len(self._secret) >= 8:
            return text.replace(self._secret, "***")
        return text

    def transport_error(self, exc: httpx.HTTPError, attempts: int = 1) -> ModelError:
        """A failure to get a response at all."""
        where = f"the model at {self.base_url}"
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        if isinstance(exc, httpx.ConnectTimeout):
            return ModelError(
                f"Could not reach {where}: no answer within {self.timeout:g}s{tries}. {self.hint}",
                retryable=True,
                kind="unreachable",
            )
        if isinstance(exc, httpx.TimeoutException):
            return ModelError(
                f"The model at {self.base_url} did not answer within {self.timeout:g}s "
                "(timeout). Try again or raise the timeout.",
                retryable=True,
                kind="timeout",
            )
        if isinstance(exc, httpx.ConnectError):
            return ModelError(
                f"Could not reach {where}: {_connect_reason(exc)}{tries}. {self.hint}",
                retryable=True,
                kind="unreachable",
            )
        if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
            return ModelError(
                f"The base URL {self.base_url!r} is not a valid http(s) URL. {self.hint}"
            )
        reason = self.redact(one_line(str(exc))) or type(exc).__name__
        return ModelError(
            f"The connection to the model at {self.base_url} failed{tries}: {reason}.",
            retryable=True,
            kind="unreachable",
        )

    def malformed(self, detail: str) -> ModelError:
        """An answer toolwire could not read."""
        return ModelError(
            f"The model at {self.base_url} sent a response toolwire could not read: "
            f"{self.redact(detail)}.",
            kind="malformed",
        )


def as_events(response: ModelResponse) -> list[ModelStreamEvent]:
    """A whole response as the events a stream of it would have given."""
    msg = response.message
    events: list[ModelStreamEvent] = []
    if msg.reasoning:
        events.append(ModelReasoningDelta(msg.reasoning))
    if msg.content:
        events.append(ModelContentDelta(msg.content))
    for index, call in enumerate(msg.tool_calls):
        events.append(ModelToolCallStart(index, call.id, call.name))
        events.append(ModelToolCallArgsDelta(index, call.arguments))
    events.append(response)
    return events


async def drain(rest: AsyncIterator[Any], seconds: float) -> None:
    """Read what follows the end of an answer (normally just the end of the body), so the
    connection goes back to the pool instead of being closed. Gives up after `seconds`: a
    server that keeps the stream open costs a connection, not a wait."""
    try:
        async with asyncio.timeout(seconds):
            async for _ in rest:
                pass
    except (httpx.HTTPError, TimeoutError):
        pass


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait an upstream asked for (`retry-after-ms`, `Retry-After` seconds or date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _connect_reason(exc: httpx.ConnectError) -> str:
    text = str(exc).lower()
    if "refused" in text or "all connection attempts failed" in text:
        return "connection refused"
    if any(s in text for s in ("name or service", "nodename", "getaddrinfo", "name resolution")):
        return "host not found"
    if "ssl" in text or "certificate" in text:
        return "TLS handshake failed"
    return one_line(str(exc)) or "connection failed"
