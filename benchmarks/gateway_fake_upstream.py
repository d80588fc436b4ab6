"""An instant, cheap OpenAI-compatible upstream for `bench_gateway.py`.

Run: `python benchmarks/gateway_fake_upstream.py [--port 0] [--hermes-kb 128]`
Prints `listening on <port>` once it accepts connections, then serves until killed.

Raw asyncio (`asyncio.Protocol`), HTTP/1.1 keep-alive, and every response built once at
start-up, so that the upstream costs tens of µs per request (0.015-0.05 ms of CPU,
kernel included, by machine and load) and the figures measure the gateway, not the
fake. `POST .../chat/completions` answers by the request body:

- `"stream": true` → a 20-chunk SSE stream (chunked transfer encoding, one HTTP chunk per
  event, all written at once), then `data: [DONE]`;
- otherwise → one small `chat.completion` JSON;
- a model whose name contains `tools` → the server-tool loop: a native call of `lookup`
  (`{"key": "k1"}`) while the request holds no tool result yet, then the usual answer;
- a model whose name contains `hermes` → the `parse:hermes` scenario: the content is
  `<tool_call>{"name": "write_file", "arguments": {...}}</tool_call>` as raw text, with a
  string argument of `--hermes-kb` KB, streamed in 1-character deltas (1 KB if the name
  also contains `warm`: a cheap warm-up of the same path).

`GET /healthz` and `GET /v1/models` answer 200. Everything else is 404.

`--cost-ms X` makes each chat completion burn X ms of CPU before it answers: an upstream
that does some work (a real server parses, validates and serialises), against which "half
of the direct throughput" is a meaningful figure; 0 (the default) is the instant upstream.

`--starlette` serves the same answers from a Starlette app under uvicorn (httptools,
uvloop, one worker): the mock issue 29 measured the gateway against, a Python web app
doing the least a Python web app does per request (a few tenths of a millisecond), where
the raw one costs tens of µs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, Final, cast

MODEL: Final = "fake-model"
STREAM_CHUNKS: Final = 20
HERMES_TOOL: Final = "write_file"
HERMES_PATH: Final = "notes.txt"
_STREAM_FIELD: Final = re.compile(rb'"stream"\s*:\s*true')
_MODEL_FIELD: Final = re.compile(rb'"model"\s*:\s*"([^"]*)"')
_TOOL_RESULT: Final = re.compile(rb'"role"\s*:\s*"tool"')


def hermes_text(kb: int) -> str:
    """The raw Hermes text of the `parse:hermes` scenario (the whole model output).

    Args:
        kb: Size of the `content` string argument in KB (1024 characters each).
    """
    arguments = {"path": HERMES_PATH, "content": hermes_argument(kb)}
    call = json.dumps({"name": HERMES_TOOL, "arguments": arguments})
    return f"<tool_call>\n{call}\n</tool_call>"


def hermes_argument(kb: int) -> str:
    """The `content` argument of the Hermes call: printable text with quotes and newlines,
    so the parser has escapes to handle, not just letters."""
    line = 'line "quoted" and plain text, 0123456789 abcdefghijklmnopqrstuvwxyz\n'
    size = kb * 1024
    return (line * (size // len(line) + 1))[:size]


def _head(status: str, content_type: str, length: int | None) -> bytes:
    framing = f"content-length: {length}" if length is not None else "transfer-encoding: chunked"
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n{framing}\r\n"
        "connection: keep-alive\r\n\r\n"
    ).encode()


def _json_response(payload: object, status: str = "200 OK") -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return _head(status, "application/json", len(body)) + body


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(events: list[dict[str, object]]) -> bytes:
    parts = [_head("200 OK", "text/event-stream", None)]
    for event in events:
        parts.append(
            _chunk(b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n")
        )
    parts.append(_chunk(b"data: [DONE]\n\n"))
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


def _chunk_event(model: str, delta: dict[str, object], finish: str | None) -> dict[str, object]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def build_responses(hermes_kb: int) -> dict[str, bytes]:
    """Every response, serialised once: `plain`, `stream`, `hermes[_warm][_plain]`,
    `models`, `healthz`, `not_found`."""
    usage = {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32}
    completion = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "The answer is 42.", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }
    stream_events = [_chunk_event(MODEL, {"role": "assistant", "content": "tok0 "}, None)]
    stream_events += [
        _chunk_event(MODEL, {"content": f"tok{i} "}, None) for i in range(1, STREAM_CHUNKS - 1)
    ]
    stream_events.append(_chunk_event(MODEL, {"content": "end."}, "stop"))

    def hermes(kb: int) -> tuple[bytes, bytes]:
        text = hermes_text(kb)
        # One event per character; serialising 130 000 events takes a moment, once.
        model = "fake-hermes"
        events = [_chunk_event(model, {"role": "assistant", "content": ""}, None)]
        events += [_chunk_event(model, {"content": ch}, None) for ch in text]
        events.append(_chunk_event(model, {}, "stop"))
        plain = json.loads(json.dumps(completion))
        plain["model"] = model
        plain["choices"][0]["message"]["content"] = text
        return _sse(events), _json_response(plain)

    call = {
        "id": "call_bench",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"key": "k1"}'},
    }
    tool_plain = json.loads(json.dumps(completion))
    tool_plain["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call],
    }
    tool_plain["choices"][0]["finish_reason"] = "tool_calls"
    tool_events = [
        _chunk_event(
            MODEL,
            {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]},
            None,
        ),
        _chunk_event(MODEL, {}, "tool_calls"),
    ]

    hermes_stream, hermes_plain = hermes(hermes_kb)
    warm_stream, warm_plain = hermes(1)
    return {
        "plain": _json_response(completion),
        "stream": _sse(stream_events),
        "hermes": hermes_stream,
        "hermes_plain": hermes_plain,
        "hermes_warm": warm_stream,
        "hermes_warm_plain": warm_plain,
        "tool_call": _sse(tool_events),
        "tool_call_plain": _json_response(tool_plain),
        "models": _json_response(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]}
        ),
        "healthz": _json_response({"status": "ok"}),
        "not_found": _json_response(
            {"error": {"message": "not found", "type": "invalid_request_error"}}, "404 Not Found"
        ),
    }


class UpstreamProtocol(asyncio.Protocol):
    """One keep-alive connection: parse requests as they arrive, answer each at once."""

    def __init__(self, responses: dict[str, bytes], cost: float = 0.0) -> None:
        self._responses = responses
        self._cost = cost
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not `asyncio.Transport` subclasses; they have its methods.
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while self._transport is not None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buffer[:end]).decode("latin-1")
            lines = head.split("\r\n")
            length = 0
            close = False
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "connection" and value.strip().lower() == "close":
                    close = True
                elif name == "transfer-encoding":
                    self._transport.write(
                        _json_response({"error": "send a content-length"}, "411 Length Required")
                    )
                    self._transport.close()
                    return
            if len(self._buffer) < end + 4 + length:
                return
            body = bytes(self._buffer[end + 4 : end + 4 + length])
            del self._buffer[: end + 4 + length]
            self._transport.write(self._answer(lines[0], body))
            if close:
                self._transport.close()
                return

    def _answer(self, request_line: str, body: bytes) -> bytes:
        method, _, rest = request_line.partition(" ")
        path = rest.partition(" ")[0].partition("?")[0]
        if method == "POST" and path.endswith("/chat/completions"):
            if self._cost:
                until = time.perf_counter() + self._cost
                while time.perf_counter() < until:
                    pass
            found = _MODEL_FIELD.search(body)
            model = found.group(1) if found is not None else b""
            stream = _STREAM_FIELD.search(body) is not None
            if b"tools" in model and _TOOL_RESULT.search(body) is None:
                return self._responses["tool_call" if stream else "tool_call_plain"]
            if b"hermes" in model:
                name = "hermes_warm" if b"warm" in model else "hermes"
                return self._responses[name if stream else f"{name}_plain"]
            return self._responses["stream" if stream else "plain"]
        if method == "GET" and path.endswith("/models"):
            return self._responses["models"]
        if method == "GET" and path in ("/healthz", "/health"):
            return self._responses["healthz"]
        return self._responses["not_found"]

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None


async def serve(host: str, port: int, hermes_kb: int, cost_ms: float = 0.0) -> None:
    responses = build_responses(hermes_kb)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: UpstreamProtocol(responses, cost_ms / 1000),
        host,
        port,
        backlog=1024,
        reuse_address=True,
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on {bound}", flush=True)
    async with server:
        await server.serve_forever()


def unframe(raw: bytes) -> tuple[int, str, list[bytes]]:
    """A prebuilt response as its status, content type and body parts (one per HTTP
    chunk of a chunked one)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    if fields.get("transfer-encoding") != "chunked":
        return status, fields["content-type"], [body]
    parts: list[bytes] = []
    at = 0  # an offset, not a slice per chunk: a 137,000-chunk stream would copy ~TBs
    while at < len(body):
        eol = body.index(b"\r\n", at)
        size = int(body[at:eol], 16)
        if size == 0:
            break
        parts.append(body[eol + 2 : eol + 2 + size])
        at = eol + 2 + size + 2
    return status, fields["content-type"], parts


def serve_starlette(host: str, port: int, hermes_kb: int, cost_ms: float = 0.0) -> None:
    """The same answers from a Starlette app under uvicorn, written the way a small mock
    app is: the body read as JSON, the answer serialised per request (a whole JSON
    response, or one SSE event per chunk of a stream)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    pick = UpstreamProtocol(build_responses(0), cost_ms / 1000)
    answers: dict[str, tuple[int, list[Any]]] = {}
    for name, raw in build_responses(hermes_kb).items():
        status, media, parts = unframe(raw)
        if media.startswith("text/event-stream"):
            events = [p.removeprefix(b"data: ").strip() for p in parts]
            answers[name] = (status, [json.loads(e) for e in events if e != b"[DONE]"])
        else:
            answers[name] = (status, [json.loads(parts[0])])

    async def completions(request: Request) -> Response:
        body = await request.json()
        raw_line = f"POST {request.url.path} HTTP/1.1"
        chosen = pick._answer(raw_line, json.dumps(body, separators=(",", ":")).encode())
        # Chosen by the raw upstream's rules (its Hermes answers built small: only the
        # name is used), answered from `answers` (built at --hermes-kb).
        name = next(n for n, r in pick._responses.items() if r is chosen)
        status, payloads = answers[name]
        if body.get("stream"):

            async def events() -> AsyncIterator[str]:
                for payload in payloads:
                    yield f"data: {json.dumps(payload)}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse(payloads[0], status_code=status)

    async def models(request: Request) -> Response:
        return JSONResponse(answers["models"][1][0])

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models),
            Route("/healthz", models),
        ]
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        app, http="httptools", loop="uvloop", access_log=False, log_level="warning"
    )
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--hermes-kb", type=int, default=128, help="size of the Hermes argument")
    parser.add_argument(
        "--cost-ms", type=float, default=0.0, help="CPU burnt per chat completion (ms)"
    )
    parser.add_argument("--starlette", action="store_true", help="a Starlette app under uvicorn")
    parser.add_argument(
        "--uvloop",
        action="store_true",
        help="the raw server on uvloop (0.03-0.04 ms of CPU per request at concurrency 32, "
        "against 0.04-0.05 on asyncio's own loop)",
    )
    args = parser.parse_args()
    if args.starlette:
        serve_starlette(args.host, args.port, args.hermes_kb, args.cost_ms)
        return
    if args.uvloop:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        asyncio.run(serve(args.host, args.port, args.hermes_kb, args.cost_ms))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
