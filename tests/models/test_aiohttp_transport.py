"""The aiohttp transport behind the gateway's upstream client: the model clients see the
same results and the same httpx errors as with httpx's own transport."""

from __future__ import annotations

import socket

import httpx
import pytest

from fakes.openai_server import FakeOpenAIServer, completion, delta, dropped, sse, tool_call
from toolwire.models import (
    ModelContentDelta,
    ModelError,
    ModelResponse,
    OpenAIChatModel,
    UserMessage,
)
from toolwire.models.aiohttp_transport import AiohttpTransport, pooled_client

HI = [UserMessage(content="hi")]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_pooled_client_uses_aiohttp_when_installed() -> None:
    client = pooled_client(timeout=5)
    try:
        assert isinstance(client._transport, AiohttpTransport)
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
