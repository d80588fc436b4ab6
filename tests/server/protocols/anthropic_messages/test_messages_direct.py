"""`POST /v1/messages` on the direct path (a gateway without server tools), driven by the
`anthropic` SDK over a real socket in front of the fake OpenAI server: answers, client
tool round trips, streamed tool arguments, `tool_choice`, `system` blocks, thinking, and
the exact event sequence on the wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic.types import RawMessageStreamEvent, TextBlock, ThinkingBlock
from e2e_chat_support import live_gateway, openai_upstream
from live import LiveServer
from messages_support import (
    MODEL,
    TIME,
    WEATHER,
    async_sdk,
    check_grammar,
    raw_events,
    sdk,
    text_of,
    tool_uses,
    user,
)
from server_support import config_with

from fakes.openai_server import (
    FakeOpenAIServer,
    calls_events,
    calls_sse,
    completion,
    delta,
    sse,
    text_sse,
    tool_call,
)

HERMES_TWO = (
    "Let me look.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    "</tool_call>\n<tool_call>\n"
    '{"name": "get_time", "arguments": {"city": "Tokyo"}}\n'
    "</tool_call>"
)


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    models = {
        MODEL: "gpt-4o",
        "hermes-raw": {"model": "qwen2.5-7b-instruct", "tool_calls": "parse:hermes"},
        "prompted": {"model": "plain-llm", "tool_calls": "prompted:hermes"},
    }
    upstream = openai_upstream(_openai_server_session.base_url, models)
    with live_gateway(config_with(upstream=upstream, store="memory")) as live:
        yield live


# --- answers ----------------------------------------------------------------------------------


def test_plain_answer(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        completion("Hello there.", usage={"prompt_tokens": 12, "completion_tokens": 3})
    )
    with sdk(server) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=256, messages=user("Hi!")
        )
    message = raw.parse()
    assert message.id.startswith("msg_")
    assert (message.type, message.role, message.model) == ("message", "assistant", MODEL)
    assert [(b.type, text_of(message)) for b in message.content] == [("text", "Hello there.")]
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 3)
    assert raw.headers["request-id"]
    sent = openai_server.last.json
    assert sent["messages"] == [{"role": "user", "content": "Hi!"}]
    assert sent["max_tokens"] == 256
    assert "tools" not in sent


def test_streamed_answer_through_the_sdk(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse([delta("Hel"), delta("lo."), delta(finish_reason="stop")]))
    with sdk(server) as client:
        events: list[RawMessageStreamEvent] = list(
            client.messages.create(model=MODEL, max_tokens=64, messages=user(), stream=True)
        )
    kinds = [e.type for e in events]
    # The upstream's deltas may arrive (and be forwarded) together: one delta or more.
    deltas = kinds.count("content_block_delta")
    assert kinds == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert deltas >= 1
    text = "".join(
        e.delta.text
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    assert text == "Hello."
    openai_server.reply(text_sse("Hello, streamed.", chunk=4))
    with (
        sdk(server) as client,
        client.messages.stream(model=MODEL, max_tokens=64, messages=user()) as stream,
    ):
        assert "".join(stream.text_stream) == "Hello, streamed."
        final = stream.get_final_message()
    assert text_of(final) == "Hello, streamed."
    assert final.stop_reason == "end_turn"


def test_the_event_sequence_on_the_wire(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        sse(
            [
                delta("Checking."),
                *calls_events([("call_w", "get_weather", '{"city": "Paris"}')], chunk=5),
                delta(usage={"prompt_tokens": 20, "completion_tokens": 9}),
            ]
        )
    )
    body = {"model": MODEL, "max_tokens": 100, "messages": user(), "tools": [WEATHER]}
    response, events = raw_events(server, body)
    assert response.headers["cache-control"] == "no-cache"
    blocks = check_grammar(events)
    assert blocks == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "call_w", "name": "get_weather", "input": {"city": "Paris"}},
    ]
    start = events[0][1]["message"]
    assert start["content"] == []
    assert start["model"] == MODEL
    assert start["stop_reason"] is None
    message_delta = events[-2][1]
    assert message_delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert message_delta["usage"] == {"input_tokens": 20, "output_tokens": 9}


async def test_async_client(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion("Async hello."), text_sse("Async stream.", chunk=3))
    async with async_sdk(server) as client:
        message = await client.messages.create(model=MODEL, max_tokens=32, messages=user())
        assert text_of(message) == "Async hello."
        async with client.messages.stream(model=MODEL, max_tokens=32, messages=user()) as stream:
            final = await stream.get_final_message()
    assert text_of(final) == "Async stream."


def test_max_tokens_is_the_stop_reason_when_the_answer_is_cut(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("It was a dark and", finish_reason="length"))
    with sdk(server) as client:
        message = client.messages.create(model=MODEL, max_tokens=5, messages=user("A story."))
    assert message.stop_reason == "max_tokens"
    assert openai_server.last.json["max_tokens"] == 5


# --- client tools -----------------------------------------------------------------------------


def test_client_tool_round_trip(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        completion(
            "Let me check.",
            tool_calls=[tool_call("get_weather", {"city": "Paris"}, id="call_w")],
        ),
        completion("It is sunny in Paris."),
    )
    messages = user()
    with sdk(server) as client:
        first = client.messages.create(
            model=MODEL, max_tokens=200, messages=messages, tools=[WEATHER]
        )
        assert first.stop_reason == "tool_use"
        assert text_of(first) == "Let me check."
        assert tool_uses(first) == [("call_w", "get_weather", {"city": "Paris"})]
        messages += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_w", "content": "Sunny, 24°C"}
                ],
            },
        ]
        second = client.messages.create(
            model=MODEL, max_tokens=200, messages=messages, tools=[WEATHER]
        )
    assert text_of(second) == "It is sunny in Paris."
    assert second.stop_reason == "end_turn"
    offered = openai_server.requests[0].json["tools"]
    assert offered == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The current weather in a city.",
                "parameters": WEATHER["input_schema"],
            },
        }
    ]
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["content"] == "Let me check."
    [call] = sent[1]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_w", "get_weather")
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("call_w", "Sunny, 24°C")


def test_parallel_client_calls_and_their_results(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(
            tool_calls=[
                tool_call("get_weather", {"city": "Paris"}, id="call_a"),
                tool_call("get_time", {"city": "Tokyo"}, id="call_b"),
            ]
        ),
        completion("Sunny in Paris; 9pm in Tokyo."),
    )
    messages = user("Weather in Paris and time in Tokyo?")
    with sdk(server) as client:
        first = client.messages.create(
            model=MODEL, max_tokens=200, messages=messages, tools=[WEATHER, TIME]
        )
        assert [b.type for b in first.content] == ["tool_use", "tool_use"]
        assert tool_uses(first) == [
            ("call_a", "get_weather", {"city": "Paris"}),
            ("call_b", "get_time", {"city": "Tokyo"}),
        ]
        messages += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    # Results in another order than the calls, then a remark: all honoured.
                    {"type": "tool_result", "tool_use_id": "call_b", "content": "21:00"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_a",
                        "content": [
                            {"type": "text", "text": "Sunny"},
                            {"type": "text", "text": "24°C"},
                        ],
                    },
                    {"type": "text", "text": "Be brief."},
                ],
            },
        ]
        second = client.messages.create(
            model=MODEL, max_tokens=200, messages=messages, tools=[WEATHER, TIME]
        )
    assert text_of(second) == "Sunny in Paris; 9pm in Tokyo."
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:4]] == [
        ("call_b", "21:00"),
        ("call_a", "Sunny\n24°C"),
    ]
    assert sent[4]["content"] == "Be brief."


@pytest.mark.parametrize("split", [1, 3, 7])
def test_streamed_arguments_split_anywhere_arrive_once_and_whole(
    server: LiveServer, openai_server: FakeOpenAIServer, split: int
) -> None:
    calls = [
        ("call_a", "get_weather", ['{"ci', 'ty": "Pa', 'ris"', "}"]),
        ("call_b", "get_time", '{"city": "Tō\\"kyo\\""}'),
    ]
    openai_server.reply(calls_sse(calls, indexes="zero", content="On it.", chunk=2, split=split))
    with (
        sdk(server) as client,
        client.messages.stream(
            model=MODEL, max_tokens=100, messages=user(), tools=[WEATHER, TIME]
        ) as stream,
    ):
        seen = [event.type for event in stream]
        final = stream.get_final_message()
    assert text_of(final) == "On it."
    assert tool_uses(final) == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_time", {"city": 'Tō"kyo"'}),
    ]
    assert final.stop_reason == "tool_use"
    # One input_json event per call: nothing lost, nothing repeated.
    assert seen.count("input_json") == 2


def test_raw_text_calls_of_a_parse_route_stream_as_tool_use_blocks(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(text_sse(HERMES_TWO, chunk=3))
    body = {"model": "hermes-raw", "max_tokens": 100, "messages": user(), "tools": [WEATHER, TIME]}
    _, events = raw_events(server, body)
    blocks = check_grammar(events)
    assert [b["type"] for b in blocks] == ["text", "tool_use", "tool_use"]
    assert blocks[0]["text"].strip() == "Let me look."
    assert [(b["name"], b["input"]) for b in blocks[1:]] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"city": "Tokyo"}),
    ]
    assert all(b["id"] for b in blocks[1:])
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_a_prompted_route_returns_tool_use(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
        )
    )
    with sdk(server) as client:
        message = client.messages.create(
            model="prompted", max_tokens=100, messages=user(), tools=[WEATHER]
        )
    [(call_id, name, arguments)] = tool_uses(message)
    assert (name, arguments) == ("get_weather", {"city": "Oslo"})
    assert call_id
    # The upstream knows nothing of tools: they were put into its instructions.
    sent = openai_server.last.json
    assert "tools" not in sent
    assert "get_weather" in sent["messages"][0]["content"]


@pytest.mark.parametrize(
    ("choice", "sent_choice", "parallel"),
    [
        ({"type": "auto"}, "auto", None),
        ({"type": "any"}, "required", None),
        ({"type": "none"}, "none", None),
        (
            {"type": "tool", "name": "get_time"},
            {"type": "function", "function": {"name": "get_time"}},
            None,
        ),
        ({"type": "auto", "disable_parallel_tool_use": True}, "auto", False),
        ({"type": "any", "disable_parallel_tool_use": False}, "required", None),
    ],
)
def test_tool_choice_reaches_the_upstream(
    server: LiveServer,
    openai_server: FakeOpenAIServer,
    choice: Any,
    sent_choice: Any,
    parallel: bool | None,
) -> None:
    openai_server.reply(completion("ok"))
    with sdk(server) as client:
        client.messages.create(
            model=MODEL, max_tokens=10, messages=user(), tools=[WEATHER, TIME], tool_choice=choice
        )
    sent = openai_server.last.json
    assert sent["tool_choice"] == sent_choice
    assert sent.get("parallel_tool_calls") == parallel


# --- system, sampling, thinking, images -------------------------------------------------------


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        ("Be terse.", "Be terse."),
        (
            [
                {"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Answer in French."},
            ],
            "Be terse.\n\nAnswer in French.",
        ),
    ],
)
def test_system_as_a_string_or_blocks(
    server: LiveServer, openai_server: FakeOpenAIServer, system: Any, expected: str
) -> None:
    openai_server.reply(completion("Oui."))
    with sdk(server) as client:
        client.messages.create(model=MODEL, max_tokens=10, system=system, messages=user())
    sent = openai_server.last.json["messages"]
    assert sent[0] == {"role": "system", "content": expected}
    assert sent[1]["role"] == "user"


def test_sampling_fields_are_mapped_and_unknown_ones_named(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("ok"))
    with sdk(server) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=10,
            messages=user(),
            stop_sequences=["END"],
            metadata={"user_id": "u-42"},
            service_tier="auto",
            # Sampling fields older SDKs (and raw clients) send; this SDK only as extras.
            extra_body={"temperature": 0.3, "top_p": 0.9, "top_k": 40},
        )
    sent = openai_server.last.json
    assert (sent["temperature"], sent["top_p"], sent["top_k"]) == (0.3, 0.9, 40)
    assert (sent["stop"], sent["user"]) == (["END"], "u-42")
    assert "service_tier" not in sent
    assert raw.headers["toolwire-ignored-fields"] == "service_tier"


def test_reasoning_is_shown_only_when_thinking_is_enabled(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    answer = {"reasoning_content": "Paris is in France.", "content": "Sunny."}
    openai_server.reply(completion(**answer), completion(**answer))
    with sdk(server) as client:
        plain = client.messages.create(model=MODEL, max_tokens=2048, messages=user())
        thinking = client.messages.create(
            model=MODEL,
            max_tokens=2048,
            messages=user(),
            thinking={"type": "enabled", "budget_tokens": 1024},
        )
    assert [b.type for b in plain.content] == ["text"]
    assert isinstance(plain.content[0], TextBlock)
    assert [b.type for b in thinking.content] == ["thinking", "text"]
    assert isinstance(thinking.content[0], ThinkingBlock)
    assert thinking.content[0].thinking == "Paris is in France."
    assert "thinking" not in openai_server.last.json

    openai_server.reply(
        sse([delta(reasoning_content="Hmm. "), delta("Sunny."), delta(finish_reason="stop")])
    )
    body = {
        "model": MODEL,
        "max_tokens": 2048,
        "messages": user(),
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    _, events = raw_events(server, body)
    blocks = check_grammar(events)
    assert blocks == [
        {"type": "thinking", "thinking": "Hmm. ", "signature": ""},
        {"type": "text", "text": "Sunny."},
    ]


def test_images_reach_the_upstream_as_image_parts(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("A cat."))
    content: Any = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "What is this?"},
    ]
    with sdk(server) as client:
        client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": content}]
        )
    [message] = openai_server.last.json["messages"]
    assert message["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "What is this?"},
    ]
