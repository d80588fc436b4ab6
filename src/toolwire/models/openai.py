"""`OpenAIChatModel`: any OpenAI-compatible Chat Completions endpoint over httpx."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import httpx
import orjson

from toolwire.models import openai_wire as wire
from toolwire.models.base import ModelError, ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.messages import Message
from toolwire.parsing.events import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallStart
from toolwire.tools.tool import Tool

__all__ = ["OpenAIChatModel"]

DEFAULT_HINT = "Check --base-url or TOOLWIRE_BASE_URL."

_DONE = object()
"""Stands for the `data: [DONE]` event that ends a stream."""


class OpenAIChatModel:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint.

    Works with OpenAI, vLLM, SGLang, llama.cpp server, Ollama, LM Studio, LiteLLM and
    anything else speaking the Chat Completions protocol. Every failure (unreachable host,
    timeout, HTTP error, unreadable body) is raised as a `ModelError` whose text is one
    readable line; `retryable` is set for connection errors, 429 and 5xx.

    Args:
        base_url: The API root, e.g. `https://api.openai.com/v1` or
            `http://127.0.0.1:8000/v1` (a trailing `/chat/completions` is accepted too).
        api_key: Sent as a bearer token; `None` or empty for servers that need none.
        model: The model name sent upstream.
        timeout: Seconds to wait for the server (connecting, and between bytes received).
        http_client: A client to use for every request (connection pooling, proxies); it
            is never closed by the model. Without one, `async with model:` keeps one
            pooled client open for the block, and otherwise each request opens its own.
        extra_headers: Headers added to every request.
        connect_hint: The advice appended to "could not reach" errors.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        timeout: float = 120.0,
        http_client: httpx.AsyncClient | None = None,
        extra_headers: Mapping[str, str] | None = None,
        connect_hint: str = DEFAULT_HINT,
    ) -> None:
        base = base_url.strip().rstrip("/")
        base = base.removesuffix("/chat/completions")
        self.base_url = base
        self.model = model
        self.timeout = timeout
        self._url = base + "/chat/completions"
        self._hint = connect_hint
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._headers.update(extra_headers or {})
        self._external_client = http_client
        self._client: httpx.AsyncClient | None = None

    @property
    def name(self) -> str:
        return self.model

    def __repr__(self) -> str:
        return f"OpenAIChatModel(base_url={self.base_url!r}, model={self.model!r})"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        body = wire.build_request(self.model, messages, tools, settings)
        try:
            async with self._http() as client:
                response = await client.post(
                    self._url,
                    content=orjson.dumps(body),
                    headers=self._headers,
                    timeout=self._timeout,
                )
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        if response.status_code >= 400:
            raise self._status_error(response.status_code, response.content)
        try:
            return wire.parse_completion(orjson.loads(response.content))
        except orjson.JSONDecodeError:
            raise self._malformed(f"the body is not JSON: {_snippet(response.content)}") from None
        except wire.UpstreamError as exc:
            raise self._upstream(str(exc)) from None
        except wire.WireError as exc:
            raise self._malformed(str(exc)) from None

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        body = wire.build_request(self.model, messages, tools, settings, stream=True)
        headers = {**self._headers, "accept": "text/event-stream"}
        assembler = wire.ChatStreamAssembler()
        try:
            async with (
                self._http() as client,
                client.stream(
                    "POST",
                    self._url,
                    content=orjson.dumps(body),
                    headers=headers,
                    timeout=self._timeout,
                ) as response,
            ):
                if response.status_code >= 400:
                    raise self._status_error(response.status_code, await response.aread())
                ctype = response.headers.get("content-type", "")
                if "text/event-stream" not in ctype and "json" in ctype:
                    # The server ignored stream=true and answered in one piece.
                    async for event in self._whole_body_as_stream(await response.aread()):
                        yield event
                    return
                async for data in _sse_data(response.aiter_lines()):
                    chunks = _decode_event(data)
                    for chunk in chunks:
                        if chunk is _DONE:
                            break
                        for delta in assembler.feed(chunk):
                            yield delta
                    if _DONE in chunks:
                        break
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        except wire.UpstreamError as exc:
            raise self._upstream(str(exc)) from None
        except wire.WireError as exc:
            raise self._malformed(str(exc)) from None
        yield assembler.finish()

    async def aclose(self) -> None:
        """Close the HTTP client this model owns (not one passed as `http_client`)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def __aenter__(self) -> OpenAIChatModel:
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

    async def _whole_body_as_stream(self, content: bytes) -> AsyncIterator[ModelStreamEvent]:
        try:
            response = wire.parse_completion(orjson.loads(content))
        except orjson.JSONDecodeError:
            raise self._malformed(f"the body is not JSON: {_snippet(content)}") from None
        except wire.UpstreamError as exc:
            raise self._upstream(str(exc)) from None
        except wire.WireError as exc:
            raise self._malformed(str(exc)) from None
        msg = response.message
        if msg.reasoning:
            yield ReasoningDelta(msg.reasoning)
        if msg.content:
            yield ContentDelta(msg.content)
        for index, call in enumerate(msg.tool_calls):
            yield ToolCallStart(index, call.id, call.name)
            yield ToolCallArgsDelta(index, call.arguments)
        yield response

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
        reason = _one_line(str(exc)) or type(exc).__name__
        return ModelError(
            f"The connection to the model at {self.base_url} failed: {reason}.", retryable=True
        )

    def _status_error(self, status: int, content: bytes) -> ModelError:
        try:
            detail = wire.error_message(orjson.loads(content))
        except orjson.JSONDecodeError:
            detail = None
        if detail is None:
            detail = _snippet(content) if content.strip() else "no details given"
        advice = {
            401: " Check the API key (TOOLWIRE_API_KEY).",
            403: " Check the API key (TOOLWIRE_API_KEY) and its permissions.",
            404: f" Check the model name ({self.model!r}) and the base URL.",
            429: " The server is rate limiting; try again later.",
        }.get(status, "")
        return ModelError(
            f"The model at {self.base_url} returned HTTP {status}: {detail.rstrip('.')}.{advice}",
            status=status,
            retryable=status == 429 or status >= 500,
        )

    def _upstream(self, detail: str) -> ModelError:
        return ModelError(f"The model at {self.base_url} reported an error: {detail}")

    def _malformed(self, detail: str) -> ModelError:
        return ModelError(
            f"The model at {self.base_url} sent a response toolwire could not read: {detail}."
        )


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The `data` of each server-sent event (multi-line data joined with newlines)."""
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
        # Comments (":"), "event:", "id:" and "retry:" fields carry nothing we use.
    if buf:
        yield "\n".join(buf)


def _decode_event(data: str) -> list[Any]:
    """The chunks of one event's data; `_DONE` stands for `[DONE]`."""
    if data == "[DONE]":
        return [_DONE]
    try:
        return [orjson.loads(data)]
    except orjson.JSONDecodeError:
        pass
    # Tolerate servers that leave out the blank line between events: try line by line.
    lines = data.split("\n")
    if len(lines) > 1:
        try:
            return [_DONE if ln == "[DONE]" else orjson.loads(ln) for ln in lines]
        except orjson.JSONDecodeError:
            pass
    raise wire.WireError(f"a stream event is not JSON: {_snippet(data.encode())}")


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
