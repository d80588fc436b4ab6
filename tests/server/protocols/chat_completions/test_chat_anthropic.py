"""An Anthropic upstream (`kind: anthropic`) behind the gateway, over a real socket, driven
by the `openai` SDK: text, tool_use as tool_calls, streaming, tool results sent back as
tool_result blocks, call ids kept valid both ways, and upstream errors relayed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from e2e_chat_support import (
    TIME_TOOL,
    UPSTREAM_KEY_ENV,
    UPSTREAM_SECRET,
    WEATHER_TOOL,
    live_gateway,
    openai_error,
    post_chat,
    sdk,
    sse_chunks,
    user,
)
from live import LiveServer
from openai.types.chat import ChatCompletionChunk
from server_support import config_with

from fakes.anthropic_server import (
    FakeAnthropicServer,
    ReceivedRequest,
    Reply,
    error,
    events,
    message,
    sse,
    text,
    tool_use,
)

UPSTREAM_MODEL = "claude-sonnet-4-5"
_ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@pytest.fixture(scope="module")
def _anthropic_session() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as fake:
        yield fake


@pytest.fixture
def fake(_anthropic_session: FakeAnthropicServer) -> Iterator[FakeAnthropicServer]:
    _anthropic_session.reset()
    yield _anthropic_session
    _anthropic_session.reset()


@pytest.fixture(scope="module")
def server(_anthropic_session: FakeAnthropicServer) -> Iterator[LiveServer]:
    upstream = {
        "kind": "anthropic",
        "base_url": _anthropic_session.base_url,
        "api_key_env": UPSTREAM_KEY_ENV,
        "models": {"claude": UPSTREAM_MODEL},
        "retries": 1,
    }
    with live_gateway(config_with(upstream=upstream)) as live:
        yield live


def _calls(answer: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (c.id, c.function.name, json.loads(c.function.arguments))
        for c in answer.choices[0].message.tool_calls or []
    ]


def test_text_answer(server: LiveServer, fake: FakeAnthropicServer) -> None:
    fake.reply(message("Hello from Claude.", usage={"input_tokens": 12, "output_tokens": 4}))
    with sdk(server) as client:
        answer = client.chat.completions.create(
            model="claude",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ],
            max_tokens=100,
            stop=["END"],
            top_p=0.5,
            user="user-42",
        )
    assert answer.choices[0].message.content == "Hello from Claude."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "claude"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (12, 4)
    sent = fake.last
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == UPSTREAM_SECRET
    assert "anthropic-version" in sent.headers
    assert sent.json["model"] == UPSTREAM_MODEL
    assert sent.json["system"] == "Be brief."
    assert sent.json["messages"] == [{"role": "user", "content": [text("Hi")]}]
    assert sent.json["max_tokens"] == 100
    assert sent.json["stop_sequences"] == ["END"]
    assert sent.json["top_p"] == 0.5
    assert sent.json["metadata"] == {"user_id": "user-42"}


def test_tool_use_becomes_tool_calls(server: LiveServer, fake: FakeAnthropicServer) -> None:
    fake.reply(message("Let me look.", tool_use("get_weather", {"city": "Paris"}, id="toolu_01A")))
    with sdk(server) as client:
        answer = client.chat.completions.create(
            model="claude",
            messages=user(),
            tools=[WEATHER_TOOL],
            tool_choice="required",
        )
    assert answer.choices[0].message.content == "Let me look."
    assert _calls(answer) == [("toolu_01A", "get_weather", {"city": "Paris"})]
    assert answer.choices[0].finish_reason == "tool_calls"
    sent = fake.last.json
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "input_schema": WEATHER_TOOL["function"]["parameters"],
        }
    ]
    assert sent["tool_choice"]["type"] == "any"


def test_streamed_parallel_tool_use(server: LiveServer, fake: FakeAnthropicServer) -> None:
    fake.reply(
        sse(
            events(
                text("Checking both."),
                tool_use("get_weather", {"city": "Paris"}, id="toolu_w"),
                tool_use("get_time", {"city": "Tokyo"}, id="toolu_t"),
                chunk=3,
            )
        )
    )
    with (
        sdk(server) as client,
        client.chat.completions.stream(
            model="claude",
            messages=user("Weather in Paris, time in Tokyo?"),
            tools=[WEATHER_TOOL, TIME_TOOL],
        ) as stream,
    ):
        indexes = [
            call.index
            for event in stream
            if event.type == "chunk"
            for choice in event.chunk.choices
            for call in choice.delta.tool_calls or []
            if call.id
        ]
        answer = stream.get_final_completion()
    assert indexes == [0, 1]
    assert answer.choices[0].message.content == "Checking both."
    assert _calls(answer) == [
        ("toolu_w", "get_weather", {"city": "Paris"}),
        ("toolu_t", "get_time", {"city": "Tokyo"}),
    ]
    assert answer.choices[0].finish_reason == "tool_calls"
    assert fake.last.json["stream"] is True


def _history(first_id: str, second_id: str) -> list[Any]:
    return [
        *user("Weather in Paris, time in Tokyo?"),
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {
                    "id": first_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": second_id,
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"city": "Tokyo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": first_id, "content": "18C"},
        {"role": "tool", "tool_call_id": second_id, "content": "21:00"},
    ]


def test_tool_results_go_back_as_tool_result_blocks(
    server: LiveServer, fake: FakeAnthropicServer
) -> None:
    fake.reply(message("18C in Paris; 21:00 in Tokyo."))
    with sdk(server) as client:
        answer = client.chat.completions.create(
            model="claude",
            messages=_history("toolu_w", "toolu_t"),
            tools=[WEATHER_TOOL, TIME_TOOL],
        )
    assert answer.choices[0].message.content == "18C in Paris; 21:00 in Tokyo."
    turns = fake.last.json["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"] == [
        text("Checking both."),
        {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_t", "name": "get_time", "input": {"city": "Tokyo"}},
    ]
    results = turns[2]["content"]
    assert [(b["type"], b["tool_use_id"]) for b in results] == [
        ("tool_result", "toolu_w"),
        ("tool_result", "toolu_t"),
    ]
    assert json.dumps(results[0]).count("18C") == 1
    assert json.dumps(results[1]).count("21:00") == 1


def _echo_first_call_id(request: ReceivedRequest) -> Reply:
    """Answer with a tool_use that reuses the id of the first call in the history."""
    assistant = request.json["messages"][1]
    upstream_id = next(b["id"] for b in assistant["content"] if b["type"] == "tool_use")
    return message(tool_use("get_weather", {"city": "Lyon"}, id=upstream_id))


@pytest.mark.parametrize("stream", [False, True])
def test_client_ids_are_normalised_upstream_and_mapped_back(
    server: LiveServer, fake: FakeAnthropicServer, stream: bool
) -> None:
    if stream:
        fake.reply(
            lambda request: sse(events(*json.loads(_echo_first_call_id(request).body)["content"]))
        )
    else:
        fake.reply(_echo_first_call_id)
    history = _history("call.1/x", "call 2:y")
    body = {"model": "claude", "messages": history, "tools": [WEATHER_TOOL, TIME_TOOL]}
    response = post_chat(server, {**body, "stream": stream})
    turns = fake.last.json["messages"]
    sent_ids = [b["id"] for b in turns[1]["content"] if b["type"] == "tool_use"]
    result_ids = [b["tool_use_id"] for b in turns[2]["content"]]
    assert all(_ANTHROPIC_ID.fullmatch(i) for i in sent_ids), sent_ids
    assert len(set(sent_ids)) == 2
    assert result_ids == sent_ids
    # The upstream answered with the id it knows; the client sees its own.
    if stream:
        starts = [
            call["id"]
            for c in sse_chunks(response)
            if c.get("choices")
            for call in c["choices"][0]["delta"].get("tool_calls", [])
            if "id" in call
        ]
        assert starts == ["call.1/x"]
    else:
        assert response.json()["choices"][0]["message"]["tool_calls"][0]["id"] == "call.1/x"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (404, "not_found_error"), (413, "request_too_large")],
)
def test_upstream_4xx_is_relayed(
    server: LiveServer, fake: FakeAnthropicServer, status: int, kind: str, stream: bool
) -> None:
    fake.reply(error(status, f"messages.0: anthropic refused ({status})", type=kind))
    response = post_chat(server, {"model": "claude", "messages": user(), "stream": stream})
    err = openai_error(response, status)
    assert err["message"] == f"messages.0: anthropic refused ({status})"
    assert len(fake.requests) == 1


def test_upstream_auth_error_through_the_sdk(server: LiveServer, fake: FakeAnthropicServer) -> None:
    fake.reply(error(401, "invalid x-api-key", type="authentication_error"))
    with sdk(server) as client, pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model="claude", messages=user())
    assert "invalid x-api-key" in info.value.message
    assert UPSTREAM_SECRET not in str(info.value.body)


def test_overloaded_then_success_is_retried(server: LiveServer, fake: FakeAnthropicServer) -> None:
    fake.reply(error(529, "Overloaded", type="overloaded_error"), message("Made it."))
    with sdk(server) as client:
        answer = client.chat.completions.create(model="claude", messages=user())
    assert answer.choices[0].message.content == "Made it."
    assert len(fake.requests) == 2


def test_mid_stream_drop_raises_in_the_sdk(server: LiveServer, fake: FakeAnthropicServer) -> None:
    fake.reply(sse(events(text("The weather in Paris is lovely"), chunk=4), drop_after=5))
    received: list[str] = []
    with sdk(server) as client:
        stream = client.chat.completions.create(model="claude", messages=user(), stream=True)
        with pytest.raises(openai.APIError):
            _read_content(stream, received)
    shown = "".join(received)
    assert shown.startswith("The ")  # what arrived before the drop was forwarded
    assert "The weather in Paris is lovely".startswith(shown)
    assert len(fake.requests) == 1


def _read_content(stream: openai.Stream[ChatCompletionChunk], into: list[str]) -> None:
    for chunk in stream:
        if chunk.choices:
            into.append(chunk.choices[0].delta.content or "")
