"""A scriptable fake Anthropic Messages API server on a real loopback socket, for tests.

```python
with FakeAnthropicServer() as server:
    server.reply(message("hi"))
    server.reply(sse(events(text("hello"), chunk=2)))
    server.reply(sse(events(text("cut short")), drop_after=3))
    model = AnthropicModel(server.base_url, "key", "claude-test")
    ...
    assert server.requests[0].json["messages"][0]["content"][0]["text"] == "hello"
```

Each scripted `Reply` answers one request to `POST /v1/messages`, in order. A request with
nothing scripted gets an Anthropic-shaped 500 error. `GET /v1/models` lists `model_ids`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "FakeAnthropicServer",
    "ReceivedRequest",
    "Reply",
    "error",
    "events",
    "message",
    "raw",
    "sse",
    "text",
    "thinking",
    "tool_use",
]


@dataclass
class ReceivedRequest:
    """A request the fake server received."""

    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    client_port: int | None = None
    """The client's source port: equal ports mean one reused connection."""


@dataclass
class Reply:
    """How the server answers one request."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    pieces: list[bytes] | None = None
    """If set, the body is streamed in these pieces (each flushed separately)."""
    delay: float = 0.0
    """Seconds to wait before answering (for timeout tests)."""
    headers: dict[str, str] = field(default_factory=dict)
    drop_after: int | None = None
    """If set, the connection is cut after this many pieces (a mid-stream failure)."""


Handler = Callable[[ReceivedRequest], Reply]


# --- content blocks -----------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    """A `text` content block."""
    return {"type": "text", "text": value}


def thinking(value: str, signature: str = "sig-fake") -> dict[str, Any]:
    """A `thinking` content block."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool_use(name: str, input: Mapping[str, Any], id: str = "toolu_01") -> dict[str, Any]:
    """A `tool_use` content block."""
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input)}


# --- reply builders -----------------------------------------------------------------------


def message(
    *blocks: Mapping[str, Any] | str,
    stop_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "claude-fake",
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A non-streamed Messages API response; a string block is a text block."""
    content = [text(b) if isinstance(b, str) else dict(b) for b in blocks]
    has_tools = any(b["type"] == "tool_use" for b in content)
    body = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if has_tools else "end_turn"),
        "stop_sequence": None,
        "usage": dict(usage or {"input_tokens": 10, "output_tokens": 5}),
    }
    reply = raw(json.dumps(body), status=status)
    reply.headers.update(headers or {})
    return reply


def error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An Anthropic-shaped error response."""
    body = {"type": "error", "error": {"type": type, "message": message}}
    reply = raw(json.dumps(body), status=status)
    reply.headers.update(headers or {})
    return reply


def raw(
    body: str | bytes,
    *,
    status: int = 200,
    content_type: str = "application/json",
    delay: float = 0.0,
) -> Reply:
    """Exactly these bytes."""
    data = body.encode() if isinstance(body, str) else body
    return Reply(status=status, body=data, content_type=content_type, delay=delay)


def events(
    *blocks: Mapping[str, Any] | str,
    stop_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "claude-fake",
    chunk: int | None = None,
    ping: bool = True,
    stop: bool = True,
) -> list[dict[str, Any]]:
    """The stream events of a message made of `blocks`, as Anthropic sends them.

    Args:
        blocks: Content blocks (`text(...)`, `thinking(...)`, `tool_use(...)`); a string is
            a text block.
        stop_reason: Defaults to `tool_use` when a block is one, else `end_turn`.
        usage: `input_tokens` goes in `message_start`, `output_tokens` in `message_delta`.
        model: The model named in `message_start`.
        chunk: Characters per delta (text, thinking, and the tool input's JSON); `None`
            sends each block's content in one delta.
        ping: Send a `ping` event after `message_start`.
        stop: End with `message_stop` (leave it out to fake a stream cut short).
    """
    content = [text(b) if isinstance(b, str) else dict(b) for b in blocks]
    counts = dict(usage or {"input_tokens": 10, "output_tokens": 5})
    out: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": counts.get("input_tokens", 0), "output_tokens": 1},
            },
        }
    ]
    if ping:
        out.append({"type": "ping"})
    for index, block in enumerate(content):
        kind = block["type"]
        if kind == "text":
            start, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": p} for p in _split(block["text"], chunk)],
            )
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p} for p in _split(block["thinking"], chunk)
            ]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        elif kind == "tool_use":
            start = {**block, "input": {}}
            args = json.dumps(block["input"]) if block["input"] else ""
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _split(args, chunk)]
        else:
            start, deltas = block, []
        out.append({"type": "content_block_start", "index": index, "content_block": start})
        out.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        out.append({"type": "content_block_stop", "index": index})
    has_tools = any(b["type"] == "tool_use" for b in content)
    out.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": stop_reason or ("tool_use" if has_tools else "end_turn"),
                "stop_sequence": None,
            },
            "usage": {"output_tokens": counts.get("output_tokens", 0)},
        }
    )
    if stop:
        out.append({"type": "message_stop"})
    return out


def sse(
    stream_events: Iterable[Mapping[str, Any] | str],
    *,
    split: int | None = None,
    delay: float = 0.0,
    drop_after: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A `text/event-stream` body: dicts become `event: {type}` + `data: {json}` events,
    strings are sent verbatim.

    Args:
        stream_events: The events, in order (see `events`). A string is written as is (use
            it for malformed lines, comments or hand-made framing).
        split: If set, the bytes are sent in pieces of this size, cutting lines anywhere;
            otherwise each event is one piece.
        delay: Seconds to wait before the first byte.
        drop_after: Cut the connection after this many pieces, without ending the body.
    """
    parts: list[str] = []
    for ev in stream_events:
        if isinstance(ev, str):
            parts.append(ev)
        else:
            parts.append(f"event: {ev.get('type')}\ndata: {json.dumps(ev)}\n\n")
    data = "".join(parts).encode()
    if split is not None:
        pieces = [data[i : i + split] for i in range(0, len(data), split)]
    else:
        pieces = [p.encode() for p in parts]
    return Reply(
        body=data,
        content_type="text/event-stream",
        pieces=pieces,
        delay=delay,
        drop_after=drop_after,
        headers=dict(headers or {}),
    )


def _split(value: str, size: int | None) -> list[str]:
    if not value:
        return []
    if size is None:
        return [value]
    return [value[i : i + size] for i in range(0, len(value), size)]


# --- the server ---------------------------------------------------------------------------


class _Dropped(Exception):
    """Raised inside a streamed body so uvicorn cuts the connection mid-answer."""


class _HideDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _Dropped))


_HIDE_DROPS = _HideDrops()


class FakeAnthropicServer:
    """A uvicorn server in a background thread on 127.0.0.1 and a free port."""

    def __init__(self, model_ids: Iterable[str] = ("claude-fake",)) -> None:
        self.model_ids = list(model_ids)
        self.requests: list[ReceivedRequest] = []
        self._replies: deque[Reply | Handler] = deque()
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        config = uvicorn.Config(
            app,
            log_level="error",
            lifespan="off",
            ws="none",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        # A scripted drop is the point of the test, not an error worth a traceback.
        logging.getLogger("uvicorn.error").addFilter(_HIDE_DROPS)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The API root as Anthropic's own is written (`AnthropicModel` adds `/v1/messages`)."""
        return f"http://127.0.0.1:{self.port}"

    def reply(self, *replies: Reply | Handler) -> None:
        """Script the answers to the next requests, in order."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        return len(self._replies)

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self.requests.clear()

    @property
    def last(self) -> ReceivedRequest:
        """The most recent request."""
        return self.requests[-1]

    def start(self) -> FakeAnthropicServer:
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the fake Anthropic server failed to start")
            threading.Event().wait(0.005)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _models(self, request: Request) -> Response:
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
            for m in self.model_ids
        ]
        return JSONResponse({"data": data, "has_more": False, "first_id": None, "last_id": None})

    async def _messages(self, request: Request) -> Response:
        body = await request.body()
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        received = ReceivedRequest(
            path=request.url.path,
            headers=dict(request.headers),
            body=body,
            json=parsed,
            client_port=request.client.port if request.client else None,
        )
        with self._lock:
            self.requests.append(received)
            scripted = self._replies.popleft() if self._replies else None
        if scripted is None:
            return JSONResponse(
                {
                    "type": "error",
                    "error": {"type": "api_error", "message": "fake server: no reply scripted"},
                },
                status_code=500,
            )
        reply = scripted if isinstance(scripted, Reply) else scripted(received)
        if reply.delay:
            await _sleep_unless_disconnected(request, reply.delay)
        if reply.pieces is None:
            return Response(
                reply.body,
                status_code=reply.status,
                media_type=reply.content_type,
                headers=reply.headers,
            )
        return StreamingResponse(
            _pieces(reply.pieces, reply.drop_after),
            status_code=reply.status,
            media_type=reply.content_type,
            headers=reply.headers,
        )


async def _pieces(pieces: list[bytes], drop_after: int | None) -> AsyncIterator[bytes]:
    for sent, piece in enumerate(pieces):
        if sent == drop_after:
            raise _Dropped
        yield piece
        # Give the event loop a turn so each piece leaves as its own write.
        await asyncio.sleep(0)
    if drop_after is not None and drop_after >= len(pieces):
        raise _Dropped


async def _sleep_unless_disconnected(request: Request, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        if await request.is_disconnected():
            return
        await asyncio.sleep(min(0.02, max(0.0, end - loop.time())))
