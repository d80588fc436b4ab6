"""Mistral `[TOOL_CALLS]`: v3 JSON arrays, v11+ `name[ARGS]{…}`, `[THINK]` reasoning."""

from __future__ import annotations

from typing import Any

import pytest
from streaming import calls, parse_all_ways

from toolwire.parsing import ToolCallStart, format_for, parse_output, parser_for


@pytest.mark.parametrize(
    ("model", "fmt"),
    [
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral_v3"),
        ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mistral_v3"),
        ("mistralai/Ministral-8B-Instruct-2410", "mistral_v3"),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral_v3"),
        ("mistralai/Devstral-Small-2505", "mistral_v3"),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral_v11"),
        ("mistralai/Devstral-Small-2507", "mistral_v11"),
        ("mistralai/Magistral-Small-2506", "mistral_v11"),
        ("mistralai/Magistral-Small-2509", "mistral_v11"),
        ("mistralai/Ministral-3-14B-Reasoning-2512", "mistral_v11"),
        ("mistralai/Mistral-Medium-3.5-128B", "mistral_v11"),
        ("mistralai/Mistral-Large-3-675B-Instruct-2512", "mistral_v11"),
        ("mistralai/Mistral-Small-4-119B-2603", "mistral_v11"),
    ],
)
def test_model_ids_select_the_tokenizer_version(model: str, fmt: str) -> None:
    assert format_for(model) == fmt


def test_v3_array_with_content_before_and_arguments_before_name() -> None:
    text = 'Hi [TOOL_CALLS] [{"arguments": {"name": "Ann"}, "name": "age"}, {"name": "t"}]'
    out = parse_all_ways(text, "mistral_v3")
    assert out.content == "Hi"
    assert calls(out) == [("age", {"name": "Ann"}), ("t", {})]


def test_v3_keeps_the_models_call_id() -> None:
    out = parse_output(
        '[TOOL_CALLS][{"name": "f", "arguments": {}, "id": "a1B2c3D4e"}]', "m", format="mistral_v3"
    )
    assert out.tool_calls[0].id == "a1B2c3D4e"


def test_v11_parallel_calls_with_call_ids() -> None:
    text = (
        '[TOOL_CALLS]add[CALL_ID]000000001[ARGS]{"a": 3.5}[TOOL_CALLS]mul[CALL_ID]x2[ARGS]{"b": 6}'
    )
    out = parse_all_ways(text, "mistral_v11")
    assert calls(out) == [("add", {"a": 3.5}), ("mul", {"b": 6})]
    assert [c.id for c in out.tool_calls] == ["000000001", "x2"]
    assert out.content is None


def test_v11_without_call_id_gets_a_generated_id() -> None:
    out = parse_output("[TOOL_CALLS]get_time[ARGS]{}", "m", format="mistral_v11")
    assert calls(out) == [("get_time", {})]
    assert out.tool_calls[0].id.startswith("call_")


def test_think_reasoning_ignores_marker_text_inside_it() -> None:
    text = '[THINK]About [TOOL_CALLS]f[ARGS]{"a":1} and more[/THINK][TOOL_CALLS]f[ARGS]{"a": 2}'
    out = parse_all_ways(text, "mistral_v11")
    assert out.reasoning == 'About [TOOL_CALLS]f[ARGS]{"a":1} and more'
    assert calls(out) == [("f", {"a": 2})]


def test_plain_text_think_of_magistral_2506() -> None:
    out = parse_all_ways("<think>r</think>c", "mistral_v11")
    assert (out.reasoning, out.content) == ("r", "c")


def test_prompt_prefilled_with_think_starts_in_reasoning() -> None:
    out = parse_all_ways("plan[/THINK]answer", "mistral_v11", prompt_suffix="[/INST][THINK]")
    assert (out.reasoning, out.content) == ("plan", "answer")


def test_markers_and_braces_inside_arguments_are_data() -> None:
    text = '[TOOL_CALLS]w[ARGS]{"c": "x [TOOL_CALLS]n[ARGS]{\\"a\\": 1} [THINK]}{ ]["}'
    out = parse_all_ways(text, "mistral_v11")
    assert calls(out) == [("w", {"c": 'x [TOOL_CALLS]n[ARGS]{"a": 1} [THINK]}{ ]['})]
    assert out.content is None


def test_either_version_reads_the_other_shape() -> None:
    v3 = '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]'
    v11 = '[TOOL_CALLS]f[ARGS]{"a": 1}'
    assert calls(parse_all_ways(v3, "mistral_v11")) == [("f", {"a": 1})]
    assert calls(parse_all_ways(v11, "mistral_v3")) == [("f", {"a": 1})]


def test_content_between_and_after_calls_stays_in_order() -> None:
    out = parse_all_ways('A[TOOL_CALLS]f[ARGS]{} B [TOOL_CALLS]g[ARGS]{"x": null} C', "mistral_v11")
    assert out.content == "A B  C"
    assert calls(out) == [("f", {}), ("g", {"x": None})]


def test_call_is_emitted_only_when_its_json_closes() -> None:
    text = '[TOOL_CALLS]f[ARGS]{"a": {"b": "}"}}'
    parser = parser_for("m", format="mistral_v11")
    for i, ch in enumerate(text):
        events = parser.feed(ch)
        started = any(isinstance(e, ToolCallStart) for e in events)
        assert started == (i == len(text) - 1)


def test_text_that_is_not_a_call_comes_back_verbatim() -> None:
    out = parse_all_ways("[TOOL_CALLS] not json at all", "mistral_v3")
    assert (out.content, out.tool_calls) == ("[TOOL_CALLS] not json at all", [])
    out = parse_all_ways('[TOOL_CALLS]f[ARGS]["a"]', "mistral_v11")
    assert out.tool_calls == []


def test_truncated_inside_arguments_keeps_earlier_calls_only() -> None:
    text = '[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{"path": "/tmp/x", "content": "rm -rf /'
    out = parse_all_ways(text, "mistral_v11", truncated=True)
    assert calls(out) == [("f", {"a": 1})]
    assert out.content is None


def test_output_ending_right_after_the_marker_does_not_leak_it() -> None:
    out = parse_all_ways("[THINK]r[/THINK]Let me check.[TOOL_CALLS]", "mistral_v11", truncated=True)
    assert (out.reasoning, out.content, out.tool_calls) == ("r", "Let me check.", [])


def test_unclosed_think_is_reasoning() -> None:
    out = parse_all_ways("[THINK]The user wants", "mistral_v11", truncated=True)
    assert (out.reasoning, out.content) == ("The user wants", None)


def test_control_tokens_never_reach_content() -> None:
    out = parse_all_ways("Done.</s>[INST]", "mistral_v11")
    assert out.content == "Done."


def test_absurdly_deep_arguments_degrade_to_content() -> None:
    deep = '{"a":' * 50_000 + "1" + "}" * 50_000
    out = parse_output("[TOOL_CALLS]f[ARGS]" + deep, "m", format="mistral_v11")
    assert out.tool_calls == []
    assert out.content is not None


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   vLLM:      tests/tool_parsers/test_mistral_tool_parser.py (pre-v11 and v11 tokenizers;
#              no tools in the request)
#   SGLang:    test/registered/function_call/test_function_call_parser.py, TestMistralDetector
#              (make_next_step_decision(decision, content))
#   llama.cpp: the Mistral Nemo, Mistral Small 3.2, Devstral, Ministral-3 Reasoning and
#              Magistral blocks of tests/test-chat.cpp (special_function(arg1: integer),
#              special_function_with_opt(arg1, arg2))
# ---------------------------------------------------------------------------------------


def _tool(name: str, **props: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


SGLANG_TOOLS = [
    _tool("make_next_step_decision", decision={"type": "string"}, content={"type": "string"})
]
LLAMACPP_TOOLS = [
    _tool("special_function", arg1={"type": "integer"}),
    _tool("special_function_with_opt", arg1={"type": "integer"}, arg2={"type": "integer"}),
]
WEATHER_SF = {"city": "San Francisco", "state": "CA", "unit": "celsius"}


@pytest.mark.parametrize("fmt", ["mistral_v3", "mistral_v11"])
def test_engines_plain_text_is_content(fmt: str) -> None:
    out = parse_all_ways("This is a test", fmt)
    assert (out.content, out.reasoning, out.tool_calls, out.failures) == (
        "This is a test",
        None,
        [],
        [],
    )


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        (
            '[TOOL_CALLS][{"name": "add", "arguments":{"a": 3.5, "b": 4}}]',
            None,
            [("add", {"a": 3.5, "b": 4})],
        ),
        (
            '[TOOL_CALLS] [{"name": "get_current_weather", "arguments":{"city": "San Francisco", '
            '"state": "CA", "unit": "celsius"}}]',
            None,
            [("get_current_weather", WEATHER_SF)],
        ),
        (
            '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": '
            '"get_current_weather", "arguments":{"city": "San Francisco", "state": "CA", '
            '"unit": "celsius"}}]',
            None,
            [("add", {"a": 3.5, "b": 4}), ("get_current_weather", WEATHER_SF)],
        ),
        (
            'Hello[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1, "b": 2}}]',
            "Hello",
            [("add", {"a": 1, "b": 2})],
        ),
        (  # whitespace everywhere JSON allows it
            '[TOOL_CALLS]  [ {"name":"add" , "arguments" : {"a": 3, "b": 4} } ]',
            None,
            [("add", {"a": 3, "b": 4})],
        ),
        (  # strings stay strings
            '[TOOL_CALLS] [{"name": "add", "arguments":{"a": "3", "b": "4"}}]',
            None,
            [("add", {"a": "3", "b": "4"})],
        ),
        (
            # vLLM drops text after the array (non-streaming) or keeps "\nextra trailing
            # data" (streaming); toolwire keeps it, with the ends of content stripped.
            '[TOOL_CALLS] [{"name": "get_current_weather", "arguments":{"city": "Dallas", '
            '"state": "TX", "unit": "fahrenheit"}}]\nextra trailing data',
            "extra trailing data",
            [("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})],
        ),
        (
            # vLLM raises on a second [TOOL_CALLS] from a pre-v11 tokenizer; both are calls here.
            '[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1}}]'
            '[TOOL_CALLS] [{"name": "sub", "arguments":{"b": 2}}]',
            None,
            [("add", {"a": 1}), ("sub", {"b": 2})],
        ),
    ],
)
def test_vllm_pre_v11_json_array(text: str, content: str | None, expected: list[Any]) -> None:
    out = parse_all_ways(text, "mistral_v3")
    assert (out.content, calls(out), out.failures) == (content, expected, [])


def test_vllm_pre_v11_junk_before_the_array_is_not_a_call() -> None:
    # vLLM falls back to a regex that finds the array after the junk; toolwire returns an
    # invalid block as content, whole, with a failure (docs/parsing.md "Where engines disagree").
    text = '[TOOL_CALLS]  junk [{"name": "add", "arguments":{"a": 1, "b": 2}}] trail'
    out = parse_all_ways(text, "mistral_v3")
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["invalid"]


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        (
            '[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}',
            None,
            [("add_this_and_that", {"a": 3.5, "b": 4})],
        ),
        (
            '[TOOL_CALLS]get_current_weather{"city": "San Francisco", "state": "CA", '
            '"unit": "celsius"}',
            None,
            [("get_current_weather", WEATHER_SF)],
        ),
        (
            '[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]multiply{"a": 3, "b": 6}',
            None,
            [("add", {"a": 3.5, "b": 4}), ("multiply", {"a": 3, "b": 6})],
        ),
        (
            'bla[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}',
            "bla",
            [("add_this_and_that", {"a": 3.5, "b": 4})],
        ),
        (  # a brace in the content before, escapes and braces inside the argument
            'hi{hi[TOOL_CALLS]bash{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')"}',
            "hi{hi",
            [("bash", {"command": "print(\"hello world!\")\nre.compile(r'{}')"})],
        ),
    ],
)
def test_vllm_v11_name_then_json_without_args_marker(
    text: str, content: str | None, expected: list[Any]
) -> None:
    out = parse_all_ways(text, "mistral_v11")
    assert (out.content, calls(out), out.failures) == (content, expected, [])


@pytest.mark.parametrize(
    "text",
    [
        # vLLM returns this call with its arguments cut short; the JSON never closes, so
        # toolwire returns the text with an `unfinished` failure and no call (docs:
        # "Calls are emitted when complete").
        'hi{hi[TOOL_CALLS]bash{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')"',
        # vLLM reports tools_called with no call and no content; toolwire keeps the text.
        "[TOOL_CALLS]toolname_no_args",
    ],
)
def test_vllm_v11_call_never_finished_is_content(text: str) -> None:
    out = parse_all_ways(text, "mistral_v11")
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["unfinished"]


def test_sglang_brackets_inside_a_json_string_do_not_end_the_array() -> None:
    content = (
        "```\nTOOL: Access a weather API or service\nOBSERVATION: Retrieve the current weather "
        "data for the top 5 populated cities in the US\nANSWER: The weather in the top 5 "
        "populated cities in the US is as follows: [City Name] - [Weather Conditions] - "
        "[Temperature]\n```"
    )
    escaped = content.replace("\n", "\\n")
    text = (
        '[TOOL_CALLS] [{"name":"make_next_step_decision", "arguments":{"decision":"",'
        f'"content":"{escaped}"}}}}]'
    )
    out = parse_all_ways(text, "mistral_v3", tools=SGLANG_TOOLS)
    assert (out.content, calls(out)) == (
        None,
        [("make_next_step_decision", {"decision": "", "content": content})],
    )


@pytest.mark.parametrize("fmt", ["mistral_v3", "mistral_v11"])
def test_sglang_text_before_and_compact_args_form(fmt: str) -> None:
    text = (
        'Here is some text before the tool call: [TOOL_CALLS] [{"name":"make_next_step_decision"'
        ', "arguments":{"decision":"ANSWER", "content":"The answer is 42"}}]'
    )
    out = parse_all_ways(text, fmt, tools=SGLANG_TOOLS)
    assert out.content == "Here is some text before the tool call:"
    assert calls(out) == [
        ("make_next_step_decision", {"decision": "ANSWER", "content": "The answer is 42"})
    ]
    text = (
        '[TOOL_CALLS]make_next_step_decision[ARGS]{"decision":"TOOL", "content":"Use weather API"}'
    )
    out = parse_all_ways(text, fmt, tools=SGLANG_TOOLS)
    assert (out.content, calls(out)) == (
        None,
        [("make_next_step_decision", {"decision": "TOOL", "content": "Use weather API"})],
    )
    assert [c.offered for c in out.tool_calls] == [True]


def test_llamacpp_mistral_nemo_array_with_call_id() -> None:
    text = '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]'
    out = parse_all_ways(text, "mistral_v3", tools=LLAMACPP_TOOLS)
    assert (out.content, calls(out)) == (None, [("special_function", {"arg1": 1})])
    assert [c.id for c in out.tool_calls] == ["123456789"]


@pytest.mark.parametrize(
    ("text", "call_id"),
    [
        (
            '[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]{"arg1": 1}',
            "123456789",
        ),  # Small 3.2
        ('[TOOL_CALLS]special_function[ARGS]{"arg1": 1}', None),  # Devstral 2507
    ],
)
def test_llamacpp_v11_call_with_and_without_call_id(text: str, call_id: str | None) -> None:
    out = parse_all_ways(text, "mistral_v11", tools=LLAMACPP_TOOLS)
    assert (out.content, calls(out)) == (None, [("special_function", {"arg1": 1})])
    got = out.tool_calls[0].id
    assert got == call_id if call_id else got.startswith("call_")


@pytest.mark.parametrize(
    ("text", "reasoning", "content", "expected"),
    [
        (  # Ministral-3 Reasoning
            "[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?",
            "I'm\nthinking",
            "Hello, world!\nWhat's up?",
            [],
        ),
        (
            '[THINK]I\'m\nthinking[/THINK][TOOL_CALLS]special_function[ARGS]{"arg1":1}',
            "I'm\nthinking",
            None,
            [("special_function", {"arg1": 1})],
        ),
        (
            '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}'
            '[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2}',
            None,
            None,
            [
                ("special_function", {"arg1": 1}),
                ("special_function_with_opt", {"arg1": 1, "arg2": 2}),
            ],
        ),
        ("[THINK]raisonnement[/THINK]Réponse", "raisonnement", "Réponse", []),  # Magistral
    ],
)
def test_llamacpp_v11_reasoning_and_calls(
    text: str, reasoning: str | None, content: str | None, expected: list[Any]
) -> None:
    out = parse_all_ways(text, "mistral_v11", tools=LLAMACPP_TOOLS)
    assert (out.reasoning, out.content, calls(out), out.failures) == (
        reasoning,
        content,
        expected,
        [],
    )
