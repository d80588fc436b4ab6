"""The prompted-model formats: pre_json, json_fence, json and tool_request."""

from __future__ import annotations

from typing import Any

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


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   Ollama: tools/tools_test.go (TestParseJSONToolCalls, TestParseToolCalls: the outputs of
#           templates without a call prefix, read as bare JSON, and command-r's ```json
#           block). No engine or library we read tests `<pre>` calls; none are ported.
#
# Tools: get_current_weather (format, location), test_tool, tool1, tool2.
# ---------------------------------------------------------------------------------------

_SF = '{"name": "get_current_weather", "arguments": {"format":"fahrenheit","location":"SF"}}'
_TO = '{"name": "get_current_weather", "arguments": {"format":"celsius","location":"Toronto"}}'
_SF_CALL = ("get_current_weather", {"format": "fahrenheit", "location": "SF"})
_TO_CALL = ("get_current_weather", {"format": "celsius", "location": "Toronto"})


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        ('{"name": "test_tool", "arguments": {"arg1": "value1"}}', None,
         [("test_tool", {"arg1": "value1"})]),
        (_SF.replace('"arguments"', '"parameters"'), None, [_SF_CALL]),
        ('{"name": "tool1", "arguments": {"arg1": [1, 2, ["nested", "array"]]}}', None,
         [("tool1", {"arg1": [1, 2, ["nested", "array"]]})]),
        ('[\n  {"name": "tool1", "arguments": {"arg1": 1}},\n'
         '  {"name": "tool2", "arguments": {"arg2": "value"}}\n]', None,
         [("tool1", {"arg1": 1}), ("tool2", {"arg2": "value"})]),
        (f"[{_SF}, {_TO}] some tokens after call", "some tokens after call",
         [_SF_CALL, _TO_CALL]),
        ('{"name": "tool1", "arguments": {"arg1": 1}} text\n'
         '{"name": "tool2", "arguments": {"arg2": "value"}} text', "text\n text",
         [("tool1", {"arg1": 1}), ("tool2", {"arg2": "value"})]),
    ],
    ids=["single", "parameters", "nested-arrays", "list", "list-then-text", "one-per-line"],
)  # fmt: skip
def test_ollama_bare_json_calls(text: str, content: str | None, expected: list[Any]) -> None:
    out = parse_all_ways(text, "json")
    assert (out.content, calls(out)) == (content, expected)


@pytest.mark.parametrize(
    "text",
    [
        "not json at all",
        '{"other": "field"}',
        '{ "user": {"id": 12345, "name": "Alice", "preferences": {"theme": "dark", '
        '"notifications": true}, "stats": {"points": 987, "level": 42}}}',
        '[ { "user": {"id": 12345, "name": "Alice"}}]',
        'hi [{"options": "foo"}]',
        '[{"name": "tool1", "arguments": {"arg1": [1, 2}]',
        f"some tokens before call [{_SF}, {_TO}]",
    ],
    ids=["prose", "no-name", "object", "list", "inline-list", "unbalanced", "inline-calls"],
)
def test_ollama_output_that_is_not_a_call_is_content_without_failure(text: str) -> None:
    # Ollama's llama3.2 template also takes calls from an inline list after prose
    # ("some tokens before [...]"), its qwen2.5 template does not; `json` reads only values
    # that start a line (docs/parsing.md).
    out = parse_all_ways(text, "json")
    assert (out.content, out.tool_calls, out.failures) == (text, [], [])


def test_ollama_incomplete_json_at_the_end_is_content() -> None:
    # Ollama keeps accumulating and returns nothing; at the end of output the text that
    # only might have become a call is content, and no failure.
    text = '{"name": "test_tool", "arguments": {"arg1": '
    out = parse_all_ways(text, "json")
    assert (out.content, out.tool_calls, out.failures) == (text.rstrip(), [], [])


def test_ollama_list_on_its_own_line_after_prose_is_a_call() -> None:
    # Ollama (qwen2.5 template) returns no calls once prose came first; `json` reads a list
    # that starts a line as calls (docs/parsing.md, "The generic formats").
    text = f'I can suggest using the "get_current_weather" function:\n\n[{_SF},{_TO}]'
    out = parse_all_ways(text, "json")
    assert out.content == 'I can suggest using the "get_current_weather" function:'
    assert calls(out) == [_SF_CALL, _TO_CALL]


def test_ollama_fenced_list_opened_after_text_on_the_same_line() -> None:
    # Ollama's command-r template: `Action: ```json [...] ````; its template names the key
    # "tool_name", the prompted formats teach "name" (the case keeps "parameters").
    text = (
        'Action: ```json\n[\n    {\n        "name": "get_current_weather",\n'
        '        "parameters": {"format": "fahrenheit", "location": "SF"}\n    },\n'
        '    {"name": "get_current_weather", "parameters": {"format": "celsius", '
        '"location": "Toronto"}}\n]\n```'
    )
    out = parse_all_ways(text, "json_fence")
    assert (out.content, calls(out)) == ("Action:", [_SF_CALL, _TO_CALL])
