"""`POST /v1/responses` request checks: the body → `ResponsesRequest`, and `input` →
toolwire messages with the pairing rules of function call outputs. Every mistake is a
400 naming the field (`input[2].call_id`)."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.models.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from toolwire.server.configuration.config import Dialect, LimitsConfig
from toolwire.server.http.errors import GatewayError
from toolwire.server.protocols.responses.items import Input, parse_input
from toolwire.server.protocols.responses.request import ResponsesRequest, parse_responses_request
from toolwire.tools.call import ToolCall

WEATHER: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}


def parse(**body: Any) -> ResponsesRequest:
    return parse_responses_request(
        {"model": "gpt", "input": "hi", **body},
        limits=LimitsConfig(max_messages=4, max_tools=2),
        server_tools={"add"},
    )


def refused(**body: Any) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        parse(**body)
    assert caught.value.status == 400
    return caught.value


def items(
    raw: Any,
    *,
    waiting: tuple[ToolCall, ...] = (),
    strict: bool = False,
    dialect: Dialect = "openai",
) -> Input:
    return parse_input(raw, waiting=waiting, strict_tool_results=strict, dialect=dialect)


def refused_input(raw: Any, **options: Any) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        items(raw, **options)
    assert caught.value.status == 400
    return caught.value


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Oslo"}') -> Any:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(call_id: str, text: str = "sunny") -> Any:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


# --- the body --------------------------------------------------------------------------------


def test_the_parameters_map_onto_model_settings() -> None:
    request = parse(
        instructions="Be brief.",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        max_output_tokens=100,
        temperature=0.2,
        top_p=0.9,
        reasoning={"effort": "low"},
        text={"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
        include=["message.output_text.logprobs"],
        truncation="auto",
        prompt_cache_key="ignored",
    )
    settings = request.settings
    assert (settings.temperature, settings.max_tokens) == (0.2, 100)
    assert (settings.tool_choice, settings.parallel_tool_calls) == ("get_weather", False)
    assert settings.extra == {
        "top_p": 0.9,
        "reasoning_effort": "low",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "w", "schema": {"type": "object"}},
        },
    }
    [tool] = request.tools
    assert (tool.name, tool.description, tool.strict) == ("get_weather", "The weather.", True)
    assert request.instructions == "Be brief."
    assert request.store is True
    assert request.echo["tools"][0]["name"] == "get_weather"
    assert request.echo["parallel_tool_calls"] is False
    assert request.echo["text"]["format"]["name"] == "w"


def test_defaults() -> None:
    request = parse()
    assert (request.stream, request.store, request.previous_response_id) == (False, True, None)
    assert request.echo["tool_choice"] == "auto"
    assert request.echo["parallel_tool_calls"] is True
    assert request.settings.extra == {}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": ""}, "model"),
        ({"temperature": "0.5"}, "temperature"),
        ({"stream": 1}, "stream"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"input": 3}, "input"),
        ({"input": []}, "input"),
        ({"background": True}, "background"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"tools": {"type": "function"}}, "tools"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"tools": [{**WEATHER, "name": "get weather"}]}, "tools[0].name"),
        ({"tools": [WEATHER, WEATHER]}, "tools[1].name"),
        ({"tools": [{**WEATHER, "name": "add"}]}, "tools[0].name"),
        ({"tools": [{**WEATHER, "strict": "yes"}]}, "tools[0].strict"),
        ({"tools": [{**WEATHER, "parameters": {"type": "array"}}]}, "tools[0].parameters.type"),
        ({"tools": [{**WEATHER, "parameters": {"type": 5}}]}, "tools[0].parameters"),
        ({"tool_choice": "always"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name"),
        ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format"),
    ],
)
def test_mistakes_name_the_field(body: dict[str, Any], param: str) -> None:
    assert refused(**body).param == param


def test_limits() -> None:
    assert refused(input=["a"] * 5).code == "too_many_messages"
    assert refused(tools=[WEATHER] * 3).code == "too_many_tools"


def test_a_server_tool_may_be_named_in_tool_choice() -> None:
    assert parse(tool_choice={"type": "function", "name": "add"}).settings.tool_choice == "add"


# --- input -----------------------------------------------------------------------------------


def test_a_string_is_one_user_message() -> None:
    assert items("Hello").messages == (UserMessage(content="Hello"),)


def test_messages_in_every_form() -> None:
    got = items(
        [
            {"role": "developer", "content": "Be brief."},
            {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "S"}]},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "a"},
                    {"type": "input_text", "text": "b"},
                ],
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
            },
        ]
    )
    assert got.messages == (
        SystemMessage(content="Be brief."),
        SystemMessage(content="S"),
        UserMessage(content="a\nb"),
        AssistantMessage(content="Hi"),
    )


def test_images_and_files_become_chat_parts() -> None:
    [message] = items(
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,AA",
                        "detail": "low",
                    },
                    {
                        "type": "input_file",
                        "file_data": "data:application/pdf;base64,AA",
                        "filename": "a.pdf",
                    },
                ],
            }
        ]
    ).messages
    assert isinstance(message, UserMessage)
    assert message.content == "What is this?"
    assert message.parts == (
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "detail": "low"}},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,AA", "filename": "a.pdf"},
        },
    )


def test_calls_and_their_outputs_are_paired_in_call_order() -> None:
    got = items(
        [
            {"role": "user", "content": "Weather in Oslo and Rome?"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            call("c1"),
            call("c2", arguments='{"city": "Rome"}'),
            output("c2", "rain"),
            {"type": "reasoning", "id": "rs_1", "summary": []},
            output("c1", "sun"),
        ]
    )
    assert got.messages[1:] == (
        AssistantMessage(
            content="Checking.",
            tool_calls=(
                ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo"}'),
                ToolCall(id="c2", name="get_weather", arguments='{"city": "Rome"}'),
            ),
        ),
        ToolMessage(call_id="c1", name="get_weather", content="sun"),
        ToolMessage(call_id="c2", name="get_weather", content="rain"),
    )
    assert got.dropped_results == ()


def test_an_output_may_come_after_later_items() -> None:
    got = items([call("c1"), {"role": "user", "content": "hurry"}, output("c1")])
    assert [m.role for m in got.messages] == ["assistant", "tool", "user"]


def test_interleaved_calls_and_outputs_are_turns_of_their_own() -> None:
    got = items([call("c1"), output("c1"), call("c2"), output("c2")])
    assert [m.role for m in got.messages] == ["assistant", "tool", "assistant", "tool"]


def test_outputs_answer_the_previous_responses_calls() -> None:
    waiting = (ToolCall(id="c1", name="get_weather", arguments="{}"),)
    got = items([output("c1", [{"type": "input_text", "text": "sun"}])], waiting=waiting)
    assert got.messages == (ToolMessage(call_id="c1", name="get_weather", content="sun"),)


def test_a_call_without_output_is_refused() -> None:
    error = refused_input([{"role": "user", "content": "x"}, call("c1")])
    assert (error.param, error.code) == ("input[1].call_id", "missing_tool_result")
    waiting = (ToolCall(id="c9", name="get_time", arguments="{}"),)
    error = refused_input("and?", waiting=waiting)
    assert (error.param, error.code) == ("input", "missing_tool_result")
    assert "'c9'" in error.message


def test_orphan_outputs_are_dropped_or_refused_in_strict_mode() -> None:
    got = items([call("c1"), output("c1"), output("c1"), output("nope")])
    assert got.dropped_results == ("c1", "nope")
    assert [m.role for m in got.messages] == ["assistant", "tool"]
    error = refused_input([call("c1"), output("c1"), output("nope")], strict=True)
    assert (error.param, error.code) == ("input[2].call_id", "orphan_tool_result")
    error = refused_input([call("c1"), output("c1"), output("c1")], strict=True)
    assert "has an output already" in error.message


def test_echoed_output_items_are_skipped_and_approval_answers_collected() -> None:
    got = items(
        [
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "name": "add",
                "arguments": "{}",
                "server_label": "toolwire",
            },
            {
                "type": "mcp_approval_request",
                "id": "apr_1",
                "name": "x",
                "arguments": "{}",
                "server_label": "toolwire",
            },
            {
                "type": "mcp_approval_response",
                "approval_request_id": "apr_1",
                "approve": False,
                "reason": "no",
            },
        ]
    )
    assert got.messages == ()
    assert got.first_other is None
    [answer] = got.answers
    assert (answer.approval_id, answer.approve, answer.reason, answer.where) == (
        "apr_1",
        False,
        "no",
        "input[2]",
    )
    assert items([{"role": "user", "content": "x"}]).first_other == "input[0]"


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (["hi"], "input[0]"),
        ([{"type": "web_search_call", "id": "ws"}], "input[0].type"),
        ([{"type": "item_reference", "id": "msg_1"}], "input[0]"),
        ([{"role": "tool", "content": "x"}], "input[0].role"),
        ([{"role": "tool_result", "name": "x", "content": "x"}], "input[0].role"),
        ([{"role": "user", "content": 5}], "input[0].content"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
            "input[0].content[0].type",
        ),
        (
            [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}],
            "input[0].content[0].image_url",
        ),
        ([{"role": "user", "content": [{"type": "input_text"}]}], "input[0].content[0].text"),
        (
            [{"role": "system", "content": [{"type": "input_image", "image_url": "x"}]}],
            "input[0].content[0]",
        ),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], "input[0].call_id"),
        ([{"type": "function_call", "call_id": "c", "arguments": "{}"}], "input[0].name"),
        (
            [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}],
            "input[0].arguments",
        ),
        ([call("c"), call("c")], "input[1].call_id"),
        ([call("c"), {"type": "function_call_output", "output": "x"}], "input[1].call_id"),
        (
            [call("c"), {"type": "function_call_output", "call_id": "c", "output": 5}],
            "input[1].output",
        ),
        ([{"type": "mcp_approval_response", "approve": True}], "input[0].approval_request_id"),
        (
            [{"type": "mcp_approval_response", "approval_request_id": "a", "approve": "yes"}],
            "input[0].approve",
        ),
    ],
)
def test_input_mistakes_name_the_item(raw: Any, param: str) -> None:
    assert refused_input(raw).param == param


TOOL_REQUEST = '{"tool_request": {"name": "get_weather", "arguments": {"city": "Oslo"}}}'


def test_the_tool_request_dialect() -> None:
    got = items(
        [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": TOOL_REQUEST},
            {"role": "tool_result", "name": "get_weather", "content": "sun"},
            {"role": "tool_result", "name": "get_weather", "content": "again"},
        ],
        dialect="tool_request",
    )
    assert got.messages[1:] == (
        AssistantMessage(
            tool_calls=(ToolCall(id="toolreq_1", name="get_weather", arguments='{"city":"Oslo"}'),)
        ),
        ToolMessage(call_id="toolreq_1", name="get_weather", content="sun"),
    )
    assert got.dropped_results == ("get_weather",)
    error = refused_input([{"role": "assistant", "content": TOOL_REQUEST}], dialect="tool_request")
    assert (error.param, error.code) == ("input[0].content", "missing_tool_result")
    assert "tool_result" in error.message
    # Without the dialect the same message is plain text.
    assert items([{"role": "assistant", "content": TOOL_REQUEST}]).messages == (
        AssistantMessage(content=TOOL_REQUEST),
    )
