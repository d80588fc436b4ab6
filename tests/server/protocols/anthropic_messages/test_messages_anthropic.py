"""`POST /v1/messages` in front of an Anthropic upstream (`kind: anthropic`, the fake
Anthropic server), driven by the `anthropic` SDK: the request is translated into
toolwire's core and back out to the upstream, so tool_use / tool_result blocks,
`is_error`, `tool_choice` and streamed inputs must survive both translations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from e2e_chat_support import UPSTREAM_KEY_ENV, UPSTREAM_SECRET, live_gateway
from live import LiveServer
from messages_support import (
    TIME,
    WEATHER,
    anthropic_error,
    post,
    raw_events,
    sdk,
    text_of,
    tool_uses,
    user,
)
from server_support import config_with

from fakes.anthropic_server import (
    FakeAnthropicServer,
    error,
    events,
    message,
    sse,
    text,
    tool_use,
)

MODEL = "claude"
UPSTREAM_MODEL = "claude-sonnet-4-5"


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
        "models": {MODEL: UPSTREAM_MODEL},
        "retries": 0,
    }
    with live_gateway(config_with(upstream=upstream, store="memory")) as live:
        yield live


def test_text_answer(server: LiveServer, fake: FakeAnthropicServer) -> None:
    fake.reply(message("Hello from Claude.", usage={"input_tokens": 12, "output_tokens": 4}))
    with sdk(server) as client:
        answer = client.messages.create(
            model=MODEL, max_tokens=300, system="Be kind.", messages=user("Hi")
        )
    assert text_of(answer) == "Hello from Claude."
    assert answer.model == MODEL
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (12, 4)
    sent = fake.last
    assert sent.headers["x-api-key"] == UPSTREAM_SECRET
    assert sent.json["model"] == UPSTREAM_MODEL
    assert sent.json["max_tokens"] == 300
    assert sent.json["system"] == "Be kind."
    assert sent.json["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


def test_tool_round_trip_with_an_error_result(
    server: LiveServer, fake: FakeAnthropicServer
) -> None:
    fake.reply(
        message(
            text("Checking both."),
            tool_use("get_weather", {"city": "Paris"}, id="toolu_01"),
            tool_use("get_time", {"city": "Tokyo"}, id="toolu_02"),
        ),
        message("Sunny in Paris; the clock service failed."),
    )
    messages = user("Weather in Paris, time in Tokyo?")
    with sdk(server) as client:
        first = client.messages.create(
            model=MODEL, max_tokens=100, messages=messages, tools=[WEATHER, TIME]
        )
        assert first.stop_reason == "tool_use"
        assert tool_uses(first) == [
            ("toolu_01", "get_weather", {"city": "Paris"}),
            ("toolu_02", "get_time", {"city": "Tokyo"}),
        ]
        messages += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "Sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_02",
                        "is_error": True,
                        "content": [{"type": "text", "text": "clock service down"}],
                    },
                ],
            },
        ]
        second = client.messages.create(
            model=MODEL, max_tokens=100, messages=messages, tools=[WEATHER, TIME]
        )
    assert text_of(second) == "Sunny in Paris; the clock service failed."
    offered = fake.requests[0].json["tools"]
    assert [t["name"] for t in offered] == ["get_weather", "get_time"]
    assert offered[0]["input_schema"] == WEATHER["input_schema"]
    sent = fake.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert [b["type"] for b in sent[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert sent[1]["content"][1]["input"] == {"city": "Paris"}
    results = sent[2]["content"]
    assert [(r["tool_use_id"], r["content"], r["is_error"]) for r in results] == [
        ("toolu_01", "Sunny", False),
        ("toolu_02", "clock service down", True),
    ]


def test_streamed_tool_input_split_anywhere_arrives_once(
    server: LiveServer, fake: FakeAnthropicServer
) -> None:
    fake.reply(
        sse(
            events(
                text("One moment."),
                tool_use("get_weather", {"city": 'Zürich, "CH"'}, id="toolu_07"),
                chunk=3,
            ),
            split=5,
        )
    )
    with (
        sdk(server) as client,
        client.messages.stream(
            model=MODEL, max_tokens=100, messages=user(), tools=[WEATHER]
        ) as stream,
    ):
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert text_of(final) == "One moment."
    assert tool_uses(final) == [("toolu_07", "get_weather", {"city": 'Zürich, "CH"'})]
    assert final.stop_reason == "tool_use"
    assert kinds.count("input_json") == 1
    assert fake.last.json["stream"] is True


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ({"type": "auto"}, {"type": "auto"}),
        ({"type": "any"}, {"type": "any"}),
        ({"type": "none"}, {"type": "none"}),
        ({"type": "tool", "name": "get_time"}, {"type": "tool", "name": "get_time"}),
        (
            {"type": "any", "disable_parallel_tool_use": True},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_tool_choice_reaches_the_upstream(
    server: LiveServer, fake: FakeAnthropicServer, choice: Any, sent: Any
) -> None:
    fake.reply(message("ok"))
    with sdk(server) as client:
        client.messages.create(
            model=MODEL, max_tokens=10, messages=user(), tools=[WEATHER, TIME], tool_choice=choice
        )
    assert fake.last.json["tool_choice"] == sent


def test_upstream_errors_are_relayed_in_anthropics_shape(
    server: LiveServer, fake: FakeAnthropicServer
) -> None:
    fake.reply(error(429, "slow down", type="rate_limit_error"))
    response = post(server, {"model": MODEL, "max_tokens": 10, "messages": user()})
    assert anthropic_error(response, 429) == {"type": "rate_limit_error", "message": "slow down"}
    fake.reply(error(529, "Overloaded", type="overloaded_error"))
    with sdk(server) as client, pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(model=MODEL, max_tokens=10, messages=user())
    assert info.value.status_code == 502
    assert UPSTREAM_SECRET not in str(info.value)


def _comparable(stream: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Events with what may differ between two faithful streams blanked: the message id,
    model and counts, and the spacing of a tool input's JSON."""
    out = []
    for name, data in stream:
        data = json.loads(json.dumps(data))
        if name == "message_start":
            data["message"].update(id="msg", model="m", usage={})
        elif name == "message_delta":
            data["usage"] = {}
        elif name == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            data["delta"]["partial_json"] = json.loads(data["delta"]["partial_json"])
        out.append((name, data))
    return out


@pytest.mark.parametrize(
    "blocks",
    [
        [text("Hello there.")],
        [text("Let me check."), tool_use("get_weather", {"city": "Paris"}, id="toolu_01")],
        [
            tool_use("get_weather", {"city": "Paris"}, id="toolu_01"),
            tool_use("get_time", {"city": "Tokyo"}, id="toolu_02"),
        ],
    ],
)
def test_the_stream_is_event_for_event_what_anthropic_sends(
    server: LiveServer, fake: FakeAnthropicServer, blocks: list[dict[str, Any]]
) -> None:
    upstream = events(*blocks)
    fake.reply(sse(upstream))
    body = {"model": MODEL, "max_tokens": 100, "messages": user(), "tools": [WEATHER, TIME]}
    _, relayed = raw_events(server, body)
    assert _comparable(relayed) == _comparable([(e["type"], e) for e in upstream])
