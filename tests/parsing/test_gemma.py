"""Gemma 4: `<|tool_call>call:NAME{…}<tool_call|>` object notation and the thought channel."""

from __future__ import annotations

from typing import Any

import pytest
from streaming import calls, parse_all_ways

from toolwire.parsing import format_for

Q = '<|"|>'
THINKING_OFF = "<|turn>model\n<|channel>thought\n<channel|>"
THINKING_ON = "<|turn>model\n"


def test_model_ids_select_gemma4() -> None:
    assert format_for("google/gemma-4-31B-it") == "gemma4"


def test_string_values_and_thinking_off_prompt() -> None:
    text = f"<|tool_call>call:get_weather{{city:{Q}Paris{Q},unit:{Q}c{Q}}}<tool_call|>"
    out = parse_all_ways(text, "gemma4", prompt_suffix=THINKING_OFF)
    assert (out.content, out.reasoning) == (None, None)
    assert calls(out) == [("get_weather", {"city": "Paris", "unit": "c"})]


def test_thought_channel_drops_its_label() -> None:
    text = "<|channel>thought\nLine1\nLine2<channel|>Answer"
    out = parse_all_ways(text, "gemma4", prompt_suffix=THINKING_ON)
    assert (out.reasoning, out.content) == ("Line1\nLine2", "Answer")


def test_prompt_that_opened_the_channel_starts_in_reasoning() -> None:
    out = parse_all_ways("plan<channel|>done", "gemma4", prompt_suffix="<|turn>model\n<|channel>")
    assert (out.reasoning, out.content) == ("plan", "done")
    out = parse_all_ways("Think<channel|>done", "gemma4", prompt_suffix="<|turn>model\n<|channel>")
    assert out.reasoning == "Think"


def test_truncated_in_reasoning_is_reasoning() -> None:
    text = "<|channel>thought\nThe user wants"
    out = parse_all_ways(text, "gemma4", prompt_suffix=THINKING_ON, truncated=True)
    assert (out.reasoning, out.content) == ("The user wants", None)


def test_typed_values_keys_with_spaces_and_python_floats() -> None:
    text = (
        f"<|tool_call>call:record{{flag:false,key with space:1.5e-05,none:null,"
        f'obj:{{a:[1,{Q}t{Q}],B:1}},big:1e+21,n:-3, s:{Q}x,y}} "q"{Q}}}<tool_call|>'
    )
    out = parse_all_ways(text, "gemma4")
    assert calls(out) == [
        ("record", {"flag": False, "key with space": 1.5e-05, "none": None,
                    "obj": {"a": [1, "t"], "B": 1}, "big": 1e21, "n": -3, "s": 'x,y} "q"'}),
    ]  # fmt: skip
    assert out.tool_calls[0].arguments_json.count('"n":-3') == 1


def test_raw_strings_hold_markers_braces_and_newlines() -> None:
    inner = 'Wrap as <|tool_call>call:f{}<tool_call|>, close with <channel|>.\n\t{"ok": True}\\'
    text = f"<|tool_call>call:echo{{text:{Q}{inner}{Q}}}<tool_call|>"
    out = parse_all_ways(text, "gemma4")
    assert calls(out) == [("echo", {"text": inner})]
    assert out.content is None


def test_text_around_parallel_calls() -> None:
    text = (
        f"Before <|tool_call>call:get-weather{{l:{Q}A{Q}}}<tool_call|>"
        f"<|tool_call>call:weather.get{{}}<tool_call|> after"
    )
    out = parse_all_ways(text, "gemma4")
    assert out.content == "Before  after"
    assert calls(out) == [("get-weather", {"l": "A"}), ("weather.get", {})]


def test_call_without_its_closing_marker_still_counts() -> None:
    # Engines may stop generation on `<tool_call|>`: the call is complete when `}` closes.
    out = parse_all_ways(f"<|tool_call>call:f{{a:{Q}b{Q}}}", "gemma4")
    assert calls(out) == [("f", {"a": "b"})]


def test_call_without_an_argument_object_is_not_a_call() -> None:
    out = parse_all_ways("<|tool_call>call:bad_func no brace<tool_call|>", "gemma4")
    assert out.tool_calls == []


def test_truncated_second_call_is_dropped_and_first_kept() -> None:
    text = (
        f"<|tool_call>call:a{{c:{Q}Z{Q}}}<tool_call|>"
        f"<|tool_call>call:search{{filters:{{max:3,tags:[{Q}a{Q}]}},query:"
    )
    out = parse_all_ways(text, "gemma4", truncated=True)
    assert (out.content, calls(out)) == (None, [("a", {"c": "Z"})])


def test_truncated_inside_a_string_or_name_yields_no_call() -> None:
    for text in (f"<|tool_call>call:get_weather{{city:{Q}Par", "<|tool_call>call:get"):
        out = parse_all_ways(text, "gemma4", truncated=True)
        assert (out.content, out.tool_calls) == (None, [])


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   vLLM:      tests/tool_parsers/test_gemma4_tool_parser.py, test_gemma4_utils.py,
#              test_gemma4_regex_and_bare_calls.py
#   SGLang:    test/registered/function_call/ Gemma4Detector tests (detect_and_parse and
#              streaming, string delimiters, parallel indices, finish flush)
#   llama.cpp: the Gemma 4 block of tests/test-chat.cpp (google-gemma-4-31B-it.jinja)
#
# Tools the engines offer: get_weather (location / city, unit), get_time, search, bash,
# write_file (path, content), Edit, special_function (arg1), amount, toggle, set_nullable,
# todo_list, set_config, empty_args.
# ---------------------------------------------------------------------------------------


def _gemma(text: str, **kw: Any) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    out = parse_all_ways(text, "gemma4", **kw)
    return out.content, calls(out)


def test_vllm_string_values_with_commas_and_quoted_dict_keys() -> None:
    text = (
        f"<|tool_call>call:edit{{location:{Q}Paris, France{Q},record_map:{{{Q}3{Q}:"
        f"{Q}new text{Q}}},outer:{{inner:{{{Q}3{Q}:{Q}x{Q}}}}}}}<tool_call|>"
    )
    args = {
        "location": "Paris, France",
        "record_map": {"3": "new text"},
        "outer": {"inner": {"3": "x"}},
    }
    assert _gemma(text) == (None, [("edit", args)])


def test_vllm_number_with_a_trailing_dot_and_bare_array_values() -> None:
    text = (
        f"<|tool_call>call:box{{left:108.,right:22.8,a:[42,true,3.14],"
        f"b:[[{Q}a]b{Q},{Q}c{Q}],{Q}tail{Q}]}}<tool_call|>"
    )
    args = {"left": 108.0, "right": 22.8, "a": [42, True, 3.14], "b": [["a]b", "c"], "tail"]}
    assert _gemma(text) == (None, [("box", args)])


def test_vllm_strings_with_quotes_braces_html_and_newlines() -> None:
    html = (
        '<!DOCTYPE html>\n<html lang="zh-CN">\n<head>\n    <meta charset="UTF-8">\n'
        '    <meta name="viewport" content="width=device-width">\n'
    )
    text = (
        f"<|tool_call>call:write_file{{path:{Q}index.html{Q},content:{Q}{html}{Q},"
        f'code:{Q}function() {{ return "ok"; }}{Q},say:{Q}She said "hello" loudly{Q}}}'
        "<tool_call|>"
    )
    args = {
        "path": "index.html",
        "content": html,
        "code": 'function() { return "ok"; }',
        "say": 'She said "hello" loudly',
    }
    assert _gemma(text) == (None, [("write_file", args)])


def test_vllm_trailing_bare_boolean_and_text_after_the_call() -> None:
    text = (
        f"<|tool_call>call:Edit{{file_path:{Q}src/env.py{Q},old_string:{Q}old_val{Q},"
        f"new_string:{Q}new_val{Q},replace_all:false}}<tool_call|><div>"
    )
    args = {
        "file_path": "src/env.py",
        "old_string": "old_val",
        "new_string": "new_val",
        "replace_all": False,
    }
    assert _gemma(text) == ("<div>", [("Edit", args)])


@pytest.mark.parametrize(
    "text",
    [
        f"<|tool_call>call:get_weather{{location:{Q}London",  # vLLM: content == model_output
        "hi <|tool_call>call:get_weather{city:",  # SGLang: finish() flushes it as text
    ],
)
def test_engines_unfinished_call_at_the_end_comes_back_as_content(text: str) -> None:
    out = parse_all_ways(text, "gemma4")
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["unfinished"]


def test_vllm_turn_end_token_closing_a_call() -> None:
    text = f"<|tool_call>call:gdb{{args:{Q}-batch -ex run /tmp/poc{Q}}}<turn|>"
    assert _gemma(text) == (None, [("gdb", {"args": "-batch -ex run /tmp/poc"})])


def test_vllm_stray_colon_before_call() -> None:
    text = f"<|tool_call>:call:bash{{command:{Q}pytest{Q}}}"
    assert _gemma(text) == (None, [("bash", {"command": "pytest"})])


def test_vllm_bare_call_right_after_the_thought_channel() -> None:
    text = (
        "<|channel>thought\nI need to read the entry source file.\n<channel|>"
        f"call:bash{{command:{Q}cat /work/src/entry.c{Q}}}"
    )
    out = parse_all_ways(text, "gemma4", prompt_suffix=THINKING_ON)
    assert out.reasoning == "I need to read the entry source file."
    assert (out.content, calls(out)) == (None, [("bash", {"command": "cat /work/src/entry.c"})])


def test_sglang_text_around_and_between_calls_is_kept() -> None:
    # SGLang's detect_and_parse keeps only the text before the first call ("Some text ");
    # its streaming path keeps both. toolwire keeps all content, in order.
    text = (
        f"Some text <|tool_call>call:get_weather{{location:{Q}Tokyo{Q}}}<tool_call|>"
        f" more text <|tool_call>call:get_time{{timezone:{Q}UTC{Q}}}<tool_call|>"
    )
    assert _gemma(text) == (
        "Some text  more text",
        [("get_weather", {"location": "Tokyo"}), ("get_time", {"timezone": "UTC"})],
    )


def test_sglang_bare_words_unicode_and_parallel_calls_of_one_function() -> None:
    text = (
        "<|tool_call>call:get_weather{city:x}<tool_call|><|tool_call>call:search{query:y}"
        f"<tool_call|><|tool_call>call:get_weather{{city:{Q}Hà Nội{Q}}}<tool_call|>"
        f"<|tool_call>call:get_weather{{city:{Q}Đà Nẵng{Q}}}<tool_call|>"
    )
    assert _gemma(text) == (
        None,
        [
            ("get_weather", {"city": "x"}),
            ("search", {"query": "y"}),
            ("get_weather", {"city": "Hà Nội"}),
            ("get_weather", {"city": "Đà Nẵng"}),
        ],
    )
    ids = [c.id for c in parse_all_ways(text, "gemma4").tool_calls]
    assert len(set(ids)) == 4


def test_sglang_rich_and_nested_arguments() -> None:
    text = (
        f"<|tool_call>call:get_weather{{city:{Q}Beijing{Q}, temperature:25, windy:true, "
        f"tags:[{Q}a{Q}, {Q}b{Q}], location:{{lat:39.9, lng:116.4}}, "
        f"nested:[1, 2, {{inner:{Q}val{Q}}}], url:{Q}http://example.com{Q}}}<tool_call|>"
    )
    args = {
        "city": "Beijing",
        "temperature": 25,
        "windy": True,
        "tags": ["a", "b"],
        "location": {"lat": 39.9, "lng": 116.4},
        "nested": [1, 2, {"inner": "val"}],
        "url": "http://example.com",
    }
    assert _gemma(text) == (None, [("get_weather", args)])


def test_sglang_call_to_a_tool_not_offered_is_returned_and_marked() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    text = f"<|tool_call>call:unknown_func{{arg:{Q}val{Q}}}<tool_call|>"
    out = parse_all_ways(text, "gemma4", tools=tools)
    assert calls(out) == [("unknown_func", {"arg": "val"})]
    assert [c.offered for c in out.tool_calls] == [False]


def test_sglang_unclosed_string_is_not_a_call() -> None:
    # SGLang takes the rest as the value and returns a call; toolwire: a call the model did
    # not write validly is content plus a ParseFailure (docs/parsing.md).
    text = f"<|tool_call>call:get_weather{{city:{Q}Beijing<tool_call|>"
    out = parse_all_ways(text, "gemma4")
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["unfinished"]


@pytest.mark.parametrize(
    ("body", "args"),
    [
        (f"query:weather in Tokyo{Q}", {"query": "weather in Tokyo"}),
        (f"query:Paris, France{Q},limit:5", {"query": "Paris, France", "limit": 5}),
        (f"filters:{{city:Tokyo{Q}}},query:{Q}x{Q}", {"filters": {"city": "Tokyo"}, "query": "x"}),
    ],
    ids=["plain", "comma", "nested"],
)
def test_sglang_string_missing_its_opening_delimiter(body: str, args: dict[str, Any]) -> None:
    text = f"<|tool_call>call:web_search{{{body}}}<tool_call|>"
    assert _gemma(text) == (None, [("web_search", args)])


def test_sglang_block_that_is_not_a_call_comes_back_whole() -> None:
    text = "<|tool_call>not a call<tool_call|>"
    out = parse_all_ways(text, "gemma4")
    assert (out.content, out.tool_calls) == (text, [])


@pytest.mark.parametrize(
    ("text", "reasoning"),
    [
        ("<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", "I'm\nthinking"),
        ("<|channel>thought<channel|>Hello, world!\nWhat's up?", None),
        ("<|channel>thought\n<channel|>Hello, world!\nWhat's up?<channel|>", None),
        ("<|channel>thought\n<channel|>Hello, world!\nWhat's up?<|channel>thought\n<channel|>",
         None),
        ("<|channel>thought\n<channel|>Hello, world!\nWhat's up?<|channel>thought\n<channel|>"
         "<channel|>", None),
    ],
    ids=["thoughts", "empty-thought", "stray-close", "empty-thought-after", "double-close"],
)  # fmt: skip
def test_llamacpp_thought_channel_edges(text: str, reasoning: str | None) -> None:
    out = parse_all_ways(text, "gemma4", prompt_suffix=THINKING_ON)
    assert (out.reasoning, out.content, out.tool_calls) == (
        reasoning,
        "Hello, world!\nWhat's up?",
        [],
    )


def test_llamacpp_doubled_channel_opener() -> None:
    text = "<|channel><|channel>thought\n<channel|>Hello, world!\nWhat's up?"
    out = parse_all_ways(text, "gemma4", prompt_suffix=THINKING_ON)
    assert (out.reasoning, out.content) == (None, "Hello, world!\nWhat's up?")


def test_llamacpp_content_then_call() -> None:
    text = f"Hello, world!\nWhat's up?<|tool_call>call:get_time{{city:{Q}Paris{Q}}}<tool_call|>"
    assert _gemma(text) == ("Hello, world!\nWhat's up?", [("get_time", {"city": "Paris"})])


def test_llamacpp_value_types() -> None:
    text = (
        f"<|tool_call>call:special_function{{arg1:-7}}<tool_call|>"
        f"<|tool_call>call:amount{{orig:1.5e10}}<tool_call|>"
        f"<|tool_call>call:set_nullable{{value:null}}<tool_call|>"
        f"<|tool_call>call:todo_list{{todos:[{Q}buy milk{Q},{Q}walk dog{Q}]}}<tool_call|>"
        f"<|tool_call>call:set_config{{config:{{theme:{Q}dark{Q},count:3}}}}<tool_call|>"
        f"<|tool_call>call:todo_list{{todos:[]}}<tool_call|>"
        f"<|tool_call>call:set_config{{config:{{}}}}<tool_call|>"
        f"<|tool_call>call:empty_args{{}}<tool_call|>"
    )
    assert _gemma(text) == (
        None,
        [
            ("special_function", {"arg1": -7}),
            ("amount", {"orig": 1.5e10}),
            ("set_nullable", {"value": None}),
            ("todo_list", {"todos": ["buy milk", "walk dog"]}),
            ("set_config", {"config": {"theme": "dark", "count": 3}}),
            ("todo_list", {"todos": []}),
            ("set_config", {"config": {}}),
            ("empty_args", {}),
        ],
    )


def test_the_closer_comes_back_once_and_only_for_the_block_given_back() -> None:
    # A second stray closer is dropped as before.
    out = parse_all_ways("<|tool_call>not a call<tool_call|> then<tool_call|>", "gemma4")
    assert (out.content, out.tool_calls) == ("<|tool_call>not a call<tool_call|> then", [])
    # A call that opens before the closer comes owns it.
    out = parse_all_ways("<|tool_call>oops <|tool_call>call:f{a:1}<tool_call|>done", "gemma4")
    assert (out.content, calls(out)) == ("<|tool_call>oops done", [("f", {"a": 1})])


def test_a_delimiter_after_a_comma_still_opens_a_string() -> None:
    # Only a `<|"|>` right after value text closes a string missing its opening one.
    text = f"<|tool_call>call:f{{tags:[a, {Q}b{Q}],n:1}}<tool_call|>"
    assert _gemma(text) == (None, [("f", {"tags": ["a", "b"], "n": 1})])
    # A colon inside such a value is not read as one: the block stays text, reported.
    text = f"<|tool_call>call:f{{url:http://x{Q}}}<tool_call|>"
    out = parse_all_ways(text, "gemma4")
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["invalid"]


@pytest.mark.parametrize("answer", ["cats are great", "call me maybe", "call:", "c", "calling{x}"])
def test_an_answer_that_only_starts_like_a_bare_call_is_content(answer: str) -> None:
    for prefix in ("", "<|channel>thought\nhm<channel|>"):
        out = parse_all_ways(prefix + answer, "gemma4", prompt_suffix=THINKING_ON)
        assert (out.content, out.tool_calls, out.failures) == (answer, [], [])
