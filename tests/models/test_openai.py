"""OpenAIChatModel against a real fake server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from fakes.openai_server import (
    FakeOpenAIServer,
    ReceivedRequest,
    Reply,
    StreamedCall,
    calls_sse,
    completion,
    delta,
    dropped,
    error,
    raw,
    sse,
    text_sse,
    tool_call,
)
from toolwire.models import (
    AssistantMessage,
    Message,
    ModelContentDelta,
    ModelError,
    ModelReasoningDelta,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    OpenAIChatModel,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.tools import Tool, ToolCall

WEATHER = Tool(
    name="get_weather",
    description="Weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
CALC = Tool(
    name="calculate",
    description="Evaluate",
    input_schema={"type": "object", "properties": {"expression": {"type": "string"}}},
)


def make_model(server: FakeOpenAIServer, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel(server.base_url, "sk-test", "gpt-test", **kw)


async def collect(model: OpenAIChatModel, **kw: Any) -> list[ModelStreamEvent]:
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


async def test_plain_answer_and_the_request_sent(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        completion("Hello!", usage={"prompt_tokens": 12, "completion_tokens": 3}, model="gpt-x")
    )
    model = make_model(openai_server, extra_headers={"x-trace": "t1"})

    response = await model.complete(
        [SystemMessage(content="be brief"), UserMessage(content="hi")],
        [WEATHER],
        ModelSettings(temperature=0.2, max_tokens=50, tool_choice="auto"),
    )

    assert response.message == AssistantMessage(content="Hello!")
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.usage.requests == 1
    assert response.model == "gpt-x"
    assert model.name == "gpt-test"

    req = openai_server.last
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.headers["x-trace"] == "t1"
    assert req.json == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
        ],
        "tools": [WEATHER.to_openai()],
        "temperature": 0.2,
        "max_tokens": 50,
        "tool_choice": "auto",
    }


async def test_tool_calls_are_returned(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        completion(
            tool_calls=[
                tool_call("get_weather", {"city": "Lisbon"}, id="call_a"),
                tool_call("calculate", {"expression": "2+2"}, id="call_b"),
            ]
        )
    )
    response = await make_model(openai_server).complete([UserMessage(content="q")], [WEATHER, CALC])
    assert response.finish_reason == "tool_calls"
    assert response.message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Lisbon"}'),
        ToolCall(id="call_b", name="calculate", arguments='{"expression": "2+2"}'),
    )


async def test_missing_ids_get_generated_ones(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        completion(
            tool_calls=[
                tool_call("get_weather", "{}", id=None),
                tool_call("calculate", "{}", id=None),
            ]
        )
    )
    response = await make_model(openai_server).complete([], [WEATHER, CALC])
    ids = [c.id for c in response.message.tool_calls]
    assert all(i.startswith("call_") for i in ids)
    assert len(set(ids)) == 2


async def test_reasoning_content_is_kept(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion("42", reasoning_content="6 times 7"))
    response = await make_model(openai_server).complete([], [])
    assert response.message.reasoning == "6 times 7"
    assert response.message.content == "42"


async def test_history_with_tool_results_and_an_invalid_call(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(completion("done"))
    history = [
        UserMessage(content="weather?"),
        AssistantMessage(
            content=None,
            tool_calls=(
                ToolCall(id="c1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="c2", name="get_weather", arguments='{"city": "Par'),
            ),
        ),
        ToolMessage(call_id="c1", name="get_weather", content='{"temp": 20}'),
        ToolMessage(
            call_id="c2",
            name="get_weather",
            content='{"error": {"code": "invalid_json"}}',
            is_error=True,
        ),
    ]
    await make_model(openai_server).complete(
        history, [WEATHER], ModelSettings(tool_choice="get_weather", parallel_tool_calls=False)
    )

    sent = openai_server.last.json
    # `""`, not `null`, beside tool calls: llama-cpp-python refuses `null` (models/quirks.py).
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            # The truncated arguments go upstream as "{}": every provider accepts that.
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": "{}"},
            },
        ],
    }
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 20}'}
    assert sent["messages"][3]["tool_call_id"] == "c2"
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["parallel_tool_calls"] is False


async def test_no_tools_means_no_tool_fields(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion("ok"))
    await make_model(openai_server).complete(
        [UserMessage(content="x")], [], ModelSettings(tool_choice="auto")
    )
    assert set(openai_server.last.json) == {"model", "messages"}


async def test_no_api_key_sends_no_authorization(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion("ok"))
    await OpenAIChatModel(openai_server.base_url + "/chat/completions/", None, "m").complete([], [])
    assert openai_server.last.path == "/v1/chat/completions"
    assert "authorization" not in openai_server.last.headers


async def test_given_http_client_is_used_and_not_closed(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion("ok"))
    async with httpx.AsyncClient(headers={"x-own": "1"}) as client:
        model = OpenAIChatModel(openai_server.base_url, "k", "m", http_client=client)
        await model.complete([], [])
        await model.aclose()
        assert not client.is_closed
    assert openai_server.last.headers["x-own"] == "1"


async def test_async_with_pools_one_client(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion("a"), sse([delta("b")]), completion("c"))
    async with make_model(openai_server) as model:
        assert (await model.complete([], [])).message.content == "a"
        assert final(await collect(model)).message.content == "b"
        assert (await model.complete([], [])).message.content == "c"
    assert [r.headers["authorization"] for r in openai_server.requests] == ["Bearer sk-test"] * 3


# --- streaming --------------------------------------------------------------------------


async def test_stream_text_reasoning_and_usage(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        sse(
            [
                delta(reasoning_content="Let me "),
                delta(reasoning_content="think."),
                delta("Hel"),
                delta("lo"),
                delta(finish_reason="stop"),
                delta(usage={"prompt_tokens": 7, "completion_tokens": 2}),
            ]
        )
    )
    model = make_model(openai_server)
    events = await collect(model, tools=[])

    assert [e for e in events if not isinstance(e, ModelResponse)] == [
        ModelReasoningDelta("Let me "),
        ModelReasoningDelta("think."),
        ModelContentDelta("Hel"),
        ModelContentDelta("lo"),
    ]
    response = final(events)
    assert response.message == AssistantMessage(content="Hello", reasoning="Let me think.")
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 2)
    sent = openai_server.last.json
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert openai_server.last.headers["accept"] == "text/event-stream"


async def test_stream_reasoning_field_variant(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse([delta(reasoning="hmm"), delta("ok", finish_reason="stop")]))
    response = final(await collect(make_model(openai_server)))
    assert response.message.reasoning == "hmm"


async def test_stream_parallel_tool_calls_split_awkwardly(openai_server: FakeOpenAIServer) -> None:
    args_a = '{"city": "São Paulo"}'
    args_b = '{"expression": "(2 + 3) * 4"}'
    openai_server.reply(
        sse(
            [
                delta(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                ),
                delta(tool_calls=[{"index": 0, "function": {"arguments": '{"ci'}}]),
                delta(
                    tool_calls=[
                        {"index": 1, "id": "call_b", "function": {"name": "calculate"}},
                    ]
                ),
                delta(tool_calls=[{"index": 0, "function": {"arguments": 'ty": "S'}}]),
                delta(tool_calls=[{"index": 1, "function": {"arguments": '{"expression": "(2 '}}]),
                delta(tool_calls=[{"index": 0, "function": {"arguments": 'ão Paulo"}'}}]),
                delta(tool_calls=[{"index": 1, "function": {"arguments": '+ 3) * 4"}'}}]),
                delta(finish_reason="tool_calls"),
            ],
            split=7,  # and the SSE bytes themselves arrive cut every 7 bytes
        )
    )
    events = await collect(make_model(openai_server), tools=[WEATHER, CALC])

    starts = [e for e in events if isinstance(e, ModelToolCallStart)]
    assert starts == [
        ModelToolCallStart(0, "call_a", "get_weather"),
        ModelToolCallStart(1, "call_b", "calculate"),
    ]
    for index, args in enumerate([args_a, args_b]):
        parts = [
            e.text for e in events if isinstance(e, ModelToolCallArgsDelta) and e.index == index
        ]
        assert "".join(parts) == args
    response = final(events)
    assert response.finish_reason == "tool_calls"
    assert response.message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments=args_a),
        ToolCall(id="call_b", name="calculate", arguments=args_b),
    )


async def test_stream_calls_all_at_index_zero_with_distinct_ids(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(
        sse(
            [
                delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": "get_weather"}}]),
                delta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": "Oslo"}'}}]),
                delta(tool_calls=[{"index": 0, "id": "b", "function": {"name": "get_weather"}}]),
                delta(tool_calls=[{"index": 0, "id": "b", "function": {"arguments": '{"city":'}}]),
                delta(tool_calls=[{"index": 0, "function": {"arguments": ' "Rome"}'}}]),
                delta(finish_reason="stop"),
            ]
        )
    )
    response = final(await collect(make_model(openai_server)))
    assert response.message.tool_calls == (
        ToolCall(id="a", name="get_weather", arguments='{"city": "Oslo"}'),
        ToolCall(id="b", name="get_weather", arguments='{"city": "Rome"}'),
    )
    # "stop" with tool calls is reported as the tool-call turn it is.
    assert response.finish_reason == "tool_calls"


async def test_stream_missing_ids_are_generated_and_consistent(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(
        sse(
            [
                delta(
                    tool_calls=[{"index": 0, "function": {"name": "get_weather", "arguments": ""}}]
                ),
                delta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": "Kyiv"}'}}]),
                delta(
                    tool_calls=[{"index": 1, "function": {"name": "calculate", "arguments": ""}}]
                ),
                delta(finish_reason="tool_calls"),
            ]
        )
    )
    events = await collect(make_model(openai_server))
    starts = [e for e in events if isinstance(e, ModelToolCallStart)]
    calls = final(events).message.tool_calls
    assert [c.id for c in calls] == [s.id for s in starts]
    assert all(c.id.startswith("call_") for c in calls)
    assert calls[0].id != calls[1].id
    # A call streamed without any argument text has no arguments: "{}".
    assert calls[1].arguments == "{}"


async def test_stream_content_then_tool_call(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        sse(
            [
                delta("Checking"),
                delta(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "c",
                            "function": {"name": "get_weather", "arguments": '{"city":"Lima"}'},
                        }
                    ],
                    finish_reason="tool_calls",
                ),
            ]
        )
    )
    response = final(await collect(make_model(openai_server)))
    assert response.message.content == "Checking"
    assert response.message.tool_calls[0].arguments == '{"city":"Lima"}'


async def test_stream_framing_quirks(openai_server: FakeOpenAIServer) -> None:
    chunk = json.dumps(delta("a"))
    openai_server.reply(
        sse(
            [
                ": keep-alive comment\n\n",
                f"event: message\nid: 1\ndata:{chunk}\n\n",  # no space after "data:"
                f"data: {json.dumps(delta('b'))}\ndata: {json.dumps(delta('c'))}\n\n",  # no gap
                f"data: {json.dumps(delta('d', finish_reason='stop'))}\r\n\r\n",
            ]
        )
    )
    response = final(await collect(make_model(openai_server)))
    assert response.message.content == "abcd"


async def test_stream_without_done_still_ends(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse([delta("hi", finish_reason="stop")], done=False))
    response = final(await collect(make_model(openai_server)))
    assert response.message.content == "hi"


async def test_stream_falls_back_when_server_answers_in_one_piece(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(completion(tool_calls=[tool_call("get_weather", {"city": "Bern"}, id="x")]))
    events = await collect(make_model(openai_server))
    assert ModelToolCallStart(0, "x", "get_weather") in events
    assert final(events).message.tool_calls[0].name == "get_weather"


async def test_stream_early_exit_closes_cleanly(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse([delta(str(i)) for i in range(50)]), completion("next"))
    model = make_model(openai_server)
    stream = model.stream([], [])
    async for ev in stream:
        assert isinstance(ev, ModelContentDelta)
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert (await model.complete([], [])).message.content == "next"


# --- errors -----------------------------------------------------------------------------


async def expect_error(model: OpenAIChatModel, *, stream: bool) -> ModelError:
    async def call() -> object:
        if stream:
            return await collect(model)
        return await model.complete([UserMessage(content="hi")], [])

    with pytest.raises(ModelError) as info:
        await call()
    err = info.value
    assert "\n" not in str(err)
    assert "Traceback" not in str(err)
    return err


@pytest.mark.parametrize("stream", [False, True])
async def test_connection_refused_is_retried_then_one_line(stream: bool) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    attempts: list[str] = []

    async def count(request: httpx.Request) -> None:
        attempts.append(str(request.url))

    async with httpx.AsyncClient(event_hooks={"request": [count]}) as client:
        model = OpenAIChatModel(url, None, "m", http_client=client, retry_backoff=0.01)
        err = await expect_error(model, stream=stream)
        assert not client.is_closed
    assert attempts == [f"{url}/chat/completions"] * 3
    assert str(err) == (
        f"Could not reach the model at {url}: connection refused (3 attempts). "
        "Check --base-url or TOOLWIRE_BASE_URL."
    )
    assert err.retryable
    assert err.status is None
    assert err.body is None
    assert err.__cause__ is None


async def test_connection_refused_without_retries() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    err = await expect_error(OpenAIChatModel(url, None, "m", retries=0), stream=False)
    assert str(err) == (
        f"Could not reach the model at {url}: connection refused. "
        "Check --base-url or TOOLWIRE_BASE_URL."
    )


async def test_connect_hint_can_be_changed() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    model = OpenAIChatModel(
        url, None, "m", retries=0, connect_hint="Check upstream.base_url in toolwire.yaml."
    )
    err = await expect_error(model, stream=False)
    assert str(err).endswith("connection refused. Check upstream.base_url in toolwire.yaml.")


async def test_invalid_base_url() -> None:
    err = await expect_error(OpenAIChatModel("localhost:8000", None, "m"), stream=False)
    assert "is not a valid http(s) URL" in str(err)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("status", "message", "retryable", "advice"),
    [
        (400, "Invalid 'messages[1].content'.", False, ""),
        (
            401,
            "Incorrect API key provided: sk-t***.",
            False,
            "Check the API key (TOOLWIRE_API_KEY).",
        ),
        (404, "The model `gpt-test` does not exist", False, "Check the model name ('gpt-test')"),
        (429, "Rate limit reached", True, "rate limiting"),
        (500, "The server had an error", True, ""),
        (503, "overloaded", True, ""),
    ],
)
async def test_http_errors_carry_the_upstream_message(
    openai_server: FakeOpenAIServer,
    stream: bool,
    status: int,
    message: str,
    retryable: bool,
    advice: str,
) -> None:
    openai_server.reply(error(status, message, code="c1"))
    err = await expect_error(make_model(openai_server, retries=0), stream=stream)
    assert len(openai_server.requests) == 1
    assert err.body == {
        "message": message,
        "type": "invalid_request_error",
        "param": None,
        "code": "c1",
    }
    assert str(err).startswith(
        f"The model at {openai_server.base_url} returned HTTP {status}: {message.rstrip('.')}."
    )
    assert advice in str(err)
    assert err.status == status
    assert err.retryable is retryable


async def test_http_error_with_non_json_body(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        raw("<html>\n<h1>Bad Gateway</h1>\n</html>", status=502, content_type="text/html")
    )
    err = await expect_error(make_model(openai_server, retries=0), stream=False)
    assert "returned HTTP 502: '<html> <h1>Bad Gateway</h1> </html>'." in str(err)
    assert err.retryable
    assert err.body == {
        "message": "<html> <h1>Bad Gateway</h1> </html>",
        "type": "upstream_error",
        "param": None,
        "code": None,
    }


async def test_http_error_with_string_error_field(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(raw(json.dumps({"error": "model 'x' not found"}), status=404))
    err = await expect_error(make_model(openai_server), stream=False)
    assert "HTTP 404: model 'x' not found." in str(err)
    assert err.body is not None
    assert err.body["message"] == "model 'x' not found"
    assert err.body["type"] == "upstream_error"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ("not json at all", "the body is not JSON: 'not json at all'"),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('{"choices": []}', "the response has no 'choices'"),
        ('{"choices": [{"index": 0}]}', "choices[0] has no 'message' object"),
    ],
)
async def test_malformed_bodies(openai_server: FakeOpenAIServer, body: str, detail: str) -> None:
    openai_server.reply(raw(body))
    err = await expect_error(make_model(openai_server), stream=False)
    assert str(err) == (
        f"The model at {openai_server.base_url} sent a response toolwire could not read: {detail}."
    )
    assert not err.retryable


async def test_error_inside_a_200_body(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(raw(json.dumps({"error": {"message": "context too long"}})))
    err = await expect_error(make_model(openai_server), stream=False)
    assert str(err) == f"The model at {openai_server.base_url} reported an error: context too long"
    assert err.body == {"message": "context too long"}


async def test_malformed_sse_line(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse([delta("ok"), "data: {not json\n\n"]))
    model = make_model(openai_server)
    seen: list[ModelStreamEvent] = []

    async def consume() -> None:
        async for ev in model.stream([], []):
            seen.append(ev)

    with pytest.raises(ModelError) as info:
        await consume()
    assert seen == [ModelContentDelta("ok")]
    assert str(info.value) == (
        f"The model at {openai_server.base_url} sent a response toolwire could not read: "
        "a stream event is not JSON: '{not json'."
    )


@pytest.mark.parametrize("first", [True, False])
async def test_error_event_mid_stream(openai_server: FakeOpenAIServer, first: bool) -> None:
    inner = {"message": "upstream overloaded", "type": "server_error", "param": None, "code": 1}
    before = [] if first else [delta("par")]
    openai_server.reply(sse([*before, {"error": inner}]), completion("never asked for"))
    err = await expect_error(make_model(openai_server), stream=True)
    assert str(err).endswith("reported an error: upstream overloaded")
    assert err.body == inner
    # An error the upstream reported is its answer: never retried.
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_timeout(openai_server: FakeOpenAIServer, stream: bool) -> None:
    openai_server.reply(sse([delta("late")], delay=2.0) if stream else raw("{}", delay=2.0))
    err = await expect_error(make_model(openai_server, timeout=0.2), stream=stream)
    assert str(err) == (
        f"The model at {openai_server.base_url} did not answer within 0.2s (timeout). "
        "Try again or raise the timeout."
    )


async def test_dynamic_reply_sees_the_request(openai_server: FakeOpenAIServer) -> None:
    def echo(req: ReceivedRequest) -> Reply:
        return completion(f"{len(req.json['messages'])} messages")

    openai_server.reply(echo)
    response = await make_model(openai_server).complete(
        [UserMessage(content="a"), UserMessage(content="b")], []
    )
    assert response.message.content == "2 messages"


# --- pass-through fields and content parts -----------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_extra_fields_and_content_parts_reach_the_upstream(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(sse([delta("ok", finish_reason="stop")]) if stream else completion("ok"))
    parts = (
        {"type": "text", "text": "What is in "},
        {"type": "text", "text": "this image?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    )
    settings = ModelSettings(
        max_tokens=64,
        extra={"top_p": 0.5, "stop": ["END"], "seed": 3, "model": "not-this", "stream": "no"},
    )
    model = make_model(openai_server)
    messages = [UserMessage(content="What is in this image?", parts=parts)]
    if stream:
        await collect(model, messages=messages, tools=[], settings=settings)
    else:
        await model.complete(messages, [], settings)

    sent = openai_server.last.json
    assert sent["model"] == "gpt-test"
    assert sent["messages"] == [{"role": "user", "content": list(parts)}]
    assert sent["max_tokens"] == 64
    assert (sent["top_p"], sent["stop"], sent["seed"]) == (0.5, ["END"], 3)
    assert sent.get("stream", False) is stream


# --- call ids --------------------------------------------------------------------------------

MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")
CLIENT_ID = "call_abc123def456"


def history_with_call(call_id: str) -> list[Message]:
    return [
        UserMessage(content="weather in Oslo, then Rome"),
        AssistantMessage(
            tool_calls=(ToolCall(id=call_id, name="get_weather", arguments='{"city": "Oslo"}'),)
        ),
        ToolMessage(call_id=call_id, name="get_weather", content='{"temp": 3}'),
    ]


def echo_the_call_id(*, stream: bool) -> Callable[[ReceivedRequest], Reply]:
    """An upstream that answers with a call reusing the id of the call in the history."""

    def handler(req: ReceivedRequest) -> Reply:
        upstream_id = req.json["messages"][1]["tool_calls"][0]["id"]
        fresh = "Xy12Zw9Qa"  # an id of the upstream's own making
        if not stream:
            return completion(
                tool_calls=[
                    tool_call("get_weather", {"city": "Rome"}, id=upstream_id),
                    tool_call("get_weather", {"city": "Bern"}, id=fresh),
                ]
            )
        calls: list[StreamedCall] = [
            (upstream_id, "get_weather", '{"city": "Rome"}'),
            (fresh, "get_weather", '{"city": "Bern"}'),
        ]
        return calls_sse(calls, chunk=4)

    return handler


@pytest.mark.parametrize("stream", [False, True])
async def test_mistral_ids_go_up_short_and_come_back_as_the_clients(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(echo_the_call_id(stream=stream))
    model = make_model(openai_server, id_style="mistral")
    if stream:
        events = await collect(model, messages=history_with_call(CLIENT_ID))
        response = final(events)
        starts = [e for e in events if isinstance(e, ModelToolCallStart)]
        assert [s.id for s in starts] == [CLIENT_ID, "Xy12Zw9Qa"]
    else:
        response = await model.complete(history_with_call(CLIENT_ID), [WEATHER])

    sent = openai_server.last.json["messages"]
    upstream_id = sent[1]["tool_calls"][0]["id"]
    assert MISTRAL_ID.fullmatch(upstream_id)
    assert sent[2]["tool_call_id"] == upstream_id
    assert [c.id for c in response.message.tool_calls] == [CLIENT_ID, "Xy12Zw9Qa"]


async def test_keep_style_sends_ids_unchanged(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(echo_the_call_id(stream=True))
    events = await collect(make_model(openai_server), messages=history_with_call(CLIENT_ID))
    assert openai_server.last.json["messages"][1]["tool_calls"][0]["id"] == CLIENT_ID
    assert final(events).message.tool_calls[0].id == CLIENT_ID


async def test_distinct_ids_never_collide_upstream(openai_server: FakeOpenAIServer) -> None:
    client_ids = [f"call_{i}" for i in range(150)] + [f"call-{i}" for i in range(150)]
    client_ids += ["abcdefghi", "call_abcdefghi", "ABCDEFGHI"]
    calls = tuple(ToolCall(id=i, name="get_weather", arguments="{}") for i in client_ids)
    history: list[Message] = [
        AssistantMessage(tool_calls=calls),
        *(ToolMessage(call_id=i, name="get_weather", content="ok") for i in client_ids),
    ]
    for style in ("mistral", "anthropic"):
        openai_server.reply(completion("ok"))
        await make_model(openai_server, id_style=style).complete(history, [WEATHER])
        sent = openai_server.last.json["messages"]
        upstream = [c["id"] for c in sent[0]["tool_calls"]]
        assert len(set(upstream)) == len(client_ids)
        assert [m["tool_call_id"] for m in sent[1:]] == upstream
        if style == "mistral":
            assert all(MISTRAL_ID.fullmatch(i) for i in upstream)
            assert "abcdefghi" in upstream  # an id that already fits is kept
        else:
            assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in upstream)


# --- streamed call indexes -----------------------------------------------------------------

STREAMED: list[StreamedCall] = [
    ("call_a", "get_weather", '{"city": "São Paulo"}'),
    ("call_b", "calculate", '{"expression": "(2 + 3) * 4"}'),
    ("call_c", "get_weather", '{"city": "Oslo"}'),
]


@pytest.mark.parametrize("split", [None, 1, 7])
@pytest.mark.parametrize(
    "shape",
    [
        {"indexes": "distinct"},
        {"indexes": "zero", "ids": "first"},
        {"indexes": "zero", "ids": "none"},
        {"indexes": "none", "ids": "first"},
        {"indexes": [1, 2, 3]},
        {"indexes": [9, 4, 100]},
    ],
    ids=["distinct", "zero", "zero-no-ids", "no-index", "from-1", "arbitrary"],
)
async def test_streamed_calls_get_distinct_stable_indexes(
    openai_server: FakeOpenAIServer, shape: dict[str, Any], split: int | None
) -> None:
    openai_server.reply(calls_sse(STREAMED, chunk=5, split=split, **shape))
    events = await collect(make_model(openai_server), tools=[WEATHER, CALC])

    starts = [e for e in events if isinstance(e, ModelToolCallStart)]
    assert [(s.index, s.name) for s in starts] == [
        (0, "get_weather"),
        (1, "calculate"),
        (2, "get_weather"),
    ]
    for index, (_, _, args) in enumerate(STREAMED):
        parts = [
            e.text for e in events if isinstance(e, ModelToolCallArgsDelta) and e.index == index
        ]
        assert "".join(parts) == args
    calls = final(events).message.tool_calls
    assert [c.id for c in calls] == [s.id for s in starts]
    assert [c.arguments for c in calls] == [args for _, _, args in STREAMED]
    if shape.get("ids") != "none":
        assert [c.id for c in calls] == ["call_a", "call_b", "call_c"]


# --- retries -------------------------------------------------------------------------------


def ok_reply(stream: bool) -> Reply:
    return sse([delta("fine"), delta(finish_reason="stop")]) if stream else completion("fine")


async def answer(model: OpenAIChatModel, *, stream: bool) -> ModelResponse:
    if stream:
        return final(await collect(model, tools=[]))
    return await model.complete([UserMessage(content="hi")], [])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [500, 502, 503, 429])
async def test_5xx_and_429_are_retried(
    openai_server: FakeOpenAIServer, stream: bool, status: int
) -> None:
    openai_server.fail(2, status)
    openai_server.reply(ok_reply(stream))
    response = await answer(make_model(openai_server, retry_backoff=0.01), stream=stream)
    assert response.message.content == "fine"
    assert len(openai_server.requests) == 3
    assert openai_server.requests[0].body == openai_server.requests[2].body


@pytest.mark.parametrize("stream", [False, True])
async def test_out_of_retries_the_last_error_is_raised(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.fail(3, 503, message="overloaded")
    openai_server.reply(ok_reply(stream))
    err = await expect_error(make_model(openai_server, retry_backoff=0.01), stream=stream)
    assert len(openai_server.requests) == 3
    assert err.status == 503
    assert err.retryable
    assert err.body == {
        "message": "overloaded",
        "type": "server_error",
        "param": None,
        "code": None,
    }


async def test_retries_zero_means_one_request(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(1, 503)
    openai_server.reply(completion("fine"))
    err = await expect_error(make_model(openai_server, retries=0), stream=False)
    assert err.status == 503
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_other_4xx_are_never_retried(
    openai_server: FakeOpenAIServer, stream: bool, status: int
) -> None:
    upstream_error = {
        "message": "Invalid 'messages[0].content'.",
        "type": "invalid_request_error",
        "param": "messages[0].content",
        "code": "invalid_value",
    }
    openai_server.reply(raw(json.dumps({"error": upstream_error}), status=status))
    openai_server.reply(ok_reply(stream))
    err = await expect_error(make_model(openai_server, retry_backoff=0.01), stream=stream)
    assert len(openai_server.requests) == 1
    assert err.status == status
    assert err.body == upstream_error
    assert not err.retryable


async def test_short_retry_after_is_honoured(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(1, 429, retry_after=0.05)
    openai_server.reply(completion("fine"))
    response = await make_model(openai_server, retry_backoff=30.0).complete([], [])
    # A 30 s backoff would have timed the test out: the upstream's 0.05 s was used.
    assert response.message.content == "fine"
    assert len(openai_server.requests) == 2


async def test_long_retry_after_is_not_waited_for(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(1, 429, retry_after=120)
    openai_server.reply(completion("fine"))
    err = await expect_error(make_model(openai_server), stream=False)
    assert err.status == 429
    assert len(openai_server.requests) == 1


def test_retries_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="retries must be 0 or more"):
        OpenAIChatModel("http://x/v1", None, "m", retries=-1)


async def events_then_error(model: OpenAIChatModel) -> tuple[list[ModelStreamEvent], ModelError]:
    seen: list[ModelStreamEvent] = []

    async def consume() -> None:
        async for event in model.stream([], []):
            seen.append(event)

    with pytest.raises(ModelError) as info:
        await consume()
    return seen, info.value


ROLE_ONLY = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}


@pytest.mark.parametrize(
    "broken",
    [
        dropped([]),
        dropped([ROLE_ONLY]),
        sse([], done=False),
        sse([ROLE_ONLY], done=False),
    ],
    ids=["dropped-at-once", "dropped-after-role", "ended-at-once", "ended-after-role"],
)
async def test_a_stream_that_fails_before_yielding_anything_is_retried(
    openai_server: FakeOpenAIServer, broken: Reply
) -> None:
    openai_server.reply(broken, ok_reply(True))
    response = final(await collect(make_model(openai_server, retry_backoff=0.01)))
    assert response.message.content == "fine"
    assert len(openai_server.requests) == 2


async def test_a_stream_dropped_mid_answer_is_an_error_not_retried(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(dropped([delta("The weather "), delta("in Paris")]), ok_reply(True))
    seen, err = await events_then_error(make_model(openai_server))
    assert seen == [ModelContentDelta("The weather "), ModelContentDelta("in Paris")]
    assert str(err).startswith(
        f"The connection to the model at {openai_server.base_url} broke mid-answer: "
    )
    assert "\n" not in str(err)
    assert err.retryable
    assert len(openai_server.requests) == 1
    assert openai_server.wait_until(lambda: openai_server.dropped == 1)


async def test_a_stream_ended_mid_answer_is_an_error(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse([delta("The weather "), delta("in Paris")], done=False))
    openai_server.reply(ok_reply(True))
    seen, err = await events_then_error(make_model(openai_server))
    assert seen == [ModelContentDelta("The weather "), ModelContentDelta("in Paris")]
    assert str(err) == (
        f"The model at {openai_server.base_url} ended the stream mid-answer "
        "(no finish_reason and no [DONE]); the answer is incomplete."
    )
    assert len(openai_server.requests) == 1


async def test_done_without_a_finish_reason_is_a_complete_answer(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(sse([delta("all"), delta(" there")]))
    response = final(await collect(make_model(openai_server)))
    assert response.message.content == "all there"
    assert response.finish_reason == "stop"


# --- the shared client, cancellation and connection reuse ------------------------------------


def slow_stream(pieces: int = 200) -> Reply:
    return sse([delta(f"{i} ") for i in range(pieces)], interval=0.05)


async def test_closing_a_stream_early_cancels_the_upstream(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(slow_stream(), completion("next"))
    async with httpx.AsyncClient() as client:
        model = OpenAIChatModel(openai_server.base_url, "k", "m", http_client=client)
        stream = model.stream([], [])
        first = await anext(aiter(stream))
        assert first == ModelContentDelta("0 ")
        await stream.aclose()  # type: ignore[attr-defined]
        assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
        assert openai_server.completed == 0
        assert not client.is_closed
        assert (await model.complete([], [])).message.content == "next"


async def test_a_cancelled_task_cancels_the_upstream(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(slow_stream())
    started = asyncio.Event()

    async def consume(model: OpenAIChatModel) -> None:
        async for _ in model.stream([], []):
            started.set()

    async with httpx.AsyncClient() as client:
        task = asyncio.create_task(
            consume(OpenAIChatModel(openai_server.base_url, "k", "m", http_client=client))
        )
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
        assert not client.is_closed


async def test_the_shared_client_survives_every_outcome(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        ok_reply(True),
        dropped([delta("x")]),
        error(400, "bad"),
        completion("ok"),
    )
    async with httpx.AsyncClient() as client:
        async with OpenAIChatModel(openai_server.base_url, "k", "m", http_client=client) as model:
            await collect(model)
            with pytest.raises(ModelError):
                await collect(model)
            with pytest.raises(ModelError):
                await model.complete([], [])
            await model.complete([], [])
        await model.aclose()
        assert not client.is_closed


@pytest.mark.parametrize("stream", [False, True])
async def test_finished_requests_leave_the_connection_for_the_next(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(ok_reply(stream), ok_reply(stream), ok_reply(stream))
    async with httpx.AsyncClient() as client:
        model = OpenAIChatModel(openai_server.base_url, "k", "m", http_client=client)
        for _ in range(3):
            await answer(model, stream=stream)
    ports = {r.client_port for r in openai_server.requests}
    assert len(ports) == 1


# --- the fake server ---------------------------------------------------------------------------


async def test_fake_server_default_reply(openai_server: FakeOpenAIServer) -> None:
    openai_server.set_default(lambda req: completion(f"#{len(openai_server.requests)}"))
    openai_server.reply(completion("scripted"))
    model = make_model(openai_server)
    contents = [(await model.complete([], [])).message.content for _ in range(3)]
    assert contents == ["scripted", "#2", "#3"]


async def test_fake_server_text_stream(openai_server: FakeOpenAIServer) -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    openai_server.reply(text_sse(text, chunk=3, usage={"prompt_tokens": 1, "completion_tokens": 2}))
    events = await collect(make_model(openai_server))
    assert all(len(e.text) <= 3 for e in events if isinstance(e, ModelContentDelta))
    response = final(events)
    assert response.message.content == text
    assert response.message.tool_calls == ()
    assert response.usage.output_tokens == 2


async def test_done_without_its_blank_line_at_the_end_of_the_body(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(sse([delta("all"), "data: [DONE]"], done=False))
    response = final(await collect(make_model(openai_server)))
    assert response.message.content == "all"
    assert len(openai_server.requests) == 1


async def test_an_error_status_with_an_event_stream_body(openai_server: FakeOpenAIServer) -> None:
    inner = {"message": "prompt too long", "type": "invalid_request_error", "param": None}
    reply = sse([{"error": inner}], done=False)
    reply.status = 400
    openai_server.reply(reply)
    err = await expect_error(make_model(openai_server), stream=True)
    assert err.status == 400
    assert err.body == inner
    assert "HTTP 400: prompt too long." in str(err)
