"""DeepSeek V3/R1, V3.1 and the DSML formats of V3.2, V4 and V4.1."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streaming import calls, parse_all_ways, summary

from toolwire.parsing import (
    ContentDelta,
    ParsedOutput,
    ToolCallStart,
    assemble,
    format_for,
    parse_output,
    parser_for,
)

B, E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CB, CE, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
THINKING, NOT_THINKING = "<｜Assistant｜><think>", "<｜Assistant｜></think>"


def v3_call(name: str, args: str) -> str:
    return f"{CB}function{SEP}{name}\n```json\n{args}\n```{CE}"


def v31_call(name: str, args: str) -> str:
    return f"{CB}{name}{SEP}{args}{CE}"


def dsml(invokes: str, *, section: str = "tool_calls", space: str = "") -> str:
    """A DSML section; V4.1 writes every tag with a space after `｜DSML｜`."""
    text = f"<｜DSML｜{section}>\n{invokes}</｜DSML｜{section}>"
    return text.replace("｜DSML｜", "｜DSML｜" + space)


def invoke(name: str, *params: tuple[str, str, str]) -> str:
    lines = "".join(
        f'<｜DSML｜parameter name="{p}" string="{s}">{v}</｜DSML｜parameter>\n'
        for p, s, v in params
    )
    return f'<｜DSML｜invoke name="{name}">\n{lines}</｜DSML｜invoke>\n'


def ds(text: str, fmt: str, **kw: Any) -> ParsedOutput:
    return parse_all_ways(text, fmt, **kw)


@pytest.mark.parametrize(
    ("model", "fmt"),
    [
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V3.2", "deepseek_v32"),
        ("deepseek-ai/DeepSeek-V4-Flash", "deepseek_v4"),
        ("deepseek-ai/DeepSeek-V4-Pro", "deepseek_v4"),
        ("deepseek-ai/DeepSeek-V4.1-Flash", "deepseek_v41"),
    ],
)
def test_model_ids_select_the_sub_format(model: str, fmt: str) -> None:
    assert format_for(model) == fmt


# ----------------------------------------------------------------------------- V3, V3.1


@pytest.mark.parametrize("fmt", ["deepseek_v3", "deepseek_v31"])
def test_v3_fenced_and_v31_plain_calls_parse_under_both_names(fmt: str) -> None:
    text = "Checking.\n" + B + v3_call("a", '{"x": 1}') + "\n" + v31_call("b", "{}") + E
    out = ds(text, fmt)
    assert (out.content, calls(out)) == ("Checking.", [("a", {"x": 1}), ("b", {})])


def test_each_call_is_emitted_when_its_own_end_arrives() -> None:
    parser = parser_for("deepseek-ai/DeepSeek-V3.1")
    events = parser.feed(B + v31_call("a", '{"x": 1}'))
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["a"]
    events = parser.feed(CB + "b" + SEP + '{"y": ')
    assert not any(isinstance(e, ToolCallStart) for e in events)


def test_truncated_second_call_keeps_the_first() -> None:
    text = B + v31_call("a", '{"x": 1}') + CB + "b" + SEP + '{"y": "Zür'
    out = ds(text, "deepseek_v31", truncated=True)
    assert (out.content, calls(out)) == (None, [("a", {"x": 1})])


def test_unclosed_but_finished_call_counts_when_not_truncated() -> None:
    out = ds(B + CB + "a" + SEP + '{"x": 1}', "deepseek_v31")
    assert calls(out) == [("a", {"x": 1})]


def test_markers_inside_json_strings_are_data() -> None:
    value = f"Use {CB}f{SEP}{{}} then {CE}{E} and ```json fences```"
    args = '{"t": "Use ' + CB + "f" + SEP + "{} then " + CE + E + ' and ```json fences```"}'
    for fmt, call in (("deepseek_v3", v3_call), ("deepseek_v31", v31_call)):
        out = ds(B + call("echo", args) + E, fmt)
        assert (out.content, calls(out)) == (None, [("echo", {"t": value})])


def test_malformed_call_comes_back_as_content_and_parsing_goes_on() -> None:
    bad = v3_call("w", '{"city": "Tokyo"')
    out = ds(B + bad + v3_call("ok", "{}") + E + " after", "deepseek_v3")
    assert calls(out) == [("ok", {})]
    # The section's markers come back with the failed call, as a pair: never half.
    assert out.content == B + bad + E + " after"
    [failure] = out.failures
    assert failure.text == B + bad


def test_a_failed_call_after_a_good_one_comes_back_without_section_markers() -> None:
    bad = v3_call("w", '{"city": "Tokyo"')
    out = ds(B + v3_call("ok", "{}") + bad + E, "deepseek_v3")
    assert calls(out) == [("ok", {})]
    assert out.content == bad


def test_text_between_calls_is_content_but_whitespace_is_not() -> None:
    out = ds(
        "A" + B + "\n" + v31_call("a", "{}") + "\n\n" + v31_call("b", "{}") + E, "deepseek_v31"
    )
    assert out.content == "A"
    out = ds(B + "stray" + v31_call("a", "{}") + E, "deepseek_v31")
    assert (out.content, calls(out)) == ("stray", [("a", {})])


def test_unbalanced_quote_cannot_hide_the_rest_of_the_output() -> None:
    bad = CB + "a" + SEP + '{"x": "oops}' + CE
    out = ds(B + bad + v31_call("b", "{}") + E + "Sorry.", "deepseek_v31")
    assert (out.content, calls(out)) == (B + bad + E + "Sorry.", [("b", {})])


# ----------------------------------------------------------------------------- reasoning


def test_prefilled_think_starts_in_reasoning() -> None:
    text = "Plan it.</think>Checking." + B + v31_call("a", "{}") + E
    out = ds(text, "deepseek_v31", prompt_suffix=THINKING)
    assert (out.reasoning, out.content, calls(out)) == ("Plan it.", "Checking.", [("a", {})])


def test_not_thinking_prompt_and_think_tags_in_output() -> None:
    assert ds("Hi.", "deepseek_v32", prompt_suffix=NOT_THINKING).reasoning is None
    out = ds("<think>\nHm.\n</think>\n\nHi.<｜end▁of▁sentence｜>", "deepseek_v3")
    assert (out.reasoning, out.content) == ("Hm.", "Hi.")


def test_truncated_in_reasoning_keeps_it() -> None:
    out = ds("The user wants", "deepseek_v4", prompt_suffix=THINKING, truncated=True)
    assert (out.reasoning, out.content) == ("The user wants", None)


# ----------------------------------------------------------------------------- DSML


@pytest.mark.parametrize(
    ("fmt", "section", "space"),
    [
        ("deepseek_v32", "function_calls", ""),
        ("deepseek_v4", "tool_calls", ""),
        ("deepseek_v41", "calls", " "),
    ],
)
def test_dsml_spellings_of_each_version(fmt: str, section: str, space: str) -> None:
    body = invoke("get_weather", ("city", "true", "Zürich"), ("days", "false", "3"))
    text = "Let me look.\n\n" + dsml(body, space=space, section=section)
    out = ds(text, fmt)
    assert (out.content, calls(out)) == (
        "Let me look.",
        [("get_weather", {"city": "Zürich", "days": 3})],
    )


def test_dsml_string_values_are_raw_text_and_others_are_json() -> None:
    body = invoke(
        "f",
        ("code", "true", "007"),
        ("src", "true", '  if a < b:\n    print("x=\\"1\\"")\n'),
        ("n", "false", "1e-05"),
        ("obj", "false", '{"tags": ["a"], "ok": true, "none": null}'),
        ("bad", "false", "not json"),
    )
    out = ds(dsml(body), "deepseek_v4")
    assert calls(out) == [
        (
            "f",
            {
                "code": "007",
                "src": '  if a < b:\n    print("x=\\"1\\"")\n',
                "n": 1e-05,
                "obj": {"tags": ["a"], "ok": True, "none": None},
                "bad": "not json",
            },
        )
    ]


def test_dsml_markers_inside_a_value_are_data() -> None:
    value = 'Write <｜DSML｜invoke name="x"> inside <｜DSML｜tool_calls> or </｜DSML｜invoke>'
    out = ds(dsml(invoke("echo", ("t", "true", value))), "deepseek_v4")
    assert calls(out) == [("echo", {"t": value})]


def test_dsml_empty_and_self_closing_invokes_have_no_arguments() -> None:
    text = dsml('<｜DSML｜invoke name="a">\n\n</｜DSML｜invoke>\n<｜DSML｜invoke name="b"/>\n')
    assert calls(ds(text, "deepseek_v4")) == [("a", {}), ("b", {})]


def test_dsml_each_invoke_is_emitted_when_it_closes_and_truncation_keeps_it() -> None:
    first = invoke("a", ("x", "false", "1"))
    parser = parser_for("deepseek-ai/DeepSeek-V3.2")
    events = parser.feed("<｜DSML｜function_calls>\n" + first)
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["a"]
    cut = (
        "<｜DSML｜tool_calls>\n" + first + '<｜DSML｜invoke name="b">\n<｜DSML｜parameter name="q"'
    )
    assert calls(ds(cut, "deepseek_v4", truncated=True)) == [("a", {"x": 1})]


def test_dsml_unmarked_values_follow_the_tool_schema() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"s": {"type": "string"}, "n": {"type": "integer"}},
                },
            },
        }
    ]
    text = dsml(
        '<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="s">42</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="n">42</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
    )
    out = parse_output(text, "deepseek-ai/DeepSeek-V4-Flash", tools)
    assert calls(out) == [("f", {"s": "42", "n": 42})]


def test_dsml_invoke_holding_one_json_object() -> None:
    text = dsml('<｜DSML｜invoke name="f">\n{"a": [1, 2]}\n</｜DSML｜invoke>\n')
    assert calls(ds(text, "deepseek_v32")) == [("f", {"a": [1, 2]})]


def test_dsml_invoke_without_name_is_content() -> None:
    text = dsml("<｜DSML｜invoke>\n</｜DSML｜invoke>\n")
    parser = parser_for("deepseek-ai/DeepSeek-V4-Flash")
    events = parser.feed(text) + parser.finish()
    assert not any(isinstance(e, ToolCallStart) for e in events)
    # The section's markers come back with it: never half the markup.
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == (
        "<｜DSML｜tool_calls><｜DSML｜invoke>\n</｜DSML｜invoke></｜DSML｜tool_calls>"
    )


_DSML_BITS = [
    "<｜DSML｜tool_calls>",
    "</｜DSML｜tool_calls>",
    '<｜DSML｜invoke name="f">',
    "</｜DSML｜invoke>",
    '<｜DSML｜parameter name="p" string="false">',
    "</｜DSML｜parameter>",
    "/>",
    ">",
]
_TEXT_BITS = ["function", "\n```json\n", '{"a": 1}', '"', "\\", "x y"]
_PIECES = st.sampled_from(
    [B, E, CB, CE, SEP, "<think>", "</think>", "<｜end▁of▁sentence｜>", *_DSML_BITS, *_TEXT_BITS]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_PIECES, max_size=14),
    st.sampled_from(["deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V4-Flash"]),
    st.sampled_from(["", THINKING]),
    st.booleans(),
    st.integers(1, 6),
)
def test_any_text_never_raises_and_any_split_agrees(
    parts: list[str], model: str, suffix: str, truncated: bool, size: int
) -> None:
    text = "".join(parts)
    whole = parse_output(text, model, prompt_suffix=suffix, truncated=truncated)
    for step in (1, size):
        parser = parser_for(model, prompt_suffix=suffix)
        events = [e for i in range(0, len(text), step) for e in parser.feed(text[i : i + step])]
        events += parser.finish(truncated=truncated)
        assert summary(assemble(events)) == summary(whole)


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   vLLM:      tests/tool_parsers/test_deepseekv3_tool_parser.py, test_deepseekv31_tool_parser.py,
#              test_deepseekv32_tool_parser.py, test_deepseekv4_tool_parser.py
#   SGLang:    test/registered/function_call/test_function_call_parser.py (DeepSeekV3,
#              DeepSeekV32), test_deepseekv31_detector.py, test_deepseekv32_detector.py
#   llama.cpp: the DeepSeek R1 and DeepSeek V3.1 blocks of tests/test-chat.cpp
# ---------------------------------------------------------------------------------------


def _fn(name: str, **props: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


def _engine(text: str, fmt: str, **kw: Any) -> tuple[str | None, str | None, list[Any]]:
    out = ds(text, fmt, **kw)
    return out.content, out.reasoning, calls(out)


# --- V3 / R1 (vLLM, SGLang, llama.cpp) ---


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        ("How can I help you today?", "How can I help you today?", []),
        (
            B + v3_call("get_weather", '{"city": "Tokyo", "unit": "celsius"}') + E,
            None,
            [("get_weather", {"city": "Tokyo", "unit": "celsius"})],
        ),
        (
            "Let me check the weather for you."
            + B
            + v3_call("get_weather", '{"city": "Paris"}')
            + E,
            "Let me check the weather for you.",
            [("get_weather", {"city": "Paris"})],
        ),
        (
            # SGLang's MTP case: a newline between the calls of a section.
            B
            + v3_call("get_weather", '{"city":"Shanghai"}')
            + "\n"
            + v3_call("search_hotels", '{"location": "Tokyo", "check_in": "2025-01-15"}')
            + E,
            None,
            [
                ("get_weather", {"city": "Shanghai"}),
                ("search_hotels", {"location": "Tokyo", "check_in": "2025-01-15"}),
            ],
        ),
        (
            B
            + v3_call(
                "test_function",
                '{"s": "hello", "i": 42, "f": 3.14, "b": true, "n": null, "a": ["a", "b"], '
                '"o": {"nested": "value"}, "ea": [], "eo": {}}',
            )
            + E,
            None,
            [
                (
                    "test_function",
                    {
                        "s": "hello",
                        "i": 42,
                        "f": 3.14,
                        "b": True,
                        "n": None,
                        "a": ["a", "b"],
                        "o": {"nested": "value"},
                        "ea": [],
                        "eo": {},
                    },
                )
            ],
        ),
        (B + v3_call("get_current_time", "{}") + E, None, [("get_current_time", {})]),
        (
            B
            + v3_call(
                "send_message",
                r'{"text": "He said \"hello\"", "path": "C:\\Users\\file", "nl": "line1\nline2"}',
            )
            + E,
            None,
            [
                (
                    "send_message",
                    {"text": 'He said "hello"', "path": "C:\\Users\\file", "nl": "line1\nline2"},
                )
            ],
        ),
    ],
    ids=["no-call", "single", "content-before", "parallel", "types", "empty-args", "escapes"],
)
def test_vllm_v3(text: str, content: str | None, expected: list[Any]) -> None:
    assert _engine(text, "deepseek_v3") == (content, None, expected)


def test_vllm_v3_unclosed_json_is_content_with_the_sections_markers() -> None:
    text = B + v3_call("get_weather", '{"city": "Tokyo"') + E
    out = ds(text, "deepseek_v3")
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["invalid"]


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        (
            B + 'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Tokyo"}\n```' + E,
            "deepseek_v3",
        ),
        (B + 'foo<｜tool▁sep｜>{"x":1}' + E, "deepseek_v31"),
        ("Let me look that up." + B + "get_weather", "deepseek_v31"),
    ],
    ids=["v3-no-call-begin", "v31-no-call-markers", "v31-ends-after-the-opener"],
)
def test_vllm_section_without_a_call_comes_back_whole(text: str, fmt: str) -> None:
    out = ds(text, fmt)
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["invalid"]


def test_llamacpp_r1_reasoning_then_call_and_forced_open_reasoning() -> None:
    text = "<think>I'm\nthinking</think>\n\n" + B + v3_call("special_function", '{"arg1": 1}') + E
    assert _engine(text, "deepseek_v3") == (
        None,
        "I'm\nthinking",
        [("special_function", {"arg1": 1})],
    )
    # The R1 template pre-fills `<think>\n`: the output starts inside reasoning.
    text = "I'm\nthinking</think>Hello, world!\nWhat's up?"
    assert _engine(text, "deepseek_v3", prompt_suffix="<｜Assistant｜><think>\n") == (
        "Hello, world!\nWhat's up?",
        "I'm\nthinking",
        [],
    )


def test_llamacpp_r1_short_section_opener() -> None:
    text = (
        '<｜tool▁calls｜>function<｜tool▁sep｜>special_function\n```json\n{"arg1": 1}\n```' + CE + E
    )
    assert _engine(text, "deepseek_v3") == (None, None, [("special_function", {"arg1": 1})])
    # Broken, it comes back whole: the short opener with its closer.
    broken = "<｜tool▁calls｜>function<｜tool▁sep｜>f\n```json\n{oops\n```" + CE + E
    out = ds(broken, "deepseek_v3")
    assert (out.content, out.tool_calls) == (broken, [])
    assert [f.reason for f in out.failures] == ["invalid"]


# --- V3.1 (vLLM, SGLang, llama.cpp) ---


def test_vllm_v31_content_around_the_section() -> None:
    text = (
        "some prefix text"
        + B
        + v31_call("foo", '{"x":1}')
        + v31_call("bar", '{"y":2}')
        + E
        + " some suffix text"
    )
    # vLLM keeps only the text before the section; toolwire never loses text.
    assert _engine(text, "deepseek_v31") == (
        "some prefix text some suffix text",
        None,
        [("foo", {"x": 1}), ("bar", {"y": 2})],
    )


def test_sglang_v31_two_calls_of_one_tool() -> None:
    text = (
        B
        + v31_call("get_weather", '{"city": "Tokyo"}')
        + v31_call("get_weather", '{"city": "Paris"}')
        + E
    )
    assert _engine(text, "deepseek_v31") == (
        None,
        None,
        [("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Paris"})],
    )


def test_llamacpp_v31_reasoning_content_and_calls() -> None:
    both = (
        B
        + v31_call("get_time", '{"city": "Paris"}')
        + v31_call("get_weather", '{"city": "Paris"}')
        + E
    )
    paris = [("get_time", {"city": "Paris"}), ("get_weather", {"city": "Paris"})]
    assert _engine("REASONING</think>CONTENT" + both, "deepseek_v31", prompt_suffix=THINKING) == (
        "CONTENT",
        "REASONING",
        paris,
    )
    text = "REASONING</think>" + B + v31_call("get_time", '{"city": "Tokyo"}') + E
    assert _engine(text, "deepseek_v31", prompt_suffix=THINKING) == (
        None,
        "REASONING",
        [("get_time", {"city": "Tokyo"})],
    )
    # llama.cpp keeps the newline after the reasoning ("REASONING\n"); toolwire strips the
    # ends of reasoning and content by policy (docs/parsing.md, "Guarantees").
    assert _engine("REASONING</think>\nCONTENT", "deepseek_v31", prompt_suffix=THINKING) == (
        "CONTENT",
        "REASONING",
        [],
    )
    assert _engine("CONTENT", "deepseek_v31", prompt_suffix=NOT_THINKING) == ("CONTENT", None, [])


# --- DSML: V3.2, V4 (vLLM, SGLang) ---

DSML_TOOLS = [
    _fn("get_weather", location={"type": "string"}, date={"type": "string"}),
    _fn("toggle", enabled={"type": "boolean"}, count={"type": "integer"}),
    _fn("score", value={"type": "integer"}),
    _fn("echo", text={"type": "string"}),
    _fn(
        "set_timer",
        wait={
            "anyOf": [
                {"type": "object", "properties": {"type": {"const": "for"}}},
                {"type": "object", "properties": {"type": {"const": "until"}}},
            ]
        },
        patches={"oneOf": [{"type": "array", "items": {"type": "object"}}, {"type": "null"}]},
    ),
    _fn("measure", ratio={"type": "number"}),
    _fn(
        "coerce",
        union_value={"type": ["null", "string"]},
        bad_int={"type": "integer"},
        nullable={"type": ["integer", "null"]},
    ),
    _fn("write_note", payload={"type": "object"}),
    _fn("search", query={"type": "string"}, topn={"type": "integer"}, source={"type": "string"}),
    _fn("get_favorite_tourist_spot", city={"type": "string"}),
    _fn("get_date"),
]


def _dsml_engine(text: str, fmt: str = "deepseek_v32") -> tuple[str | None, list[Any]]:
    out = ds(text, fmt, tools=DSML_TOOLS)
    return out.content, calls(out)


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        ("just some text", "just some text", []),
        # A prefix of the section marker that turns out to be text stays content.
        ("<｜DSM some regular text", "<｜DSM some regular text", []),
        (dsml(invoke("get_date")), None, [("get_date", {})]),
        (
            "Sure, let me check! "
            + dsml(invoke("get_weather", ("location", "true", "NYC")), section="function_calls"),
            "Sure, let me check!",
            [("get_weather", {"location": "NYC"})],
        ),
        (
            dsml(
                invoke("get_weather", ("location", "true", "SF"))
                + invoke("get_weather", ("location", "true", "NYC")),
                section="function_calls",
            ),
            None,
            [("get_weather", {"location": "SF"}), ("get_weather", {"location": "NYC"})],
        ),
        (
            dsml(invoke("toggle", ("enabled", "false", "true"), ("count", "false", "42"))),
            None,
            [("toggle", {"enabled": True, "count": 42})],
        ),
        (
            dsml(
                invoke(
                    "set_timer",
                    ("wait", "false", '{"type":"for","minutes":2880}'),
                    ("patches", "false", '[{"op":"replace","path":"/schedule"}]'),
                )
            ),
            None,
            [
                (
                    "set_timer",
                    {
                        "wait": {"type": "for", "minutes": 2880},
                        "patches": [{"op": "replace", "path": "/schedule"}],
                    },
                )
            ],
        ),
        (
            dsml(
                invoke(
                    "coerce",
                    ("union_value", "false", "hello"),
                    ("bad_int", "false", "abc"),
                    ("nullable", "false", "null"),
                )
            ),
            None,
            [("coerce", {"union_value": "hello", "bad_int": "abc", "nullable": None})],
        ),
        (
            dsml(invoke("measure", ("ratio", "false", "3.14"))),
            None,
            [("measure", {"ratio": 3.14})],
        ),
        (
            dsml(invoke("unknown_fn", ("count", "false", "42"), ("flag", "false", "true"))),
            None,
            [("unknown_fn", {"count": 42, "flag": True})],
        ),
    ],
    ids=[
        "no-call",
        "marker-prefix-is-text",
        "no-params",
        "content-before",
        "two-invokes",
        "typed",
        "composed-schemas",
        "fallbacks",
        "number",
        "no-schema",
    ],
)
def test_vllm_dsml(text: str, content: str | None, expected: list[Any]) -> None:
    assert _dsml_engine(text) == (content, expected)


def test_vllm_dsml_the_string_attribute_decides_over_the_schema() -> None:
    # vLLM lets the tool's schema override the model's `string` attribute (`42` marked as a
    # string becomes 42 for an integer parameter, `null` marked as JSON becomes "null" for a
    # string one). toolwire follows the attribute, as it does Kimi K3's `type` attribute
    # (deepseek.py, kimi.py): the model said what it wrote; validation reports a mismatch.
    text = dsml(
        invoke("score", ("value", "true", "42")) + invoke("echo", ("text", "false", "null"))
    )
    assert _dsml_engine(text) == (None, [("score", {"value": "42"}), ("echo", {"text": None})])


def test_vllm_v4_reads_every_dsml_spelling() -> None:
    body = invoke("get_weather", ("location", "true", "Beijing"), ("date", "true", "today"))
    expected = [("get_weather", {"location": "Beijing", "date": "today"})]
    assert _dsml_engine("Let me check. " + dsml(body), "deepseek_v4") == ("Let me check.", expected)
    # vLLM's V4 parser leaves a V3.2 `function_calls` section as content; toolwire reads
    # all three spellings under every DSML name (deepseek.py).
    text = dsml(body, section="function_calls")
    assert _dsml_engine(text, "deepseek_v4") == (None, expected)


def test_sglang_dsml_indented_layout_and_json_bodies() -> None:
    tourist = '<｜DSML｜invoke name="get_favorite_tourist_spot">'
    xml = (
        "I'll help you with information about San Francisco.\n\n\n"
        "        <｜DSML｜function_calls>\n\n"
        f"            {tourist}\n\n"
        '                <｜DSML｜parameter name="city" string="true">San Francisco'
        "</｜DSML｜parameter>\n\n"
        "            </｜DSML｜invoke>\n\n"
        '            <｜DSML｜invoke name="search">\n'
        '                <｜DSML｜parameter name="query" string="true">WebNav benchmark'
        "</｜DSML｜parameter>\n"
        '                <｜DSML｜parameter name="topn" string="false">10</｜DSML｜parameter>\n'
        '                <｜DSML｜parameter name="source" string="true">web</｜DSML｜parameter>\n'
        "            </｜DSML｜invoke>\n"
        "        </｜DSML｜function_calls>\n        "
    )
    expected = [
        ("get_favorite_tourist_spot", {"city": "San Francisco"}),
        ("search", {"query": "WebNav benchmark", "topn": 10, "source": "web"}),
    ]
    content = "I'll help you with information about San Francisco."
    assert _dsml_engine(xml) == (content, expected)
    json_bodies = (
        content + "\n\n        <｜DSML｜function_calls>\n"
        f"            {tourist}\n"
        '            {\n                "city": "San Francisco"\n            }\n'
        "        </｜DSML｜invoke>\n"
        '            <｜DSML｜invoke name="search">\n'
        '            {\n                "query": "WebNav benchmark",\n'
        '                "topn": 10,\n                "source": "web"\n            }\n'
        "        </｜DSML｜invoke>\n"
        "        </｜DSML｜function_calls>\n        "
    )
    assert _dsml_engine(json_bodies) == (content, expected)


@pytest.mark.parametrize("fmt", ["deepseek_v32", "deepseek_v4"])
def test_sglang_dsml_prose_marked_as_json_stays_text(fmt: str) -> None:
    prose = "Здравствуйте, мир! Это тест"
    out = ds(dsml(invoke("write_note", ("payload", "false", prose))), fmt, tools=DSML_TOOLS)
    assert (out.content, calls(out), out.failures) == (
        None,
        [("write_note", {"payload": prose})],
        [],
    )
    obj = '{"city": "San Francisco"}'
    assert _dsml_engine(dsml(invoke("write_note", ("payload", "false", obj))), fmt) == (
        None,
        [("write_note", {"payload": {"city": "San Francisco"}})],
    )
