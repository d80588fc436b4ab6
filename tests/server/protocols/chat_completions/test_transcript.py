"""Chat Completions messages → toolwire messages, and the pairing rules of tool results."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire.models.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from toolwire.server.configuration.config import Dialect
from toolwire.server.http.errors import GatewayError
from toolwire.server.protocols.chat_completions.transcript import Transcript, parse_messages
from toolwire.tools.call import ToolCall


def parse(messages: list[Any], *, strict: bool = False, dialect: Dialect = "openai") -> Transcript:
    return parse_messages(messages, strict_tool_results=strict, dialect=dialect)


def refused(
    messages: list[Any], *, strict: bool = False, dialect: Dialect = "openai"
) -> GatewayError:
    with pytest.raises(GatewayError) as info:
        parse(messages, strict=strict, dialect=dialect)
    err = info.value
    assert err.status == 400
    assert err.type == "invalid_request_error"
    assert err.param is not None
    assert err.message.startswith(f"{err.param}: ")
    return err


def call(call_id: str, name: str = "get_weather", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def asks(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def result(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


USER = {"role": "user", "content": "hi"}


# --- a valid transcript --------------------------------------------------------------------


def test_multi_turn_transcript_with_parallel_calls() -> None:
    transcript = parse(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            asks(
                call("call_1", arguments='{"city": "Paris"}'),
                call("call_2", arguments='{"city": "Rome"}'),
            ),
            # Results may come in any order within the run.
            result("call_2", "25C"),
            result("call_1", "20C"),
            {"role": "assistant", "content": "Paris 20C, Rome 25C."},
            {"role": "user", "content": "Search news"},
            asks(call("call_3", "search", '{"q": "news"}')),
            result("call_3", "nothing new"),
        ]
    )
    assert transcript.dropped_results == ()
    assert transcript.messages == (
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather in Paris and Rome?"),
        AssistantMessage(
            tool_calls=(
                ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="call_2", name="get_weather", arguments='{"city": "Rome"}'),
            )
        ),
        ToolMessage(call_id="call_2", name="get_weather", content="25C"),
        ToolMessage(call_id="call_1", name="get_weather", content="20C"),
        AssistantMessage(content="Paris 20C, Rome 25C."),
        UserMessage(content="Search news"),
        AssistantMessage(
            tool_calls=(ToolCall(id="call_3", name="search", arguments='{"q": "news"}'),)
        ),
        ToolMessage(call_id="call_3", name="search", content="nothing new"),
    )


def test_system_and_developer_become_system_messages_text_parts_joined() -> None:
    transcript = parse(
        [
            {"role": "developer", "content": "Rules."},
            {
                "role": "system",
                "content": [{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}],
            },
            USER,
        ]
    )
    assert transcript.messages[:2] == (
        SystemMessage(content="Rules."),
        SystemMessage(content="One.\nTwo."),
    )


def test_user_text_parts_are_joined_without_keeping_parts() -> None:
    transcript = parse(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ]
    )
    assert transcript.messages == (UserMessage(content="a\nb"),)


def test_user_parts_are_kept_when_any_part_is_not_text() -> None:
    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-1"}},
    ]
    (message,) = parse([{"role": "user", "content": parts}]).messages
    assert message == UserMessage(content="What is this?", parts=tuple(parts))


def test_assistant_content_forms() -> None:
    transcript = parse(
        [
            USER,
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Hello"},
                    {"type": "refusal", "refusal": "no"},
                    {"type": "text", "text": "there"},
                ],
                "refusal": None,
                "reasoning_content": "thinking...",
                "name": "bot",
            },
            USER,
            {"role": "assistant", "content": None},
            USER,
            {"role": "assistant", "content": "plain", "tool_calls": []},
        ]
    )
    assert transcript.messages[1] == AssistantMessage(content="Hello\nthere")
    assert transcript.messages[3] == AssistantMessage(content=None)
    assert transcript.messages[5] == AssistantMessage(content="plain")


def test_tool_content_may_be_text_parts_and_the_name_comes_from_the_call() -> None:
    transcript = parse(
        [
            USER,
            asks(call("c1", "lookup")),
            {
                "role": "tool",
                "tool_call_id": "c1",
                "name": "something_else",
                "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
            },
        ]
    )
    assert transcript.messages[2] == ToolMessage(call_id="c1", name="lookup", content="x\ny")


# --- bad messages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "param", "advice"),
    [
        ("hello", "messages[1]", "must be an object with a 'role', not a string"),
        ({"content": "x"}, "messages[1].role", "the role is missing; use one of 'system'"),
        (
            {"role": "bot", "content": "x"},
            "messages[1].role",
            "'bot'; use one of 'system', 'developer', 'user', 'assistant', 'tool'",
        ),
        ({"role": 3, "content": "x"}, "messages[1].role", "is a number"),
        (
            {"role": "user"},
            "messages[1].content",
            "a string or an array of content parts, not null",
        ),
        ({"role": "user", "content": 5}, "messages[1].content", "not a number"),
        (
            {"role": "user", "content": [{"type": "video", "video": {}}]},
            "messages[1].content[0].type",
            "'text', 'image_url', 'input_audio', 'file'; got 'video'",
        ),
        ({"role": "user", "content": ["text"]}, "messages[1].content[0]", "got a string"),
        (
            {"role": "user", "content": [{"type": "text"}]},
            "messages[1].content[0].text",
            "needs 'text', a string; got null",
        ),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": "https://x/a.png"}]},
            "messages[1].content[0].image_url",
            '\'image_url\': {"url": "..."}',
        ),
        (
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"format": "wav"}}],
            },
            "messages[1].content[0].input_audio",
            '{"data": "..."}',
        ),
        (
            {"role": "user", "content": [{"type": "file"}]},
            "messages[1].content[0].file",
            "needs 'file': an object",
        ),
        ({"role": "system"}, "messages[1].content", "a system message needs 'content'"),
        (
            {"role": "developer", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
            "messages[1].content[0]",
            "takes only text parts",
        ),
        (
            {"role": "assistant", "content": 7},
            "messages[1].content",
            "a string, an array of text parts or null, not a number",
        ),
        (
            {"role": "assistant", "content": [{"type": "image_url"}]},
            "messages[1].content[0]",
            "(or a 'refusal' part)",
        ),
        (
            {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
            "messages[1].function_call",
            "send the call in 'tool_calls'",
        ),
        (
            {"role": "assistant", "tool_calls": {"id": "x"}},
            "messages[1].tool_calls",
            "must be an array of tool calls, not an object",
        ),
        (
            {"role": "assistant", "tool_calls": ["x"]},
            "messages[1].tool_calls[0]",
            "must be a tool call object, not a string",
        ),
        (
            {"role": "assistant", "tool_calls": [{"type": "custom", "id": "c", "custom": {}}]},
            "messages[1].tool_calls[0].type",
            "only 'function' tool calls",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            "messages[1].tool_calls[0].id",
            "a non-empty string; got null",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]},
            "messages[1].tool_calls[0].function",
            "not null",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
            "messages[1].tool_calls[0].function.name",
            "the tool's name",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
            },
            "messages[1].tool_calls[0].function.arguments",
            "as JSON text (a string), not an object; serialize",
        ),
        ({"role": "tool", "content": "x"}, "messages[1].tool_call_id", "needs 'tool_call_id'"),
        (
            {"role": "tool", "tool_call_id": "c1", "content": None},
            "messages[1].content",
            "a tool message needs 'content'",
        ),
    ],
)
def test_bad_message_names_the_field_and_the_fix(message: Any, param: str, advice: str) -> None:
    err = refused([USER, message])
    assert err.param == param
    assert advice in err.message


def test_legacy_function_role_says_to_use_tool_messages() -> None:
    err = refused([USER, {"role": "function", "name": "f", "content": "x"}])
    assert err.param == "messages[1].role"
    assert err.code == "unsupported_role"
    assert '{"role": "tool", "tool_call_id"' in err.message


def test_tool_result_role_in_the_openai_dialect_points_at_the_config() -> None:
    err = refused([USER, {"role": "tool_result", "name": "f", "content": "x"}])
    assert err.param == "messages[1].role"
    assert "`dialect: tool_request`" in err.message


def test_unknown_role_lists_tool_result_in_the_tool_request_dialect() -> None:
    err = refused([USER, {"role": "bot"}], dialect="tool_request")
    assert err.code == "invalid_role"
    assert "'tool', 'tool_result'" in err.message


def test_duplicate_call_ids_in_one_message() -> None:
    err = refused([USER, asks(call("c1"), call("c2"), call("c1"))])
    assert err.param == "messages[1].tool_calls[2].id"
    assert err.code == "duplicate_tool_call_id"
    assert "'c1'" in err.message
    assert "give each call its own id" in err.message


def test_call_type_may_be_omitted() -> None:
    msgs = [USER, {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}]
    transcript = parse([*msgs, result("c")])
    assert transcript.messages[1] == AssistantMessage(
        tool_calls=(ToolCall(id="c", name="f", arguments=""),)
    )


# --- pairing -------------------------------------------------------------------------------

ORPHANS = {
    "unknown id": (
        [USER, asks(call("c1")), result("c1"), result("zz")],
        3,
        "no assistant message before it made a call with that id",
    ),
    "answers an earlier assistant": (
        [USER, asks(call("c1")), result("c1"), asks(call("c2")), result("c2"), result("c1")],
        5,
        "that call was made by messages[1], and a result must directly follow",
    ),
    "duplicate answer": (
        [USER, asks(call("c1")), result("c1"), result("c1")],
        3,
        "messages[2] already answered that call",
    ),
    "after a user message": (
        [USER, asks(call("c1")), result("c1"), USER, result("c1")],
        4,
        "messages[2] already answered that call",
    ),
    "before any assistant": ([USER, result("c9")], 1, "no assistant message before it"),
}


@pytest.mark.parametrize("case", list(ORPHANS))
def test_orphan_result_is_dropped_and_reported(case: str) -> None:
    messages, index, _ = ORPHANS[case]
    transcript = parse(messages)
    orphan_id = messages[index]["tool_call_id"]
    assert transcript.dropped_results == (orphan_id,)
    assert len(transcript.messages) == len(messages) - 1
    kept = [m for m in messages if m is not messages[index]]
    assert [m.role for m in transcript.messages] == [m["role"] for m in kept]


@pytest.mark.parametrize("case", list(ORPHANS))
def test_orphan_result_is_refused_in_strict_mode(case: str) -> None:
    messages, index, why = ORPHANS[case]
    err = refused(messages, strict=True)
    assert err.param == f"messages[{index}].tool_call_id"
    assert err.code == "orphan_tool_result"
    assert why in err.message
    assert "strict_tool_results" in err.message


def test_an_orphan_inside_a_run_does_not_end_it() -> None:
    transcript = parse(
        [USER, asks(call("c1"), call("c2")), result("c1"), result("x"), result("c2")]
    )
    assert transcript.dropped_results == ("x",)
    assert [m.role for m in transcript.messages] == ["user", "assistant", "tool", "tool"]


def test_unanswered_call_before_the_next_message() -> None:
    err = refused(
        [
            USER,
            asks(call("c1"), call("c2", "search")),
            result("c1"),
            {"role": "user", "content": "?"},
        ]
    )
    assert err.param == "messages[1].tool_calls[1].id"
    assert err.code == "missing_tool_result"
    assert "'c2' of tool 'search' has no result before messages[3]" in err.message
    assert '{"role": "tool", "tool_call_id": "c2", "content": ...}' in err.message


def test_unanswered_call_at_the_end() -> None:
    err = refused([USER, asks(call("c1"))])
    assert err.param == "messages[1].tool_calls[0].id"
    assert err.code == "missing_tool_result"
    assert "at the end of the request" in err.message


def test_a_call_answered_only_by_an_orphan_is_still_missing() -> None:
    err = refused([USER, asks(call("c1")), result("c0"), USER])
    assert err.code == "missing_tool_result"


@given(st.permutations(["a", "b", "c", "d"]))
def test_results_of_parallel_calls_in_any_order_are_all_honoured(order: list[str]) -> None:
    transcript = parse([USER, asks(*(call(c) for c in "abcd")), *(result(c) for c in order)])
    assert transcript.dropped_results == ()
    assert [m.call_id for m in transcript.messages if isinstance(m, ToolMessage)] == order


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "tool_result", "x"])},
    optional={
        "content": _json | st.text(max_size=5),
        "tool_calls": _json,
        "tool_call_id": st.sampled_from(["a", "b", ""]) | _json,
        "name": st.sampled_from(["f", "g"]) | _json,
    },
)


@given(
    st.lists(_message | _json, max_size=6),
    st.booleans(),
    st.sampled_from(["openai", "tool_request"]),
)
def test_any_input_is_converted_or_refused_with_a_400(
    messages: list[Any], strict: bool, dialect: Dialect
) -> None:
    error: GatewayError | None = None
    try:
        parse(messages, strict=strict, dialect=dialect)
    except GatewayError as exc:
        error = exc
    if error is not None:
        assert error.status == 400
        assert error.param


# --- the tool_request dialect --------------------------------------------------------------

REQUEST = '  {"tool_request": {"name": "get_weather", "arguments": {"city": "Paris"}}}\n'


def test_tool_request_message_becomes_a_call_answered_by_tool_result() -> None:
    transcript = parse(
        [
            USER,
            {"role": "assistant", "content": REQUEST},
            {"role": "tool_result", "name": "get_weather", "content": "20C"},
            {"role": "assistant", "content": "It is 20C."},
        ],
        dialect="tool_request",
    )
    assert transcript.messages[1:] == (
        AssistantMessage(
            tool_calls=(ToolCall(id="toolreq_1", name="get_weather", arguments='{"city":"Paris"}'),)
        ),
        ToolMessage(call_id="toolreq_1", name="get_weather", content="20C"),
        AssistantMessage(content="It is 20C."),
    )


def test_tool_request_is_plain_text_in_the_openai_dialect() -> None:
    transcript = parse([USER, {"role": "assistant", "content": REQUEST}])
    assert transcript.messages[1] == AssistantMessage(content=REQUEST)


@pytest.mark.parametrize(
    "content",
    [
        '{"tool_request": {"name": "f", "arguments": {}}} and more',
        '{"tool_request": {"name": "f", "arguments": {}}, "other": 1}',
        '{"tool_request": {"name": "f", "arguments": "{}"}}',
        '{"tool_request": {"arguments": {}}}',
        '{"tool_request": ["f"]}',
        '{"tool_request": {"name": "f", "arguments": {}}',
        "I will call tool_request now {}",
    ],
)
def test_anything_but_an_exact_tool_request_is_plain_text(content: str) -> None:
    transcript = parse([USER, {"role": "assistant", "content": content}], dialect="tool_request")
    assert transcript.messages[1] == AssistantMessage(content=content)


def test_orphan_tool_result_is_dropped_by_name_or_refused() -> None:
    messages = [
        USER,
        {"role": "assistant", "content": REQUEST},
        {"role": "tool_result", "name": "get_weather", "content": "20C"},
        {"role": "tool_result", "name": "get_weather", "content": "again"},
        {"role": "tool_result", "name": "other", "content": "?"},
    ]
    transcript = parse(messages, dialect="tool_request")
    assert transcript.dropped_results == ("get_weather", "other")
    assert len(transcript.messages) == 3
    err = refused(messages, dialect="tool_request", strict=True)
    assert err.param == "messages[3].name"
    assert err.code == "orphan_tool_result"
    assert "no tool_request of that name is waiting" in err.message


def test_tool_result_needs_a_name() -> None:
    err = refused([USER, {"role": "tool_result", "content": "x"}], dialect="tool_request")
    assert err.param == "messages[1].name"
    assert "the name of the tool_request it answers" in err.message


def test_unanswered_tool_request_asks_for_a_tool_result() -> None:
    err = refused([USER, {"role": "assistant", "content": REQUEST}, USER], dialect="tool_request")
    assert err.param == "messages[1].content"
    assert err.code == "missing_tool_result"
    assert '{"role": "tool_result", "name": "get_weather", "content": ...}' in err.message


def test_both_dialects_mix_in_the_tool_request_dialect() -> None:
    transcript = parse(
        [
            USER,
            asks(call("c1", "a"), call("c2", "b")),
            {"role": "tool_result", "name": "b", "content": "B"},
            result("c1", "A"),
        ],
        dialect="tool_request",
    )
    assert transcript.messages[2:] == (
        ToolMessage(call_id="c2", name="b", content="B"),
        ToolMessage(call_id="c1", name="a", content="A"),
    )
