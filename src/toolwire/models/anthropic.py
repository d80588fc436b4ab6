"""`AnthropicModel`: the Anthropic Messages API over httpx, streaming included."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
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
MAX_RETRY_AFTER: Final = 10.0
"""A `Retry-After` longer than this many seconds is not waited for: the error is raised."""

_RETRY_TRANSPORT: Final = (httpx.NetworkError, httpx.ConnectTimeout, httpx.RemoteProtocolError)
"""Failures before any answer: the request can be sent again (a read timeout cannot, since
the upstream may still be working on it)."""


class AnthropicModel:
    """A Claude model behind the Anthropic Messages API (`POST /v1/messages`).

    Requests and answers are translated both ways: system messages become the top-level
    `system`, tool calls and results become `tool_use` / `tool_result` blocks, thinking
    becomes reasoning, and tool-call ids are rewritten to Anthropic's character set and
    mapped back. Every failure is raised as a `ModelError` whose text is one readable line;
    connection errors, 429, 5xx and 529 (overloaded) are retried with exponential backoff
    while no answer has started, `retries` times.

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
        base = base_url.strip().rstrip("/").removesuffix("/messages").removesuffix("/v1")
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
            response = await self._send(client, orjson.dumps(body), self._headers)
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
        headers = {**self._headers, "accept": "text/event-stream"}
        assembler = wire.MessageStreamAssembler(ids)
        async with self._http() as client:
            response = await self._send(client, orjson.dumps(body), headers)
            try:
                ctype = response.headers.get("content-type", "")
                if "text/event-stream" not in ctype and "json" in ctype:
                    # The server ignored stream=true and answered in one piece.
                    whole = self._parse_whole(await response.aread(), ids)
                    for event in _as_events(whole):
                        yield event
                    return
                async for data in _sse_data(response.aiter_lines()):
                    if assembler.done:
                        # Read to the end of the body (Anthropic closes it right after
                        # message_stop) so the pooled connection can serve the next request.
                        continue
                    for delta in assembler.feed(_decode(data)):
                        yield delta
            except httpx.HTTPError as exc:
                raise self._cut(exc) from None
            except wire.UpstreamError as exc:
                raise self._upstream(exc) from None
            except wire.WireError as exc:
                raise self._malformed(str(exc)) from None
            finally:
                await response.aclose()
        if not assembler.done:
            raise ModelError(
                f"The model at {self.base_url} ended mid-answer: the stream closed before "
                "message_stop.",
                retryable=True,
            )
        yield assembler.finish()

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
        self, client: httpx.AsyncClient, content: bytes, headers: Mapping[str, str]
    ) -> httpx.Response:
        """POST the request until a successful answer starts (status < 400), retrying what
        can be retried. The returned response is open: the caller reads and closes it."""
        attempt = 0
        while True:
            try:
                request = client.build_request(
                    "POST", self._url, content=content, headers=headers, timeout=self._timeout
                )
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                error = self._transport_error(exc)
                delay = self._retry_delay(attempt) if isinstance(exc, _RETRY_TRANSPORT) else None
            else:
                if response.status_code < 400:
                    return response
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

    def _retry_delay(self, attempt: int, headers: httpx.Headers | None = None) -> float | None:
        """Seconds to wait before retry number `attempt + 1`; `None` not to retry."""
        delay = self.retry_backoff * 2.0**attempt * random.uniform(0.75, 1.25)
        if headers is None:
            return delay
        if headers.get("x-should-retry", "").lower() == "false":
            return None
        after = _seconds(headers.get("retry-after"))
        if after is not None:
            if after > MAX_RETRY_AFTER:
                return None
            delay = max(delay, after)
        return delay

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


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
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


def _decode(data: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise wire.WireError(f"a stream event is not JSON: {_snippet(data.encode())}") from None


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: treated as absent
    return seconds if seconds >= 0 else None


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
