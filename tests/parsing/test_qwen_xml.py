"""Qwen3-Coder / Qwen3.5+ XML tool calls (`qwen3_xml`)."""

from __future__ import annotations

from typing import Any

from streaming import calls, parse_all_ways

from toolwire.parsing import ToolCallStart, format_for, parser_for

FMT = "qwen3_xml"
PREFILLED = "<|im_start|>assistant\n<think>\n"
NO_THINK = "<|im_start|>assistant\n<think>\n\n</think>\n\n"


def _tool(name: str, **props: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


TOOLS = [
    _tool(
        "set",
        hour={"type": "integer"},
        volume={"type": "number"},
        on={"type": "boolean"},
        label={"type": ["string", "null"]},
        tags={"anyOf": [{"type": "array"}, {"type": "null"}]},
        opts={"type": "object"},
    ),
    _tool("lookup", zip={"type": "string"}, flag={"type": "string"}, raw={"type": "string"}),
    _tool("write", path={"type": "string"}, content={"type": "string"}),
]


def _call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_model_ids_select_the_xml_format() -> None:
    for model in ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3.5-9B", "Qwen/Qwen3.6-35B-A3B"):
        assert format_for(model) == FMT
    assert format_for("Qwen/Qwen3-8B") == "hermes"


def test_values_are_typed_by_the_schema() -> None:
    text = _call(
        "set", hour="7", volume="0.75", on="true", label="null", tags='["a"]', opts='{"x": 1}'
    )
    out = parse_all_ways(text, FMT, tools=TOOLS)
    assert calls(out) == [
        (
            "set",
            {"hour": 7, "volume": 0.75, "on": True, "label": None, "tags": ["a"], "opts": {"x": 1}},
        )
    ]


def test_string_parameters_stay_strings_whatever_they_look_like() -> None:
    out = parse_all_ways(
        _call("lookup", zip="02139", flag="true", raw='{"a": 1}'), FMT, tools=TOOLS
    )
    assert calls(out) == [("lookup", {"zip": "02139", "flag": "true", "raw": '{"a": 1}'})]


def test_python_literals_for_booleans() -> None:
    # The Qwen3-Coder-30B and Qwen3.5 templates write Python's True/False.
    out = parse_all_ways(_call("set", on="False"), FMT, tools=TOOLS)
    assert calls(out) == [("set", {"on": False})]


def test_without_a_schema_json_values_are_json_and_the_rest_text() -> None:
    out = parse_all_ways(_call("other", n="3", flags="[1, 2]", s="hello world"), FMT)
    assert calls(out) == [("other", {"n": 3, "flags": [1, 2], "s": "hello world"})]


def test_exactly_one_newline_each_side_is_markup() -> None:
    out = parse_all_ways(_call("write", content="    indented\n"), FMT, tools=TOOLS)
    assert calls(out) == [("write", {"content": "    indented\n"})]


def test_compact_form_without_newlines() -> None:
    text = (
        "before<tool_call><function=write><parameter=path>a.txt</parameter></function>"
        "</tool_call>after"
    )
    out = parse_all_ways(text, FMT, tools=TOOLS)
    assert (out.content, calls(out)) == ("beforeafter", [("write", {"path": "a.txt"})])


def test_closers_inside_a_value_are_data() -> None:
    value = "Close with </parameter> and </function> then </tool_call>; open <parameter=x> inline."
    out = parse_all_ways(_call("write", content=value), FMT, tools=TOOLS)
    assert calls(out) == [("write", {"content": value})]


def test_missing_close_parameter_ended_by_the_next_parameter() -> None:
    text = (
        "<tool_call>\n<function=write>\n<parameter=path>\na.txt\n"
        "<parameter=content>\nhi\n</parameter>\n</function>\n</tool_call>"
    )
    out = parse_all_ways(text, FMT, tools=TOOLS)
    assert calls(out) == [("write", {"path": "a.txt", "content": "hi"})]


def test_missing_close_parameter_ended_by_close_function() -> None:
    text = '<tool_call>\n<function=set>\n<parameter=opts>\n{"x": 1}\n</function>\n</tool_call>'
    out = parse_all_ways(text, FMT, tools=TOOLS)
    assert calls(out) == [("set", {"opts": {"x": 1}})]


def test_missing_tool_call_opener() -> None:
    text = (
        "Listing.\n\n<function=write>\n<parameter=path>\n*.md\n</parameter>\n</function>\n"
        "</tool_call>"
    )
    out = parse_all_ways(text, FMT, tools=TOOLS)
    assert (out.content, calls(out)) == ("Listing.", [("write", {"path": "*.md"})])


def test_call_inside_unclosed_prefilled_reasoning_ends_it() -> None:
    text = "Need the file.\n" + _call("write", path="a")
    out = parse_all_ways(text, FMT, tools=TOOLS, prompt_suffix=PREFILLED)
    assert (out.reasoning, out.content, calls(out)) == (
        "Need the file.",
        None,
        [("write", {"path": "a"})],
    )


def test_thinking_disabled_prompt_starts_in_content() -> None:
    out = parse_all_ways("Paris.", FMT, prompt_suffix=NO_THINK)
    assert (out.reasoning, out.content) == (None, "Paris.")


def test_truncated_inside_a_value_keeps_only_complete_calls() -> None:
    text = (
        _call("write", path="a")
        + "\n"
        + "<tool_call>\n<function=write>\n<parameter=content>\nrm -rf /"
    )
    out = parse_all_ways(text, FMT, tools=TOOLS, truncated=True)
    assert (out.content, calls(out)) == (None, [("write", {"path": "a"})])


def test_truncated_at_the_opener_leaks_nothing() -> None:
    out = parse_all_ways(
        "Done.\n</think>\n\n<tool_call>", FMT, prompt_suffix=PREFILLED, truncated=True
    )
    assert (out.reasoning, out.content, out.tool_calls) == ("Done.", None, [])


def test_a_call_is_not_started_before_it_is_complete() -> None:
    parser = parser_for("Qwen/Qwen3-Coder-30B-A3B-Instruct", TOOLS)
    text = _call("write", path="a")
    cut = text.index("</function>")
    early = parser.feed(text[:cut])
    assert not any(isinstance(e, ToolCallStart) for e in early)
    late = parser.feed(text[cut:]) + parser.finish()
    assert [e.name for e in late if isinstance(e, ToolCallStart)] == ["write"]


def test_block_without_a_function_comes_back_as_content() -> None:
    text = "<tool_call>\nnot a call\n</tool_call>"
    assert parse_all_ways(text, FMT).content == "<tool_call>\nnot a call"


def test_big_numbers_are_kept_exact_and_overflow_stays_text() -> None:
    text = _call("set", hour="123456789012345678901", volume="1e999")
    out = parse_all_ways(text, FMT, tools=TOOLS)
    assert calls(out) == [("set", {"hour": 123456789012345678901, "volume": "1e999"})]
