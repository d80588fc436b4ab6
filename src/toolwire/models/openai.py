"""`OpenAIChatModel`: any OpenAI-compatible Chat Completions endpoint over httpx."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx
import orjson

from toolwire.models import openai_wire as wire
from toolwire.models._upstream import (
    MAX_RESPONSE_BYTES,
    EndedMidAnswer,
    Upstream,
    as_events,
    drain,
)
from toolwire.models._values import one_line, snippet
from toolwire.models.base import ModelError, ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.call_ids import IdMap, IdStyle
from toolwire.models.events import (
    ModelContentDelta,
    ModelDelta,
    ModelReasoningDelta,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.messages import Message
from toolwire.models.quirks import Engine, quirks_for
from toolwire.models.sse import SSEDecoder, SSETooLarge
from toolwire.tools.tool import Tool

__all__ = ["OpenAIChatModel"]

DEFAULT_HINT = "Check --base-url or TOOLWIRE_BASE_URL."

_DRAIN_SECONDS = 0.25
_DONE = object()
"""Stands for the `data: [DONE]` event that ends a stream."""


# Failures reading a 200 stream; retried only while nothing has been yielded.
_RETRY_STREAM = (httpx.RemoteProtocolError, httpx.ReadError, EndedMidAnswer)


class OpenAIChatModel:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint.

    Works with OpenAI, vLLM, SGLang, llama.cpp server, Ollama, LM Studio, LiteLLM and
    anything else speaking the Chat Completions protocol. Every failure (unreachable host,
    timeout, HTTP error, unreadable body, a stream cut short) is raised as a `ModelError`
    whose text is one readable line; `retryable` is set for connection errors, 429 and 5xx;
    `body` carries the upstream's own error object when it sent one.

    Connection errors, 429 and 5xx are retried with exponential backoff and jitter
    (`retry_backoff`, twice that, ... honouring a `Retry-After` of up to
    `MAX_RETRY_AFTER` seconds), but only before the first byte of a successful answer was
    read: a stream is retried only while it has yielded nothing, and a failure after that
    ends it with a `ModelError`. Other 4xx are never retried.

    Args:
        base_url: The API root, e.g. `https://api.openai.com/v1` or
            `http://127.0.0.1:8000/v1` (a trailing `/chat/completions` is accepted too).
        api_key: Sent as a bearer token; `None` or empty for servers that need none.
        model: The model name sent upstream.
        timeout: Seconds to wait for the server (connecting, and between bytes received).
        retries: How many times a failed request is retried (0: never).
        retry_backoff: Seconds before the first retry; each next one waits twice as long.
        http_client: A client to use for every request (connection pooling, proxies); it
            is never closed by the model. Without one, `async with model:` keeps one
            pooled client open for the block, and otherwise each request opens its own.
        extra_headers: Headers added to every request.
        connect_hint: The advice appended to "could not reach" errors.
        max_response_bytes: The largest answer read: a whole body, or one event of a
            stream. A larger one fails the request (`ModelError`) instead of filling the
            memory.
        id_style: How tool-call ids are rewritten for the upstream (`keep`, `anthropic`,
            `mistral`; see `toolwire.models.call_ids`); the caller always sees its own ids.
        engine: The server software behind the endpoint (`llama.cpp`, `llama-cpp-python`,
            `vllm`, ...; default `generic`): its quirks are absorbed by its profile in
            `toolwire.models.quirks`.
        join_deltas: Join the deltas that arrive in one read into one (cheaper for what
            reads the text: a parser, an agent). `False` streams each chunk as its own
            delta, as the upstream wrote it (the gateway's pass-through).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        timeout: float = 120.0,
        retries: int = 2,
        retry_backoff: float = 0.2,
        http_client: httpx.AsyncClient | None = None,
        extra_headers: Mapping[str, str] | None = None,
        connect_hint: str = DEFAULT_HINT,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        id_style: IdStyle = "keep",
        engine: Engine = "generic",
        join_deltas: bool = True,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries}.")
        base = base_url.strip().rstrip("/")
        base = base.removesuffix("/chat/completions")
        self.base_url = base
        self.model = model
        self.id_style: IdStyle = id_style
        self.quirks = quirks_for(engine)
        self.join_deltas = join_deltas
        self._endpoint = Upstream(
            base_url=base,
            url=base + "/chat/completions",
            timeout=timeout,
            retries=retries,
            retry_backoff=retry_backoff,
            http_client=http_client,
            hint=connect_hint,
            max_response_bytes=max_response_bytes,
            secret=api_key,
        )
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._headers.update(extra_headers or {})
        self._stream_headers = {**self._headers, "accept": "text/event-stream"}

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
        ids = None if self.id_style == "keep" else IdMap(self.id_style)
        body = wire.build_request(self.model, messages, tools, settings, ids=ids)
        content = orjson.dumps(self.quirks.request(body))
        client, owned = self._endpoint.client()
        try:
            response, _ = await self._endpoint.post(
                client, content, self._headers, 0, self._status_error
            )
            try:
                data = await self._endpoint.read(response)
            except httpx.HTTPError as exc:
                raise self._endpoint.transport_error(exc) from None
            finally:
                await response.aclose()
        finally:
            if owned:
                await client.aclose()
        return self._parse_whole(data, ids)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        ids = None if self.id_style == "keep" else IdMap(self.id_style)
        body = wire.build_request(self.model, messages, tools, settings, stream=True, ids=ids)
        content = orjson.dumps(self.quirks.request(body))
        client, owned = self._endpoint.client()
        attempt = 0
        try:
            while True:
                response, attempt = await self._endpoint.post(
                    client, content, self._stream_headers, attempt, self._status_error
                )
                assembler = wire.ChatStreamAssembler(ids)
                yielded = False
                retry = False
                try:
                    ctype = response.headers.get("content-type", "")
                    if "text/event-stream" not in ctype and "json" in ctype:
                        # The server ignored stream=true and answered in one piece.
                        try:
                            data = await self._endpoint.read(response)
                        except httpx.HTTPError as exc:
                            raise self._endpoint.transport_error(exc) from None
                        for event in as_events(self._parse_whole(data, ids)):
                            yield event
                        return
                    decoder = SSEDecoder(self._endpoint.max_response_bytes)
                    done = False
                    try:
                        pieces = response.aiter_bytes()
                        async for piece in pieces:
                            batch, done = read_deltas(
                                piece, decoder, assembler, join=self.join_deltas
                            )
                            for delta in batch:
                                yielded = True
                                yield delta
                            if done:
                                break
                        if not done:
                            # The body ended: an event may be left without its blank line.
                            for data in decoder.finish():
                                for chunk in _decode_event(data):
                                    if chunk is _DONE:
                                        done = True
                                        break
                                    for delta in assembler.feed(chunk):
                                        yielded = True
                                        yield delta
                            if not done and not assembler.finished:
                                raise EndedMidAnswer
                    except (httpx.HTTPError, EndedMidAnswer) as exc:
                        retry = (
                            not yielded
                            and attempt < self._endpoint.retries
                            and isinstance(exc, _RETRY_STREAM)
                        )
                        if not retry:
                            raise self._stream_error(exc, attempt + 1) from None
                    except wire.UpstreamError as exc:
                        raise self._upstream(exc) from None
                    except wire.WireError as exc:
                        raise self._endpoint.malformed(str(exc)) from None
                    except SSETooLarge:
                        raise self._endpoint.too_large(self._endpoint.max_response_bytes) from None
                    if not retry:
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

    async def __aenter__(self) -> OpenAIChatModel:
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

    def _parse_whole(self, content: bytes, ids: IdMap | None) -> ModelResponse:
        try:
            return wire.parse_completion(orjson.loads(content), ids)
        except orjson.JSONDecodeError:
            raise self._endpoint.malformed(f"the body is not JSON: {snippet(content)}") from None
        except wire.UpstreamError as exc:
            raise self._upstream(exc) from None
        except wire.WireError as exc:
            raise self._endpoint.malformed(str(exc)) from None

    def _stream_error(self, exc: Exception, attempts: int) -> ModelError:
        if isinstance(exc, EndedMidAnswer):
            return ModelError(
                f"The model at {self.base_url} ended the stream mid-answer (no finish_reason "
                "and no [DONE]); the answer is incomplete.",
                retryable=True,
                kind="ended",
            )
        assert isinstance(exc, httpx.HTTPError)
        if isinstance(exc, httpx.TimeoutException):
            return self._endpoint.transport_error(exc, attempts)
        reason = self._endpoint.redact(one_line(str(exc))) or type(exc).__name__
        return ModelError(
            f"The connection to the model at {self.base_url} broke mid-answer: {reason}.",
            retryable=True,
            kind="ended",
        )

    def _status_error(self, status: int, content: bytes) -> ModelError:
        try:
            parsed: Any = orjson.loads(content)
        except orjson.JSONDecodeError:
            parsed = _first_event_json(content)
        detail = wire.error_message(parsed)
        if detail is None:
            detail = snippet(content) if content.strip() else "no details given"
        advice = {
            401: " Check the API key (TOOLWIRE_API_KEY).",
            403: " Check the API key (TOOLWIRE_API_KEY) and its permissions.",
            404: f" Check the model name ({self.model!r}) and the base URL.",
            429: " The server is rate limiting; try again later.",
        }.get(status, "")
        fallback = one_line(content.decode("utf-8", "replace")) or f"HTTP {status}"
        return ModelError(
            f"The model at {self.base_url} returned HTTP {status}: {detail.rstrip('.')}.{advice}",
            status=status,
            retryable=status == 429 or status >= 500,
            body=wire.error_object(parsed, fallback),
        )

    def _upstream(self, exc: wire.UpstreamError) -> ModelError:
        return ModelError(
            f"The model at {self.base_url} reported an error: {one_line(str(exc))}",
            body=exc.body,
        )


def _decode_event(data: bytes) -> list[Any]:
    """The chunks of one event's data; `_DONE` stands for `[DONE]`."""
    if data == b"[DONE]":
        return [_DONE]
    try:
        return [orjson.loads(data)]
    except orjson.JSONDecodeError:
        pass
    # Tolerate servers that leave out the blank line between events: try line by line.
    lines = data.split(b"\n")
    if len(lines) > 1:
        try:
            return [_DONE if ln == b"[DONE]" else orjson.loads(ln) for ln in lines]
        except orjson.JSONDecodeError:
            pass
    raise wire.WireError(f"a stream event is not JSON: {snippet(data)}")


def _first_event_json(content: bytes) -> Any:
    """The JSON of the first event of an error sent as a stream (`data: {"error": ...}`)."""
    if not content.lstrip().startswith(b"data:"):
        return None
    decoder = SSEDecoder()
    events = decoder.feed(content) + decoder.finish()
    try:
        return orjson.loads(events[0]) if events else None
    except orjson.JSONDecodeError:
        return None


def read_deltas(
    piece: bytes, decoder: SSEDecoder, assembler: wire.ChatStreamAssembler, *, join: bool = True
) -> tuple[list[ModelDelta], bool]:
    """The deltas of one read of an upstream stream, and whether it held `[DONE]`.

    With `join`, deltas that arrived in one read go on as one: nothing waits for them,
    and a fast upstream's thousands of one-character deltas then cost one pass
    downstream instead of thousands (runs of plain text chunks are joined before any
    delta is made); what reads the text (a parser) wants that. Without it, each chunk
    is its own delta, as the upstream wrote it (a gateway passing a stream through).
    """
    done = False
    chunks: list[Any] = []
    shape = assembler.shape
    # Runs of text chunks of the learnt shape are read straight from the bytes; what lies
    # between them goes through the decoder (all of a read at once when it holds a `\r`,
    # as the run pattern knows only `\n` line ends).
    fast = join and b"\r" not in piece  # a run read from the bytes is its chunks joined
    pos, n = 0, len(piece)
    while pos < n and not done:
        if not fast:
            end = n
        elif decoder.idle:
            run = shape.run(piece, pos)
            if run is not None:
                chunks.append(run[0])
                pos = run[1]
                continue
            end = shape.next_run(piece, pos)
        else:  # the end of an event the last read began
            end = piece.find(b"\n\n", pos)
            end = n if end < 0 else end + 2
        done = _decoded(decoder.feed(piece[pos:end]), shape, chunks)
        pos = end
    batch: list[ModelDelta] = []
    if not join:
        for chunk in chunks:
            if type(chunk) is str:
                if assembler.feed_text_run([chunk], 0)[0]:
                    batch.append(ModelContentDelta(chunk))
            else:
                batch += assembler.feed(chunk)
        return batch, done
    i, n = 0, len(chunks)
    while i < n:
        text, i = assembler.feed_text_run(chunks, i)
        if text:
            batch.append(ModelContentDelta(text))
        if i < n:
            batch += assembler.feed(chunks[i])
            i += 1
    return _coalesced(batch), done


def _decoded(events: list[bytes], shape: wire.TextChunkShape, chunks: list[Any]) -> bool:
    """Append the chunks of `events` (a `str` for a text chunk read from its bytes); True
    when `[DONE]` came (what follows it is not read)."""
    for data in events:
        if data == b"[DONE]":
            return True
        text = shape.text(data)
        if text is not None:
            chunks.append(text)  # a plain text chunk, read without decoding its JSON
            continue
        try:
            chunk = orjson.loads(data)
            chunks.append(chunk)
            plain = wire.plain_text(chunk)
            if plain is not None:
                # A plain text chunk of another shape (the first one names the role):
                # the next ones are likelier to look like this one.
                shape.learn(data, plain)
        except orjson.JSONDecodeError:
            for chunk in _decode_event(data):
                if chunk is _DONE:
                    return True
                chunks.append(chunk)
    return False


def _coalesced(deltas: list[ModelDelta]) -> list[ModelDelta]:
    """Adjacent text deltas of the same kind (arguments: of the same call) joined."""
    if len(deltas) < 2:
        return deltas
    out: list[ModelDelta] = []
    texts: list[str] = []

    def flush() -> None:
        if len(texts) > 1:
            last = out[-1]
            text = "".join(texts)
            if isinstance(last, ModelToolCallArgsDelta):
                out[-1] = ModelToolCallArgsDelta(last.index, text)
            elif isinstance(last, ModelContentDelta):
                out[-1] = ModelContentDelta(text)
            elif isinstance(last, ModelReasoningDelta):
                out[-1] = ModelReasoningDelta(text)
        texts.clear()

    for delta in deltas:
        last = out[-1] if out else None
        if isinstance(delta, ModelToolCallStart):
            flush()
            out.append(delta)
        elif type(delta) is type(last) and (
            not isinstance(delta, ModelToolCallArgsDelta)
            or (isinstance(last, ModelToolCallArgsDelta) and last.index == delta.index)
        ):
            texts.append(delta.text)
        else:
            flush()
            out.append(delta)
            texts.append(delta.text)
    flush()
    return out
