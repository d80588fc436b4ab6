"""`AnthropicModel`: the Anthropic Messages API over httpx, streaming included."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any, Final

import httpx
import orjson

from toolwire.models import anthropic_wire as wire
from toolwire.models.base import ModelError, ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.call_ids import IdMap
from toolwire.models.messages import Message
from toolwire.parsing.events import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallStart
from toolwire.tools.tool import Tool

__all__ = ["AnthropicModel"]

DEFAULT_HINT = "Check the base URL and the network."
MAX_RETRY_AFTER: Final = 5.0
"""The longest `Retry-After` honoured (seconds); an upstream asking for more is not retried
and its error goes to the caller at once."""

_MAX_BACKOFF: Final = 8.0
_DRAIN_SECONDS: Final = 1.0

_RETRY_TRANSPORT: Final = (httpx.NetworkError, httpx.ConnectTimeout, httpx.RemoteProtocolError)
"""Failures before any response: the request can be sent again. A pooled keep-alive
connection the upstream closed just as it was reused shows up as one of these. Read timeouts
are not here: the upstream may still be working on the request."""


class _EndedMidAnswer(Exception):
    """The stream ended without `message_stop`."""


class AnthropicModel:
    """A Claude model behind the Anthropic Messages API (`POST /v1/messages`).

    Requests and answers are translated both ways: system messages become the top-level
    `system`, tool calls and results become `tool_use` / `tool_result` blocks, thinking
    becomes reasoning, and tool-call ids are rewritten to Anthropic's character set and
    mapped back. Every failure is raised as a `ModelError` whose text is one readable line.

    Connection errors, 429, 5xx and 529 (overloaded, also when reported as an `error` event
    of a stream) are retried `retries` times with exponential backoff and jitter, honouring
    a `Retry-After` of up to `MAX_RETRY_AFTER` seconds, but only while no part of the answer
    has reached the caller: once a delta was yielded, a failure ends the stream with a
    `ModelError` ("ended mid-answer"), never a silent truncation.

    Args:
        base_url: The API root, e.g. `https://api.anthropic.com` (a trailing `/v1` or
            `/v1/messages` is accepted too).
        api_key: Sent as `x-api-key`; never shown in errors or `repr`.
        model: The model name sent upstream.
        max_tokens: The answer's token limit when the request's settings give none
            (Anthropic requires one).
        timeout: Seconds to wait for the server (connecting, and between bytes received).
        retries: How many times a failed request is sent again before giving up.
        retry_backoff: Seconds before the first retry; each later one waits twice as long
            (with jitter), or as long as a short `Retry-After` asks.
        http_client: A client to use for every request (connection pooling, proxies); it
            is never closed by the model. Without one, `async with model:` keeps one
            pooled client open for the block, and otherwise each request opens its own.
        extra_headers: Headers added to every request (e.g. `anthropic-beta`).
        anthropic_version: The `anthropic-version` header.
        connect_hint: The advice appended to "could not reach" errors.
    """

    def __init__(
        self,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        model: str = "claude-sonnet-4-5",
        *,
        max_tokens: int = 4096,
        timeout: float = 120.0,
        retries: int = 2,
        retry_backoff: float = 0.2,
        http_client: httpx.AsyncClient | None = None,
        extra_headers: Mapping[str, str] | None = None,
        anthropic_version: str = "2023-06-01",
        connect_hint: str = DEFAULT_HINT,
    ) -> None:
        base = base_url.strip().rstrip("/").removesuffix("/v1/messages").removesuffix("/v1")
        self.base_url = base
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.retries = max(0, retries)
        self.retry_backoff = retry_backoff
        self._url = base + "/v1/messages"
        self._hint = connect_hint
        self._api_key = api_key or ""
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "anthropic-version": anthropic_version,
        }
        if api_key:
            self._headers["x-api-key"] = api_key
        self._headers.update(extra_headers or {})
        self._external_client = http_client
        self._client: httpx.AsyncClient | None = None

    @property
    def name(self) -> str:
        return self.model

    def __repr__(self) -> str:
        return f"AnthropicModel(base_url={self.base_url!r}, model={self.model!r})"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        ids = IdMap("anthropic")
        body = wire.build_request(
            self.model, messages, tools, settings, ids=ids, max_tokens=self.max_tokens
        )
        async with self._http() as client:
            response, _ = await self._send(client, orjson.dumps(body), self._headers)
            try:
                content = await response.aread()
            except httpx.HTTPError as exc:
                raise self._cut(exc) from None
            finally:
                await response.aclose()
        return self._parse_whole(content, ids)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        ids = IdMap("anthropic")
        body = wire.build_request(
            self.model, messages, tools, settings, ids=ids, max_tokens=self.max_tokens, stream=True
        )
        content = orjson.dumps(body)
        headers = {**self._headers, "accept": "text/event-stream"}
        async with self._http() as client:
            attempt = 0
            while True:
                response, attempt = await self._send(client, content, headers, attempt)
                assembler = wire.MessageStreamAssembler(ids)
                events: AsyncGenerator[str, None] | None = None
                yielded = False
                try:
                    ctype = response.headers.get("content-type", "")
                    if "text/event-stream" not in ctype and "json" in ctype:
                        # The server ignored stream=true and answered in one piece.
                        try:
                            whole = await response.aread()
                        except httpx.HTTPError as exc:
                            raise self._cut(exc) from None
                        for event in _as_events(self._parse_whole(whole, ids)):
                            yield event
                        return
                    events = _sse_data(response.aiter_lines())
                    try:
                        async for data in events:
                            for delta in assembler.feed(_decode(data)):
                                yielded = True
                                yield delta
                            if assembler.done:
                                break
                        if not assembler.done:
                            raise _EndedMidAnswer
                    except (httpx.HTTPError, _EndedMidAnswer, wire.UpstreamError) as exc:
                        # While nothing has reached the caller, the answer can start over.
                        if yielded or attempt >= self.retries or not _retry_midway(exc):
                            raise self._stream_error(exc) from None
                    except wire.WireError as exc:
                        raise self._malformed(str(exc)) from None
                    else:
                        yield assembler.finish()
                        await _drain(events)
                        return
                finally:
                    if events is not None:
                        await events.aclose()
                    await response.aclose()
                await asyncio.sleep(self._backoff(attempt))
                attempt += 1

    async def aclose(self) -> None:
        """Close the HTTP client this model owns (not one passed as `http_client`)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def __aenter__(self) -> AnthropicModel:
        if self._external_client is None and self._client is None:
            self._client = self._new_client()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- internals -------------------------------------------------------------------

    @asynccontextmanager
    async def _http(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._external_client is not None:
            yield self._external_client
        elif self._client is not None:
            yield self._client
        else:
            # Outside `async with model:` each request gets its own short-lived client, so
            # nothing is left open when the caller's event loop ends.
            async with self._new_client() as client:
                yield client

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self._timeout)

    async def _send(
        self,
        client: httpx.AsyncClient,
        content: bytes,
        headers: Mapping[str, str],
        attempt: int = 0,
    ) -> tuple[httpx.Response, int]:
        """POST the request until a successful answer starts (status < 400), retrying what
        can be retried while `attempt < self.retries`. The returned response is open (the
        caller reads and closes it), with the attempt number reached.

        Raises:
            ModelError: Out of retries, or a failure that is not retried.
        """
        while True:
            try:
                request = client.build_request(
                    "POST", self._url, content=content, headers=headers, timeout=self._timeout
                )
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                error = self._transport_error(exc)
                delay = self._backoff(attempt) if isinstance(exc, _RETRY_TRANSPORT) else None
            else:
                if response.status_code < 400:
                    return response, attempt
                try:
                    data = await response.aread()
                except httpx.HTTPError:
                    data = b""
                finally:
                    await response.aclose()
                error = self._status_error(response.status_code, data)
                delay = self._retry_delay(attempt, response.headers) if error.retryable else None
            if delay is None or attempt >= self.retries:
                raise error from None
            attempt += 1
            await asyncio.sleep(delay)

    def _backoff(self, attempt: int) -> float:
        delay = self.retry_backoff * 2.0**attempt * random.uniform(0.5, 1.5)
        return min(delay, _MAX_BACKOFF)

    def _retry_delay(self, attempt: int, headers: httpx.Headers) -> float | None:
        """Seconds to wait before the next attempt; `None` not to retry."""
        # Anthropic's own hint; its SDKs follow it too.
        should = headers.get("x-should-retry", "").lower()
        if should == "false":
            return None
        after = _retry_after(headers)
        if after is None:
            return self._backoff(attempt)
        return after if after <= MAX_RETRY_AFTER else None

    def _stream_error(self, exc: Exception) -> ModelError:
        if isinstance(exc, wire.UpstreamError):
            return self._upstream(exc)
        if isinstance(exc, httpx.HTTPError):
            return self._cut(exc)
        return ModelError(
            f"The model at {self.base_url} ended mid-answer: the stream closed before "
            "message_stop.",
            retryable=True,
        )

    def _parse_whole(self, content: bytes, ids: IdMap) -> ModelResponse:
        try:
            return wire.parse_message(orjson.loads(content), ids)
        except orjson.JSONDecodeError:
            raise self._malformed(f"the body is not JSON: {_snippet(content)}") from None
        except wire.UpstreamError as exc:
            raise self._upstream(exc) from None
        except wire.WireError as exc:
            raise self._malformed(str(exc)) from None

    def _transport_error(self, exc: httpx.HTTPError) -> ModelError:
        where = f"the model at {self.base_url}"
        if isinstance(exc, httpx.ConnectTimeout):
            return ModelError(
                f"Could not reach {where}: no answer within {self.timeout:g}s. {self._hint}",
                retryable=True,
            )
        if isinstance(exc, httpx.TimeoutException):
            return ModelError(
                f"The model at {self.base_url} did not answer within {self.timeout:g}s "
                "(timeout). Try again or raise the timeout.",
                retryable=True,
            )
        if isinstance(exc, httpx.ConnectError):
            return ModelError(
                f"Could not reach {where}: {_connect_reason(exc)}. {self._hint}", retryable=True
            )
        if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
            return ModelError(
                f"The base URL {self.base_url!r} is not a valid http(s) URL. {self._hint}"
            )
        reason = self._redact(_one_line(str(exc))) or type(exc).__name__
        return ModelError(
            f"The connection to the model at {self.base_url} failed: {reason}.", retryable=True
        )

    def _cut(self, exc: httpx.HTTPError) -> ModelError:
        """A failure after the answer started: never retried, never a silent truncation."""
        if isinstance(exc, httpx.TimeoutException):
            reason = f"nothing received for {self.timeout:g}s (timeout)"
        else:
            reason = self._redact(_one_line(str(exc))) or type(exc).__name__
            reason = f"the connection broke ({reason})"
        return ModelError(
            f"The model at {self.base_url} ended mid-answer: {reason}.", retryable=True
        )

    def _status_error(self, status: int, content: bytes) -> ModelError:
        try:
            body = wire.error_body(orjson.loads(content))
        except orjson.JSONDecodeError:
            body = None
        if body is not None:
            body = {**body, "message": self._redact(body["message"])}
            detail = body["message"]
        else:
            detail = _snippet(content) if content.strip() else "no details given"
        advice = {
            401: " Check the API key.",
            403: " Check the API key and its permissions.",
            404: f" Check the model name ({self.model!r}) and the base URL.",
            429: " The server is rate limiting; try again later.",
            529: " Anthropic is overloaded; try again later.",
        }.get(status, "")
        return ModelError(
            f"The model at {self.base_url} returned HTTP {status}: {detail.rstrip('.')}.{advice}",
            status=status,
            retryable=status == 429 or status >= 500,
            body=body,
        )

    def _upstream(self, exc: wire.UpstreamError) -> ModelError:
        body = {**exc.body, "message": self._redact(str(exc.body.get("message", "")))}
        status = exc.status
        return ModelError(
            f"The model at {self.base_url} reported an error: {body['message']}",
            status=status,
            retryable=status is not None and (status == 429 or status >= 500),
            body=body,
        )

    def _malformed(self, detail: str) -> ModelError:
        return ModelError(
            f"The model at {self.base_url} sent a response toolwire could not read: "
            f"{self._redact(detail)}."
        )

    def _redact(self, text: str) -> str:
        # An upstream (or a proxy in front of it) may echo the key back; never pass it on.
        if len(self._api_key) >= 8:
            return text.replace(self._api_key, "***")
        return text


def _as_events(response: ModelResponse) -> list[ModelStreamEvent]:
    msg = response.message
    events: list[ModelStreamEvent] = []
    if msg.reasoning:
        events.append(ReasoningDelta(msg.reasoning))
    if msg.content:
        events.append(ContentDelta(msg.content))
    for index, call in enumerate(msg.tool_calls):
        events.append(ToolCallStart(index, call.id, call.name))
        events.append(ToolCallArgsDelta(index, call.arguments))
    events.append(response)
    return events


async def _sse_data(lines: AsyncIterator[str]) -> AsyncGenerator[str, None]:
    """The `data` of each server-sent event (multi-line data joined with newlines).

    Anthropic's events also carry an `event:` name; the data repeats it as `type`."""
    buf: list[str] = []
    async for line in lines:
        if not line:
            if buf:
                yield "\n".join(buf)
                buf = []
            continue
        if line.startswith("data:"):
            value = line[5:]
            buf.append(value[1:] if value.startswith(" ") else value)
    if buf:
        yield "\n".join(buf)


def _retry_midway(exc: Exception) -> bool:
    """Whether a failure of a started stream (before any delta was yielded) is retried."""
    if isinstance(exc, wire.UpstreamError):
        # Anthropic reports overload as an error event in a 200 stream.
        return exc.status is not None and (exc.status == 429 or exc.status >= 500)
    return isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | _EndedMidAnswer)


async def _drain(events: AsyncIterator[str]) -> None:
    """Read what follows `message_stop` (normally just the end of the body), so the
    connection goes back to the pool instead of being closed. Gives up after a moment: a
    server that keeps the stream open costs a connection, not a hang."""
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in events:
                pass
    except (httpx.HTTPError, TimeoutError):
        pass


def _decode(data: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise wire.WireError(f"a stream event is not JSON: {_snippet(data.encode())}") from None


def _retry_after(headers: httpx.Headers) -> float | None:
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
    return _one_line(str(exc)) or "connection failed"


def _snippet(content: bytes, limit: int = 200) -> str:
    text = content.decode("utf-8", "replace")
    return repr(_one_line(text, limit)) if text.strip() else "(empty)"


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
