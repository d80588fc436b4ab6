"""The floor of a pass-through gateway: the least a Python process can do to relay one
request to an upstream and its answer back, for `bench_hot_path.py --floor` and
`bench_instructions.py --floor` to measure beside `toolwire serve`.

Run: `python benchmarks/floor_proxy.py --upstream-port P [--port 0]` (prints `listening
on <port>` once it accepts connections, then serves until killed).

Issue 29 puts the floor at "a process that parses one request, calls the upstream and
copies its answer back": this is that process, on the same parts the gateway stands on
(uvloop, httptools, orjson), with nothing else. Per request it parses the client's
request (httptools), reads the body's `model` as a router must (orjson), writes the body
upstream on a kept-alive connection with a head of its own, parses the answer (httptools)
and copies it back: a `content-length` body in one write, or chunked transfer encoding
relayed one upstream chunk per client chunk as it comes, which is what the gateway's
native pass-through of a stream does. No keys, limits, validation, logs, metrics,
timeouts, errors or flow control: a figure, not a server.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from typing import Any

import httptools
import orjson
import uvloop


class _Upstream(asyncio.Protocol):
    """One kept-alive connection to the upstream, used by one client connection."""

    def __init__(self, client: _Client) -> None:
        self.client = client
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.chunked = False
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.chunked = False
        self.body = []

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            self.chunked = True

    def on_headers_complete(self) -> None:
        if self.chunked:
            status = self.parser.get_status_code()
            self.client.write(
                b"HTTP/1.1 %d OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n" % status
            )

    def on_body(self, body: bytes) -> None:
        if self.chunked:
            self.client.write(b"%x\r\n%s\r\n" % (len(body), body))
        else:
            self.body.append(body)

    def on_message_complete(self) -> None:
        if self.chunked:
            self.client.write(b"0\r\n\r\n")
            return
        body = b"".join(self.body)
        status = self.parser.get_status_code()
        self.client.write(
            b"HTTP/1.1 %d OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (status, len(body), body)
        )


class _Client(asyncio.Protocol):
    """A client connection: its requests, one at a time, relayed upstream."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.upstream: _Upstream | None = None
        self.url = b""
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_message_begin(self) -> None:
        self.body = []

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self.body)
        model = orjson.loads(body).get("model") if body else None
        head = (
            b"%s %s HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\n"
            b"x-model: %s\r\ncontent-length: %d\r\n\r\n"
            % (
                self.parser.get_method(),
                self.url,
                self.upstream_port,
                str(model).encode(),
                len(body),
            )
        )
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.write(head + body)
        else:
            asyncio.get_running_loop().create_task(self._connect(head + body))

    async def _connect(self, request: bytes) -> None:
        loop = asyncio.get_running_loop()
        _, upstream = await loop.create_connection(
            lambda: _Upstream(self), "127.0.0.1", self.upstream_port
        )
        sock: Any = upstream.transport.get_extra_info("socket") if upstream.transport else None
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.upstream = upstream
        assert upstream.transport is not None
        upstream.transport.write(request)


async def _serve(port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(upstream_port), "127.0.0.1", port)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream-port", type=int, required=True)
    args = parser.parse_args()
    uvloop.run(_serve(args.port, args.upstream_port))


if __name__ == "__main__":
    main()
