"""AnthropicModel against a real fake Anthropic server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.anthropic_server import (
    FakeAnthropicServer,
    ReceivedRequest,
    Reply,
    error,
    events,
    message,
    raw,
    sse,
    thinking,
    tool_use,
)
from toolwire.models import (
    AnthropicModel,
    AssistantMessage,
    ModelContentDelta,
    ModelError,
    ModelReasoningDelta,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.tools import Tool, ToolCall

KEY = "sk-ant-secret-key-123"
WEATHER = Tool(
    name="get_weather",
    description="Weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.fixture(scope="module")
def _server_session() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def server(_server_session: FakeAnthropicServer) -> Iterator[FakeAnthropicServer]:
    _server_session.reset()
    yield _server_session
    _server_session.reset()


def make_model(server: FakeAnthropicServer, **kw: Any) -> AnthropicModel:
    kw.setdefault("retry_backoff", 0.01)
    return AnthropicModel(server.base_url, KEY, "claude-test", **kw)


async def collect(model: AnthropicModel, **kw: Any) -> list[ModelStreamEvent]:
    messages = kw.pop("messages", [UserMessage(content="hi")])
    tools = kw.pop("tools", [WEATHER])
    return [ev async for ev in model.stream(messages, tools, **kw)]


def final(events: list[ModelStreamEvent]) -> ModelResponse:
    responses = [e for e in events if isinstance(e, ModelResponse)]
    assert len(responses) == 1
    assert events[-1] is responses[0]
    return responses[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- non-streaming ----------------------------------------------------------------------


async def test_plain_answer_and_the_request_sent(server: FakeAnthropicServer) -> None:
    server.reply(message("Hello!", usage={"input_tokens": 12, "output_tokens": 3}, model="c-x"))
    model = make_model(server, extra_headers={"anthropic-beta": "b1"})

    response = await model.complete(
        [SystemMessage(content="be brief"), UserMessage(content="hi")],
        [WEATHER],
        ModelSettings(temperature=0.2, max_tokens=50, tool_choice="auto"),
    )

    assert response.message == AssistantMessage(content="Hello!")
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.usage.requests == 1
    assert response.model == "c-x"
    assert model.name == "claude-test"

    req = server.last
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["anthropic-beta"] == "b1"
    assert "authorization" not in req.headers
    assert req.json == {
        "model": "claude-test",
        "max_tokens": 50,
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [WEATHER.to_anthropic()],
        "tool_choice": {"type": "auto"},
        "temperature": 0.2,
    }


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1/messages"])
async def test_base_url_forms(server: FakeAnthropicServer, suffix: str) -> None:
    server.reply(message("ok"))
    model = AnthropicModel(server.base_url + suffix, KEY, "m")
    assert (await model.complete([UserMessage(content="hi")], [])).message.content == "ok"
    assert server.last.path == "/v1/messages"
    assert model.base_url == server.base_url


async def test_tool_use_round_trip_with_history(server: FakeAnthropicServer) -> None:
    model = make_model(server)
    server.reply(message(tool_use("get_weather", {"city": "Oslo"}, id="toolu_oslo")))
    ids_seen: dict[str, str] = {}

    def answer(req: ReceivedRequest) -> Reply:
        # The upstream sees the normalised id and answers with a call using it again.
        ids_seen["sent"] = req.json["messages"][1]["content"][1]["id"]
        return message(
            "Also checking Oslo.", tool_use("get_weather", {"city": "Oslo"}, id=ids_seen["sent"])
        )

    server.reply(answer)

    first = await model.complete([UserMessage(content="weather?")], [WEATHER])
    assert first.finish_reason == "tool_calls"
    assert first.message.tool_calls == (
        ToolCall(id="toolu_oslo", name="get_weather", arguments='{"city":"Oslo"}'),
    )

    history = [
        SystemMessage(content="be brief"),
        UserMessage(content="weather in Paris and Rome?"),
        AssistantMessage(
            content="Checking.",
            reasoning="dropped on the way up",
            tool_calls=(
                ToolCall(id="call.abc/1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="call_2", name="get_weather", arguments="not json"),
            ),
        ),
        ToolMessage(call_id="call.abc/1", name="get_weather", content="18C"),
        ToolMessage(call_id="call_2", name="get_weather", content="bad args", is_error=True),
        UserMessage(content="and Oslo?"),
    ]
    second = await model.complete(history, [WEATHER])

    sent = ids_seen["sent"]
    assert sent != "call.abc/1"
    assert set(sent) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
    assert server.last.json["system"] == "be brief"
    assert server.last.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather in Paris and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": sent, "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": sent, "content": "18C", "is_error": False},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": "bad args",
                    "is_error": True,
                },
                {"type": "text", "text": "and Oslo?"},
            ],
        },
    ]
    # An id the upstream repeats maps back to the client's own.
    assert second.message.content == "Also checking Oslo."
    assert second.message.tool_calls[0].id == "call.abc/1"


async def test_thinking_becomes_reasoning(server: FakeAnthropicServer) -> None:
    server.reply(message(thinking("let me think"), "42"))
    response = await make_model(server).complete([UserMessage(content="q")], [])
    assert response.message == AssistantMessage(content="42", reasoning="let me think")


async def test_settings_mapping_reaches_the_upstream(server: FakeAnthropicServer) -> None:
    server.reply(message("ok"))
    settings = ModelSettings(
        tool_choice="get_weather",
        parallel_tool_calls=False,
        extra={"stop": ["END"], "top_p": 0.5, "top_k": 3, "user": "alice", "seed": 1},
    )
    await make_model(server, max_tokens=777).complete(
        [UserMessage(content="q")], [WEATHER], settings
    )
    body = server.last.json
    assert body["max_tokens"] == 777
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "get_weather",
        "disable_parallel_tool_use": True,
    }
    assert body["stop_sequences"] == ["END"]
    assert (body["top_p"], body["top_k"]) == (0.5, 3)
    assert body["metadata"] == {"user_id": "alice"}
    assert "seed" not in body
    assert "stream" not in body


async def test_given_http_client_is_used_and_not_closed(server: FakeAnthropicServer) -> None:
    server.reply(message("a"), message("b"))
    async with httpx.AsyncClient() as client:
        model = make_model(server, http_client=client)
        assert (await model.complete([], [])).message.content == "a"
        async with model:
            assert (await model.complete([], [])).message.content == "b"
        assert not client.is_closed


async def test_streams_leave_the_pooled_connection_reusable(
    server: FakeAnthropicServer,
) -> None:
    server.reply(sse(events("a", chunk=1)), sse(events("b")), message("c"))
    async with httpx.AsyncClient() as client:
        model = make_model(server, http_client=client)
        assert final(await collect(model)).message.content == "a"
        assert final(await collect(model)).message.content == "b"
        assert (await model.complete([], [])).message.content == "c"
    assert len({r.client_port for r in server.requests}) == 1


async def test_async_with_pools_one_client(server: FakeAnthropicServer) -> None:
    server.reply(message("a"), sse(events("b")))
    async with make_model(server) as model:
        assert (await model.complete([], [])).message.content == "a"
        assert final(await collect(model)).message.content == "b"
    assert len({r.client_port for r in server.requests}) == 1
    assert model._endpoint._client is None  # closed with the block


def test_repr_hides_the_key() -> None:
    model = AnthropicModel("https://api.anthropic.com", KEY)
    assert KEY not in repr(model)
    assert repr(model) == (
        "AnthropicModel(base_url='https://api.anthropic.com', model='claude-sonnet-4-5')"
    )


# --- streaming --------------------------------------------------------------------------


async def test_stream_text_with_every_event_split(server: FakeAnthropicServer) -> None:
    stream = events("Hello there", chunk=1, usage={"input_tokens": 20, "output_tokens": 4})
    server.reply(sse(stream, split=7))
    model = make_model(server)
    got = await collect(model, settings=ModelSettings(max_tokens=10))

    assert got[:-1] == [ModelContentDelta(c) for c in "Hello there"]
    response = final(got)
    assert response.message == AssistantMessage(content="Hello there")
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 4)
    assert response.model == "claude-fake"
    assert server.last.json["stream"] is True
    assert server.last.headers["accept"] == "text/event-stream"


async def test_stream_parallel_tool_calls(server: FakeAnthropicServer) -> None:
    server.reply(
        sse(
            events(
                thinking("two cities"),
                "On it.",
                tool_use("get_weather", {"city": "Paris"}, id="toolu_a"),
                tool_use("get_weather", {"city": "Rome"}, id="toolu_b"),
                chunk=3,
            ),
            split=5,
        )
    )
    got = await collect(make_model(server))

    assert "".join(e.text for e in got if isinstance(e, ModelReasoningDelta)) == "two cities"
    assert "".join(e.text for e in got if isinstance(e, ModelContentDelta)) == "On it."
    starts = [e for e in got if isinstance(e, ModelToolCallStart)]
    assert starts == [
        ModelToolCallStart(0, "toolu_a", "get_weather"),
        ModelToolCallStart(1, "toolu_b", "get_weather"),
    ]
    for index, city in enumerate(["Paris", "Rome"]):
        fragments = [
            e.text for e in got if isinstance(e, ModelToolCallArgsDelta) and e.index == index
        ]
        assert len(fragments) > 1
        assert json.loads("".join(fragments)) == {"city": city}
    response = final(got)
    assert response.finish_reason == "tool_calls"
    assert [json.loads(c.arguments) for c in response.message.tool_calls] == [
        {"city": "Paris"},
        {"city": "Rome"},
    ]
    assert response.message.reasoning == "two cities"


async def test_stream_maps_ids_back(server: FakeAnthropicServer) -> None:
    def answer(req: ReceivedRequest) -> Reply:
        sent = req.json["messages"][1]["content"][0]["id"]
        return sse(events(tool_use("get_weather", {"city": "Oslo"}, id=sent)))

    server.reply(answer)
    history = [
        UserMessage(content="q"),
        AssistantMessage(tool_calls=(ToolCall(id="call.x:1", name="get_weather", arguments="{}"),)),
        ToolMessage(call_id="call.x:1", name="get_weather", content="r"),
    ]
    got = await collect(make_model(server), messages=history)
    assert ModelToolCallStart(0, "call.x:1", "get_weather") in got
    assert final(got).message.tool_calls[0].id == "call.x:1"


async def test_stream_falls_back_when_server_answers_in_one_piece(
    server: FakeAnthropicServer,
) -> None:
    server.reply(message(tool_use("get_weather", {"city": "Bern"}, id="toolu_x")))
    got = await collect(make_model(server))
    assert got[:2] == [
        ModelToolCallStart(0, "toolu_x", "get_weather"),
        ModelToolCallArgsDelta(0, '{"city":"Bern"}'),
    ]
    assert final(got).message.tool_calls[0].name == "get_weather"


async def test_stream_early_exit_closes_cleanly(server: FakeAnthropicServer) -> None:
    server.reply(sse(events("x" * 50, chunk=1)), message("next"))
    model = make_model(server)
    stream = model.stream([], [])
    async for ev in stream:
        assert isinstance(ev, ModelContentDelta)
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert (await model.complete([], [])).message.content == "next"


# --- errors -----------------------------------------------------------------------------


async def expect_error(
    model: AnthropicModel, *, stream: bool, seen: list[ModelStreamEvent] | None = None
) -> ModelError:
    async def call() -> None:
        if stream:
            async for ev in model.stream([UserMessage(content="hi")], []):
                if seen is not None:
                    seen.append(ev)
        else:
            await model.complete([UserMessage(content="hi")], [])

    with pytest.raises(ModelError) as info:
        await call()
    err = info.value
    assert "\n" not in str(err)
    assert KEY not in str(err)
    assert err.__cause__ is None
    return err


@pytest.mark.parametrize("stream", [False, True])
async def test_401_relays_the_upstream_error(server: FakeAnthropicServer, stream: bool) -> None:
    server.reply(error(401, "invalid x-api-key", type="authentication_error"))
    err = await expect_error(make_model(server), stream=stream)
    assert str(err) == (
        f"The model at {server.base_url} returned HTTP 401: invalid x-api-key. Check the API key."
    )
    assert err.status == 401
    assert not err.retryable
    assert err.body == {
        "message": "invalid x-api-key",
        "type": "authentication_error",
        "param": None,
        "code": None,
    }
    assert len(server.requests) == 1


async def test_an_echoed_key_is_redacted(server: FakeAnthropicServer) -> None:
    server.reply(error(403, f"key {KEY} may not use this model", type="permission_error"))
    err = await expect_error(make_model(server), stream=False)
    assert "key *** may not use this model" in str(err)
    assert err.body is not None
    assert KEY not in err.body["message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_400_is_not_retried(server: FakeAnthropicServer, stream: bool) -> None:
    server.reply(error(400, "messages: roles must alternate"), message("never sent"))
    err = await expect_error(make_model(server, retries=3), stream=stream)
    assert err.status == 400
    assert err.body is not None
    assert err.body["type"] == "invalid_request_error"
    assert len(server.requests) == 1
    assert server.pending == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_503_then_200_succeeds(server: FakeAnthropicServer, stream: bool) -> None:
    server.reply(
        error(503, "unavailable", type="api_error"), sse(events("ok")) if stream else message("ok")
    )
    model = make_model(server)
    if stream:
        assert final(await collect(model)).message.content == "ok"
    else:
        assert (await model.complete([], [])).message.content == "ok"
    assert len(server.requests) == 2


async def test_529_overloaded_is_retried_then_reported(server: FakeAnthropicServer) -> None:
    overloaded = error(529, "Overloaded", type="overloaded_error")
    server.reply(overloaded, overloaded, overloaded, message("too late"))
    err = await expect_error(make_model(server, retries=2), stream=True)
    assert len(server.requests) == 3
    assert err.status == 529
    assert err.retryable
    assert str(err).endswith(
        "returned HTTP 529: Overloaded. Anthropic is overloaded; try again later."
    )
    assert err.body is not None
    assert err.body["type"] == "overloaded_error"


async def test_429_with_a_short_retry_after_is_retried(server: FakeAnthropicServer) -> None:
    server.reply(
        error(429, "slow down", type="rate_limit_error", headers={"retry-after": "0"}),
        error(429, "slow down", type="rate_limit_error", headers={"retry-after-ms": "10"}),
        message("ok"),
    )
    assert (await make_model(server).complete([], [])).message.content == "ok"
    assert len(server.requests) == 3


async def test_a_long_retry_after_or_should_retry_false_is_not_waited_for(
    server: FakeAnthropicServer,
) -> None:
    server.reply(
        error(429, "slow down", type="rate_limit_error", headers={"retry-after": "3600"}),
        error(500, "no", type="api_error", headers={"x-should-retry": "false"}),
        message("never sent"),
    )
    model = make_model(server)
    assert (await expect_error(model, stream=False)).status == 429
    assert (await expect_error(model, stream=False)).status == 500
    assert len(server.requests) == 2


async def test_mid_stream_drop_is_an_error_and_not_retried(server: FakeAnthropicServer) -> None:
    server.reply(sse(events("Hello world", chunk=1), drop_after=6), sse(events("again")))
    seen: list[ModelStreamEvent] = []
    err = await expect_error(make_model(server), stream=True, seen=seen)
    assert seen == [ModelContentDelta("H"), ModelContentDelta("e"), ModelContentDelta("l")]
    assert str(err).startswith(f"The model at {server.base_url} ended mid-answer: ")
    assert len(server.requests) == 1
    assert server.pending == 1


async def test_a_stream_failing_before_any_delta_starts_over(server: FakeAnthropicServer) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.reply(
        sse(events("lost", chunk=1), drop_after=2),  # message_start and ping, then cut
        sse([*events("x")[:2], overloaded]),  # Anthropic's overload inside a 200 stream
        sse(events("fine", chunk=2)),
    )
    got = await collect(make_model(server))
    assert got[:-1] == [ModelContentDelta("fi"), ModelContentDelta("ne")]
    assert final(got).message.content == "fine"
    assert len(server.requests) == 3


async def test_a_stream_failing_before_any_delta_out_of_retries(
    server: FakeAnthropicServer,
) -> None:
    server.reply(sse(events("lost"), drop_after=1), sse(events("never")))
    err = await expect_error(make_model(server, retries=0), stream=True)
    assert "ended mid-answer" in str(err)
    assert len(server.requests) == 1


async def test_stream_ending_without_message_stop_is_an_error(
    server: FakeAnthropicServer,
) -> None:
    server.reply(sse(events("Hel", chunk=1, stop=False)))
    seen: list[ModelStreamEvent] = []
    err = await expect_error(make_model(server), stream=True, seen=seen)
    assert seen == [ModelContentDelta("H"), ModelContentDelta("e"), ModelContentDelta("l")]
    assert str(err) == (
        f"The model at {server.base_url} ended mid-answer: the stream closed before message_stop."
    )


async def test_error_event_mid_stream(server: FakeAnthropicServer) -> None:
    stream = events("partial", chunk=4, stop=False)[:4]
    stream.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    server.reply(sse(stream), message("not retried"))
    seen: list[ModelStreamEvent] = []
    err = await expect_error(make_model(server), stream=True, seen=seen)
    assert seen == [ModelContentDelta("part")]
    assert str(err) == f"The model at {server.base_url} reported an error: Overloaded"
    assert err.status == 529
    assert err.body == {
        "message": "Overloaded",
        "type": "overloaded_error",
        "param": None,
        "code": None,
    }
    assert len(server.requests) == 1


async def test_malformed_event(server: FakeAnthropicServer) -> None:
    server.reply(sse([*events("ok")[:4], "event: x\ndata: {not json\n\n"]))
    seen: list[ModelStreamEvent] = []
    err = await expect_error(make_model(server), stream=True, seen=seen)
    assert seen == [ModelContentDelta("ok")]
    assert str(err) == (
        f"The model at {server.base_url} sent a response toolwire could not read: "
        "a stream event is not JSON: '{not json'."
    )


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ("not json", "the body is not JSON: 'not json'"),
        ('{"type": "message"}', "the response has no 'content' list"),
    ],
)
async def test_malformed_bodies(server: FakeAnthropicServer, body: str, detail: str) -> None:
    server.reply(raw(body))
    err = await expect_error(make_model(server), stream=False)
    assert str(err) == (
        f"The model at {server.base_url} sent a response toolwire could not read: {detail}."
    )
    assert not err.retryable


async def test_http_error_with_non_json_body(server: FakeAnthropicServer) -> None:
    server.reply(raw("<h1>Bad Gateway</h1>", status=502, content_type="text/html"))
    err = await expect_error(make_model(server, retries=0), stream=False)
    assert "returned HTTP 502: '<h1>Bad Gateway</h1>'." in str(err)
    assert err.body is None
    assert err.retryable


@pytest.mark.parametrize("stream", [False, True])
async def test_connection_refused_is_retried_then_reported(stream: bool) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    model = AnthropicModel(url, KEY, "m", retries=1, retry_backoff=0.01)
    err = await expect_error(model, stream=stream)
    assert str(err) == (
        # Both attempts (the first and one retry) were refused.
        f"Could not reach the model at {url}: connection refused (2 attempts). "
        "Check the base URL and the network."
    )
    assert err.retryable
    assert err.status is None


@pytest.mark.parametrize("stream", [False, True])
async def test_timeout(server: FakeAnthropicServer, stream: bool) -> None:
    server.reply(sse(events("late"), delay=2.0) if stream else raw("{}", delay=2.0))
    err = await expect_error(make_model(server, timeout=0.2), stream=stream)
    assert str(err) == (
        f"The model at {server.base_url} did not answer within 0.2s (timeout). "
        "Try again or raise the timeout."
    )
    # A read timeout is not retried: the upstream may still be answering the first request.
    assert len(server.requests) == 1


async def test_nothing_scripted_is_an_anthropic_shaped_500(server: FakeAnthropicServer) -> None:
    err = await expect_error(make_model(server, retries=0), stream=False)
    assert err.status == 500
    assert err.body is not None
    assert err.body["type"] == "api_error"


async def test_models_list(server: FakeAnthropicServer) -> None:
    async with httpx.AsyncClient() as client:
        got = (await client.get(server.base_url + "/v1/models")).json()
    assert [m["id"] for m in got["data"]] == ["claude-fake"]
