"""The pure Messages API conversions, without HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.anthropic_server import events, text, thinking, tool_use
from toolwire.models import (
    AssistantMessage,
    ModelContentDelta,
    ModelReasoningDelta,
    ModelResponse,
    ModelSettings,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.models.anthropic_wire import (
    MessageStreamAssembler,
    UpstreamError,
    WireError,
    build_request,
    error_body,
    messages_to_anthropic,
    parse_message,
    tool_choice_to_anthropic,
    user_content,
)
from toolwire.models.call_ids import IdMap
from toolwire.tools import Tool, ToolCall

WEATHER = Tool(
    name="get_weather",
    description="Weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def request(settings: ModelSettings | None = None, tools: list[Tool] | None = None) -> Any:
    return build_request(
        "claude-test",
        [UserMessage(content="hi")],
        [WEATHER] if tools is None else tools,
        settings,
        ids=IdMap("anthropic"),
        max_tokens=1000,
    )


# --- toolwire -> wire -------------------------------------------------------------------


def test_history_with_tools_becomes_alternating_turns() -> None:
    ids = IdMap("anthropic")
    system, turns = messages_to_anthropic(
        [
            SystemMessage(content="be brief"),
            UserMessage(content="weather in Paris and Rome?"),
            SystemMessage(content="use metric units"),
            AssistantMessage(
                content="Checking.",
                reasoning="two cities, two calls",
                tool_calls=(
                    ToolCall(id="call.abc/1", name="get_weather", arguments='{"city": "Paris"}'),
                    ToolCall(id="toolu_2", name="get_weather", arguments='{"city": "Ro'),
                ),
            ),
            ToolMessage(call_id="call.abc/1", name="get_weather", content="18C"),
            ToolMessage(call_id="toolu_2", name="get_weather", content="bad args", is_error=True),
            UserMessage(content="and in Oslo?"),
        ],
        ids,
    )
    assert system == "be brief\n\nuse metric units"
    new_id = ids.upstream("call.abc/1")
    assert new_id != "call.abc/1"
    assert ids.client(new_id) == "call.abc/1"
    assert turns == [
        {"role": "user", "content": [text("weather in Paris and Rome?")]},
        {
            "role": "assistant",
            "content": [
                text("Checking."),
                tool_use("get_weather", {"city": "Paris"}, id=new_id),
                tool_use("get_weather", {}, id="toolu_2"),  # invalid JSON goes back as {}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": new_id, "content": "18C", "is_error": False},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "bad args",
                    "is_error": True,
                },
                text("and in Oslo?"),
            ],
        },
    ]


def test_same_role_turns_are_merged_and_empty_assistant_turns_dropped() -> None:
    _, turns = messages_to_anthropic(
        [
            UserMessage(content="a"),
            AssistantMessage(content=None),
            UserMessage(content="b"),
            AssistantMessage(content="c"),
            AssistantMessage(content="d"),
        ],
        IdMap("anthropic"),
    )
    assert turns == [
        {"role": "user", "content": [text("a"), text("b")]},
        {"role": "assistant", "content": [text("c"), text("d")]},
    ]


def test_tool_results_open_their_user_turn() -> None:
    _, turns = messages_to_anthropic(
        [
            AssistantMessage(tool_calls=(ToolCall(id="t1", name="x", arguments="{}"),)),
            UserMessage(content="by the way"),
            ToolMessage(call_id="t1", name="x", content="done"),
        ],
        IdMap("anthropic"),
    )
    assert [b["type"] for b in turns[1]["content"]] == ["tool_result", "text"]


def test_user_parts_keep_text_and_images() -> None:
    parts = (
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "image_url", "image_url": {"url": "ftp://example.com/x.png"}},
    )
    blocks = user_content(UserMessage(content="what is this?", parts=parts))
    assert blocks == [
        text("what is this?"),
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]


def test_user_parts_with_nothing_usable_fall_back_to_the_text() -> None:
    parts = ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},)
    assert user_content(UserMessage(content="listen", parts=parts)) == [text("listen")]


@pytest.mark.parametrize(
    ("choice", "parallel", "wire"),
    [
        (None, None, None),
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        ("get_weather", None, {"type": "tool", "name": "get_weather"}),
        ("auto", True, {"type": "auto"}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("none", False, {"type": "none"}),
    ],
)
def test_tool_choice(choice: str | None, parallel: bool | None, wire: Any) -> None:
    assert tool_choice_to_anthropic(choice, parallel) == wire
    body = request(ModelSettings(tool_choice=choice, parallel_tool_calls=parallel))
    assert body.get("tool_choice") == wire


def test_settings_mapping() -> None:
    body = request(
        ModelSettings(
            temperature=0.3,
            max_tokens=64,
            extra={"stop": "END", "top_p": 0.9, "top_k": 40, "user": "u-1", "seed": 7},
        )
    )
    assert body == {
        "model": "claude-test",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [text("hi")]}],
        "tools": [WEATHER.to_anthropic()],
        "temperature": 0.3,
        "stop_sequences": ["END"],
        "top_p": 0.9,
        "top_k": 40,
        "metadata": {"user_id": "u-1"},
    }


def test_defaults_and_stop_list() -> None:
    body = request(ModelSettings(extra={"stop": ["a", "b"]}), tools=[])
    assert body == {
        "model": "claude-test",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": [text("hi")]}],
        "stop_sequences": ["a", "b"],
    }
    assert "tool_choice" not in request(ModelSettings(tool_choice="required"), tools=[])
    assert request(ModelSettings(extra={"max_completion_tokens": 7}))["max_tokens"] == 7


# --- wire -> toolwire -------------------------------------------------------------------


def test_parse_message_with_thinking_text_and_tool_use() -> None:
    ids = IdMap("anthropic")
    upstream = ids.upstream("call.abc/1")
    body = {
        "type": "message",
        "model": "claude-x",
        "content": [
            thinking("let me see"),
            text("Looking "),
            text("it up."),
            tool_use("get_weather", {"city": "Paris"}, id=upstream),
            tool_use("get_weather", {}, id="toolu_new"),
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 7, "cache_read_input_tokens": 100, "output_tokens": 9},
    }
    response = parse_message(body, ids)
    assert response.message == AssistantMessage(
        content="Looking it up.",
        reasoning="let me see",
        tool_calls=(
            ToolCall(id="call.abc/1", name="get_weather", arguments='{"city":"Paris"}'),
            ToolCall(id="toolu_new", name="get_weather", arguments="{}"),
        ),
    )
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (107, 9)
    assert response.usage.requests == 1
    assert response.model == "claude-x"


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("tool_use", "stop"),  # no tool_use block: nothing to call
        (None, "stop"),
    ],
)
def test_stop_reasons(stop_reason: str | None, finish: str) -> None:
    body = {"type": "message", "content": [text("x")], "stop_reason": stop_reason}
    assert parse_message(body, IdMap("anthropic")).finish_reason == finish


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ([1], "expected a JSON object, got an array"),
        ({"type": "message"}, "the response has no 'content' list"),
        ({"content": [{"type": "tool_use", "input": {}}]}, "a tool_use block has no name"),
    ],
)
def test_parse_message_rejects_what_is_no_message(body: Any, detail: str) -> None:
    with pytest.raises(WireError, match=detail):
        parse_message(body, IdMap("anthropic"))


def test_error_bodies_in_openai_shape() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert error_body(body) == {
        "message": "Overloaded",
        "type": "overloaded_error",
        "param": None,
        "code": None,
    }
    with pytest.raises(UpstreamError) as info:
        parse_message(body, IdMap("anthropic"))
    assert info.value.status == 529
    assert str(info.value) == "Overloaded"
    assert error_body({"type": "message"}) is None
    assert error_body("nope") is None


# --- streaming --------------------------------------------------------------------------


def feed_all(assembler: MessageStreamAssembler, stream: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for event in stream:
        out.extend(assembler.feed(event))
    return out


def test_stream_text_thinking_and_parallel_calls_split_in_single_characters() -> None:
    ids = IdMap("anthropic")
    upstream = ids.upstream("call.abc/1")
    stream = events(
        thinking("hmm"),
        text("Hi"),
        tool_use("get_weather", {"city": "Paris"}, id=upstream),
        tool_use("get_weather", {"city": "Rome"}, id="toolu_b"),
        chunk=1,
        usage={"input_tokens": 12, "output_tokens": 30},
    )
    assembler = MessageStreamAssembler(ids)
    deltas = feed_all(assembler, stream)
    assert assembler.done
    assert deltas[:5] == [
        ModelReasoningDelta("h"),
        ModelReasoningDelta("m"),
        ModelReasoningDelta("m"),
        ModelContentDelta("H"),
        ModelContentDelta("i"),
    ]
    # Anthropic's block indexes are 2 and 3; the call indexes count calls from 0.
    assert deltas[5] == ModelToolCallStart(0, "call.abc/1", "get_weather")
    paris = '{"city": "Paris"}'
    assert deltas[6 : 6 + len(paris)] == [ModelToolCallArgsDelta(0, c) for c in paris]
    rest = deltas[6 + len(paris) :]
    assert rest[0] == ModelToolCallStart(1, "toolu_b", "get_weather")
    assert "".join(d.text for d in rest[1:]) == '{"city": "Rome"}'

    response = assembler.finish()
    assert isinstance(response, ModelResponse)
    assert response.message == AssistantMessage(
        content="Hi",
        reasoning="hmm",
        tool_calls=(
            ToolCall(id="call.abc/1", name="get_weather", arguments=paris),
            ToolCall(id="toolu_b", name="get_weather", arguments='{"city": "Rome"}'),
        ),
    )
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 30)
    assert response.model == "claude-fake"


def test_stream_tool_call_without_input_has_empty_object_arguments() -> None:
    assembler = MessageStreamAssembler(IdMap("anthropic"))
    deltas = feed_all(assembler, events(tool_use("list_files", {}, id="toolu_x")))
    assert deltas == [ModelToolCallStart(0, "toolu_x", "list_files")]
    assert assembler.finish().message.tool_calls[0].arguments == "{}"


def test_stream_input_given_whole_in_block_start() -> None:
    stream = [
        *events(text("x"))[:2],
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": tool_use("f", {"a": 1}, id="toolu_f"),
        },
        {"type": "content_block_stop", "index": 0},
    ]
    assembler = MessageStreamAssembler(IdMap("anthropic"))
    assert feed_all(assembler, stream) == [
        ModelToolCallStart(0, "toolu_f", "f"),
        ModelToolCallArgsDelta(0, '{"a":1}'),
    ]


def test_stream_without_message_stop_is_not_done() -> None:
    assembler = MessageStreamAssembler(IdMap("anthropic"))
    feed_all(assembler, events(text("half"), stop=False))
    assert not assembler.done


def test_stream_error_event() -> None:
    assembler = MessageStreamAssembler(IdMap("anthropic"))
    feed_all(assembler, events(text("x"))[:3])
    with pytest.raises(UpstreamError) as info:
        assembler.feed(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        )
    assert info.value.status == 529
    assert info.value.body["type"] == "overloaded_error"


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        ("ping", "a stream event is a string, not a JSON object"),
        ({"type": "content_block_delta", "delta": {}}, "has no block 'index'"),
        (
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta"}},
            "an input_json_delta for block 0, which is no tool_use",
        ),
        ({"type": "content_block_start", "index": 0}, "has no 'content_block' object"),
    ],
)
def test_stream_rejects_malformed_events(event: Any, detail: str) -> None:
    with pytest.raises(WireError, match=detail):
        MessageStreamAssembler(IdMap("anthropic")).feed(event)


def test_stream_ignores_unknown_events_and_deltas() -> None:
    assembler = MessageStreamAssembler(IdMap("anthropic"))
    assert assembler.feed({"type": "something_new"}) == []
    assembler.feed({"type": "content_block_start", "index": 0, "content_block": text("")})
    delta = {"type": "citations_delta", "citation": {}}
    assert assembler.feed({"type": "content_block_delta", "index": 0, "delta": delta}) == []
