"""`AnthropicModel`: the Anthropic Messages API over httpx, streaming included."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Final

import httpx
import orjson

from toolwire.models import anthropic_wire as wire
from toolwire.models._upstream import (
    MAX_RESPONSE_BYTES,
    EndedMidAnswer,
    Upstream,
    as_events,
    drain,
)
from toolwire.models._values import one_line, snippet
from toolwire.models.base import ModelError, ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.call_ids import IdMap
from toolwire.models.messages import Message
from toolwire.models.sse import SSEDecoder, SSETooLarge
from toolwire.tools.tool import Tool

__all__ = ["AnthropicModel"]

DEFAULT_HINT = "Check the base URL and the network."
_DRAIN_SECONDS: Final = 1.0


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
        max_response_bytes: The largest answer read: a whole body, or one event of a
            stream. A larger one fails the request (`ModelError`) instead of filling the
            memory.
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
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        base = base_url.strip().rstrip("/").removesuffix("/v1/messages").removesuffix("/v1")
        self.base_url = base
        self.model = model
        self.max_tokens = max_tokens
        self._endpoint = Upstream(
            base_url=base,
            url=base + "/v1/messages",
            timeout=timeout,
            retries=retries,
            retry_backoff=retry_backoff,
            http_client=http_client,
            hint=connect_hint,
            max_response_bytes=max_response_bytes,
            secret=api_key,
        )
        self._headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "anthropic-version": anthropic_version,
        }
        if api_key:
            self._headers["x-api-key"] = api_key
        self._headers.update(extra_headers or {})

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
        client, owned = self._endpoint.client()
        try:
            response, _ = await self._endpoint.post(
                client, orjson.dumps(body), self._headers, 0, self._status_error
            )
            try:
                content = await self._endpoint.read(response)
            except httpx.HTTPError as exc:
                raise self._cut(exc) from None
            finally:
                await response.aclose()
        finally:
            if owned:
                await client.aclose()
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
        client, owned = self._endpoint.client()
        attempt = 0
        try:
            while True:
                response, attempt = await self._endpoint.post(
                    client, content, headers, attempt, self._status_error
                )
                assembler = wire.MessageStreamAssembler(ids)
                yielded = False
                try:
                    ctype = response.headers.get("content-type", "")
                    if "text/event-stream" not in ctype and "json" in ctype:
                        # The server ignored stream=true and answered in one piece.
                        try:
                            whole = await self._endpoint.read(response)
                        except httpx.HTTPError as exc:
                            raise self._cut(exc) from None
                        for event in as_events(self._parse_whole(whole, ids)):
                            yield event
                        return
                    decoder = SSEDecoder(self._endpoint.max_response_bytes)
                    pieces = response.aiter_bytes()
                    try:
                        async for piece in pieces:
                            for data in decoder.feed(piece):
                                for delta in assembler.feed(_decode(data)):
                                    yielded = True
                                    yield delta
                                if assembler.done:
                                    break
                            if assembler.done:
                                break
                        if not assembler.done:
                            raise EndedMidAnswer
                    except (httpx.HTTPError, EndedMidAnswer, wire.UpstreamError) as exc:
                        # While nothing has reached the caller, the answer can start over.
                        if yielded or attempt >= self._endpoint.retries or not _retry_midway(exc):
                            raise self._stream_error(exc) from None
                    except wire.WireError as exc:
                        raise self._endpoint.malformed(str(exc)) from None
                    except SSETooLarge:
                        raise self._endpoint.too_large(self._endpoint.max_response_bytes) from None
                    else:
                        yield assembler.finish()
                        await drain(pieces, _DRAIN_SECONDS)
                        return
                finally:
                    await response.aclose()
                await asyncio.sleep(self._endpoint.backoff(attempt))
                attempt += 1
        finally:
            if owned:
                await client.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client this model owns (not one passed as `http_client`)."""
        await self._endpoint.aclose()

    async def __aenter__(self) -> AnthropicModel:
        self._endpoint.open_pool()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- internals -------------------------------------------------------------------

    def _stream_error(self, exc: Exception) -> ModelError:
        if isinstance(exc, wire.UpstreamError):
            return self._upstream(exc)
        if isinstance(exc, httpx.HTTPError):
            return self._cut(exc)
        return ModelError(
            f"The model at {self.base_url} ended mid-answer: the stream closed before "
            "message_stop.",
            retryable=True,
            kind="ended",
        )

    def _parse_whole(self, content: bytes, ids: IdMap) -> ModelResponse:
        try:
            return wire.parse_message(orjson.loads(content), ids)
        except orjson.JSONDecodeError:
            raise self._endpoint.malformed(f"the body is not JSON: {snippet(content)}") from None
        except wire.UpstreamError as exc:
            raise self._upstream(exc) from None
        except wire.WireError as exc:
            raise self._endpoint.malformed(str(exc)) from None

    def _cut(self, exc: httpx.HTTPError) -> ModelError:
        """A failure after the answer started: never retried, never a silent truncation."""
        if isinstance(exc, httpx.TimeoutException):
            reason = f"nothing received for {self._endpoint.timeout:g}s (timeout)"
        else:
            reason = self._endpoint.redact(one_line(str(exc))) or type(exc).__name__
            reason = f"the connection broke ({reason})"
        return ModelError(
            f"The model at {self.base_url} ended mid-answer: {reason}.",
            retryable=True,
            kind="ended",
        )

    def _status_error(self, status: int, content: bytes) -> ModelError:
        try:
            body = wire.error_body(orjson.loads(content))
        except orjson.JSONDecodeError:
            body = None
        if body is not None:
            body = {**body, "message": self._endpoint.redact(body["message"])}
            detail = body["message"]
        else:
            detail = snippet(content) if content.strip() else "no details given"
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
        body = {**exc.body, "message": self._endpoint.redact(str(exc.body.get("message", "")))}
        status = exc.status
        return ModelError(
            f"The model at {self.base_url} reported an error: {body['message']}",
            status=status,
            retryable=status is not None and (status == 429 or status >= 500),
            body=body,
        )


def _retry_midway(exc: Exception) -> bool:
    """Whether a failure of a started stream (before any delta was yielded) is retried."""
    if isinstance(exc, wire.UpstreamError):
        # Anthropic reports overload as an error event in a 200 stream.
        return exc.status is not None and (exc.status == 429 or exc.status >= 500)
    return isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | EndedMidAnswer)


def _decode(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise wire.WireError(f"a stream event is not JSON: {snippet(data)}") from None
