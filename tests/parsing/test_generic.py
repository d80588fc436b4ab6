"""The prompted-model formats: pre_json, json_fence, json and tool_request."""

from __future__ import annotations

import pytest
from streaming import calls, parse_all_ways

from toolwire.parsing import ContentDelta, ToolCallStart, parser_for

# ----------------------------------------------------------------------------- pre_json


def test_pre_json_call_between_text_with_marker_in_argument() -> None:
    out = parse_all_ways(
        'Let me look.\n<pre>{"name": "echo", "arguments": {"text": "a </pre> b"}}</pre>\nDone.',
        "pre_json",
    )
    assert calls(out) == [("echo", {"text": "a </pre> b"})]
    assert out.content == "Let me look.\n\nDone."


def test_pre_json_list_and_parameters_key() -> None:
    out = parse_all_ways(
        '<pre>\n[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "parameters": {"y": true}}]\n'
        "</pre>",
        "pre_json",
    )
    assert calls(out) == [("a", {"x": 1}), ("b", {"y": True})]
    assert out.content is None


def test_pre_json_without_arguments_is_a_no_argument_call() -> None:
    out = parse_all_ways('<pre>{"name": "now"}</pre>', "pre_json")
    assert calls(out) == [("now", {})]
    assert out.tool_calls[0].arguments_json == "{}"


@pytest.mark.parametrize(
    "text",
    [
        "<pre>ls -la\ntotal 0</pre> is the listing",
        '<pre>{"answer": 42}</pre>',
        "<pre>it's a \"quote</pre> then more",
    ],
)
def test_pre_block_that_is_not_a_call_stays_verbatim(text: str) -> None:
    out = parse_all_ways(text, "pre_json")
    assert out.tool_calls == []
    assert out.content == text


def test_pre_json_closer_eaten_by_stop_sequence_still_calls() -> None:
    out = parse_all_ways('<pre>{"name": "f", "arguments": {"a": 1}}', "pre_json")
    assert calls(out) == [("f", {"a": 1})]


def test_pre_json_truncated_keeps_finished_list_items_only() -> None:
    text = 'Ok <pre>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"q": "ca'
    out = parse_all_ways(text, "pre_json", truncated=True)
    assert calls(out) == [("a", {})]
    assert out.content == "Ok"


def test_pre_json_truncated_single_call_is_dropped_without_markup() -> None:
    out = parse_all_ways('Ok <pre>{"name": "a", "arguments": {"q": 1}}', "pre_json", truncated=True)
    assert out.tool_calls == []
    assert out.content == "Ok"


def test_pre_json_call_emitted_only_at_its_closer() -> None:
    parser = parser_for("m", format="pre_json")
    events = parser.feed('<pre>{"name": "f", "arguments": {"a": 1}}')
    assert not any(isinstance(e, ToolCallStart) for e in events)
    events = parser.feed("</pre>")
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["f"]


def test_pre_json_reasoning_prefilled_and_explicit() -> None:
    out = parse_all_ways(
        'plan</think>\n<pre>{"name": "f", "arguments": {}}</pre>',
        "pre_json",
        prompt_suffix="<think>\n",
    )
    assert (out.reasoning, calls(out)) == ("plan", [("f", {})])
    out = parse_all_ways("<think>\nplan\n</think>\n\nHello", "pre_json")
    assert (out.reasoning, out.content) == ("plan", "Hello")


# ----------------------------------------------------------------------------- json_fence


def test_json_fence_call_with_backticks_in_argument() -> None:
    out = parse_all_ways(
        'Calling:\n```json\n{"name": "run", "arguments": {"md": "```py\\nx\\n```"}}\n```\nthen',
        "json_fence",
    )
    assert calls(out) == [("run", {"md": "```py\nx\n```"})]
    assert out.content == "Calling:\n\nthen"


def test_json_fence_with_other_json_or_other_language_stays_content() -> None:
    for text in ['```json\n{"answer": 42}\n```', "```python\nprint({1: 2})\n```"]:
        out = parse_all_ways(text, "json_fence")
        assert (out.content, out.tool_calls) == (text, [])


def test_json_fence_list_of_calls() -> None:
    out = parse_all_ways(
        '```json\n[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"n": 2}}]\n```',
        "json_fence",
    )
    assert calls(out) == [("a", {}), ("b", {"n": 2})]


# ----------------------------------------------------------------------------- json


def test_json_bare_object_with_parameters_types_preserved() -> None:
    out = parse_all_ways(
        '{"name": "calc", "parameters": {"x": 3, "y": "3", "z": 1.5, "ok": false, "n": null,'
        ' "big": 123456789012345678901234567890}}',
        "json",
    )
    assert calls(out) == [
        (
            "calc",
            {
                "x": 3,
                "y": "3",
                "z": 1.5,
                "ok": False,
                "n": None,
                "big": 123456789012345678901234567890,
            },
        )
    ]
    assert out.content is None


def test_json_list_after_text_line() -> None:
    out = parse_all_ways(
        'I will call both.\n[{"name": "a", "arguments": {"s": "]}"}}, '
        '{"name": "b", "arguments": {}}]\nDone.',
        "json",
    )
    assert calls(out) == [("a", {"s": "]}"}), ("b", {})]
    assert out.content == "I will call both.\n\nDone."


def test_json_arguments_encoded_as_a_string_are_decoded() -> None:
    out = parse_all_ways('{"name": "f", "arguments": "{\\"a\\": [1, 2]}"}', "json")
    assert calls(out) == [("f", {"a": [1, 2]})]


@pytest.mark.parametrize(
    "text",
    [
        'Inline {"name": "f", "arguments": {}} is an example, not a call.',
        '{"name": "Bob", "age": 3}',
        "[1] A reference\n[2] Another",
        "[]",
        "Code:\n{\n  oops\n}",
        'An open brace at the end\n{"name": "f", "argu',
        '[{"name": "f", "arguments": {}}, 3]',
    ],
)
def test_json_values_that_are_not_calls_stay_content(text: str) -> None:
    out = parse_all_ways(text, "json")
    assert out.tool_calls == []
    assert out.content == text


def test_json_call_emitted_as_soon_as_the_object_closes() -> None:
    parser = parser_for("m", format="json")
    events = parser.feed('{"name": "f", "arguments": {"a": "}"}')
    assert not any(isinstance(e, ToolCallStart) for e in events)
    events = parser.feed("}\nmore")
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["f"]


def test_json_truncated_list_keeps_finished_calls() -> None:
    text = '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"q": '
    out = parse_all_ways(text, "json", truncated=True)
    assert calls(out) == [("a", {})]
    assert out.content is None


def test_json_truncated_single_object_comes_back_as_content() -> None:
    text = '{"name": "a", "arguments": {"q": "Par'
    out = parse_all_ways(text, "json", truncated=True)
    assert (out.tool_calls, out.content) == ([], text)


def test_json_reasoning_then_call() -> None:
    out = parse_all_ways('<think>\nneed f\n</think>\n\n{"name": "f", "arguments": {}}', "json")
    assert (out.reasoning, out.content, calls(out)) == ("need f", None, [("f", {})])


# ----------------------------------------------------------------------------- tool_request


def test_tool_request_whole_message_is_a_call() -> None:
    out = parse_all_ways(
        '\n {"tool_request" : {"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}}\n',
        "tool_request",
    )
    assert calls(out) == [("get_weather", {"city": "Oslo", "days": 3})]
    assert out.content is None


def test_tool_request_without_arguments() -> None:
    out = parse_all_ways('{"tool_request": {"name": "now"}}', "tool_request")
    assert calls(out) == [("now", {})]


@pytest.mark.parametrize(
    "text",
    [
        'Sure: {"tool_request": {"name": "f", "arguments": {}}}',
        '{"tool_request": {"name": "f", "arguments": {}}} and then some text',
        '{"tool_request": {"name": "f", "arguments": {"a": 1}',
        '{"tool_request": {"name": "f", "arguments": [1]}}',
        '{"tool_request": {"name": "f", "arguments": {}, "extra": 1}}',
        '{"tool_request": {"name": "f"}, "also": 2}',
        '{"answer": "not a request"}',
        '{"tool_request": {"name": "f", "arguments": {}}}{"tool_request": {"name": "g"}}',
        "Just text.",
    ],
)
def test_tool_request_anything_else_is_ordinary_content(text: str) -> None:
    out = parse_all_ways(text, "tool_request")
    assert (out.content, out.tool_calls) == (text, [])


def test_tool_request_truncated_is_content_even_when_complete() -> None:
    text = '{"tool_request": {"name": "f", "arguments": {}}}'
    out = parse_all_ways(text, "tool_request", truncated=True)
    assert (out.content, out.tool_calls) == (text, [])


def test_tool_request_holds_only_while_it_could_be_the_message() -> None:
    parser = parser_for("m", format="tool_request")
    assert parser.feed('{"tool_request": {"name": "f", "arguments": {}}}') == []
    assert parser.feed("  \n") == []
    assert isinstance(parser.finish()[0], ToolCallStart)

    parser = parser_for("m", format="tool_request")
    assert parser.feed('{"tool_re') == []
    released = parser.feed('ply": 1}')
    assert released == [ContentDelta('{"tool_reply": 1}')]

    parser = parser_for("m", format="tool_request")
    assert parser.feed("Hello") == [ContentDelta("Hello")]


def test_tool_request_after_reasoning() -> None:
    out = parse_all_ways(
        'I should ask for the weather.</think>\n{"tool_request": {"name": "w", "arguments": {}}}',
        "tool_request",
        prompt_suffix="<|im_start|>assistant\n<think>\n",
    )
    assert (out.reasoning, calls(out)) == ("I should ask for the weather.", [("w", {})])


def test_json_fence_without_a_language_tag_holds_a_call() -> None:
    text = 'Sure:\n```\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    out = parse_all_ways(text, "json_fence")
    assert calls(out) == [("get_weather", {"city": "Paris"})]
    assert out.content == "Sure:"


def test_an_untagged_code_fence_that_is_no_call_is_content_and_no_failure() -> None:
    text = "Run:\n```\nprint(1)\n```\nthen stop."
    out = parse_all_ways(text, "json_fence")
    assert (out.content, out.tool_calls, out.failures) == (text, [], [])


@pytest.mark.parametrize("fmt", ["pre_json", "json_fence"])
@pytest.mark.parametrize(
    "text",
    [
        '<tool>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool>',
        '<function=get_weather>{"city": "Paris"}</function>',
        '<function=get_weather>\n{"city": "Paris"}\n</function>',
    ],
)
def test_off_format_wrappers_are_calls_in_the_lenient_formats(fmt: str, text: str) -> None:
    out = parse_all_ways("Checking. " + text, fmt)
    assert calls(out) == [("get_weather", {"city": "Paris"})]
    assert out.content == "Checking."
