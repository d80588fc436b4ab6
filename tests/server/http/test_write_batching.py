"""The serving protocols send the writes of one pass of the event loop together: a JSON
answer in one system call, the events a stream has at once in one, and nothing held back
while the app waits. Through uvicorn with each of the gateway's protocols, on loopback."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from live import LiveServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from toolwire.server.http._httptools_protocol import GatewayHttpProtocol
from toolwire.server.http.serving import GatewayServer, H11WithHeaderDeadline, ServeOptions
from toolwire.server.http.write_batching import BatchedWrites

EVENTS = [f'data: {{"n": {i}}}\n\n'.encode() for i in range(20)]


class _Recorder:
    """The socket's transport, recording each write that reaches it."""

    def __init__(self, transport: Any, writes: list[bytes]) -> None:
        self._transport = transport
        self._writes = writes

    def write(self, data: bytes) -> None:
        self._writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Served:
    def __init__(self, live: LiveServer, writes: list[bytes], go_on: threading.Event) -> None:
        self.live = live
        self.writes = writes
        self.go_on = go_on

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.live.port), timeout=5)


def _app(go_on: threading.Event) -> Starlette:
    async def answer(request: Request) -> Response:
        return JSONResponse({"answer": 42})

    async def burst(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            for event in EVENTS:
                yield event

        return StreamingResponse(body(), media_type="text/event-stream")

    async def slow(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield EVENTS[0]
            # The next event only once the client has read the first: held back, the
            # first would never arrive and the test would time out.
            assert await asyncio.to_thread(go_on.wait, 10)
            yield EVENTS[1]

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(
        routes=[Route("/answer", answer), Route("/burst", burst), Route("/slow", slow)]
    )


@pytest.fixture(params=[GatewayHttpProtocol, H11WithHeaderDeadline], ids=["httptools", "h11"])
def served(request: pytest.FixtureRequest) -> Iterator[_Served]:
    writes: list[bytes] = []
    base: type[asyncio.Protocol] = request.param

    class Recording(base):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(_Recorder(transport, writes))

    go_on = threading.Event()
    app = _app(go_on)
    config = ServeOptions(log_level="warning").uvicorn_config(app)
    config.http = Recording
    with LiveServer(app, server=GatewayServer(config, drain_seconds=1)) as live:
        yield _Served(live, writes, go_on)


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nhost: test\r\n\r\n".encode()


def _read_until(sock: socket.socket, end: bytes) -> bytes:
    data = b""
    while not data.endswith(end):
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {data!r}"
        data += chunk
    return data


def _chunks(body: bytes) -> list[bytes]:
    """The HTTP chunks of a chunked body, in order."""
    out: list[bytes] = []
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out
        out.append(body[:size])
        assert body[size : size + 2] == b"\r\n"
        body = body[size + 2 :]


def test_a_json_answer_is_one_write(served: _Served) -> None:
    with served.connect() as sock:
        for _ in range(3):  # and again on the kept-alive connection
            del served.writes[:]
            sock.sendall(_get("/answer"))
            data = _read_until(sock, b'{"answer":42}')
            assert data.startswith(b"HTTP/1.1 200 OK\r\n")
            assert served.writes == [data]


def test_events_ready_at_once_go_in_one_write_each_its_own_chunk(served: _Served) -> None:
    with served.connect() as sock:
        sock.sendall(_get("/burst"))
        data = _read_until(sock, b"\r\n0\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    assert _chunks(body) == EVENTS  # the app's body messages, one HTTP chunk each
    assert b"".join(served.writes) == data
    # Starlette sends the head, then awaits its body iterator once per event: a few
    # passes of the loop at most, never one write per event.
    assert len(served.writes) < 5


def test_a_write_is_not_held_while_the_app_waits(served: _Served) -> None:
    with served.connect() as sock:
        sock.sendall(_get("/slow"))
        first = _read_until(sock, EVENTS[0] + b"\r\n")
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        served.go_on.set()
        rest = _read_until(sock, b"\r\n0\r\n\r\n")
    assert _chunks((first + rest).partition(b"\r\n\r\n")[2]) == EVENTS[:2]


# --- BatchedWrites itself ----------------------------------------------------------


class _Transport:
    def __init__(self) -> None:
        self.events: list[object] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.events.append(bytes(data))

    def close(self) -> None:
        self.events.append("close")

    def abort(self) -> None:
        self.events.append("abort")

    def write_eof(self) -> None:
        self.events.append("eof")

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def _batched() -> tuple[BatchedWrites, _Transport]:
    transport = _Transport()
    return BatchedWrites(transport, asyncio.get_running_loop()), transport  # type: ignore[arg-type]


async def test_writes_of_one_pass_leave_together_when_the_pass_ends() -> None:
    writes, transport = _batched()
    writes.write(b"a")
    writes.writelines([b"b", b"c"])
    assert writes.get_write_buffer_size() == 3
    assert transport.events == []
    await asyncio.sleep(0)
    assert transport.events == [b"abc"]
    writes.write(b"d")
    await asyncio.sleep(0)
    assert transport.events == [b"abc", b"d"]


async def test_flush_and_close_send_at_once_abort_drops() -> None:
    writes, transport = _batched()
    writes.write(b"head")
    writes.write(b"body")
    writes.flush()
    assert transport.events == [b"headbody"]
    writes.write(b"last")
    writes.close()
    assert transport.events == [b"headbody", b"last", "close"]
    await asyncio.sleep(0)  # the pass's own send finds nothing left
    assert transport.events == [b"headbody", b"last", "close"]

    writes, transport = _batched()
    writes.write(b"x")
    writes.write_eof()
    writes.write(b"never")
    writes.abort()
    await asyncio.sleep(0)
    assert transport.events == [b"x", "eof", "abort"]
    assert writes.get_extra_info("peername") == ("127.0.0.1", 1)


async def test_a_buffer_reused_after_its_write_does_not_change_what_is_sent() -> None:
    writes, transport = _batched()
    buffer = bytearray(b"first")
    writes.write(buffer)
    buffer[:] = b"later"
    writes.write(memoryview(b"!"))
    await asyncio.sleep(0)
    assert transport.events == [b"first!"]


async def test_writes_held_when_the_client_went_away_are_dropped() -> None:
    writes, transport = _batched()
    writes.write(b"late")
    transport.closing = True  # the connection was lost before the pass ended
    await asyncio.sleep(0)
    assert transport.events == []
