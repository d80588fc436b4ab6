"""`/v1/chat/completions` with the default setup of `toolwire serve` (no config file): the
offline model and the demo tools, driven by the `openai` SDK over a real socket."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from chat_support import (
    BOOK_FLIGHT,
    async_sdk,
    extensions,
    function_calls,
    raw_stream,
    sdk,
    streamed_content,
)
from live import LiveServer
from openai.types.chat import ChatCompletionMessageParam

from toolwire.cli.serve_cmd import default_config
from toolwire.server import create_app

MODEL = "toolwire-offline"
LISBON: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What's the weather in Lisbon?"}
]


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with LiveServer(create_app(default_config(), environ={})) as live:
        yield live


def test_models_list_has_the_offline_model(server: LiveServer) -> None:
    with sdk(server) as client:
        models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]


def test_weather_question_runs_the_demo_tool(server: LiveServer) -> None:
    with sdk(server) as client:
        response = client.chat.completions.create(model=MODEL, messages=LISBON)
    choice = response.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    content = choice.message.content
    assert content is not None
    assert "Lisbon" in content
    assert "not real weather" in content
    # The server tool call and its result travel in the extension field.
    extra = response.model_extra or {}
    run = extra["toolwire"]
    assert run["status"] == "completed"
    [call] = run["tool_calls"]
    assert call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Lisbon"}
    assert call["result"]["success"] is True
    assert call["result"]["result"]["city"] == "Lisbon"
    # The answer quotes the tool's own figure.
    assert str(call["result"]["result"]["temperature"]) in content


def test_weather_question_streams_through_the_sdk(server: LiveServer) -> None:
    with sdk(server) as client:
        stream = client.chat.completions.create(
            model=MODEL, messages=LISBON, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Lisbon" in text
    assert "not real weather" in text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None
    # The SDK keeps the extension chunks (empty choices) without failing on them.
    tagged = [c for c in chunks if (c.model_extra or {}).get("toolwire")]
    assert [(c.model_extra or {})["toolwire"]["type"] for c in tagged] == [
        "tool_call",
        "tool_result",
    ]
    assert all(c.choices == [] for c in tagged)


def test_weather_stream_on_the_wire(server: LiveServer) -> None:
    _, chunks = raw_stream(server, {"model": MODEL, "messages": LISBON})
    call, result = extensions(chunks)
    assert (call["type"], call["name"]) == ("tool_call", "get_weather")
    assert json.loads(call["arguments"]) == {"city": "Lisbon"}
    assert (result["type"], result["name"], result["call_id"]) == (
        "tool_result",
        "get_weather",
        call["id"],
    )
    assert result["success"] is True
    assert json.loads(result["content"]) == result["result"]
    # The extension chunks come before the answer they led to.
    first_text = next(i for i, c in enumerate(chunks) if streamed_content([c]))
    last_ext = max(i for i, c in enumerate(chunks) if "toolwire" in c)
    assert last_ext < first_text
    assert "Lisbon" in streamed_content(chunks)


def test_stream_helper_on_the_offline_model(server: LiveServer) -> None:
    with (
        sdk(server) as client,
        client.chat.completions.stream(
            model=MODEL, messages=[{"role": "user", "content": "What is 12 * 7?"}]
        ) as stream,
    ):
        final = stream.get_final_completion()
    content = final.choices[0].message.content
    assert content is not None
    assert "84" in content
    assert final.choices[0].finish_reason == "stop"


def test_client_tool_with_the_offline_model(server: LiveServer) -> None:
    ask: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Book a flight to Paris"}]
    with sdk(server) as client:
        response = client.chat.completions.create(model=MODEL, messages=ask, tools=[BOOK_FLIGHT])
        choice = response.choices[0]
        assert choice.finish_reason == "tool_calls"
        [call] = function_calls(choice.message)
        assert call.function.name == "book_flight"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        # The gateway did not run it: no server tool in the extension.
        assert (response.model_extra or {})["toolwire"]["tool_calls"] == []

        # The client runs it and sends the result back; the model answers from it.
        follow_up: list[ChatCompletionMessageParam] = [
            *ask,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": "book_flight", "arguments": call.function.arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "Booked: seat 12A, ref ZX81"},
        ]
        answer = client.chat.completions.create(
            model=MODEL, messages=follow_up, tools=[BOOK_FLIGHT]
        )
    assert answer.choices[0].finish_reason == "stop"
    text = answer.choices[0].message.content
    assert text is not None
    assert "ZX81" in text


async def test_client_tool_streamed_with_the_async_stream_helper(server: LiveServer) -> None:
    async with (
        async_sdk(server) as client,
        client.chat.completions.stream(
            model=MODEL,
            messages=[{"role": "user", "content": "Book a flight to Paris"}],
            tools=[BOOK_FLIGHT],
        ) as stream,
    ):
        final = await stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.function.name == "book_flight"
    assert call.function.parsed_arguments == {"city": "Paris"}
