"""What the fake model servers share: a uvicorn server in a background thread on a free
loopback port, answering one endpoint with scripted `Reply`s in order.

Each fake (`FakeOpenAIServer`, `FakeAnthropicServer`) adds its protocol: the endpoint's
path, the models listing, the error shape, and builders for its bodies and streams.

Counters (`active`, `completed`, `cancelled`, `dropped`) follow the streamed replies, so
a test can see a client go away (`wait_until(lambda: server.cancelled == 1)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

__all__ = ["Handler", "ReceivedRequest", "Reply", "ScriptedServer", "event_stream", "raw"]


@dataclass
class ReceivedRequest:
    """A request the fake server received."""

    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    client_port: int | None = None
    """The client's port: two requests with the same port came over one connection."""


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
    interval: float = 0.0
    """Seconds to wait between pieces (a slow stream, for disconnect tests)."""
    drop_after: int | None = None
    """If set, the connection is cut after this many pieces, without ending the body."""


Handler = Callable[[ReceivedRequest], Reply]


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


def event_stream(
    parts: list[str], *, split: int | None = None, drop_at_end: bool = False, **fields: Any
) -> Reply:
    """A `text/event-stream` reply of these already formatted events: one piece per event,
    or pieces of `split` bytes cutting lines anywhere; `drop_at_end` cuts the connection
    after the last piece. `fields` are other `Reply` fields."""
    data = "".join(parts).encode()
    if split is not None:
        pieces = [data[i : i + split] for i in range(0, len(data), split)]
    else:
        pieces = [p.encode() for p in parts]
    if drop_at_end:
        fields["drop_after"] = len(pieces)
    return Reply(body=data, content_type="text/event-stream", pieces=pieces, **fields)


class ScriptedServer:
    """The scripted server; subclasses name the endpoint and speak the protocol.

    Args:
        endpoint: The path of the scripted endpoint (`POST`).
        model_ids: What the models listing returns.
    """

    label = "fake"

    def __init__(self, endpoint: str, model_ids: Iterable[str]) -> None:
        self.model_ids = list(model_ids)
        self.requests: list[ReceivedRequest] = []
        self.active = 0
        """Streams in progress."""
        self.completed = 0
        """Streams sent to their end."""
        self.cancelled = 0
        """Streams the client went away from before their end."""
        self.dropped = 0
        """Streams whose connection the server dropped (`Reply.drop_after`)."""
        self._replies: deque[Reply | Handler] = deque()
        self._default: Reply | Handler | None = None
        self._lock = threading.Condition()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        app = Starlette(
            routes=[
                Route(endpoint, self._answer, methods=["POST"]),
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

    # --- the protocol (subclasses) ----------------------------------------------------------

    def models_body(self) -> Any:
        """The JSON of `GET /v1/models`."""
        raise NotImplementedError

    def unscripted_body(self) -> Any:
        """The JSON of the 500 answer to a request with nothing scripted."""
        raise NotImplementedError

    # --- scripting --------------------------------------------------------------------------

    def reply(self, *replies: Reply | Handler) -> None:
        """Script the answers to the next requests, in order."""
        with self._lock:
            self._replies.extend(replies)

    def set_default(self, reply: Reply | Handler | None) -> None:
        """The answer to every request with nothing scripted (`None`: a 500 error)."""
        with self._lock:
            self._default = reply

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        return len(self._replies)

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self.requests.clear()
            self._default = None
            self.active = self.completed = self.cancelled = self.dropped = 0

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until `predicate()` is true (checked whenever a request arrives or a stream
        starts or ends); return whether it became true within `timeout` seconds."""
        with self._lock:
            return self._lock.wait_for(predicate, timeout)

    @property
    def last(self) -> ReceivedRequest:
        """The most recent request."""
        return self.requests[-1]

    # --- running ----------------------------------------------------------------------------

    def start(self) -> Any:
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the {self.label} server failed to start")
            threading.Event().wait(0.005)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- serving ----------------------------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        return JSONResponse(self.models_body())

    async def _answer(self, request: Request) -> Response:
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
            scripted = self._replies.popleft() if self._replies else self._default
            self._lock.notify_all()
        if scripted is None:
            return JSONResponse(self.unscripted_body(), status_code=500)
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
        return _StreamedResponse(self, reply)

    def _stream_event(self, what: Literal["start", "completed", "cancelled", "dropped"]) -> None:
        with self._lock:
            if what == "start":
                self.active += 1
            else:
                self.active -= 1
                setattr(self, what, getattr(self, what) + 1)
            self._lock.notify_all()


class _DropConnection(Exception):
    """Raised inside the app to make uvicorn drop the connection mid-body."""


class _QuietDrops(logging.Filter):
    # A scripted drop is the point of the test, not an error worth a traceback.
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _DropConnection))


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


class _StreamedResponse(Response):
    """Sends `reply.pieces` one write each, watching for the client going away."""

    def __init__(self, server: ScriptedServer, reply: Reply) -> None:
        # Not Response.__init__: it would declare a content-length of 0.
        self.status_code = reply.status
        self.background = None
        headers = {"content-type": reply.content_type, **reply.headers}
        self.raw_headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        self._server = server
        self._reply = reply

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        reply = self._reply
        pieces = reply.pieces or []
        outcome: Literal["completed", "cancelled", "dropped"] = "cancelled"
        self._server._stream_event("start")
        try:
            start = {"status": self.status_code, "headers": self.raw_headers}
            await send({"type": "http.response.start", **start})
            for n, piece in enumerate(pieces):
                if n == reply.drop_after:
                    break
                if n and reply.interval:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gone.wait(), reply.interval)
                elif n:
                    # Give the event loop a turn so each piece leaves as its own write.
                    await asyncio.sleep(0)
                if gone.is_set():
                    return
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            if reply.drop_after is not None:
                await asyncio.sleep(0.01)  # let the last piece leave before the drop
                outcome = "dropped"
                raise _DropConnection
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            outcome = "completed"
        finally:
            watcher.cancel()
            self._server._stream_event(outcome)


async def _sleep_unless_disconnected(request: Request, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        if await request.is_disconnected():
            return
        await asyncio.sleep(min(0.02, max(0.0, end - loop.time())))
