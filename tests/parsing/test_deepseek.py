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
