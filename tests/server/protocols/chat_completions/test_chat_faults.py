"""Upstream faults through the gateway over a real socket: retries before the first byte,
unreachable upstreams, relayed 4xx, mid-stream failures, the upstream key kept secret, and
client disconnects cancelling the upstream request and running server tools."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import e2e_slow_tools
import httpx
import openai
import pytest
from e2e_chat_support import (
    UPSTREAM_KEY_ENV,
    UPSTREAM_SECRET,
    WEATHER_TOOL,
    live_gateway,
    openai_error,
    openai_upstream,
    post_chat,
    sdk,
    sse_chunks,
    user,
)
from live import LiveServer
from openai.types.chat import ChatCompletionChunk
from server_support import config_with

from fakes.openai_server import (
    FakeOpenAIServer,
    Reply,
    calls_sse,
    completion,
    delta,
    dropped,
    error,
    sse,
    tool_call,
)

# Served by uvicorn as it comes, and by the server `toolwire serve` runs, whose protocol
# tells the app of a disconnect itself (no task per request waits for it).
_SERVERS = ["uvicorn", "toolwire"]


@pytest.fixture(scope="module", params=_SERVERS)
def server(
    request: pytest.FixtureRequest, _openai_server_session: FakeOpenAIServer
) -> Iterator[LiveServer]:
    config = config_with(
        upstream=openai_upstream(_openai_server_session.base_url, {"gpt": "gpt-4o"}, retries=2)
    )
    with live_gateway(config, served_by=request.param) as live:
        yield live


@pytest.fixture(scope="module", params=_SERVERS)
def tools_server(
    request: pytest.FixtureRequest, _openai_server_session: FakeOpenAIServer
) -> Iterator[LiveServer]:
    config = config_with(
        upstream=openai_upstream(_openai_server_session.base_url, {"gpt": "gpt-4o"}),
        server_tools={"modules": ["e2e_slow_tools"]},
    )
    with live_gateway(config, served_by=request.param) as live:
        yield live


@pytest.fixture
def slow_tool() -> Iterator[None]:
    e2e_slow_tools.reset()
    yield
    e2e_slow_tools.reset()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- retries before the first byte ----------------------------------------------------------


def test_503_then_200_is_retried(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(1, 503)
    openai_server.reply(completion("recovered"))
    with sdk(server) as client:
        answer = client.chat.completions.create(model="gpt", messages=user())
    assert answer.choices[0].message.content == "recovered"
    assert len(openai_server.requests) == 2
    assert openai_server.requests[0].json == openai_server.requests[1].json


def test_503_then_stream_is_retried(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(1, 502)
    openai_server.reply(sse([delta("re"), delta("covered"), delta(finish_reason="stop")]))
    with sdk(server) as client:
        stream = client.chat.completions.create(model="gpt", messages=user(), stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "recovered"
    assert len(openai_server.requests) == 2


def test_429_with_retry_after_is_retried(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.fail(1, 429, retry_after=0)
    openai_server.reply(completion("ok"))
    with sdk(server) as client:
        answer = client.chat.completions.create(model="gpt", messages=user())
    assert answer.choices[0].message.content == "ok"
    assert len(openai_server.requests) == 2


def test_out_of_retries_is_502(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(3, 503, message="the model is overloaded")
    response = post_chat(server, {"model": "gpt", "messages": user()})
    error = openai_error(response, 502)
    assert error["type"] == "upstream_error"
    assert "\n" not in error["message"]
    assert len(openai_server.requests) == 3  # the first try and two retries


def test_unreachable_upstream_is_502() -> None:
    port = _closed_port()
    config = config_with(
        upstream=openai_upstream(f"http://127.0.0.1:{port}/v1", {"gpt": "gpt-4o"}, retries=1)
    )
    with live_gateway(config) as live:
        plain = post_chat(live, {"model": "gpt", "messages": user()})
        streamed = post_chat(live, {"model": "gpt", "messages": user(), "stream": True})
        with sdk(live) as client, pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="gpt", messages=user())
    for response in (plain, streamed):
        error = openai_error(response, 502)
        assert error["type"] == "upstream_error"
        assert "\n" not in error["message"]
        assert str(port) in error["message"] or "upstream" in error["message"]
    assert info.value.status_code == 502


# --- upstream 4xx relayed ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 404, 422])
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_4xx_is_relayed(
    server: LiveServer, openai_server: FakeOpenAIServer, status: int, stream: bool
) -> None:
    openai_server.reply(
        error(status, f"upstream says no ({status})", code="model_refused", param="messages")
    )
    response = post_chat(server, {"model": "gpt", "messages": user(), "stream": stream})
    error_ = openai_error(response, status)
    assert error_["message"] == f"upstream says no ({status})"
    assert error_["code"] == "model_refused"
    assert error_["param"] == "messages"
    assert len(openai_server.requests) == 1  # a 4xx is never retried


def test_upstream_4xx_through_the_sdk(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(error(400, "context length exceeded", code="context_length_exceeded"))
    with sdk(server) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt", messages=user())
    assert info.value.code == "context_length_exceeded"
    assert "context length exceeded" in info.value.message


# --- a failure mid-stream ---------------------------------------------------------------------


def test_mid_stream_drop_raises_in_the_sdk(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(dropped([delta("The weather "), delta("in Paris is")]))
    received: list[str] = []
    with sdk(server) as client:
        stream = client.chat.completions.create(model="gpt", messages=user(), stream=True)
        with pytest.raises(openai.APIError) as info:
            _read_content(stream, received)
    assert "".join(received) == "The weather in Paris is"
    assert UPSTREAM_SECRET not in str(info.value)
    assert len(openai_server.requests) == 1  # nothing the client saw is repeated


def test_mid_stream_drop_ends_with_an_error_event(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        dropped(
            [
                delta(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"ci'},
                        }
                    ]
                )
            ]
        )
    )
    body = {"model": "gpt", "messages": user(), "tools": [WEATHER_TOOL], "stream": True}
    response = post_chat(server, body)
    assert response.status_code == 200  # the failure came after the first event
    chunks = sse_chunks(response)
    assert "error" in chunks[-1]
    assert set(chunks[-1]["error"]) == {"message", "type", "param", "code"}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
    assert not any(finishes)  # never dressed up as a finished answer
    assert UPSTREAM_SECRET not in response.text


def test_stream_ending_without_a_finish_is_an_error(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    # A clean end of body, but no finish_reason and no [DONE]: still a truncation.
    openai_server.reply(sse([delta("half an ans")], done=False))
    with sdk(server) as client:
        stream = client.chat.completions.create(model="gpt", messages=user(), stream=True)
        with pytest.raises(openai.APIError):
            _read_content(stream, [])


def _read_content(stream: openai.Stream[ChatCompletionChunk], into: list[str]) -> None:
    for chunk in stream:
        if chunk.choices:
            into.append(chunk.choices[0].delta.content or "")


# --- the upstream key -------------------------------------------------------------------------


def test_upstream_key_is_sent_upstream_and_never_echoed(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion("fine"),
        # An upstream that echoes the key it was given, as some do in auth errors.
        error(401, f"Incorrect API key provided: {UPSTREAM_SECRET}.", code="invalid_api_key"),
        error(400, f"bad request for key {UPSTREAM_SECRET}"),
        dropped([delta("x")]),
    )
    openai_server.fail(3, 500, message=f"internal error, key={UPSTREAM_SECRET}")
    body = {"model": "gpt", "messages": user()}
    responses = [
        post_chat(server, body),
        post_chat(server, body),
        post_chat(server, {**body, "stream": True}),
        post_chat(server, {**body, "stream": True}),
        post_chat(server, body),
    ]
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_SECRET}"
    assert [r.status_code for r in responses] == [200, 401, 400, 200, 502]
    for response in responses:
        assert UPSTREAM_SECRET not in response.text
        assert UPSTREAM_SECRET not in json.dumps(dict(response.headers))
        assert UPSTREAM_KEY_ENV not in response.text


# --- client disconnects -----------------------------------------------------------------------


def _slow_stream() -> Reply:
    return sse([delta("first"), delta(" second"), delta(finish_reason="stop")], interval=20)


def test_disconnect_during_a_slow_stream_closes_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(_slow_stream())
    body = {"model": "gpt", "messages": user(), "stream": True}
    with (
        httpx.Client(base_url=server.url, timeout=10) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        first = next(line for line in response.iter_lines() if line.startswith("data: "))
        assert json.loads(first[6:])["object"] == "chat.completion.chunk"
        # Leaving the block closes the connection mid-stream.
    assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
    assert openai_server.completed == 0


def test_a_streaming_client_leaving_before_the_first_byte_closes_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse([delta("late"), delta(finish_reason="stop")], delay=20))
    body = {"model": "gpt", "messages": user(), "stream": True}
    with httpx.Client(base_url=server.url) as http, pytest.raises(httpx.ReadTimeout):
        http.post("/v1/chat/completions", json=body, timeout=httpx.Timeout(10, read=0.3))
    assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
    assert openai_server.completed == 0


def test_disconnect_during_a_slow_answer_closes_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    # A whole (non-streamed) answer whose body arrives slowly.
    body = completion("slow").body
    openai_server.reply(
        Reply(body=body, pieces=[body[:10], body[10:]], interval=20),
    )
    with httpx.Client(base_url=server.url) as http, pytest.raises(httpx.ReadTimeout):
        http.post(
            "/v1/chat/completions",
            json={"model": "gpt", "messages": user()},
            timeout=httpx.Timeout(10, read=0.3),
        )
    assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
    assert openai_server.completed == 0


def _slow_tool_call(stream: bool) -> Reply:
    if stream:
        return calls_sse([("call_slow", "slow_lookup", '{"query": "tides"}')])
    return completion(tool_calls=[tool_call("slow_lookup", {"query": "tides"}, id="call_slow")])


async def _abandon_while_the_tool_runs(server: LiveServer, body: dict[str, Any]) -> None:
    async def call() -> None:
        async with (
            httpx.AsyncClient(base_url=server.url, timeout=30) as http,
            http.stream("POST", "/v1/chat/completions", json=body) as response,
        ):
            async for _ in response.aiter_bytes():
                pass

    task = asyncio.create_task(call())
    started = await asyncio.to_thread(e2e_slow_tools.started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert started, "the server tool never started"


@pytest.mark.usefixtures("slow_tool")
@pytest.mark.parametrize("stream", [False, True])
async def test_disconnect_cancels_a_running_server_tool(
    tools_server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(_slow_tool_call(stream))
    body = {"model": "gpt", "messages": user("Look up the tides."), "stream": stream}
    await _abandon_while_the_tool_runs(tools_server, body)
    assert await asyncio.to_thread(e2e_slow_tools.cancelled.wait, 5)
    assert not e2e_slow_tools.finished.is_set()
    assert len(openai_server.requests) == 1  # the loop stopped with the tool


# --- the same faults when server tools run (the agent path) ---------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_agent_path_relays_upstream_4xx(
    tools_server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(error(422, "unprocessable messages", code="bad_messages"))
    response = post_chat(tools_server, {"model": "gpt", "messages": user(), "stream": stream})
    err = openai_error(response, 422)
    assert err["message"] == "unprocessable messages"
    assert err["code"] == "bad_messages"
    assert len(openai_server.requests) == 1


def test_agent_path_mid_stream_drop_raises_in_the_sdk(
    tools_server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(dropped([delta("The weather "), delta("in Paris is")]))
    received: list[str] = []
    with sdk(tools_server) as client:
        stream = client.chat.completions.create(model="gpt", messages=user(), stream=True)
        with pytest.raises(openai.APIError):
            _read_content(stream, received)
    assert "".join(received) == "The weather in Paris is"
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_agent_path_disconnect_closes_the_upstream(
    tools_server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    if stream:
        openai_server.reply(_slow_stream())
    else:
        slow = completion("slow").body
        openai_server.reply(Reply(body=slow, pieces=[slow[:10], slow[10:]], interval=20))
    body = {"model": "gpt", "messages": user(), "stream": stream}
    with pytest.raises(httpx.ReadTimeout):
        _read_until_stalled(tools_server, body)
    assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
    assert openai_server.completed == 0


def _read_until_stalled(server: LiveServer, body: dict[str, Any]) -> None:
    """Read the whole answer, giving up (and closing the connection) when it stalls."""
    timeout = httpx.Timeout(10, read=0.5)
    with (
        httpx.Client(base_url=server.url, timeout=timeout) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        for _ in response.iter_bytes():
            pass


def test_a_502_never_names_the_upstream_and_the_log_has_the_detail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = _closed_port()
    config = config_with(
        upstream=openai_upstream(f"http://127.0.0.1:{port}/v1", {"gpt": "gpt-4o"}, retries=0)
    )
    with caplog.at_level("WARNING", logger="toolwire"), live_gateway(config) as live:
        response = post_chat(live, {"model": "gpt", "messages": user()})
    error = openai_error(response, 502)
    assert str(port) not in error["message"]
    assert "127.0.0.1" not in error["message"]
    assert error["message"].startswith("The upstream model could not be reached.")
    assert any(str(port) in r.getMessage() for r in caplog.records)


@pytest.mark.usefixtures("slow_tool")
async def test_disconnect_during_a_sync_tool_records_how_it_really_ended(
    tools_server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    call = tool_call("slow_sync_write", {"name": "order-9"}, id="call_sync")
    openai_server.reply(completion(tool_calls=[call]))
    body = {"model": "gpt", "messages": user("Write order-9."), "stream": True}

    async def call_and_leave() -> None:
        async with (
            httpx.AsyncClient(base_url=tools_server.url, timeout=30) as http,
            http.stream("POST", "/v1/chat/completions", json=body) as response,
        ):
            async for _ in response.aiter_bytes():
                pass

    task = asyncio.create_task(call_and_leave())
    assert await asyncio.to_thread(e2e_slow_tools.sync_started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Give the gateway a moment to see the client leave while the thread still runs (if
    # the thread ended first, 'ok' would be the true outcome instead).
    await asyncio.sleep(0.5)
    # The thread cannot be stopped: it goes on, and the audit log says how it ended.
    e2e_slow_tools.sync_release.set()
    async with httpx.AsyncClient(base_url=tools_server.url, timeout=10) as http:
        for _ in range(200):
            records = (await http.get("/v1/audit", params={"tool": "slow_sync_write"})).json()
            outcomes = [(r["event"], r["outcome"]) for r in records["data"]]
            if ("finished", "finished_late") in outcomes:
                break
            await asyncio.sleep(0.02)
    assert e2e_slow_tools.sync_written == ["order-9"]
    assert outcomes == [("started", None), ("finished", "finished_late")]
