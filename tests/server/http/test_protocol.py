"""The HTTP/1.1 behaviour of the server `toolwire serve` runs (`GatewayHttpProtocol`), next
to uvicorn's h11 protocol it falls back to: keep-alive, pipelining, `Expect:
100-continue`, request bodies (chunked, large), `HEAD`, proxy headers, failing apps and
clients that leave. Raw sockets on loopback, so every byte is the server's."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from live import LiveServer

from toolwire.server.http._httptools_protocol import GatewayHttpProtocol
from toolwire.server.http.serving import GatewayServer, H11WithHeaderDeadline, ServeOptions

seen: list[dict[str, Any]] = []
"""What the app saw of each request (scope parts, the messages `receive` gave)."""


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    path = scope["path"]
    if path == "/fail-before":
        raise RuntimeError("before the answer")
    if path == "/fail-after":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        raise RuntimeError("mid-answer")
    if path == "/bad-header":
        headers = [(b"x-split", b"a\r\nset-cookie: evil=1")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        return
    if path == "/wait-for-disconnect":
        messages = []
        while True:
            message = await receive()
            messages.append(message["type"])
            if message["type"] == "http.disconnect":
                break
        seen.append({"path": path, "messages": messages})
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if path == "/empty":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    answer = orjson.dumps(
        {
            "method": scope["method"],
            "path": path,
            "raw_path": scope["raw_path"].decode(),
            "query": scope["query_string"].decode(),
            "client": scope["client"][0],
            "scheme": scope["scheme"],
            "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
            "length": len(body),
            "tail": body[-8:].decode("latin-1"),
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(answer)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture(params=[GatewayHttpProtocol, H11WithHeaderDeadline], ids=["toolwire", "h11"])
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    config = ServeOptions(log_level="critical", header_timeout=2).uvicorn_config(_app)
    config.http = request.param
    config.timeout_keep_alive = 1
    with LiveServer(_app, server=GatewayServer(config, drain_seconds=1)) as live:
        yield live


def _connect(live: LiveServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", live.port), timeout=5)


def _request(path: str, body: bytes = b"", method: str = "POST", extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nhost: test\r\n{extra}content-length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _response(
    sock: socket.socket, buffer: bytearray, *, head_only: bool = False
) -> tuple[bytes, bytes]:
    """One response's head and body (content-length, chunked, or none) off `buffer`."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {bytes(buffer)!r}"
        buffer += chunk
    head, _, _rest = bytes(buffer).partition(b"\r\n\r\n")
    del buffer[: len(head) + 4]
    lines = head.lower().split(b"\r\n")
    length = next((int(x.split(b":")[1]) for x in lines if x.startswith(b"content-length:")), 0)
    if b"transfer-encoding: chunked" in lines:
        while not buffer.endswith(b"0\r\n\r\n"):
            buffer += sock.recv(65536)
        body = bytes(buffer)
        del buffer[:]
        return head, body
    if head.startswith(b"HTTP/1.1 204") or head_only:
        return head, b""
    while len(buffer) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed mid-body"
        buffer += chunk
    body = bytes(buffer[:length])
    del buffer[:length]
    return head, body


def _closed(sock: socket.socket, within: float) -> bytes:
    """What arrives until the server closes the connection (fails after `within` s)."""
    sock.settimeout(within)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_requests_on_one_connection_and_the_request_as_the_app_sees_it(
    server: LiveServer,
) -> None:
    with _connect(server) as sock:
        buffer = bytearray()
        for n in range(3):
            sock.sendall(_request(f"/a%20b?n={n}", b"hello", extra="X-Mixed-Case: V\r\n"))
            head, body = _response(sock, buffer)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            got = orjson.loads(body)
            assert got["path"] == "/a b"
            assert got["raw_path"] == "/a%20b"
            assert got["query"] == f"n={n}"
            assert got["headers"]["x-mixed-case"] == "V"  # names lower-cased, values kept
            assert got["length"] == 5
            assert got["scheme"] == "http"


def test_pipelined_requests_are_answered_in_order(server: LiveServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"".join(_request(f"/p{n}", b"x" * n) for n in range(1, 5)))
        buffer = bytearray()
        paths = [orjson.loads(_response(sock, buffer)[1])["path"] for _ in range(4)]
    assert paths == ["/p1", "/p2", "/p3", "/p4"]


def test_expect_100_continue_is_answered_before_the_body_is_sent(server: LiveServer) -> None:
    with _connect(server) as sock:
        body = b"y" * 1000
        head = _request("/echo", body, extra="Expect: 100-continue\r\n")[: -len(body)]
        sock.sendall(head)
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        buffer = bytearray(interim[len(b"HTTP/1.1 100 Continue\r\n\r\n") :])
        sock.sendall(body)
        assert orjson.loads(_response(sock, buffer)[1])["length"] == 1000


def test_a_chunked_and_a_large_body_arrive_whole(server: LiveServer) -> None:
    with _connect(server) as sock:
        pieces = [b"a" * 5000, b"b" * 7, b"c" * 70000]
        chunked = b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\n\r\n" + chunked
        )
        buffer = bytearray()
        got = orjson.loads(_response(sock, buffer)[1])
        assert got["length"] == 75007
        assert got["tail"] == "c" * 8
        large = bytes(range(256)) * 4096  # 1 MB, past the read-pause mark many times
        sock.sendall(_request("/echo", large))
        got = orjson.loads(_response(sock, buffer)[1])
        assert got["length"] == len(large)


def test_head_and_204_have_no_body_and_the_connection_stays_usable(server: LiveServer) -> None:
    with _connect(server) as sock:
        buffer = bytearray()
        sock.sendall(_request("/echo", method="HEAD"))
        head, body = _response(sock, buffer, head_only=True)
        assert head.startswith(b"HTTP/1.1 200")
        assert body == b""
        assert b"content-length:" in head.lower()
        sock.sendall(_request("/empty"))
        head, _ = _response(sock, buffer)
        assert head.startswith(b"HTTP/1.1 204")
        assert b"transfer-encoding" not in head.lower()
        sock.sendall(_request("/echo", b"after"))
        assert orjson.loads(_response(sock, buffer)[1])["length"] == 5
        assert not buffer  # nothing but the answers came


def test_forwarded_headers_from_a_trusted_proxy_set_the_client(server: LiveServer) -> None:
    with _connect(server) as sock:
        buffer = bytearray()
        extra = "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n"
        sock.sendall(_request("/echo", extra=extra))
        got = orjson.loads(_response(sock, buffer)[1])
        assert (got["client"], got["scheme"]) == ("203.0.113.7", "https")
        sock.sendall(_request("/echo"))  # the next request on the connection has its own
        got = orjson.loads(_response(sock, buffer)[1])
        assert (got["client"], got["scheme"]) == ("127.0.0.1", "http")


def test_an_app_that_fails_before_answering_gets_a_500_and_the_connection_closes(
    server: LiveServer,
) -> None:
    with _connect(server) as sock:
        sock.sendall(_request("/fail-before"))
        data = _closed(sock, 5)
    assert data.startswith(b"HTTP/1.1 500 ")
    assert b"\r\n\r\n" in data
    assert b"Internal Server Error" in data


@pytest.mark.parametrize("path", ["/fail-after", "/bad-header"])
def test_an_app_that_fails_mid_answer_closes_the_connection(server: LiveServer, path: str) -> None:
    with _connect(server) as sock:
        sock.sendall(_request(path))
        data = _closed(sock, 5)
    assert b"set-cookie" not in data.lower()  # a header with a line break is never sent
    assert not data.endswith(b"0\r\n\r\n")  # a cut answer never looks complete


def test_an_idle_kept_alive_connection_closes_quietly_after_the_keep_alive_timeout(
    server: LiveServer,
) -> None:
    with _connect(server) as sock:
        buffer = bytearray()
        sock.sendall(_request("/echo"))
        _response(sock, buffer)
        started = time.monotonic()
        assert _closed(sock, 5) == b""
        assert 0.8 < time.monotonic() - started < 2.5  # timeout_keep_alive = 1


def test_a_client_that_leaves_is_told_by_receive(server: LiveServer) -> None:
    del seen[:]
    with _connect(server) as sock:
        sock.sendall(_request("/wait-for-disconnect", b"body"))
        time.sleep(0.2)
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [
        {"path": "/wait-for-disconnect", "messages": ["http.request", "http.disconnect"]}
    ]


def test_a_client_that_leaves_mid_body_is_told_by_receive(server: LiveServer) -> None:
    del seen[:]
    with _connect(server) as sock:
        sock.sendall(_request("/wait-for-disconnect", b"z" * 100)[:-60])
        time.sleep(0.2)
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen
    assert seen[0]["messages"][-1] == "http.disconnect"
    assert "http.request" in seen[0]["messages"]  # the 40 bytes that came, then the end


async def test_shutdown_closes_idle_connections_and_ends_busy_ones_after_their_answer() -> None:
    config = ServeOptions(log_level="critical").uvicorn_config(_app)
    config.http = GatewayHttpProtocol
    with LiveServer(_app, server=GatewayServer(config, drain_seconds=1)) as live:
        idle = _connect(live)
        busy = _connect(live)
        head = _request("/echo", b"12345")
        busy.sendall(head[:-2])  # the body not all sent: the request is being served
        await asyncio.sleep(0.2)
        live._server.should_exit = True
        await asyncio.sleep(0.3)
        assert _closed(idle, 5) == b""
        busy.sendall(head[-2:])
        data = _closed(busy, 5)
        assert data.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"connection: close" in data.lower()
        idle.close()
        busy.close()
