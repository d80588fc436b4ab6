"""Harmony (gpt-oss): channels, recipients in either header position, stop tokens cut."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streaming import calls, parse_all_ways, summary

from toolwire.parsing import (
    ParsedOutput,
    ToolCallStart,
    assemble,
    format_for,
    parse_output,
    parser_for,
)
from toolwire.parsing.formats.harmony import MARKERS

ANALYSIS = "<|channel|>analysis<|message|>Need the weather.<|end|>"
ROLE_CALL = (
    "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
    '<|message|>{"city": "Paris"}'
)
WEATHER = [("get_weather", {"city": "Paris"})]


def harmony(text: str, **kw: Any) -> ParsedOutput:
    return parse_all_ways(text, "harmony", **kw)


def test_gpt_oss_model_ids_select_harmony() -> None:
    for model in ("openai/gpt-oss-20b", "openai/gpt-oss-120b", "gpt-oss:20b"):
        assert format_for(model) == "harmony"


def test_analysis_then_call_with_recipient_in_role_header() -> None:
    out = harmony(ANALYSIS + ROLE_CALL)
    assert (out.reasoning, out.content, calls(out)) == ("Need the weather.", None, WEATHER)


@pytest.mark.parametrize(
    "header",
    [
        "<|channel|>commentary to=functions.get_weather <|constrain|>json",
        "<|channel|>commentary to=functions.get_weather<|constrain|>json",
        " to=functions.get_weather<|channel|>commentary json",
        " to=functions.get_weather<|channel|>commentary",
        " to=functions.get_weather<|channel|>analysis <|constrain|>json",
    ],
    ids=["channel", "constrain-adjacent", "role-json-text", "no-content-type", "on-analysis"],
)
def test_every_header_spelling_is_the_same_call(header: str) -> None:
    out = harmony(header + '<|message|>{"city": "Paris"}')
    assert (out.reasoning, out.content, calls(out)) == (None, None, WEATHER)


def test_end_of_output_ends_the_call_because_call_token_is_cut() -> None:
    assert calls(harmony(ROLE_CALL)) == WEATHER
    assert calls(harmony(ROLE_CALL + "<|call|>")) == WEATHER
    assert calls(harmony(ROLE_CALL + "<|end|>")) == WEATHER


def test_call_is_emitted_at_its_call_token_not_later() -> None:
    parser = parser_for("openai/gpt-oss-20b")
    events = parser.feed(ANALYSIS + ROLE_CALL)
    assert not any(isinstance(e, ToolCallStart) for e in events)
    events = parser.feed("<|call|>")
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["get_weather"]


def test_sequential_calls_then_final_answer() -> None:
    text = (
        ANALYSIS
        + ROLE_CALL
        + "<|call|><|start|>assistant to=functions.get_time<|channel|>commentary json"
        '<|message|>{"tz": "UTC"}<|call|><|start|>assistant<|channel|>final<|message|>Done.'
    )
    out = harmony(text)
    assert calls(out) == [*WEATHER, ("get_time", {"tz": "UTC"})]
    assert (out.reasoning, out.content) == ("Need the weather.", "Done.")


def test_commentary_without_recipient_is_a_preamble_in_content() -> None:
    text = "<|channel|>commentary<|message|>Checking — one moment.<|end|>" + ROLE_CALL
    out = harmony(text)
    assert (out.content, calls(out)) == ("Checking — one moment.", WEATHER)


def test_final_only_and_json_lookalike_stay_content() -> None:
    text = '<|channel|>final<|message|>{"name": "get_weather", "arguments": {}}'
    out = harmony(text)
    assert (out.content, out.tool_calls) == ('{"name": "get_weather", "arguments": {}}', [])


def test_marker_text_inside_json_argument_strings_is_data() -> None:
    value = 'Ends with <|call|> or <|end|>; "quoted" \\ <|start|>assistant<|channel|>final'
    text = (
        " to=functions.write<|channel|>commentary <|constrain|>json<|message|>"
        '{"text": "Ends with <|call|> or <|end|>; \\"quoted\\" \\\\ '
        '<|start|>assistant<|channel|>final"}<|call|>'
    )
    out = harmony(text)
    assert calls(out) == [("write", {"text": value})]
    assert out.content is None


def test_marker_text_inside_reasoning_is_data() -> None:
    text = "<|channel|>analysis<|message|>Never write <|call|> or <|channel|>final.<|end|>"
    out = harmony(text + ROLE_CALL)
    assert out.reasoning == "Never write <|call|> or <|channel|>final."
    assert calls(out) == WEATHER


def test_builtin_recipient_is_not_a_function_call() -> None:
    text = (
        ANALYSIS
        + "<|start|>assistant<|channel|>commentary to=python <|constrain|>code"
        + '<|message|>print("hi")'
    )
    out = harmony(text)
    assert (out.reasoning, out.content, out.tool_calls) == ("Need the weather.", None, [])


def test_bare_recipient_naming_an_offered_tool_is_a_call() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    text = ' to=get_weather<|channel|>commentary<|message|>{"city": "Paris"}'
    out = parse_output(text, "openai/gpt-oss-20b", tools)
    assert calls(out) == WEATHER
    assert parse_output(text, "openai/gpt-oss-20b").tool_calls == []


def test_malformed_headers_are_skipped_and_parsing_goes_on() -> None:
    garbled = "<|channel|>??<|end|><|start|>assistant<|channel|>analysis<|message|>Thinking."
    assert harmony(garbled).reasoning == "Thinking."
    stray = "<|channel|>commentary to=assistant<|channel|>analysis<|message|>Hm.<|end|>"
    out = harmony(stray + "<|start|>assistant<|channel|>final<|message|>Hi!")
    assert (out.reasoning, out.content, out.tool_calls) == ("Hm.", "Hi!", [])
    unknown = harmony("<|channel|>comment<|message|>some text<|end|>")
    assert (unknown.content, unknown.reasoning, unknown.tool_calls) == (None, None, [])


def test_truncated_inside_arguments_never_emits_the_call() -> None:
    text = ANALYSIS + ROLE_CALL[:-3]
    parser = parser_for("openai/gpt-oss-20b")
    events = [e for ch in text for e in parser.feed(ch)] + parser.finish(truncated=True)
    assert not any(isinstance(e, ToolCallStart) for e in events)
    out = harmony(text, truncated=True)
    assert (out.reasoning, out.content, out.tool_calls) == ("Need the weather.", None, [])


def test_truncated_complete_json_is_still_unfinished() -> None:
    out = harmony(ROLE_CALL, truncated=True)
    assert out.tool_calls == []


def test_truncated_inside_header_keeps_the_reasoning() -> None:
    out = harmony(ANALYSIS + ROLE_CALL.split("<|message|>")[0], truncated=True)
    assert (out.reasoning, out.content, out.tool_calls) == ("Need the weather.", None, [])


def test_earlier_calls_survive_truncation_of_a_later_one() -> None:
    text = ROLE_CALL + "<|call|>" + ROLE_CALL[:-5]
    assert calls(harmony(text, truncated=True)) == WEATHER


def test_invalid_arguments_degrade_to_content() -> None:
    out = harmony(' to=functions.f<|channel|>commentary<|message|>{"a": 1<|call|>')
    assert (out.content, out.tool_calls) == ('{"a": 1', [])


def test_unbalanced_quote_cannot_hide_the_rest_of_the_output() -> None:
    text = (
        ' to=functions.f<|channel|>commentary<|message|>{"a": "x}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>Sorry."
    )
    out = harmony(text)
    assert (out.content, out.tool_calls) == ('{"a": "x}\n\nSorry.', [])


def test_prompt_suffix_says_where_output_starts() -> None:
    final = "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>"
    assert harmony("Hello!", prompt_suffix=final).content == "Hello!"
    analysis = "<|start|>assistant<|channel|>analysis<|message|>"
    out = harmony(
        "Hmm.<|end|><|start|>assistant<|channel|>final<|message|>Hi", prompt_suffix=analysis
    )
    assert (out.reasoning, out.content) == ("Hmm.", "Hi")
    role_call = ROLE_CALL.removeprefix("<|start|>assistant")
    assert calls(harmony(role_call, prompt_suffix="<|start|>assistant")) == WEATHER


def test_output_without_any_marker_is_plain_content() -> None:
    assert harmony("Just text, no channels.").content == "Just text, no channels."


_PIECES = st.sampled_from(
    [
        *MARKERS,
        " to=functions.f",
        "analysis",
        "final",
        "commentary",
        '{"a": 1}',
        '"',
        "\\",
        "x y",
        " json",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_PIECES, max_size=14), st.booleans(), st.randoms(use_true_random=False))
def test_any_text_never_raises_and_any_split_agrees(
    parts: list[str], truncated: bool, rng: Any
) -> None:
    text = "".join(parts)
    whole = parse_output(text, "openai/gpt-oss-20b", truncated=truncated)
    for pieces in (list(text), _random_pieces(text, rng)):
        parser = parser_for("openai/gpt-oss-20b")
        events = [e for p in pieces for e in parser.feed(p)] + parser.finish(truncated=truncated)
        assert summary(assemble(events)) == summary(whole)


def _random_pieces(text: str, rng: Any) -> list[str]:
    pieces, pos = [], 0
    while pos < len(text):
        size = rng.randint(1, 6)
        pieces.append(text[pos : pos + size])
        pos += size
    return pieces


def test_a_preamble_and_the_final_answer_are_kept_apart() -> None:
    text = (
        "<|channel|>commentary<|message|>Checking the weather.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>"
    )
    assert harmony(text).content == "Checking the weather.\n\nIt is sunny."


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   openai/harmony: tests/test_harmony.py, src/tests.rs, test-data/test_simple_tool_call.txt,
#                   test-data/test_streamable_parser.txt (parse_messages_from_completion_tokens,
#                   StreamableParser strict and non-strict)
#   vLLM:           tests/tool_parsers/test_openai_tool_parser.py,
#                   tests/entrypoints/openai/parser/test_harmony_utils.py (parse_chat_output)
#   SGLang:         test/registered/function_call/test_gpt_oss_detector.py and the other
#                   GptOssDetector tests (abbreviated header, normal text after a call),
#                   test/registered/.../test_reasoning_parser.py (GptOssDetector)
#   llama.cpp:      the GPT-OSS block of tests/test-chat.cpp
#
# Tools the engines offer: get_weather / get_current_weather (city, state, unit), search,
# read_file (files), special_function (arg1), lookup_weather (location).
# ---------------------------------------------------------------------------------------


def _offered(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": {}}} for n in names]


def test_harmony_lib_bare_recipient_on_analysis_with_code_content_type() -> None:
    # openai/harmony test_simple_tool_call: recipient without `functions.`, channel analysis.
    text = (
        '<|channel|>analysis<|message|>User asks: "What is the weather in Tokyo?" We need to '
        "use lookup_weather tool.<|end|><|start|>assistant to=lookup_weather<|channel|>analysis"
        ' code<|message|>{"location": "Tokyo"}'
    )
    out = harmony(text, tools=_offered("lookup_weather"))
    assert out.reasoning == (
        'User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.'
    )
    assert (out.content, calls(out)) == (None, [("lookup_weather", {"location": "Tokyo"})])


def test_harmony_lib_builtin_call_and_tool_message_in_the_output_are_not_ours() -> None:
    # openai/harmony test_streamable_parser: analysis, a browser.search call (`code` after
    # the channel-side recipient), then the tool's own message addressed to the assistant.
    thinking = (
        'User asks "Who is the current US president?" It\'s 2025. But w\ne need up to date '
        "info. Let's browse to confirm."
    )
    text = (
        f"<|channel|>analysis<|message|>{thinking}<|end|><|start|>assistant<|channel|>"
        'commentary to=browser.search code<|message|>{"query": "current US president", '
        '"topn": 10}<|call|><|start|>browser.search to=assistant<|channel|>commentary'
        '<|message|>{"result": "https://openai.com/"}<|end|>'
    )
    out = harmony(text)
    assert (out.reasoning, out.content, out.tool_calls) == (thinking, None, [])


@pytest.mark.parametrize(
    ("text", "content", "reasoning", "expected"),
    [
        (
            "I must refuse<|end|><|start|>assistant<|channel|>analysis<|message|>We must refuse"
            "<|end|><|start|>assistant<|channel|>final<|message|>I'm sorry, but I can't help "
            "with that.<|return|>",
            "I must refuse\n\nI'm sorry, but I can't help with that.",
            "We must refuse",
            [],
        ),
        (
            "... Let's use the tool.<|end|><|start|>assistant to=functions.get_weather"
            '<|channel|>commentary json<|message|>{"location": "Tokyo"}<|call|>',
            "... Let's use the tool.",
            None,
            [("get_weather", {"location": "Tokyo"})],
        ),
        (
            "Let me check.<|start|>assistant<|channel|>commentary to=functions.get_weather"
            '<|constrain|>json<|message|>{"city":"Beijing"}<|call|>',
            "Let me check.",
            None,
            [("get_weather", {"city": "Beijing"})],
        ),
        (
            "I'll look that up. <|start|>assistant<|channel|>commentary to=functions.get_weather"
            '<|constrain|>json<|message|>{"city":"Beijing", "unit":"celsius"}<|call|>',
            "I'll look that up.",
            None,
            [("get_weather", {"city": "Beijing", "unit": "celsius"})],
        ),
    ],
    ids=["harmony-refuse-end", "harmony-text-then-call", "sglang-text-start", "sglang-stream"],
)
def test_engines_plain_text_before_the_first_header_is_content(
    text: str, content: str, reasoning: str | None, expected: list[Any]
) -> None:
    # openai/harmony's non-strict StreamableParser keeps text that no <|message|> followed
    # as a channel-less message; SGLang keeps text before <|start|> as normal text.
    out = harmony(text)
    assert (out.content, out.reasoning, calls(out)) == (content, reasoning, expected)


def test_harmony_lib_header_with_a_channel_but_no_message_keeps_its_text() -> None:
    # openai/harmony non-strict keeps "I must refuse" as analysis and strict (its default,
    # what vLLM runs) raises; toolwire keeps the text, as the non-strict parser does.
    text = (
        "<|channel|>analysis I must refuse<|end|><|start|>assistant<|channel|>analysis"
        "<|message|>We must refuse<|end|><|start|>assistant<|channel|>final<|message|>I'm "
        "sorry, but I can't help with that.<|return|>"
    )
    out = harmony(text)
    assert (out.reasoning, out.content) == (
        "I must refuse\n\nWe must refuse",
        "I'm sorry, but I can't help with that.",
    )


def test_vllm_calls_with_and_without_content_type_and_empty_arguments() -> None:
    text = (
        "<|channel|>analysis<|message|>We need get_current_weather and get_user_location."
        "<|end|><|start|>assistant to=functions.get_current_weather<|channel|>commentary json"
        '<|message|>{"location": "Tokyo"}<|call|><|start|>assistant to=functions.'
        'get_user_location<|channel|>commentary json<|message|>{"location": "Tokyo"}<|call|>'
        "<|start|>assistant to=functions.no_content_type<|channel|>commentary<|message|>"
        '{"location": "Tokyo"}<|call|><|start|>assistant to=functions.empty_args<|channel|>'
        "commentary json<|message|>{}<|call|><|start|>assistant to=functions.no_args"
        "<|channel|>commentary json<|message|><|call|>"
    )
    out = harmony(text)
    tokyo = {"location": "Tokyo"}
    assert calls(out) == [
        ("get_current_weather", tokyo),
        ("get_user_location", tokyo),
        ("no_content_type", tokyo),
        ("empty_args", {}),
        ("no_args", {}),  # vLLM passes the empty body on as arguments ""; ours are {}
    ]
    assert (out.reasoning, out.content) == (
        "We need get_current_weather and get_user_location.",
        None,
    )


def test_vllm_arguments_that_are_not_json_come_back_as_content() -> None:
    # vLLM returns a call with arguments "foo"; toolwire: an invalid call is content plus a
    # ParseFailure (docs/parsing.md, "Where engines disagree").
    text = (
        "<|start|>assistant to=functions.not_json_no_content_type<|channel|>commentary"
        "<|message|>foo<|call|>"
    )
    out = harmony(text)
    assert (out.content, out.tool_calls) == ("foo", [])
    assert [f.reason for f in out.failures] == ["invalid"]


def test_vllm_multiline_json_arguments() -> None:
    text = (
        "<|start|>assistant to=functions.get_current_weather<|channel|>commentary json"
        '<|message|>{\n"location": "Tokyo"\n}<|call|>'
    )
    assert calls(harmony(text)) == [("get_current_weather", {"location": "Tokyo"})]


def test_engines_final_answer_after_a_call_is_content() -> None:
    # vLLM keeps the final message as content; SGLang's detector drops text after a call.
    # toolwire keeps it: nothing the model wrote is lost.
    text = (
        "<|channel|>analysis<|message|>Reasoning...<|end|><|start|>assistant<|channel|>"
        "commentary to=functions.read_file <|constrain|>json<|message|>"
        '{\n  "files": []\n}<|call|><|start|>assistant<|channel|>final<|message|>'
        "This tool call will get the weather."
    )
    out = harmony(text)
    assert calls(out) == [("read_file", {"files": []})]
    assert (out.reasoning, out.content) == ("Reasoning...", "This tool call will get the weather.")


@pytest.mark.parametrize(
    ("text", "truncated", "reasoning", "content"),
    [
        ("<|channel|>final<|message|>I'm in the middle of answering", True, None,
         "I'm in the middle of answering"),
        ("<|channel|>analysis<|message|>I'm in the middle of thinking", True,
         "I'm in the middle of thinking", None),
        ("<|channel|>analysis<|message|>I'm thinking.<|end|><|start|>assistant<|channel|>final"
         "<|message|>I'm in the middle of answering", True, "I'm thinking.",
         "I'm in the middle of answering"),
        ("<|channel|>final<|message|>The answer is 4.<|end|>", False, None, "The answer is 4."),
        ("<|channel|>commentary<|message|>I need to call some tools.<|end|>", False, None,
         "I need to call some tools."),
        ("<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final"
         "<|message|>Hello, world!\nWhat's up?", False, "I'm\nthinking",
         "Hello, world!\nWhat's up?"),
    ],
    ids=["vllm-cut-final", "vllm-cut-analysis", "vllm-cut-after-analysis", "vllm-final-end",
         "vllm-preamble-only", "llamacpp-analysis-final"],
)  # fmt: skip
def test_engines_channels_to_reasoning_and_content(
    text: str, truncated: bool, reasoning: str | None, content: str | None
) -> None:
    out = harmony(text, truncated=truncated)
    assert (out.reasoning, out.content, out.tool_calls) == (reasoning, content, [])


def test_sglang_sequential_calls_with_channel_side_recipients() -> None:
    text = (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather<|constrain|>json"
        '<|message|>{"city":"Beijing"}<|call|><|start|>assistant<|channel|>commentary '
        'to=functions.search<|constrain|>json<|message|>{"query":"restaurants"}<|call|>'
    )
    out = harmony(text)
    assert calls(out) == [
        ("get_weather", {"city": "Beijing"}),
        ("search", {"query": "restaurants"}),
    ]
    assert out.content is None


def test_sglang_abbreviated_header_and_a_repeated_call_token() -> None:
    header = (
        '<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>{"city":'
        '"Paris"}<|call|><|call|>'
    )
    for text in (header, "<|start|>assistant" + header):
        out = harmony(text)
        assert (out.content, calls(out)) == (None, [("get_weather", {"city": "Paris"})])


@pytest.mark.parametrize(
    "text", ["ordinary commentary to=functions.get_weather", '{"city":"Paris"}']
)
def test_sglang_text_without_markers_is_content_not_a_call(text: str) -> None:
    out = harmony(text)
    assert (out.content, out.tool_calls) == (text, [])


def test_sglang_messages_without_a_role_between_them() -> None:
    # SGLang's reasoning-parser tests write `<|start|>` without a role and no `<|start|>`
    # at all before the second message.
    text = (
        "<|start|><|channel|>analysis<|message|>thinking hard<|end|><|channel|>final"
        "<|message|>the answer<|end|>"
    )
    out = harmony(text)
    assert (out.reasoning, out.content) == ("thinking hard", "the answer")


def test_sglang_garbage_between_messages_is_skipped() -> None:
    # SGLang only asserts "think" in the reasoning and "result" in the content; the stray
    # `<|call|>tool_data<|return|>` is a header that never reached <|message|>: skipped.
    text = (
        "<|start|><|channel|>analysis<|message|>think<|end|><|call|>tool_data<|return|>"
        "<|channel|>final<|message|>result<|end|>"
    )
    out = harmony(text)
    assert (out.reasoning, out.content, out.tool_calls) == ("think", "result", [])


def test_llamacpp_call_cut_off_inside_its_arguments_is_dropped() -> None:
    # llama.cpp returns the partial call (arguments `{"arg1`); toolwire never announces an
    # unfinished call (docs/parsing.md, "Calls are emitted when complete").
    text = (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>"
        'commentary to=functions.special_function <|constrain|>json<|message|>{"arg1'
    )
    out = harmony(text, truncated=True)
    assert (out.reasoning, out.content, out.tool_calls) == ("I'm\nthinking", None, [])


def test_llamacpp_preamble_then_call_without_content_type() -> None:
    text = (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>"
        "commentary<|message|>Hello, world!\nWhat's up?<|end|><|start|>assistant<|channel|>"
        'commentary to=functions.special_function<|message|>{"arg1": 1}'
    )
    out = harmony(text)
    assert (out.reasoning, out.content) == ("I'm\nthinking", "Hello, world!\nWhat's up?")
    assert calls(out) == [("special_function", {"arg1": 1})]


def test_llamacpp_role_side_recipient_on_analysis_after_reasoning() -> None:
    text = (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant "
        'to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{"arg1": 1}'
    )
    out = harmony(text)
    assert (out.reasoning, out.content) == ("I'm\nthinking", None)
    assert calls(out) == [("special_function", {"arg1": 1})]


def test_two_analysis_messages_are_kept_apart() -> None:
    text = (
        "<|channel|>analysis<|message|>First thought.<|end|><|start|>assistant<|channel|>"
        "analysis<|message|>Second thought.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Done.<|return|>"
    )
    out = harmony(text)
    assert (out.reasoning, out.content) == ("First thought.\n\nSecond thought.", "Done.")


def test_a_header_with_a_recipient_but_no_message_is_no_text() -> None:
    text = (
        "<|channel|>commentary to=functions.f json<|end|><|start|>assistant<|channel|>final"
        "<|message|>Done.<|return|>"
    )
    out = harmony(text)
    assert (out.reasoning, out.content, out.tool_calls) == (None, "Done.", [])
