"""The load generator of `bench_gateway.py`: its own process, raw asyncio HTTP/1.1.

httpx costs more per request than the gateway under test, so this speaks HTTP/1.1 itself
over keep-alive connections (`asyncio.Protocol`, one pre-serialised request, incremental
chunked decoding). It is driven by `bench_gateway.py` through JSON lines:

    → {"op": "prepare", "host", "port", "path", "key", "body", "stream", "concurrency",
       "requests", "duration", "warmup", "save_body"}
    ← {"event": "ready"}      connections open, warm-up requests answered
    → {"op": "go"}
    ← {"event": "done", "count", "errors", "elapsed", "latency": [...], "ttfb": [...],
       "first_error"}
    → {"op": "quit"}

The split between `prepare` and `go` lets the caller read the gateway's CPU time exactly
around the measured requests. Connections stay open until the next `prepare` or `quit`,
so closing them is not counted either.

Latency is from writing the request to the end of the response; `ttfb` is to the first
byte of the body for JSON responses and to the first `data:` line for SSE streams. A
response counts as an error if its status is not 200, or a stream does not end with
`data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_DONE_MARK = b"data: [DONE]"


@dataclass(kw_only=True)
class Result:
    """One response as the load generator saw it."""

    status: int
    ttfb: float
    end: float
    ok: bool
    error: str | None = None
    body: bytes | None = None


@dataclass(kw_only=True)
class _Pending:
    started: float
    stream: bool
    keep_body: bool
    future: asyncio.Future[Result]
    status: int = 0
    head_done: bool = False
    length: int | None = None  # content-length; None with chunked
    chunked: bool = False
    received: int = 0
    first_body: float = 0.0
    first_data: float = 0.0
    seen: bytearray = field(default_factory=bytearray)  # early body, to find "data:"
    tail: bytes = b""
    body: bytearray | None = None


class ClientProtocol(asyncio.Protocol):
    """One keep-alive connection; one request in flight at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buf = bytearray()
        self._pending: _Pending | None = None
        self._chunk_left = 0
        self._need_crlf = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, raw: bytes, *, stream: bool, keep_body: bool) -> asyncio.Future[Result]:
        """Write one request; the future resolves when its response is complete."""
        if self.transport is None or self.transport.is_closing():
            raise ConnectionError("the connection is closed")
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending = _Pending(
            started=time.perf_counter(),
            stream=stream,
            keep_body=keep_body,
            future=future,
            body=bytearray() if keep_body else None,
        )
        self._chunk_left = 0
        self._need_crlf = False
        self.transport.write(raw)
        return future

    def data_received(self, data: bytes) -> None:
        p = self._pending
        if p is None:
            return  # bytes after a finished response: nothing to do with them
        now = time.perf_counter()
        self._buf += data
        if not p.head_done:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
            del self._buf[: end + 4]
            try:
                p.status = int(lines[0].split(" ", 2)[1])
            except (IndexError, ValueError):
                self._finish(p, now, error=f"bad status line {lines[0]!r}")
                return
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    p.length = int(value)
                elif name == "transfer-encoding" and "chunked" in value.lower():
                    p.chunked = True
            p.head_done = True
        if p.chunked:
            self._feed_chunked(p, now)
        else:
            if self._buf:
                self._on_body(p, bytes(self._buf), now)
                self._buf.clear()
            if p.length is not None and p.received >= p.length:
                self._finish(p, now)

    def _feed_chunked(self, p: _Pending, now: float) -> None:
        buf = self._buf
        pos = 0
        size_total = len(buf)
        while pos < size_total:
            if self._chunk_left:
                take = min(self._chunk_left, size_total - pos)
                self._on_body(p, bytes(buf[pos : pos + take]), now)
                pos += take
                self._chunk_left -= take
                if not self._chunk_left:
                    self._need_crlf = True
                continue
            if self._need_crlf:
                if size_total - pos < 2:
                    break
                pos += 2
                self._need_crlf = False
                continue
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                break
            size = int(bytes(buf[pos:nl]).split(b";")[0], 16)
            if size == 0:
                # Last chunk; no trailers are expected, just the closing CRLF.
                if size_total - nl - 2 < 2:
                    break
                pos = nl + 4
                del buf[:pos]
                self._finish(p, now)
                return
            pos = nl + 2
            self._chunk_left = size
        del buf[:pos]

    def _on_body(self, p: _Pending, data: bytes, now: float) -> None:
        if not p.received:
            p.first_body = now
        p.received += len(data)
        if p.stream and not p.first_data:
            p.seen += data
            if b"data:" in p.seen:
                p.first_data = now
                p.seen.clear()
        p.tail = (p.tail + data)[-64:]
        if p.body is not None:
            p.body += data

    def _finish(self, p: _Pending, now: float, error: str | None = None) -> None:
        self._pending = None
        if error is None and p.status != 200:
            error = f"HTTP {p.status}"
        if error is None and p.stream and _DONE_MARK not in p.tail:
            error = "the stream did not end with data: [DONE]"
        ttfb = (p.first_data if p.stream else p.first_body) or now
        p.future.set_result(
            Result(
                status=p.status,
                ttfb=ttfb - p.started,
                end=now - p.started,
                ok=error is None,
                error=error,
                body=bytes(p.body) if p.body is not None else None,
            )
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        p = self._pending
        if p is not None:
            now = time.perf_counter()
            if p.head_done and p.length is None and not p.chunked:
                self._finish(p, now)  # body delimited by the end of the connection
            else:
                self._finish(p, now, error=f"connection closed by the server ({exc or 'EOF'})")
        if not self.lost.done():
            self.lost.set_result(None)


class LoadGen:
    """The state between `prepare` and `go`."""

    def __init__(self) -> None:
        self.conns: list[ClientProtocol] = []
        self.spec: dict[str, Any] = {}
        self.raw = b""

    async def close(self) -> None:
        for conn in self.conns:
            if conn.transport is not None:
                conn.transport.close()
        if self.conns:
            await asyncio.wait([c.lost for c in self.conns], timeout=5)
        self.conns = []

    async def prepare(self, spec: dict[str, Any]) -> None:
        await self.close()
        self.spec = spec
        body = spec["body"].encode()
        self.raw = (
            f"POST {spec['path']} HTTP/1.1\r\nhost: {spec['host']}:{spec['port']}\r\n"
            "content-type: application/json\r\naccept: */*\r\n"
            f"authorization: Bearer {spec['key']}\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body
        loop = asyncio.get_running_loop()
        for _ in range(spec["concurrency"]):
            _, conn = await loop.create_connection(ClientProtocol, spec["host"], spec["port"])
            self.conns.append(conn)
        per_conn = -(-spec["warmup"] // len(self.conns))  # ceil; 0 means no warm-up
        results = await asyncio.gather(*(self._warm(c, per_conn) for c in self.conns))
        errors = [r.error for rs in results for r in rs if not r.ok]
        if errors:
            raise RuntimeError(f"warm-up request failed: {errors[0]}")

    async def _warm(self, conn: ClientProtocol, n: int) -> list[Result]:
        return [
            await conn.request(self.raw, stream=self.spec["stream"], keep_body=False)
            for _ in range(n)
        ]

    async def go(self) -> dict[str, Any]:
        spec = self.spec
        budget = spec["requests"]
        deadline = time.perf_counter() + spec["duration"]
        latency: list[float] = []
        ttfb: list[float] = []
        errors: list[str] = []
        kept: list[bytes] = []

        async def worker(conn: ClientProtocol) -> None:
            nonlocal budget
            while budget > 0 and time.perf_counter() < deadline:
                budget -= 1
                try:
                    result = await conn.request(
                        self.raw, stream=spec["stream"], keep_body=bool(spec.get("save_body"))
                    )
                except ConnectionError as exc:
                    errors.append(str(exc))
                    return
                if result.ok:
                    latency.append(result.end)
                    ttfb.append(result.ttfb)
                    if result.body is not None and not kept:
                        kept.append(result.body)
                else:
                    errors.append(result.error or "error")
                    if conn.transport is None:
                        return

        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in self.conns))
        elapsed = time.perf_counter() - started
        if kept and spec.get("save_body"):
            # After the measured window, so a blocking write costs nothing that counts.
            _save(spec["save_body"], kept[0])
        return {
            "event": "done",
            "count": len(latency),
            "errors": len(errors),
            "first_error": errors[0] if errors else None,
            "elapsed": elapsed,
            "latency": latency,
            "ttfb": ttfb,
        }


def _save(path: str, data: bytes) -> None:
    Path(path).write_bytes(data)


async def _read_line(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    line = await reader.readline()
    return json.loads(line) if line else None


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def run() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    gen = LoadGen()
    try:
        while (command := await _read_line(reader)) is not None:
            op = command.get("op")
            try:
                if op == "prepare":
                    await gen.prepare(command)
                    _reply({"event": "ready"})
                elif op == "go":
                    _reply(await gen.go())
                elif op == "quit":
                    break
                else:
                    _reply({"event": "error", "message": f"unknown op {op!r}"})
            except (OSError, RuntimeError, ValueError) as exc:
                await gen.close()
                _reply({"event": "error", "message": f"{type(exc).__name__}: {exc}"})
    finally:
        await gen.close()


if __name__ == "__main__":
    asyncio.run(run())
