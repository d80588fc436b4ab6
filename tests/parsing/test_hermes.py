"""Hermes-style tool calls as Qwen3 (hybrid, Thinking-2507, Instruct-2507) write them."""

from __future__ import annotations

from typing import Any

import pytest
from streaming import calls, parse_all_ways

from toolwire.parsing import ContentDelta, ToolCallStart, format_for, parser_for

NO_THINK = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
PREFILLED = "<|im_start|>assistant\n<think>\n"


def test_qwen3_model_ids_select_hermes() -> None:
    for model in ("Qwen/Qwen3-8B", "Qwen/Qwen3-4B-Thinking-2507", "qwen2.5-7b-instruct"):
        assert format_for(model) == "hermes"


def test_thinking_then_call() -> None:
    out = parse_all_ways(
        '<think>\nNeed weather.\n</think>\n\n<tool_call>\n{"name": "w", "arguments": {"c": "Oslo"}}'
        "\n</tool_call>",
        "hermes",
    )
    assert (out.reasoning, out.content, calls(out)) == (
        "Need weather.",
        None,
        [("w", {"c": "Oslo"})],
    )


def test_prefilled_think_starts_in_reasoning() -> None:
    out = parse_all_ways("Simple.\n</think>\n\n2 + 2 = 4.", "hermes", prompt_suffix=PREFILLED)
    assert (out.reasoning, out.content) == ("Simple.", "2 + 2 = 4.")


def test_prefilled_think_truncated_keeps_reasoning() -> None:
    out = parse_all_ways("The user wants", "hermes", prompt_suffix=PREFILLED, truncated=True)
    assert (out.reasoning, out.content) == ("The user wants", None)


def test_thinking_disabled_prompt_does_not_start_in_reasoning() -> None:
    out = parse_all_ways("Hello!", "hermes", prompt_suffix=NO_THINK)
    assert (out.reasoning, out.content) == (None, "Hello!")


def test_parameters_instead_of_arguments() -> None:
    out = parse_all_ways(
        '<tool_call>{"name": "f", "parameters": {"a": [1, 2]}}</tool_call>', "hermes"
    )
    assert calls(out) == [("f", {"a": [1, 2]})]


def test_markers_inside_argument_strings_are_data() -> None:
    text = (
        '<tool_call>\n{"name": "echo", "arguments": {"t": "<tool_call> </tool_call> <think>"}}\n'
        "</tool_call>"
    )
    out = parse_all_ways(text, "hermes")
    assert calls(out) == [("echo", {"t": "<tool_call> </tool_call> <think>"})]
    assert out.content is None


def test_stray_end_tokens_and_closers_never_leak() -> None:
    out = parse_all_ways(
        '</think>\n\nHi.</tool_call><tool_call>{"name": "f", "arguments": {}}</tool_call>'
        "<|im_end|>",
        "hermes",
    )
    assert (out.content, calls(out)) == ("Hi.", [("f", {})])


def test_block_that_is_not_a_call_comes_back_verbatim() -> None:
    text = "<tool_call>not valid json</tool_call>"
    assert parse_all_ways(text, "hermes").content == text
    text = '<tool_call>{"name": "f", "arguments": [1]}</tool_call>'
    assert parse_all_ways(text, "hermes").content == text


def test_missing_closer_at_stop_still_calls() -> None:
    out = parse_all_ways('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n', "hermes")
    assert calls(out) == [("f", {"a": 1})]


def test_truncated_second_call_keeps_first_and_drops_markup() -> None:
    text = (
        'I will check.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": {"q": "caf'
    )
    out = parse_all_ways(text, "hermes", truncated=True)
    assert (out.content, calls(out)) == ("I will check.", [("a", {})])


def test_call_is_emitted_only_once_closed_and_text_held_minimally() -> None:
    parser = parser_for("Qwen/Qwen3-8B")
    assert parser.feed("Let me check <tool") == [ContentDelta("Let me check")]
    assert parser.feed('_call>{"name": "f", "arguments": {}}') == []
    events = parser.feed("</tool_call>")
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["f"]
    # The space held back after "check" is released with the next visible text.
    assert parser.feed(" <b>ok") == [ContentDelta("  <b>ok")]


def test_a_call_inside_reasoning_never_closed_ends_the_reasoning() -> None:
    # Qwen3 with thinking on may call a tool without writing </think> first.
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    for text, suffix in (
        ("I should check." + call, "<think>\n"),
        ("<think>I should check." + call, ""),
    ):
        out = parse_all_ways(text, "hermes", prompt_suffix=suffix)
        assert out.reasoning == "I should check."
        assert calls(out) == [("get_weather", {"city": "Paris"})]
        assert out.content is None


def test_a_late_think_closer_after_such_a_call_does_not_leak() -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    out = parse_all_ways("<think>Hmm." + call + "</think>Checking.", "hermes")
    assert (out.reasoning, out.content) == ("Hmm.", "Checking.")
    assert calls(out) == [("get_weather", {"city": "Paris"})]


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   vLLM:      tests/tool_parsers/test_hermes_tool_parser.py (no tools in the request)
#   SGLang:    test/registered/function_call/test_function_call_parser.py (the
#              BaseFormatDetector block on `<tool_call>`), the Qwen25Detector unit tests
#              (test_qwen25_detector.py; tools get_weather(city, unit), search(query))
#   llama.cpp: the Hermes 2 Pro and Qwen-QwQ-32B blocks of tests/test-chat.cpp
#              (special_function(arg1: integer))
# ---------------------------------------------------------------------------------------

FMT = "hermes"


def _tool(name: str, **props: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


SGLANG_TOOLS = [
    _tool(
        "get_weather",
        city={"type": "string"},
        unit={"type": "string", "enum": ["celsius", "fahrenheit"]},
    ),
    _tool("search", query={"type": "string"}),
]
SPECIAL = [_tool("special_function", arg1={"type": "integer"})]


def _block(call: str) -> str:
    return f"<tool_call>\n{call}\n</tool_call>"


@pytest.mark.parametrize(
    "text",
    [
        "This is some prior text that has nothing to do with tool calling.",  # vLLM
        "The weather is nice today.",  # SGLang
        "Hello, world!\nWhat's up?",  # llama.cpp
    ],
)
def test_engines_plain_text_is_content(text: str) -> None:
    out = parse_all_ways(text, FMT, tools=SGLANG_TOOLS)
    assert (out.content, out.reasoning, out.tool_calls, out.failures) == (text, None, [], [])


def test_vllm_boolean_argument_keeps_its_type() -> None:
    # vLLM bug 19056: `true` must come back as a boolean, not a string.
    out = parse_all_ways(_block('{"name": "final_answer", "arguments": {"trigger": true}}'), FMT)
    assert (out.content, calls(out)) == (None, [("final_answer", {"trigger": True})])
    assert out.tool_calls[0].arguments_json == '{"trigger":true}'


def test_vllm_call_without_whitespace_between_keys() -> None:
    text = (
        '<tool_call>{"name": "get_current_temperature","arguments": {"location":'
        '"San Francisco, California, United States", "unit": "celsius"}}</tool_call>'
    )
    out = parse_all_ways(text, FMT)
    assert calls(out) == [
        (
            "get_current_temperature",
            {"location": "San Francisco, California, United States", "unit": "celsius"},
        )
    ]


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        (  # vLLM
            'Sure, let me check the weather.<tool_call>{"name": "get_weather", '
            '"arguments": {"city": "NYC"}}</tool_call>',
            "Sure, let me check the weather.",
            [("get_weather", {"city": "NYC"})],
        ),
        (  # vLLM: content and a whole call in one chunk
            'Hi!<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>',
            "Hi!",
            [("f", {"x": 1})],
        ),
        (  # SGLang: the space before the opener is stripped with the content's end
            "Let me check the weather. "
            + _block('{"name": "get_weather", "arguments": {"city": "Tokyo"}}'),
            "Let me check the weather.",
            [("get_weather", {"city": "Tokyo"})],
        ),
        (  # llama.cpp: Hermes 2 Pro, content then call
            "Hello, world!\nWhat's up?"
            + _block('{"name": "special_function", "arguments": {"arg1": 1}}'),
            "Hello, world!\nWhat's up?",
            [("special_function", {"arg1": 1})],
        ),
        (  # SGLang: token-by-token output with empty arguments
            "正在帮您查询订单\n\n" + _block('{"name": "search_order", "arguments": {}}'),
            "正在帮您查询订单",
            [("search_order", {})],
        ),
    ],
)
def test_engines_content_before_a_call(text: str, content: str, expected: list[Any]) -> None:
    out = parse_all_ways(text, FMT)
    assert (out.content, calls(out), out.failures) == (content, expected, [])


def test_engines_parallel_calls_in_separate_blocks() -> None:
    # vLLM (search cats/dogs, adjacent) and SGLang (get_weather + search, newline between).
    text = (
        '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
        '<tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>'
    )
    assert calls(parse_all_ways(text, FMT)) == [
        ("search", {"q": "cats"}),
        ("search", {"q": "dogs"}),
    ]
    text = (
        _block('{"name": "get_weather", "arguments": {"city": "Beijing"}}')
        + "\n"
        + _block('{"name": "search", "arguments": {"query": "restaurants"}}')
    )
    out = parse_all_ways(text, FMT, tools=SGLANG_TOOLS)
    assert (out.content, calls(out)) == (
        None,
        [("get_weather", {"city": "Beijing"}), ("search", {"query": "restaurants"})],
    )
    assert [c.offered for c in out.tool_calls] == [True, True]


def test_vllm_unfinished_json_without_closer_is_content() -> None:
    # vLLM: not a call. Here it is also content, whole, with an `unfinished` failure.
    text = '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}'
    out = parse_all_ways(text, FMT)
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["unfinished"]


def test_vllm_arguments_serialized_as_a_json_string_are_decoded_once() -> None:
    # Granite 4 / some fine-tunes write `"arguments": "{\"param\": ...}"`.
    text = _block('{"name": "get_db_config", "arguments": "{\\"param\\": \\"max_connections\\"}"}')
    out = parse_all_ways(text, FMT)
    assert calls(out) == [("get_db_config", {"param": "max_connections"})]
    assert out.tool_calls[0].arguments_json == '{"param":"max_connections"}'


@pytest.mark.parametrize("value", ["hello", "{hello world}", "[oops", '{\\"a\\": 1} tail text'])
def test_vllm_string_arguments_that_hold_no_object_are_not_a_call(value: str) -> None:
    # vLLM returns a call whose arguments are the JSON string; toolwire's arguments are
    # always a JSON object (docs/parsing.md "Guarantees"), so the block is content + failure.
    text = f'<tool_call>{{"name": "f", "arguments": "{value}"}}</tool_call>'
    out = parse_all_ways(text, FMT)
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["invalid"]


def test_sglang_malformed_block_is_kept_and_the_valid_one_still_calls() -> None:
    # SGLang logs and drops the broken block; toolwire keeps its text as content and
    # reports it (docs/parsing.md "Where engines disagree").
    broken = _block("{not valid json}")
    text = broken + "\n" + _block('{"name": "search", "arguments": {"query": "books"}}')
    out = parse_all_ways(text, FMT, tools=SGLANG_TOOLS)
    assert (out.content, calls(out)) == (broken, [("search", {"query": "books"})])
    assert [(f.reason, f.text) for f in out.failures] == [("invalid", broken)]


def test_sglang_two_objects_in_one_block_are_not_a_valid_block() -> None:
    # SGLang's base detector reads `{…}, {…}` inside one `<tool_call>` as two calls; the
    # Qwen/Hermes templates write one call per block and the text is not one JSON value,
    # so toolwire returns it as content with a failure (documented choice for invalid blocks).
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "search", "arguments": {"query": "London"}}</tool_call>'
    )
    out = parse_all_ways(text, FMT, tools=SGLANG_TOOLS)
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["invalid"]


def test_sglang_unknown_function_is_returned_marked_not_offered() -> None:
    # SGLang drops a call to a tool that was not offered; toolwire returns it, offered=False.
    text = _block('{"name":"unknown_func","arguments":{"city":"Paris"}}')
    out = parse_all_ways(text, FMT, tools=SGLANG_TOOLS)
    assert calls(out) == [("unknown_func", {"city": "Paris"})]
    assert [c.offered for c in out.tool_calls] == [False]
    assert out.content is None


def test_sglang_non_ascii_arguments_are_not_escaped() -> None:
    text = _block('{"name": "get_weather", "arguments": {"city": "杭州"}}')
    out = parse_all_ways(text, FMT, tools=SGLANG_TOOLS)
    assert calls(out) == [("get_weather", {"city": "杭州"})]
    assert out.tool_calls[0].arguments_json == '{"city":"杭州"}'


def test_sglang_partial_opener_is_held_then_released_at_the_end() -> None:
    parser = parser_for("Qwen/Qwen3-8B")
    assert parser.feed("I think <tool") == [ContentDelta("I think")]
    out = parse_all_ways("I think <tool", FMT)
    assert (out.content, out.tool_calls) == ("I think <tool", [])


def test_llamacpp_qwq_prefilled_think_then_answer() -> None:
    # QwQ-32B always has `<think>\n` pre-filled: the output starts inside reasoning.
    out = parse_all_ways(
        "Let me think about this...\n</think>\nThe answer is 42.", FMT, prompt_suffix=PREFILLED
    )
    assert (out.reasoning, out.content, out.tool_calls) == (
        "Let me think about this...",
        "The answer is 42.",
        [],
    )


def test_llamacpp_hermes_call_with_typed_argument() -> None:
    text = _block('{"name": "special_function", "arguments": {"arg1": 1}}')
    out = parse_all_ways(text, FMT, tools=SPECIAL)
    assert (out.content, calls(out)) == (None, [("special_function", {"arg1": 1})])
    assert [c.offered for c in out.tool_calls] == [True]
