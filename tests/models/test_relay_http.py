"""The relay transport behind the gateway's upstream client: the model clients see the
same results and the same httpx errors as with httpx's own transport, and its own HTTP/1.1
(keep-alive, framing, back-pressure, timeouts, limits, TLS) holds against servers that
answer exactly what a test says."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes.openai_server import FakeOpenAIServer, completion, delta, dropped, sse, tool_call
from toolwire.models import (
    ModelContentDelta,
    ModelError,
    ModelResponse,
    OpenAIChatModel,
    UserMessage,
)
from toolwire.models.relay_http import RawResponse, RelayTransport, pooled_client

HI = [UserMessage(content="hi")]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_pooled_client_uses_the_relay_transport_when_httptools_is_installed() -> None:
    client = pooled_client(timeout=5)
    try:
        assert isinstance(client._transport, RelayTransport)
    finally:
        await client.aclose()


async def test_complete_and_stream_through_the_transport(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion(tool_calls=[tool_call("f", {"a": 1}, id="c1")]))
    openai_server.reply(sse([delta("Hel"), delta("lo"), delta(finish_reason="stop")]))
    async with pooled_client(timeout=5) as client:
        model = OpenAIChatModel(openai_server.base_url, "k", "m", http_client=client)
        first = await model.complete(HI, [])
        events = [e async for e in model.stream(HI, [])]
    assert first.message.tool_calls[0].arguments == '{"a": 1}'
    # Deltas that arrive in one read may come as one; the text is the same.
    assert "".join(e.text for e in events if isinstance(e, ModelContentDelta)) == "Hello"
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.content == "Hello"
    # Headers arrive as the client set them (the key as a bearer token).
    assert openai_server.requests[0].headers["authorization"] == "Bearer k"


async def test_refused_connection_is_a_connect_error() -> None:
    async with pooled_client(timeout=5) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{closed_port()}/")


async def test_dropped_stream_is_a_protocol_error(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(dropped([delta("partial")]))

    async def read_all(client: httpx.AsyncClient) -> None:
        async with client.stream("POST", f"{openai_server.base_url}/chat/completions") as r:
            async for _ in r.aiter_bytes():
                pass

    async with pooled_client(timeout=5) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await read_all(client)


async def test_model_error_messages_match_httpx_transport() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with pooled_client(timeout=5) as fast, httpx.AsyncClient() as plain:
        errors = []
        for client in (fast, plain):
            model = OpenAIChatModel(url, None, "m", http_client=client, retries=0)
            with pytest.raises(ModelError) as info:
                await model.complete(HI, [])
            errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert "connection refused" in errors[0]


async def test_upstream_cookies_are_not_kept(openai_server: FakeOpenAIServer) -> None:
    reply = completion(content="a")
    reply.headers["set-cookie"] = "session=caller-one; Path=/"
    openai_server.reply(reply)
    openai_server.reply(completion(content="b"))
    async with pooled_client(timeout=5) as client:
        model = OpenAIChatModel(openai_server.base_url, None, "m", http_client=client)
        await model.complete(HI, [])
        await model.complete(HI, [])
    assert "cookie" not in openai_server.requests[1].headers


async def test_the_pooled_client_sends_without_httpx(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_httpx(*args: object, **kwargs: object) -> httpx.Response:
        raise AssertionError("the gateway's upstream requests should not go through httpx")

    monkeypatch.setattr(httpx.AsyncClient, "send", no_httpx)
    openai_server.reply(completion(content="whole"))
    openai_server.reply(sse([delta("str"), delta("eam"), delta(finish_reason="stop")]))
    async with pooled_client(timeout=5) as client:
        model = OpenAIChatModel(openai_server.base_url, "secret-key", "m", http_client=client)
        whole = await model.complete(HI, [])
        streamed = [e async for e in model.stream(HI, [])]
    assert whole.message.content == "whole"
    assert isinstance(streamed[-1], ModelResponse)
    assert streamed[-1].message.content == "stream"
    sent = openai_server.requests[0].headers
    assert sent["authorization"] == "Bearer secret-key"
    assert sent["content-type"] == "application/json"
    # Bodies are read as sent (nothing decompresses them): compression is never asked for.
    assert "gzip" not in sent.get("accept-encoding", "")


async def test_a_client_a_user_passes_goes_through_httpx_with_its_hooks(
    openai_server: FakeOpenAIServer,
) -> None:
    seen: list[str] = []

    async def hook(request: httpx.Request) -> None:
        seen.append(request.headers["x-team"])

    openai_server.reply(completion(content="ok"))
    async with httpx.AsyncClient(headers={"x-team": "blue"}, event_hooks={"request": [hook]}) as c:
        model = OpenAIChatModel(openai_server.base_url, None, "m", http_client=c)
        assert (await model.complete(HI, [])).message.content == "ok"
    assert seen == ["blue"]
    assert openai_server.requests[0].headers["x-team"] == "blue"


# --- the transport's own HTTP/1.1, against servers that answer exactly what a test says ---


Answer = Callable[[bytes], Awaitable[bytes | None]]
"""From the request's bytes, the bytes to write (None: close without answering; a
`closing` reply: close once it is written)."""


class closing(bytes):
    """A reply after which the server closes the connection."""


class Upstream:
    """A loopback server that reads one request at a time and writes what `answer` says:
    every connection and every request is counted."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.handlers: list[asyncio.Task[None]] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Upstream:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1/chat/completions"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self.handlers.append(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                reply = await self.answer(request)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
                if isinstance(reply, closing):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def fixed(*replies: bytes | None) -> Answer:
    queue = list(replies)

    async def answer(request: bytes) -> bytes | None:
        return queue.pop(0) if queue else None

    return answer


def ok(body: bytes, *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (head.encode(), len(body), body)


def chunked(*pieces: bytes) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"


TIMEOUT = httpx.Timeout(5.0)


async def body_of(response: RawResponse) -> bytes:
    try:
        return b"".join([piece async for piece in response.aiter_bytes()])
    finally:
        await response.aclose()


async def test_sequential_requests_share_one_keep_alive_connection() -> None:
    async with Upstream(fixed(ok(b"one"), chunked(b"tw", b"o"), ok(b"three"))) as up:
        transport = RelayTransport()
        for expected in (b"one", b"two", b"three"):
            response = await transport.send(up.url, b"{}", {"x-a": "1"}, TIMEOUT)
            assert response.status_code == 200
            assert await body_of(response) == expected
        await transport.aclose()
    assert up.connections == 1
    first = up.requests[0]
    assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in first
    assert b"\r\nContent-Length: 2\r\n" in first
    assert b"\r\nx-a: 1\r\n" in first
    assert first.endswith(b"\r\n\r\n{}")


async def test_a_body_without_a_length_ends_with_the_connection() -> None:
    reply = closing(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
    async with Upstream(fixed(reply, closing(b"HTTP/1.1 200 OK\r\n\r\n"))) as up:
        transport = RelayTransport()
        assert await body_of(await transport.send(up.url, b"", {}, TIMEOUT)) == b"all of it"
        # The connection is gone; the next request opens another.
        assert await body_of(await transport.send(up.url, b"", {}, TIMEOUT)) == b""
        await transport.aclose()
    assert up.connections == 2


async def test_a_connection_the_upstream_closed_while_idle_is_not_reused() -> None:
    async with Upstream(fixed(ok(b"a"), None)) as up:
        transport = RelayTransport()
        assert await body_of(await transport.send(up.url, b"", {}, TIMEOUT)) == b"a"
        up.answer = fixed(None)
        # The server closes the idle connection; wait until the client has seen it.
        for writer in up.writers:
            writer.close()
        await asyncio.sleep(0.05)
        up.answer = fixed(ok(b"b"))
        assert await body_of(await transport.send(up.url, b"", {}, TIMEOUT)) == b"b"
        await transport.aclose()
    assert up.connections == 2


async def test_a_stream_left_unread_closes_its_connection() -> None:
    async def slow(request: bytes) -> bytes | None:
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n"

    async with Upstream(slow) as up:
        transport = RelayTransport()
        response = await transport.send(up.url, b"", {}, TIMEOUT)
        pieces = response.aiter_bytes()
        assert await anext(pieces) == b"first"
        await response.aclose()
        up.answer = fixed(ok(b"next"))
        assert await body_of(await transport.send(up.url, b"", {}, TIMEOUT)) == b"next"
        await transport.aclose()
    assert up.connections == 2


async def test_a_large_body_is_read_whole_under_back_pressure() -> None:
    big = bytes(range(256)) * 8192  # 2 MiB, 8x the high-water mark
    async with Upstream(
        fixed(ok(big), chunked(*[big[i : i + 1000] for i in range(0, 300_000, 1000)]))
    ) as up:
        transport = RelayTransport()
        response = await transport.send(up.url, b"", {}, TIMEOUT)
        seen = []
        async for piece in response.aiter_bytes():
            seen.append(piece)
            await asyncio.sleep(0)  # a slow reader
        await response.aclose()
        assert b"".join(seen) == big
        assert await body_of(await transport.send(up.url, b"", {}, TIMEOUT)) == big[:300_000]
        await transport.aclose()
    assert up.connections == 1


async def test_an_upstream_that_stops_sending_is_a_read_timeout() -> None:
    async def stalls(request: bytes) -> bytes | None:
        return b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"

    async with Upstream(stalls) as up:
        transport = RelayTransport()
        response = await transport.send(up.url, b"", {}, httpx.Timeout(0.2))
        with pytest.raises(httpx.ReadTimeout):
            await body_of(response)
        never = asyncio.Event()

        async def silent(request: bytes) -> bytes | None:
            await never.wait()
            return None

        up.answer = silent
        with pytest.raises(httpx.ReadTimeout):
            await transport.send(up.url, b"", {}, httpx.Timeout(0.2))
        await transport.aclose()


def _trickle(up: list[Upstream], pieces: int, then: bytes | None) -> Answer:
    """A chunked answer written one byte-chunk every 0.1 s, then `then` (`None`: a stall)."""

    async def answer(request: bytes) -> bytes | None:
        writer = up[0].writers[-1]
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(pieces):
            await asyncio.sleep(0.1)
            writer.write(b"1\r\n%d\r\n" % i)
        if then is None:
            await asyncio.Event().wait()
        await asyncio.sleep(0.1)
        return then

    return answer


async def test_the_read_timeout_is_for_each_read_not_the_whole_body() -> None:
    holder: list[Upstream] = []
    async with Upstream(_trickle(holder, 8, b"0\r\n\r\n")) as up:
        holder.append(up)
        transport = RelayTransport()
        response = await transport.send(up.url, b"", {}, httpx.Timeout(0.3))
        # 0.9 s in all, never 0.3 s without a byte.
        assert await body_of(response) == b"01234567"
        await transport.aclose()


async def test_a_stall_after_some_body_is_a_read_timeout_after_the_last_byte() -> None:
    holder: list[Upstream] = []
    async with Upstream(_trickle(holder, 5, None)) as up:
        holder.append(up)
        transport = RelayTransport()
        loop = asyncio.get_running_loop()
        response = await transport.send(up.url, b"", {}, httpx.Timeout(0.3))
        seen: list[bytes] = []
        last = loop.time()

        async def read() -> None:
            nonlocal last
            async for piece in response.aiter_bytes():
                seen.append(piece)
                last = loop.time()

        with pytest.raises(httpx.ReadTimeout):
            await read()
        waited = loop.time() - last
        await response.aclose()
        await transport.aclose()
    assert b"".join(seen) == b"01234"
    assert 0.25 <= waited < 1.0


async def test_an_idle_connection_s_old_deadline_does_not_end_its_next_read() -> None:
    async def slow(request: bytes) -> bytes | None:
        await asyncio.sleep(0.25)
        return ok(b"late")

    async with Upstream(fixed(ok(b"first"))) as up:
        transport = RelayTransport()
        timeout = httpx.Timeout(0.3)
        assert await body_of(await transport.send(up.url, b"", {}, timeout)) == b"first"
        await asyncio.sleep(0.2)  # idle in the pool as the first read's deadline nears
        up.answer = slow
        # 0.45 s after the first read began, 0.25 s into this one: in time.
        assert await body_of(await transport.send(up.url, b"", {}, timeout)) == b"late"
        await transport.aclose()
    assert up.connections == 1


async def test_a_response_cut_short_is_a_protocol_error() -> None:
    async with Upstream(fixed(closing(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))) as up:
        transport = RelayTransport()
        response = await transport.send(up.url, b"", {}, TIMEOUT)
        with pytest.raises(httpx.RemoteProtocolError, match="incomplete response body"):
            await body_of(response)
        await transport.aclose()


@pytest.mark.parametrize(
    "reply",
    [b"SPDY/3 200 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"],
    ids=["not http", "bad length"],
)
async def test_a_response_that_is_not_http_is_a_protocol_error(reply: bytes) -> None:
    async with Upstream(fixed(reply)) as up:
        transport = RelayTransport()
        with pytest.raises(httpx.RemoteProtocolError, match="invalid HTTP response"):
            await transport.send(up.url, b"", {}, TIMEOUT)
        await transport.aclose()


async def test_headers_without_end_are_refused() -> None:
    flood = b"HTTP/1.1 200 OK\r\n" + b"x-pad: " + b"a" * 100_000 + b"\r\n\r\n"
    async with Upstream(fixed(flood)) as up:
        transport = RelayTransport()
        with pytest.raises(httpx.RemoteProtocolError, match="too large"):
            await transport.send(up.url, b"", {}, TIMEOUT)
        await transport.aclose()


async def test_an_interim_response_is_skipped() -> None:
    reply = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok(b"final", "X-Final: yes")
    async with Upstream(fixed(reply)) as up:
        transport = RelayTransport()
        response = await transport.send(up.url, b"", {}, TIMEOUT)
        assert response.status_code == 200
        assert response.headers["x-final"] == "yes"
        assert "link" not in response.headers
        assert await body_of(response) == b"final"
        await transport.aclose()


async def test_repeated_headers_are_joined_and_names_are_case_insensitive() -> None:
    reply = ok(b"", "Retry-After: 1", "X-Many: a", "x-many: b")
    async with Upstream(fixed(reply)) as up:
        transport = RelayTransport()
        response = await transport.send(up.url, b"", {}, TIMEOUT)
        await response.aclose()
        assert response.headers.get("RETRY-after") == "1"
        assert response.headers["x-many"] == "a, b"
        assert response.headers.get("absent", "-") == "-"
        await transport.aclose()


@pytest.mark.parametrize(
    "headers",
    [{"x-evil": "a\r\nx-injected: 1"}, {"x-evil\r\nx-injected": "1"}, {"x-a": "b\nc"}],
)
async def test_a_header_that_spans_lines_is_refused_before_sending(
    headers: dict[str, str],
) -> None:
    async with Upstream(fixed(ok(b""))) as up:
        transport = RelayTransport()
        with pytest.raises(httpx.LocalProtocolError, match="spans lines"):
            await transport.send(up.url, b"", headers, TIMEOUT)
        await transport.aclose()
    assert up.requests == []


async def test_requests_beyond_the_limit_wait_for_a_connection() -> None:
    release = asyncio.Event()

    async def held(request: bytes) -> bytes | None:
        await release.wait()
        return ok(b"done")

    async with Upstream(held) as up:
        transport = RelayTransport(max_connections=1)
        first = asyncio.ensure_future(transport.send(up.url, b"", {}, TIMEOUT))
        await asyncio.sleep(0.05)
        with pytest.raises(httpx.PoolTimeout):
            await transport.send(up.url, b"", {}, httpx.Timeout(5.0, pool=0.1))
        second = asyncio.ensure_future(transport.send(up.url, b"", {}, TIMEOUT))
        await asyncio.sleep(0.05)
        assert not second.done()
        release.set()
        assert await body_of(await first) == b"done"
        assert await body_of(await second) == b"done"
        await transport.aclose()
    assert up.connections == 1


async def test_the_httpx_path_sends_any_method() -> None:
    replies = fixed(ok(b"listed"), ok(b"ignored"), ok(b"posted"))
    async with Upstream(replies) as up, httpx.AsyncClient(transport=RelayTransport()) as client:
        got = await client.get(up.url, headers={"x-probe": "1"})
        head = await client.head(up.url)
        posted = await client.post(up.url, content=b"abc")
    assert (got.status_code, got.text) == (200, "listed")
    assert head.status_code == 200
    assert head.content == b""
    assert posted.text == "posted"
    assert up.requests[0].startswith(b"GET /v1/chat/completions HTTP/1.1\r\n")
    assert b"content-length" not in up.requests[0].lower()
    assert up.requests[1].startswith(b"HEAD ")
    assert up.requests[2].endswith(b"\r\n\r\nabc")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http:///nohost", "http://h:99999/"])
async def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    transport = RelayTransport()
    with pytest.raises((httpx.UnsupportedProtocol, httpx.InvalidURL)):
        await transport.send(url, b"", {}, TIMEOUT)


async def test_https_checks_the_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    server = await asyncio.start_server(
        lambda r, w: _answer_once(r, w, ok(b"secret")), "127.0.0.1", 0, ssl=served
    )
    port = server.sockets[0].getsockname()[1]
    url = f"https://localhost:{port}/v1"
    try:
        untrusting = RelayTransport()
        with pytest.raises(httpx.ConnectError, match="SSL"):
            await untrusting.send(url, b"", {}, TIMEOUT)
        trusting = RelayTransport(ssl_context=ssl.create_default_context(cafile=cert))
        assert await body_of(await trusting.send(url, b"", {}, TIMEOUT)) == b"secret"
        await trusting.aclose()
    finally:
        server.close()


async def _answer_once(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: bytes
) -> None:
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
        pass
    finally:
        writer.close()


def self_signed(directory: Path) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


# --- a model-based test: any framing, any cut of the bytes, the same bodies back ---------


REPLY = st.tuples(
    st.binary(max_size=3000),
    st.sampled_from(["length", "chunked", "close"]),
    st.lists(st.integers(1, 700), min_size=1, max_size=6),  # chunk sizes (chunked)
    st.lists(st.integers(1, 400), max_size=8),  # where the server cuts its writes
    st.booleans(),  # the server closes the connection once it is idle
)


def _framed(body: bytes, framing: str, sizes: list[int]) -> bytes:
    if framing == "length":
        return ok(body)
    if framing == "close":
        return b"HTTP/1.1 200 OK\r\n\r\n" + body
    pieces, at, turn = [], 0, 0
    while at < len(body):
        size = sizes[turn % len(sizes)]
        pieces.append(body[at : at + size])
        at, turn = at + size, turn + 1
    return chunked(*pieces)


@settings(max_examples=60, deadline=None)
@given(st.lists(REPLY, min_size=1, max_size=5))
def test_any_framing_and_any_cut_give_the_same_bodies(
    replies: list[tuple[bytes, str, list[int], list[int], bool]],
) -> None:
    async def scenario() -> None:
        queue = list(replies)
        connections = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            try:
                while queue:
                    await reader.readuntil(b"\r\n\r\n")
                    body, framing, sizes, cuts, idle_close = queue.pop(0)
                    data = _framed(body, framing, sizes)
                    at = 0
                    for cut in cuts:
                        writer.write(data[at : at + cut])
                        await writer.drain()
                        await asyncio.sleep(0)
                        at += cut
                    writer.write(data[at:])
                    await writer.drain()
                    if framing == "close" or idle_close:
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
        transport = RelayTransport()
        try:
            for body, framing, _, _, idle_close in replies:
                response = await transport.send(url, b"{}", {}, TIMEOUT)
                assert await body_of(response) == body
                if framing != "close" and idle_close:
                    await asyncio.sleep(0.02)  # the client sees the close before reusing
        finally:
            await transport.aclose()
            server.close()
        expected = 1 + sum(1 for r in replies[:-1] if r[1] == "close" or r[4])
        assert connections == expected

    asyncio.run(scenario())
