"""Qwen3-Coder / Qwen3.5+ XML tool calls (`qwen3_xml`)."""

from __future__ import annotations

from typing import Any

import pytest
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


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   vLLM:      tests/tool_parsers/test_qwen3coder_tool_parser.py,
#              test_qwen3_xml_coder_shared.py, test_qwen36_bugs.py
#   SGLang:    test/registered/function_call/test_qwen3_coder_detector/
#   llama.cpp: the Qwen3-Coder block of tests/test-chat.cpp
# ---------------------------------------------------------------------------------------


def _props(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def _fn(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


ENGINE_TOOLS = [
    _fn(
        "get_current_weather",
        _props(
            city={"type": "string"},
            state={"type": "string"},
            unit={"type": "string", "enum": ["fahrenheit", "celsius"]},
            location={"type": "string"},
            days={"type": "integer"},
        ),
    ),
    _fn(
        "calculate_area",
        _props(
            shape={"type": "string"}, dimensions={"type": "object"}, precision={"type": "integer"}
        ),
    ),
    _fn(
        "test_types",
        _props(
            int_param={"type": "integer"},
            float_param={"type": "float"},  # not a JSON Schema type; vLLM's test uses it
            bool_param={"type": "boolean"},
            str_param={"type": "string"},
            obj_param={"type": "object"},
        ),
    ),
    _fn("write_file", _props(path={"type": "string"}, content={"type": "string"})),
    _fn("pick", _props(items={"type": "array"})),
    _fn("search", _props(query={"type": "string"})),
    _fn("set_code", _props(code={"anyOf": [{"type": "string"}, {"type": "null"}]})),
    _fn("set_count", _props(count={"anyOf": [{"type": "integer"}, {"type": "null"}]})),
    _fn("update_record", _props(data={"anyOf": [{"type": "object"}, {"type": "null"}]})),
    _fn(
        "test_anyof",
        _props(
            anyof_int={"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 5},
            anyof_str={"anyOf": [{"type": "string"}, {"type": "null"}]},
            anyof_array={
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
            },
            anyof_obj={"anyOf": [{"type": "object"}, {"type": "null"}]},
            type_as_array={"type": ["integer", "null"]},
            multi_non_null={"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        ),
    ),
    _fn("process", _props(name={"type": "string"}, data={"type": "object"})),
    _fn("sql_interpreter", _props(query={"type": "string"}, dry_run={"type": "boolean"})),
    _fn(
        "TodoWrite",
        _props(
            todos={
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"content": {"type": "string"}, "status": {"type": "string"}},
                },
            }
        ),
    ),
    _fn(
        "get_current_time",
        _props(
            cities={"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}
        ),
    ),
    _fn(
        "process_optional_list",
        _props(
            items={
                "anyOf": [
                    {"anyOf": [{"type": "null"}, {"anyOf": [{"type": "array"}, {"type": "null"}]}]},
                    {"type": "null"},
                ]
            }
        ),
    ),
    _fn("special_function", _props(arg1={"type": "integer"})),
    _fn(
        "complex_function",
        _props(
            name={"type": "string"},
            age={"type": "integer"},
            active={"type": "boolean"},
            score={"type": "number"},
            config={"type": "object"},
            items={"type": "array"},
            optional_param={"type": "null"},
            negative={"type": "integer"},
            decimal={"type": "number"},
            scientific={"type": "number"},
        ),
    ),
    _fn("text_function", _props(text={"type": "string"}, code={"type": "string"})),
]

WEATHER_DALLAS = (
    "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
    "<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n"
    "</function>\n</tool_call>"
)
DALLAS = ("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})


def _engine(
    text: str, tools: Any = ENGINE_TOOLS, **kw: Any
) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    out = parse_all_ways(text, FMT, tools=tools, **kw)
    return out.content, calls(out)


# --- vLLM: basic extraction (single, with content, multi-line JSON, parallel, typed) ---


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        (WEATHER_DALLAS, None, [DALLAS]),
        (
            "Sure! Let me check the weather for you." + WEATHER_DALLAS,
            "Sure! Let me check the weather for you.",
            [DALLAS],
        ),
        (
            "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n"
            '<parameter=dimensions>\n{"width": 10, \n "height": 20}\n</parameter>\n'
            "<parameter=precision>\n2\n</parameter>\n</function>\n</tool_call>",
            None,
            [
                (
                    "calculate_area",
                    {
                        "shape": "rectangle",
                        "dimensions": {"width": 10, "height": 20},
                        "precision": 2,
                    },
                )
            ],
        ),
        (
            WEATHER_DALLAS + "\n" + WEATHER_DALLAS.replace("Dallas", "Orlando").replace("TX", "FL"),
            None,
            [
                DALLAS,
                ("get_current_weather", {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}),
            ],
        ),
        (
            "Let me calculate that area for you.<tool_call>\n<function=calculate_area>\n"
            "<parameter=shape>\ncircle\n</parameter>\n"
            '<parameter=dimensions>\n{"radius": 15.5}\n</parameter>\n'
            "<parameter=precision>\n3\n</parameter>\n</function>\n</tool_call>",
            "Let me calculate that area for you.",
            [
                (
                    "calculate_area",
                    {"shape": "circle", "dimensions": {"radius": 15.5}, "precision": 3},
                )
            ],
        ),
        ("This is a test without tools", "This is a test without tools", []),
    ],
    ids=["single", "with-content", "multiline-json", "parallel", "typed", "no-tools"],
)
def test_vllm_extraction(text: str, content: str | None, expected: list[Any]) -> None:
    assert _engine(text) == (content, expected)


def test_vllm_fallback_without_any_tool_call_tags() -> None:
    text = (
        "<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
        "<parameter=state>\nTX\n</parameter>\n</function>"
    )
    assert _engine(text) == (None, [("get_current_weather", {"city": "Dallas", "state": "TX"})])


def test_vllm_type_conversion() -> None:
    text = (
        "<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n"
        "<parameter=float_param>\n3.14\n</parameter>\n<parameter=bool_param>\ntrue\n</parameter>\n"
        "<parameter=str_param>\nhello world\n</parameter>\n"
        '<parameter=obj_param>\n{"key": "value"}\n</parameter>\n</function>\n</tool_call>'
    )
    args = {
        "int_param": 42,
        "float_param": 3.14,
        "bool_param": True,
        "str_param": "hello world",
        "obj_param": {"key": "value"},
    }
    assert _engine(text) == (None, [("test_types", args)])


def test_vllm_object_written_as_a_python_repr() -> None:
    text = (
        "<tool_call>\n<function=test_types>\n<parameter=obj_param>\n{'key': 'value'}\n"
        "</parameter>\n</function>\n</tool_call>"
    )
    assert _engine(text) == (None, [("test_types", {"obj_param": {"key": "value"}})])


def test_vllm_object_double_encoded_as_a_json_string_of_a_python_repr() -> None:
    # A model trained on json.dumps(str(dict)) writes "{'key': 'value', 'n': 1}".
    text = (
        "<tool_call>\n<function=process>\n<parameter=name>\nhello\n</parameter>\n"
        "<parameter=data>\n\"{'key': 'value', 'n': 1}\"\n</parameter>\n</function>\n</tool_call>\n"
    )
    assert _engine(text) == (
        None,
        [("process", {"name": "hello", "data": {"key": "value", "n": 1}})],
    )


def test_vllm_missing_close_parameter_with_content_before() -> None:
    text = (
        "Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n"
        "<parameter=city>\nDallas\n<parameter=state>\nTX\n</parameter>\n"
        "<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>"
    )
    assert _engine(text) == ("Let me check the weather for you:", [DALLAS])


def test_vllm_whitespace_only_before_a_call_is_no_content() -> None:
    assert _engine("\n\n" + WEATHER_DALLAS) == (None, [DALLAS])


def test_vllm_function_name_without_closing_bracket_is_not_a_call() -> None:
    bad = "<tool_call>\n<function=bad_func_no_gt\n</function>\n</tool_call>\n"
    assert _engine(bad + WEATHER_DALLAS) == (
        "<tool_call>\n<function=bad_func_no_gt\n</function>",
        [DALLAS],
    )


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # A string parameter keeps "null"; a nullable one maps null and Python's None.
        ("<function=search>\n<parameter=query>null</parameter>", {"query": "null"}),
        ("<function=set_code>\n<parameter=code>42</parameter>", {"code": "42"}),
        ("<function=set_code>\n<parameter=code>null</parameter>", {"code": None}),
        ("<function=set_code>\n<parameter=code>None</parameter>", {"code": None}),
        ("<function=set_count>\n<parameter=count>42</parameter>", {"count": 42}),
        ("<function=set_count>\n<parameter=count>None</parameter>", {"count": None}),
        (
            '<function=update_record>\n<parameter=data>{"key": "value", "count": 42}</parameter>',
            {"data": {"key": "value", "count": 42}},
        ),
        (
            '<function=pick>\n<parameter=items>\n["a", "b", 1, true]\n</parameter>',
            {"items": ["a", "b", 1, True]},
        ),
        ("<function=search>\n<parameter=query>hello world</parameter>", {"query": "hello world"}),
    ],
)
def test_vllm_values_typed_by_the_schema(call: str, expected: dict[str, Any]) -> None:
    text = f"<tool_call>\n{call}\n</function>\n</tool_call>"
    assert _engine(text) == (None, [(call.split(">")[0][len("<function=") :], expected)])


def test_vllm_anyof_and_type_lists() -> None:
    text = (
        "<tool_call>\n<function=test_anyof>\n<parameter=anyof_int>5</parameter>\n"
        "<parameter=anyof_str>hello</parameter>\n"
        '<parameter=anyof_array>["a", "b", "c"]</parameter>\n'
        '<parameter=anyof_obj>{"key": "value"}</parameter>\n'
        "<parameter=type_as_array>42</parameter>\n"
        "<parameter=multi_non_null>some text</parameter>\n</function>\n</tool_call>"
    )
    args = {
        "anyof_int": 5,
        "anyof_str": "hello",
        "anyof_array": ["a", "b", "c"],
        "anyof_obj": {"key": "value"},
        "type_as_array": 42,
        "multi_non_null": "some text",
    }
    assert _engine(text) == (None, [("test_anyof", args)])


def test_vllm_two_calls_and_trailing_text() -> None:
    one = (
        "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    text = one + "\n" + one.replace("Paris", "London") + "\nAll done!"
    assert _engine(text) == (
        "All done!",
        [("get_current_weather", {"city": "Paris"}), ("get_current_weather", {"city": "London"})],
    )


def _write_file(content: str, path: str = "test.py") -> str:
    return (
        "<tool_call>\n<function=write_file>\n"
        f"<parameter=path>\n{path}\n</parameter>\n"
        f"<parameter=content>\n{content}</parameter>\n"
        "</function>\n</tool_call>\n"
    )


# File contents that hold the format's own markup (a parser's test fixture, a chat template):
# the value is kept whole and no argument or call is made of it.
MARKUP_IN_VALUES = {
    "tags-inside-lines": (
        "char_deltas = [\n"
        '    "<tool_call>\\n",\n'
        '    "<parameter=query>\\n",\n'
        '    "\\n</parameter>\\n",\n'
        '    "</function>\\n",\n'
        "]\n"
    ),
    "param-lines-of-an-unknown-name": (
        'TOOL_CALL_TEMPLATE = """\n</parameter>\n<parameter=new_string>\n'
        '#!/usr/bin/env python3\n</parameter>\n"""\n'
    ),
    "param-lines-of-a-real-name": 'doc = """\n<parameter=path>\nliteral/value\n</parameter>\n"""\n',
    "a-whole-call": (
        'doc = """\n<tool_call>\n<function=write_file>\n<parameter=path>\nliteral/value.txt\n'
        "</parameter>\n<parameter=content>\nhello\n</parameter>\n</function>\n</tool_call>\n"
        '"""\n'
    ),
    "a-call-of-another-tool": (
        'template = """\n<tool_call>\n<function=foo>\n<parameter=bar>baz</parameter>\n'
        '</function>\n</tool_call>\n"""\n'
    ),
    "a-call-at-the-very-end": (
        "<tool_call>\n<function=write_file>\n<parameter=path>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n"
    ),
}


@pytest.mark.parametrize("content", MARKUP_IN_VALUES.values(), ids=MARKUP_IN_VALUES.keys())
def test_vllm_markup_inside_a_value_is_data(content: str) -> None:
    assert _engine(_write_file(content)) == (
        None,
        [("write_file", {"path": "test.py", "content": content[:-1]})],
    )


def test_vllm_markup_inside_the_value_of_a_second_call() -> None:
    first = "<tool_call>\n<function=foo>\n<parameter=bar>baz</parameter>\n</function>\n</tool_call>"
    content = MARKUP_IN_VALUES["a-call-of-another-tool"]
    assert _engine(first + "\n\n" + _write_file(content)) == (
        None,
        [("foo", {"bar": "baz"}), ("write_file", {"path": "test.py", "content": content[:-1]})],
    )


def test_vllm_unrendered_jinja_function_name_is_not_a_call() -> None:
    phantom = (
        "<tool_call>\n<function={{ tc.name }}>\n<parameter={{ k }}>\n{{ v }}\n</parameter>\n"
        "</function>\n</tool_call>\n\n"
    )
    assert _engine(phantom + _write_file("hello\n", path="out.txt")) == (
        phantom.replace("\n</tool_call>", "").strip(),  # text again; a stray closer is dropped
        [("write_file", {"path": "out.txt", "content": "hello"})],
    )


def test_vllm_inline_empty_tool_call_keeps_the_text_around_it() -> None:
    text = (
        "I'll show: <tool_call>example</tool_call>. Now real:\n"
        "<tool_call>\n<function=search>\n<parameter=query>\nhi\n</parameter>\n</function>\n"
        "</tool_call>"
    )
    # The block without a function is text again; its stray `</tool_call>` is dropped.
    found = [("search", {"query": "hi"})]
    assert _engine(text) == ("I'll show: <tool_call>example. Now real:", found)


# --- SGLang ---


def test_sglang_python_booleans_and_several_calls() -> None:
    text = (
        "<tool_call>\n<function=get_current_weather>\n<parameter=location>New York</parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=sql_interpreter>\n"
        "<parameter=query>SELECT * FROM users</parameter>\n<parameter=dry_run>True</parameter>\n"
        "</function>\n</tool_call>"
    )
    assert _engine(text) == (
        None,
        [
            ("get_current_weather", {"location": "New York"}),
            ("sql_interpreter", {"query": "SELECT * FROM users", "dry_run": True}),
        ],
    )


def test_sglang_arrays_nullable_and_nested_anyof() -> None:
    todos = (
        '[\n  {"content": "Buy groceries", "status": "pending"},\n'
        '  {"content": "Finish report", "status": "completed"}\n]'
    )
    text = (
        f"<tool_call>\n<function=TodoWrite>\n<parameter=todos>\n{todos}\n</parameter>\n"
        "</function>\n</tool_call>\n"
        '<tool_call>\n<function=get_current_time>\n<parameter=cities>\n["NYC"]\n</parameter>\n'
        "</function>\n</tool_call>\n"
        "<tool_call>\n<function=get_current_time>\n<parameter=cities>\nnull\n</parameter>\n"
        "</function>\n</tool_call>\n"
        "<tool_call>\n<function=process_optional_list>\n<parameter=items>\n"
        '[true, null, {"enabled": false}]\n</parameter>\n</function>\n</tool_call>'
    )
    assert _engine(text) == (
        None,
        [
            (
                "TodoWrite",
                {
                    "todos": [
                        {"content": "Buy groceries", "status": "pending"},
                        {"content": "Finish report", "status": "completed"},
                    ]
                },
            ),
            ("get_current_time", {"cities": ["NYC"]}),
            ("get_current_time", {"cities": None}),
            ("process_optional_list", {"items": [True, None, {"enabled": False}]}),
        ],
    )


def test_sglang_empty_value_and_special_characters() -> None:
    text = (
        "<tool_call>\n<function=get_current_weather>\n<parameter=location></parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=sql_interpreter>\n"
        "<parameter=query>SELECT * FROM users WHERE name = 'John \"Doe\"'</parameter>\n"
        "</function>\n</tool_call>"
    )
    assert _engine(text) == (
        None,
        [
            ("get_current_weather", {"location": ""}),
            ("sql_interpreter", {"query": "SELECT * FROM users WHERE name = 'John \"Doe\"'"}),
        ],
    )


def test_sglang_every_close_parameter_missing() -> None:
    text = (
        "Text prefix + implicit parameter close test\n\n<function=get_current_weather>\n"
        "<parameter=location>Paris\n<parameter=unit>celsius\n<parameter=days>3\n</function>"
    )
    assert _engine(text) == (
        "Text prefix + implicit parameter close test",
        [("get_current_weather", {"location": "Paris", "unit": "celsius", "days": 3})],
    )


def test_sglang_bare_functions_one_after_another() -> None:
    text = (
        "Text prefix + double tool call test\n\n<function=get_current_weather>\n"
        "<parameter=location>New York</parameter>\n</function>\n<function=sql_interpreter>\n"
        "<parameter=query>SELECT * FROM users</parameter>\n<parameter=dry_run>True</parameter>\n"
        "</function>\n"
    )
    assert _engine(text) == (
        "Text prefix + double tool call test",
        [
            ("get_current_weather", {"location": "New York"}),
            ("sql_interpreter", {"query": "SELECT * FROM users", "dry_run": True}),
        ],
    )


def test_sglang_array_mixing_json_and_python_quotes() -> None:
    text = (
        "Text prefix + complex schema tool call test\n\n<function=TodoWrite>\n<parameter=todos>\n"
        '[\n {"content": "Buy a new car", "status": \'pending\'},\n'
        ' {"content": "Buy a new house", "status": "completed"}\n]\n</parameter>\n</function>\n\n'
    )
    assert _engine(text) == (
        "Text prefix + complex schema tool call test",
        [
            (
                "TodoWrite",
                {
                    "todos": [
                        {"content": "Buy a new car", "status": "pending"},
                        {"content": "Buy a new house", "status": "completed"},
                    ]
                },
            )
        ],
    )


def test_sglang_unfinished_call_at_the_end_is_not_a_call() -> None:
    text = "<tool_call>\n<function=get_current_weather>\n<parameter=location>London"
    assert _engine(text) == (text, [])
    assert _engine(text, truncated=True) == (None, [])


# --- llama.cpp ---


def test_llamacpp_spaces_between_the_tags() -> None:
    text = (
        " <tool_call>\n<function=special_function> <parameter=arg1>1\n</parameter>\n"
        "</function> </tool_call>\n\n\n"
    )
    assert _engine(text) == (None, [("special_function", {"arg1": 1})])


def _indented(fn: str, /, **params: str) -> str:
    body = "".join(f"    <parameter={k}>\n      {v}\n    </parameter>\n" for k, v in params.items())
    return f"<tool_call>\n  <function={fn}>\n{body}  </function>\n</tool_call>"


def test_llamacpp_indented_layout_typed_values() -> None:
    text = _indented(
        "complex_function",
        age="30",
        active="true",
        score="95.5",
        config='{"host": "localhost", "port": 8080, "ssl": false}',
        items='["apple", "banana", "cherry"]',
        optional_param="null",
        negative="-42",
        decimal="-3.14",
        scientific="1.23e-4",
    )
    args = {
        "age": 30,
        "active": True,
        "score": 95.5,
        "config": {"host": "localhost", "port": 8080, "ssl": False},
        "items": ["apple", "banana", "cherry"],
        "optional_param": None,
        "negative": -42,
        "decimal": -3.14,
        "scientific": 1.23e-4,
    }
    assert _engine(text) == (None, [("complex_function", args)])


# llama.cpp's Qwen3-Coder block writes its values inside a block indented two spaces a
# level (`    <parameter=k>\n      VALUE\n    </parameter>`), some of them from the margin.
# Each case: the value's lines as written between the opener's line and the closer's
# (None: no line at all), and the argument expected.
LAID_OUT: dict[str, tuple[str | None, str]] = {
    "name": ("      John Doe", "John Doe"),
    "unicode": (
        "      Hello 世界! 🌍 Special chars: @#$%^&*()",
        "Hello 世界! 🌍 Special chars: @#$%^&*()",
    ),
    "code from the margin": (
        'def hello():\n    print("Hello, World!")\n    return True',
        'def hello():\n    print("Hello, World!")\n    return True',
    ),
    "xml": ("      <root><item>value</item></root>", "<root><item>value</item></root>"),
    "quotes": ('      She said "Hello!" and left.', 'She said "Hello!" and left.'),
    "long text": (
        "      This is a long text parameter that should test the parser's ability to "
        "handle larger amounts of text data.",
        "This is a long text parameter that should test the parser's ability to handle "
        "larger amounts of text data.",
    ),
    "search query": ("      laptops", "laptops"),
    "underscored names 1": ("      value1", "value1"),
    "underscored names 2": ("      value2", "value2"),
    "deep xml": (
        "      <root><level1><level2><level3>deep content</level3></level2></level1></root>",
        "<root><level1><level2><level3>deep content</level3></level2></level1></root>",
    ),
    "empty": (None, ""),
    "whitespace only": ("      ", ""),
    "tabs and spaces from the margin": (
        "line1\n\tindented line\n    spaces",
        "line1\n\tindented line\n    spaces",
    ),
    "control characters": (
        "Line1\nLine2\tTabbed\rCarriage return",
        "Line1\nLine2\tTabbed\rCarriage return",
    ),
    "emoji": (
        "      Hello! 👋 🌟 🚀 Testing emojis: 😀😃😄😁 and symbols: ∑∏∆∇",
        "Hello! 👋 🌟 🚀 Testing emojis: 😀😃😄😁 and symbols: ∑∏∆∇",
    ),
    "formula": ("      E = mc² and ∫f(x)dx = F(x) + C", "E = mc² and ∫f(x)dx = F(x) + C"),
    "sql": (
        "      SELECT * FROM users WHERE id = 1; DROP TABLE users; --",
        "SELECT * FROM users WHERE id = 1; DROP TABLE users; --",
    ),
    "html": (
        "      <script>alert('xss')</script><img src=x onerror=alert(1)>",
        "<script>alert('xss')</script><img src=x onerror=alert(1)>",
    ),
    "base64": (
        "      SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dC4=",
        "SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dC4=",
    ),
}


def _laid_out(lines: str | None) -> str:
    body = "" if lines is None else lines + "\n"
    return (
        "<tool_call>\n  <function=text_function>\n    <parameter=text>\n"
        f"{body}    </parameter>\n  </function>\n</tool_call>"
    )


@pytest.mark.parametrize(("lines", "expected"), LAID_OUT.values(), ids=LAID_OUT.keys())
def test_llamacpp_values_laid_out_in_an_indented_block(lines: str | None, expected: str) -> None:
    # The closer's indented line shows an indented block: its layout (the newline after
    # the opener, the closer's line, indentation common to the value's lines) is markup.
    assert _engine(_laid_out(lines)) == (None, [("text_function", {"text": expected})])


def test_llamacpp_text_before_an_indented_call() -> None:
    # llama.cpp keeps the space before the call ("... products. "); toolwire strips the ends
    # of content (docs/parsing.md, "Where engines disagree").
    text = "I'll help you search for products. " + _laid_out("      laptops")
    assert _engine(text) == (
        "I'll help you search for products.",
        [("text_function", {"text": "laptops"})],
    )


def test_sglang_output_indented_as_a_whole() -> None:
    # SGLang's streaming test indents every line after the first by eight spaces.
    lines = [
        "<function=get_current_weather>",
        "<parameter=city>",
        "Dallas",
        "</parameter>",
        "<parameter=state>",
        "TX",
        "</parameter>",
        "</function>",
        "</tool_call>",
        "Some text in between.",
        "<tool_call>",
        "<function=calculate_area>",
        "<parameter=shape>",
        "circle",
        "</parameter>",
        "<parameter=dimensions>",
        '{"radius": 5}',
        "</parameter>",
        "</function>",
        "</tool_call>",
    ]
    text = "<tool_call>\n" + "\n".join(" " * 8 + line for line in lines)
    assert _engine(text) == (
        "Some text in between.",
        [
            ("get_current_weather", {"city": "Dallas", "state": "TX"}),
            ("calculate_area", {"shape": "circle", "dimensions": {"radius": 5}}),
        ],
    )


# toolwire's rule around those cases: only an indented block's layout goes.


def test_an_indented_block_keeps_the_values_own_relative_indentation() -> None:
    code = "        def f():\n            return 1\n\n        f()"
    text = _laid_out(code).replace("text_function", "write_file").replace("=text>", "=content>")
    assert _engine(text) == (
        None,
        [("write_file", {"content": "def f():\n    return 1\n\nf()"})],
    )


def test_a_block_at_the_margin_keeps_the_values_indentation() -> None:
    # A write_file of an indented line, or of text ending in a newline, stays as written.
    text = _write_file("    return 1\n\n")
    assert _engine(text) == (
        None,
        [("write_file", {"path": "test.py", "content": "    return 1\n"})],
    )


def test_whitespace_on_the_openers_line_is_the_values() -> None:
    text = (
        "<tool_call>\n  <function=search>\n    <parameter=query>  two spaces</parameter>\n"
        "  </function>\n</tool_call>"
    )
    assert _engine(text) == (None, [("search", {"query": "  two spaces"})])


@pytest.mark.parametrize(
    "value",
    [
        'def hello():\n    print("Hello, World!")\n    return True',
        "line1\n\tindented line\n    spaces",
        "Line1\nLine2\tTabbed\rCarriage return",
        "Hello 世界! 🌍 Special chars: @#$%^&*()",
        "<root><level1><level2><level3>deep content</level3></level2></level1></root>",
        "<script>alert('xss')</script><img src=x onerror=alert(1)>",
        "SELECT * FROM users WHERE id = 1; DROP TABLE users; --",
        'She said "Hello!" and left.',
    ],
)
def test_llamacpp_string_values_are_verbatim(value: str) -> None:
    # The same values in the template's own layout (no indentation): nothing but the one
    # newline on each side is markup.
    text = _call("text_function", text=value)
    assert _engine(text) == (None, [("text_function", {"text": value})])


def test_llamacpp_compact_form_and_big_integers() -> None:
    # llama.cpp expects 1e+60 for the big integer (its JSON library's overflow); toolwire
    # keeps it exact (docs/parsing.md, "Where engines disagree").
    text = (
        "<tool_call><function=text_function><parameter=code>value</parameter></function>"
        "</tool_call><tool_call><function=special_function><parameter=arg1>"
        "999999999999999999999999999999999999999999999999999999999999</parameter></function>"
        "</tool_call>"
    )
    assert _engine(text) == (
        None,
        [
            ("text_function", {"code": "value"}),
            (
                "special_function",
                {"arg1": 999999999999999999999999999999999999999999999999999999999999},
            ),
        ],
    )


# --- toolwire's own rules around those cases ---


def test_a_parameter_the_tool_does_not_declare_is_still_a_parameter() -> None:
    # `</parameter>` then an undeclared name is not known structure when read, but nothing
    # ends the value later, so it ends there after all.
    text = _call("write", path="a.txt", mode="w")
    assert _engine(text, tools=TOOLS) == (None, [("write", {"path": "a.txt", "mode": "w"})])


def test_a_literal_opener_without_its_close_stays_in_the_value() -> None:
    content = "Write\n<parameter=NAME> to open a parameter."
    assert _engine(_write_file(content + "\n")) == (
        None,
        [("write_file", {"path": "test.py", "content": content})],
    )


def test_several_calls_all_missing_close_parameter() -> None:
    one = (
        "<function=write_file>\n<parameter=path>\n{0}\n<parameter=content>\nline {0}\n</function>\n"
    )
    text = "".join(one.format(i) for i in range(3))
    assert _engine(text) == (
        None,
        [("write_file", {"path": str(i), "content": f"line {i}"}) for i in range(3)],
    )


def test_cut_off_after_a_missing_close_parameter_keeps_no_unfinished_call() -> None:
    text = (
        _write_file("ok\n", path="a")
        + "<tool_call>\n<function=write_file>\n<parameter=path>\nb\n<parameter=content>\nrm -rf /"
    )
    assert _engine(text, truncated=True) == (
        None,
        [("write_file", {"path": "a", "content": "ok"})],
    )
