"""The pure Chat Completions conversions, without HTTP."""

from __future__ import annotations

import pytest

from toolwire.models import AssistantMessage, ModelSettings, ToolMessage, UserMessage
from toolwire.models.openai_wire import (
    ChatStreamAssembler,
    UpstreamError,
    WireError,
    build_request,
    error_message,
    message_to_openai,
    parse_completion,
    wire_arguments,
)
from toolwire.parsing.events import ToolCallArgsDelta, ToolCallStart
from toolwire.tools import ToolCall


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ('{"city": "Lisbon"}', '{"city": "Lisbon"}'),
        ("{}", "{}"),
        ('{"city": "Lis', "{}"),  # truncated
        ("city=Lisbon", "{}"),  # not JSON
        ("", "{}"),
        ('"Lisbon"', "{}"),  # JSON, but not an object
        ("[1, 2]", "{}"),
        ("null", "{}"),
    ],
)
def test_invalid_arguments_are_sent_upstream_as_an_empty_object(arguments: str, sent: str) -> None:
    assert wire_arguments(arguments) == sent
    msg = AssistantMessage(tool_calls=(ToolCall(id="c", name="t", arguments=arguments),))
    assert message_to_openai(msg)["tool_calls"][0]["function"]["arguments"] == sent


def test_messages_to_wire() -> None:
    assert message_to_openai(AssistantMessage(content="hi", reasoning="r")) == {
        "role": "assistant",
        "content": "hi",
    }
    assert message_to_openai(AssistantMessage()) == {"role": "assistant", "content": ""}
    assert message_to_openai(ToolMessage(call_id="c", name="t", content="x", is_error=True)) == {
        "role": "tool",
        "tool_call_id": "c",
        "content": "x",
    }


def test_build_request_required_tool_choice() -> None:
    from toolwire.tools import Tool

    body = build_request(
        "m",
        [UserMessage(content="x")],
        [Tool(name="t")],
        ModelSettings(tool_choice="required"),
        stream=True,
    )
    assert body["tool_choice"] == "required"
    assert body["stream"] is True


def test_parse_completion_quirks() -> None:
    body = {
        "choices": [
            {
                "message": {
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    "reasoning": "why",
                    "tool_calls": [
                        {"id": "c1", "function": {"name": "t", "arguments": {"x": 1}}},
                        {"id": "c2", "function": {"name": "u", "arguments": ""}},
                    ],
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"input_tokens": 4, "output_tokens": 5},
    }
    response = parse_completion(body)
    assert response.message.content == "ab"
    assert response.message.reasoning == "why"
    # Arguments sent as an object become JSON text; empty arguments become "{}".
    assert [c.arguments for c in response.message.tool_calls] == ['{"x":1}', "{}"]
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (4, 5)


def test_parse_completion_legacy_function_call_and_finish_reasons() -> None:
    body = {
        "choices": [
            {
                "message": {"content": None, "function_call": {"name": "t", "arguments": "{}"}},
                "finish_reason": "function_call",
            }
        ]
    }
    response = parse_completion(body)
    assert response.message.tool_calls[0].name == "t"
    assert response.finish_reason == "tool_calls"
    length = parse_completion(
        {"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]}
    )
    assert length.finish_reason == "length"
    odd = parse_completion({"choices": [{"message": {"content": "x"}, "finish_reason": "weird"}]})
    assert odd.finish_reason == "stop"


def test_parse_completion_errors() -> None:
    with pytest.raises(UpstreamError, match="boom"):
        parse_completion({"error": {"message": "boom"}})
    with pytest.raises(WireError, match="no function name"):
        parse_completion({"choices": [{"message": {"tool_calls": [{"function": {}}]}}]})


def test_error_message_variants() -> None:
    assert error_message({"error": {"message": "a\n  b"}}) == "a b"
    assert error_message({"error": "plain"}) == "plain"
    assert error_message({"detail": "fastapi style"}) == "fastapi style"
    assert error_message({"nothing": 1}) is None
    assert error_message([1]) is None


def calls_chunk(*calls: dict[str, object]) -> dict[str, object]:
    return {"choices": [{"delta": {"tool_calls": list(calls)}}]}


def test_assembler_without_index_and_with_repeated_ids() -> None:
    asm = ChatStreamAssembler()
    events = []
    for chunk in [
        {"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "t"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"arguments": '{"x"'}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": ": 1}"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"id": "b", "function": {"name": "u"}}]}}]},
        {"choices": [{"index": 1, "delta": {"content": "other choice is ignored"}}]},
    ]:
        events.extend(asm.feed(chunk))
    assert events == [
        ToolCallStart(0, "a", "t"),
        ToolCallArgsDelta(0, '{"x"'),
        ToolCallArgsDelta(0, ": 1}"),
        ToolCallStart(1, "b", "u"),
    ]
    response = asm.finish()
    assert [(c.id, c.arguments) for c in response.message.tool_calls] == [
        ("a", '{"x": 1}'),
        ("b", "{}"),
    ]
    assert response.message.content is None
    assert response.usage.requests == 1


def test_assembler_buffers_arguments_that_arrive_before_the_name() -> None:
    asm = ChatStreamAssembler()
    first = asm.feed(
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"index": 0, "id": "a", "function": {"arguments": '{"k":'}}]
                    }
                }
            ]
        }
    )
    assert first == []
    second = asm.feed(
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"name": "t", "arguments": "2}"}}]
                    }
                }
            ]
        }
    )
    assert second == [ToolCallStart(0, "a", "t"), ToolCallArgsDelta(0, '{"k":2}')]


def test_assembler_drops_nameless_fragments_and_rejects_garbage() -> None:
    asm = ChatStreamAssembler()
    asm.feed(
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}
    )
    assert asm.finish().message.tool_calls == ()
    with pytest.raises(WireError, match="not a JSON object"):
        asm.feed([1])
    with pytest.raises(UpstreamError, match="bad"):
        asm.feed({"error": {"message": "bad"}})
