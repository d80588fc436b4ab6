"""The pure Chat Completions conversions, without HTTP."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from fakes.openai_server import StreamedCall, calls_events
from toolwire.models import (
    AssistantMessage,
    ModelContentDelta,
    ModelDelta,
    ModelResponse,
    ModelSettings,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.models.call_ids import IdMap
from toolwire.models.openai_wire import (
    RESERVED_FIELDS,
    ChatStreamAssembler,
    UpstreamError,
    WireError,
    build_request,
    error_message,
    error_object,
    message_to_openai,
    parse_completion,
    wire_arguments,
)
from toolwire.models.sse import SSEDecoder
from toolwire.tools import Tool, ToolCall


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
        ModelToolCallStart(0, "a", "t"),
        ModelToolCallArgsDelta(0, '{"x"'),
        ModelToolCallArgsDelta(0, ": 1}"),
        ModelToolCallStart(1, "b", "u"),
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
    assert second == [ModelToolCallStart(0, "a", "t"), ModelToolCallArgsDelta(0, '{"k":2}')]


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


# --- pass-through fields and content parts -------------------------------------------------


def test_extra_fields_are_merged_without_overriding_owned_fields() -> None:
    settings = ModelSettings(
        max_tokens=50,
        temperature=0.5,
        extra={
            "top_p": 0.9,
            "stop": ["\n\n"],
            "seed": 7,
            "response_format": {"type": "json_object"},
            "max_tokens": 5,  # the typed setting wins
            "model": "other",
            "messages": [],
            "tools": [],
            "stream": False,
            "stream_options": {"include_usage": False},
        },
    )
    body = build_request("m", [UserMessage(content="x")], [Tool(name="t")], settings, stream=True)
    assert body["model"] == "m"
    assert body["messages"] == [{"role": "user", "content": "x"}]
    assert [t["function"]["name"] for t in body["tools"]] == ["t"]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 50
    assert body["temperature"] == 0.5
    assert (body["top_p"], body["stop"], body["seed"]) == (0.9, ["\n\n"], 7)
    assert body["response_format"] == {"type": "json_object"}
    assert sorted(RESERVED_FIELDS) == ["messages", "model", "stream", "stream_options", "tools"]


def test_extra_max_tokens_is_used_when_the_setting_is_not() -> None:
    body = build_request("m", [], [], ModelSettings(extra={"max_tokens": 5, "user": "u1"}))
    assert body == {"model": "m", "messages": [], "max_tokens": 5, "user": "u1"}


def test_user_parts_are_sent_as_the_content_list() -> None:
    from types import MappingProxyType

    parts = (
        {"type": "text", "text": "What is this?"},
        MappingProxyType({"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}),
    )
    msg = UserMessage(content="What is this?", parts=parts)
    assert message_to_openai(msg) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
        ],
    }
    assert message_to_openai(SystemMessage(content="s")) == {"role": "system", "content": "s"}


# --- call ids ------------------------------------------------------------------------------

MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")


def test_ids_sent_upstream_go_through_the_map() -> None:
    ids = IdMap("mistral")
    history = [
        AssistantMessage(
            tool_calls=(
                ToolCall(id="call_abc123def456", name="t", arguments="{}"),
                ToolCall(id="abcdefghi", name="t", arguments="{}"),  # already valid: kept
            )
        ),
        ToolMessage(call_id="call_abc123def456", name="t", content="1"),
        ToolMessage(call_id="abcdefghi", name="t", content="2"),
    ]
    body = build_request("m", history, [], ids=ids)
    sent = [c["id"] for c in body["messages"][0]["tool_calls"]]
    assert MISTRAL_ID.fullmatch(sent[0])
    assert sent[1] == "abcdefghi"
    assert [m["tool_call_id"] for m in body["messages"][1:]] == sent
    # And back: the upstream's echo of an id is the client's id again.
    assert ids.client(sent[0]) == "call_abc123def456"


def test_parse_completion_maps_ids_back() -> None:
    ids = IdMap("mistral")
    upstream = ids.upstream("call_abc123def456")
    body = {
        "choices": [
            {
                "message": {
                    "tool_calls": [
                        {"id": upstream, "function": {"name": "t", "arguments": "{}"}},
                        {"id": "newCall01", "function": {"name": "t", "arguments": "{}"}},
                    ]
                }
            }
        ]
    }
    calls = parse_completion(body, ids).message.tool_calls
    assert [c.id for c in calls] == ["call_abc123def456", "newCall01"]


def test_the_assembler_maps_ids_back_in_events_and_the_final_response() -> None:
    ids = IdMap("anthropic")
    upstream = ids.upstream("call:1/weird id")
    assert upstream != "call:1/weird id"
    asm = ChatStreamAssembler(ids)
    events: list[ModelDelta] = []
    for chunk in calls_events([(upstream, "t", '{"a": 1}'), ("toolu_new", "u", "{}")], chunk=3):
        events.extend(asm.feed(chunk))
    starts = [e for e in events if isinstance(e, ModelToolCallStart)]
    assert starts == [
        ModelToolCallStart(0, "call:1/weird id", "t"),
        ModelToolCallStart(1, "toolu_new", "u"),
    ]
    assert [c.id for c in asm.finish().message.tool_calls] == ["call:1/weird id", "toolu_new"]


# --- streamed call indexes: every quirk, split every way ------------------------------------

CALLS: list[StreamedCall] = [
    ("call_a", "get_weather", '{"city": "São Paulo"}'),
    ("call_b", "calculate", '{"expression": "(2 + 3) * 4"}'),
    ("call_c", "get_weather", '{"city": "Oslo"}'),  # the same tool again
]

QUIRKS: dict[str, dict[str, Any]] = {
    "distinct indexes": {"indexes": "distinct"},
    "all at index 0, id on the first delta": {"indexes": "zero", "ids": "first"},
    "all at index 0, id on every delta": {"indexes": "zero", "ids": "every"},
    "all at index 0, no ids": {"indexes": "zero", "ids": "none"},
    "no index, id on the first delta": {"indexes": "none", "ids": "first"},
    "no index, no ids": {"indexes": "none", "ids": "none"},
    "indexes from 1": {"indexes": [1, 2, 3]},
    "arbitrary indexes": {"indexes": [7, 3, 42]},
    "distinct indexes, id on every delta": {"indexes": "distinct", "ids": "every"},
}


def assemble(chunks: Sequence[Any]) -> tuple[list[ModelDelta], ModelResponse]:
    asm = ChatStreamAssembler()
    events: list[ModelDelta] = []
    for chunk in chunks:
        events.extend(asm.feed(chunk))
    return events, asm.finish()


def check_calls(
    events: list[ModelDelta], response: ModelResponse, calls: Sequence[StreamedCall]
) -> None:
    starts = [e for e in events if isinstance(e, ModelToolCallStart)]
    assert [(s.index, s.name) for s in starts] == [(n, c[1]) for n, c in enumerate(calls)]
    for n, (_, _, arguments) in enumerate(calls):
        parts = [e.text for e in events if isinstance(e, ModelToolCallArgsDelta) and e.index == n]
        assert "".join(parts) == "".join(arguments)
    # Every delta belongs to a call already started, and indexes never go past the calls.
    started: set[int] = set()
    for event in events:
        if isinstance(event, ModelToolCallStart):
            assert event.index == len(started)
            started.add(event.index)
        elif isinstance(event, ModelToolCallArgsDelta):
            assert event.index in started
    final = response.message.tool_calls
    assert [(c.name, c.arguments) for c in final] == [(c[1], "".join(c[2])) for c in calls]
    assert [c.id for c in final] == [s.id for s in starts]
    assert len({c.id for c in final}) == len(calls)
    assert response.finish_reason == "tool_calls"


@pytest.mark.parametrize("quirk", list(QUIRKS))
def test_stream_index_quirks_split_every_way(quirk: str) -> None:
    shape = QUIRKS[quirk]
    longest = max(len(c[2]) for c in CALLS)
    for chunk in range(1, longest + 1):
        events, response = assemble(calls_events(CALLS, chunk=chunk, **shape))
        check_calls(events, response, CALLS)
        if shape.get("ids", "first") != "none":
            assert [c.id for c in response.message.tool_calls] == ["call_a", "call_b", "call_c"]


@pytest.mark.parametrize("quirk", list(QUIRKS))
def test_stream_index_quirks_with_arguments_cut_at_every_point(quirk: str) -> None:
    """Each call's arguments cut in two at every position (not only in equal chunks)."""
    for cut in range(1, max(len(c[2]) for c in CALLS)):
        calls: list[StreamedCall] = [
            (call_id, name, [piece for piece in (args[:cut], args[cut:]) if piece])
            for call_id, name, args in CALLS
            if isinstance(args, str)
        ]
        events, response = assemble(calls_events(calls, **QUIRKS[quirk]))
        check_calls(events, response, CALLS)


def test_all_calls_at_index_zero_interleaved_with_content() -> None:
    chunks = [
        {"choices": [{"delta": {"content": "Let me check."}}]},
        *calls_events(CALLS[:2], indexes="zero", chunk=4, finish_reason="stop"),
    ]
    events, response = assemble(chunks)
    assert events[0] == ModelContentDelta("Let me check.")
    check_calls(events, response, CALLS[:2])


def test_a_name_repeated_on_every_delta_is_one_call() -> None:
    chunks = [
        calls_chunk({"index": 0, "function": {"name": "t", "arguments": '{"a": '}}),
        calls_chunk({"index": 0, "function": {"name": "t", "arguments": "1"}}),
        calls_chunk({"index": 0, "function": {"name": "t", "arguments": "}"}}),
    ]
    _, response = assemble(chunks)
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [("t", '{"a": 1}')]


def test_a_second_call_to_the_same_tool_at_index_zero_without_ids() -> None:
    chunks = [
        calls_chunk({"index": 0, "function": {"name": "t", "arguments": '{"a": 1}'}}),
        calls_chunk({"index": 0, "function": {"name": "t", "arguments": '{"a": 2}'}}),
        calls_chunk({"index": 0, "function": {"name": "t", "arguments": "{}"}}),
    ]
    events, response = assemble(chunks)
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [
        ("t", '{"a": 1}'),
        ("t", '{"a": 2}'),
        ("t", "{}"),
    ]
    assert [e.index for e in events if isinstance(e, ModelToolCallStart)] == [0, 1, 2]


def test_an_index_reused_after_other_calls_with_a_new_id() -> None:
    chunks = [
        calls_chunk({"index": 0, "id": "a", "function": {"name": "t", "arguments": "{}"}}),
        calls_chunk({"index": 1, "id": "b", "function": {"name": "t", "arguments": "{}"}}),
        calls_chunk({"index": 0, "id": "c", "function": {"name": "u", "arguments": "{}"}}),
        calls_chunk({"index": 1, "function": {"arguments": ""}}),
    ]
    events, response = assemble(chunks)
    assert [c.id for c in response.message.tool_calls] == ["a", "b", "c"]
    assert [e.index for e in events if isinstance(e, ModelToolCallStart)] == [0, 1, 2]


def test_an_id_arriving_after_the_start_keeps_the_started_id() -> None:
    chunks = [
        calls_chunk({"index": 0, "function": {"name": "t", "arguments": "{"}}),
        calls_chunk({"index": 0, "id": "late", "function": {"arguments": "}"}}),
    ]
    events, response = assemble(chunks)
    start = events[0]
    assert isinstance(start, ModelToolCallStart)
    assert response.message.tool_calls[0].id == start.id
    assert response.message.tool_calls[0].arguments == "{}"


def test_finished_tracks_the_finish_reason() -> None:
    asm = ChatStreamAssembler()
    asm.feed({"choices": [{"delta": {"content": "a"}, "finish_reason": None}]})
    assert not asm.finished
    asm.feed({"choices": [{"delta": {}, "finish_reason": "length"}]})
    assert asm.finished
    assert asm.finish().finish_reason == "length"


def test_error_event_keeps_the_upstream_error_object() -> None:
    asm = ChatStreamAssembler()
    err = {"message": "overloaded", "type": "server_error", "param": None, "code": "busy"}
    with pytest.raises(UpstreamError) as info:
        asm.feed({"error": err})
    assert info.value.body == err
    assert str(info.value) == "overloaded"


# --- error objects ---------------------------------------------------------------------------


def test_error_object_variants() -> None:
    full = {"message": "bad", "type": "invalid_request_error", "param": "x", "code": "c"}
    assert error_object({"error": full}, "fallback") == full
    assert error_object({"error": {"code": 42}}, "fallback") == {"code": 42, "message": "fallback"}
    synthesized = {"type": "upstream_error", "param": None, "code": None}
    assert error_object({"error": "model not found"}, "f") == {
        "message": "model not found",
        **synthesized,
    }
    assert error_object({"detail": "Not Found"}, "f") == {"message": "Not Found", **synthesized}
    assert error_object(None, "<html>Bad Gateway</html>") == {
        "message": "<html>Bad Gateway</html>",
        **synthesized,
    }


# --- server-sent events ----------------------------------------------------------------------

SSE_STREAM = (
    b": comment\n\n"
    b'data: {"a": 1}\n\n'
    b'event: message\nid: 3\nretry: 10\ndata:{"b": 2}\r\n\r\n'
    b"data: line one\ndata: line two\n\n"
    b"data: \xc3\xa9t\xc3\xa9\r\r"
    b"data: [DONE]\n\n"
)
SSE_DATA = [b'{"a": 1}', b'{"b": 2}', b"line one\nline two", "été".encode(), b"[DONE]"]


def test_sse_decoder_whole() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(SSE_STREAM) == SSE_DATA
    assert decoder.finish() == []


@pytest.mark.parametrize("size", range(1, 12))
def test_sse_decoder_split_every_way(size: int) -> None:
    decoder = SSEDecoder()
    out: list[bytes] = []
    for i in range(0, len(SSE_STREAM), size):
        out.extend(decoder.feed(SSE_STREAM[i : i + size]))
    out.extend(decoder.finish())
    assert out == SSE_DATA


def test_sse_decoder_cut_at_every_byte_in_two() -> None:
    for cut in range(len(SSE_STREAM) + 1):
        decoder = SSEDecoder()
        out = decoder.feed(SSE_STREAM[:cut]) + decoder.feed(SSE_STREAM[cut:]) + decoder.finish()
        assert out == SSE_DATA, cut


def test_sse_decoder_finish_gives_an_unterminated_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a": 1}\n\ndata: {"b"') == [b'{"a": 1}']
    assert decoder.finish() == [b'{"b"']
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\n") == []
    assert decoder.finish() == [b"x"]
