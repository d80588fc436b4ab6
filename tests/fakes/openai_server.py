"""A scriptable fake OpenAI-compatible server on a real loopback socket, for tests.

```python
with FakeOpenAIServer() as server:
    server.reply(completion(content="hi"))
    server.reply(sse([delta(content="h"), delta(content="i", finish_reason="stop")]))
    model = OpenAIChatModel(server.base_url, "key", "gpt-test")
    ...
    assert server.requests[0].json["messages"][0]["content"] == "hello"
```

Each scripted `Reply` answers one request to `POST /v1/chat/completions`, in order. A
request with nothing scripted gets an OpenAI-shaped 500 error. `GET /v1/models` lists
`model_ids`.
"""

from __future__ import annotations

import asyncio
import json
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
    "FakeOpenAIServer",
    "ReceivedRequest",
    "Reply",
    "completion",
    "delta",
    "error",
    "raw",
    "sse",
    "tool_call",
]


@dataclass
class ReceivedRequest:
    """A request the fake server received."""

    path: str
    headers: dict[str, str]
    body: bytes
    json: Any


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


Handler = Callable[[ReceivedRequest], Reply]


# --- reply builders -----------------------------------------------------------------------


def tool_call(
    name: str, arguments: str | Mapping[str, Any], id: str | None = "call_1"
) -> dict[str, Any]:
    """A complete `tool_calls` entry of a non-streamed message."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": args}}
    if id is not None:
        out["id"] = id
    return out


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning_content: str | None = None,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "fake-model",
    status: int = 200,
) -> Reply:
    """A non-streamed Chat Completions response."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        body["usage"] = dict(usage)
    return raw(json.dumps(body), status=status)


def error(
    status: int, message: str, *, type: str = "invalid_request_error", code: str | None = None
) -> Reply:
    """An OpenAI-shaped error response."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return raw(json.dumps(body), status=status)


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


def delta(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning_content: str | None = None,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "fake-model",
) -> dict[str, Any]:
    """One streamed `chat.completion.chunk`. With only `usage`, `choices` is empty."""
    d: dict[str, Any] = {}
    if content is not None:
        d["content"] = content
    if reasoning_content is not None:
        d["reasoning_content"] = reasoning_content
    if reasoning is not None:
        d["reasoning"] = reasoning
    if tool_calls is not None:
        d["tool_calls"] = tool_calls
    chunk: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": model,
    }
    only_usage = usage is not None and not d and finish_reason is None
    chunk["choices"] = (
        [] if only_usage else [{"index": 0, "delta": d, "finish_reason": finish_reason}]
    )
    if usage is not None:
        chunk["usage"] = dict(usage)
    return chunk


def sse(
    events: Iterable[Mapping[str, Any] | str],
    *,
    done: bool = True,
    split: int | None = None,
    delay: float = 0.0,
) -> Reply:
    """A `text/event-stream` body: dicts become `data: {json}` events, strings are sent verbatim.

    Args:
        events: The chunks, in order. A string is written as is (use it for malformed
            lines, comments or hand-made framing).
        done: Whether to end with `data: [DONE]`.
        split: If set, the bytes are sent in pieces of this size, cutting lines anywhere.
        delay: Seconds to wait before the first byte.
    """
    parts: list[str] = []
    for ev in events:
        parts.append(ev if isinstance(ev, str) else f"data: {json.dumps(ev)}\n\n")
    if done:
        parts.append("data: [DONE]\n\n")
    data = "".join(parts).encode()
    if split is not None:
        pieces = [data[i : i + split] for i in range(0, len(data), split)]
    else:
        pieces = [p.encode() for p in parts]
    return Reply(body=data, content_type="text/event-stream", pieces=pieces, delay=delay)


# --- the server ---------------------------------------------------------------------------


class FakeOpenAIServer:
    """A uvicorn server in a background thread on 127.0.0.1 and a free port."""

    def __init__(self, model_ids: Iterable[str] = ("fake-model",)) -> None:
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
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
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
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

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

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the fake OpenAI server failed to start")
            threading.Event().wait(0.005)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _models(self, request: Request) -> Response:
        data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.model_ids]
        return JSONResponse({"object": "list", "data": data})

    async def _chat(self, request: Request) -> Response:
        body = await request.body()
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        received = ReceivedRequest(
            path=request.url.path, headers=dict(request.headers), body=body, json=parsed
        )
        with self._lock:
            self.requests.append(received)
            scripted = self._replies.popleft() if self._replies else None
        if scripted is None:
            return JSONResponse(
                {"error": {"message": "fake server: no reply scripted", "type": "server_error"}},
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
            _pieces(reply.pieces),
            status_code=reply.status,
            media_type=reply.content_type,
            headers=reply.headers,
        )


async def _pieces(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece
        # Give the event loop a turn so each piece leaves as its own write.
        await asyncio.sleep(0)


async def _sleep_unless_disconnected(request: Request, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        if await request.is_disconnected():
            return
        await asyncio.sleep(min(0.02, max(0.0, end - loop.time())))
