"""GLM-4.5/4.6 (`glm45`) and GLM-4.7/5.x (`glm47`) tool calls."""

from __future__ import annotations

from typing import Any

import pytest
from streaming import calls, parse_all_ways

from toolwire.parsing import ToolCallStart, format_for, parse_output, parser_for

NO_THINK_47 = "<|assistant|></think>"
NO_THINK_45 = "<|assistant|>\n<think></think>"


def _tool(name: str, **props: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


TOOLS = [
    _tool("timer", seconds={"type": "integer"}, label={"type": "string"}),
    _tool("event", attendees={"type": "array"}, all_day={"type": "boolean"}, remind={}),
    _tool("write", path={"type": "string"}, content={"type": "string"}),
]


def _call(name: str, *pairs: tuple[str, str], nl: str = "") -> str:
    args = "".join(f"<arg_key>{k}</arg_key>{nl}<arg_value>{v}</arg_value>{nl}" for k, v in pairs)
    return f"<tool_call>{name}{nl}{args}</tool_call>"


def test_model_ids_select_the_variant() -> None:
    for model in ("zai-org/GLM-4.5", "zai-org/GLM-4.5-Air", "zai-org/GLM-4.6"):
        assert format_for(model) == "glm45"
    for model in ("zai-org/GLM-4.7", "zai-org/GLM-4.7-Flash", "zai-org/GLM-5.3"):
        assert format_for(model) == "glm47"


def test_strings_are_raw_and_other_values_json_by_schema() -> None:
    text = _call("timer", ("seconds", "3"), ("label", "3"))
    out = parse_all_ways(text, "glm47", prompt_suffix=NO_THINK_47, tools=TOOLS)
    assert calls(out) == [("timer", {"seconds": 3, "label": "3"})]


def test_number_and_json_looking_strings_stay_strings() -> None:
    text = _call("write", ("path", "0042"), ("content", '{"a": 1}'))
    out = parse_all_ways(text, "glm47", prompt_suffix=NO_THINK_47, tools=TOOLS)
    assert calls(out) == [("write", {"path": "0042", "content": '{"a": 1}'})]


def test_untyped_parameters_fall_back_to_json() -> None:
    text = _call("event", ("attendees", '["a@x"]'), ("all_day", "false"), ("remind", "null"))
    out = parse_all_ways(text, "glm47", prompt_suffix=NO_THINK_47, tools=TOOLS)
    assert calls(out) == [("event", {"attendees": ["a@x"], "all_day": False, "remind": None})]


def test_whitespace_inside_a_value_is_data() -> None:
    text = _call("write", ("content", "  two  spaces\n"))
    out = parse_all_ways(text, "glm47", prompt_suffix=NO_THINK_47, tools=TOOLS)
    assert calls(out) == [("write", {"content": "  two  spaces\n"})]


@pytest.mark.parametrize("fmt", ["glm45", "glm47"])
def test_both_whitespace_variants_parse_with_both_names(fmt: str) -> None:
    for nl in ("", "\n"):
        text = "\n" + _call("write", ("path", "a"), ("content", "b"), nl=nl)
        out = parse_all_ways(text, fmt, prompt_suffix=NO_THINK_47, tools=TOOLS)
        assert (out.content, calls(out)) == (None, [("write", {"path": "a", "content": "b"})])


def test_glm47_without_a_prompt_starts_in_reasoning() -> None:
    out = parse_all_ways("Think.</think>Answer.", "glm47")
    assert (out.reasoning, out.content) == ("Think.", "Answer.")
    out = parse_all_ways("Cut off while thinking", "glm47", truncated=True)
    assert (out.reasoning, out.content) == ("Cut off while thinking", None)


def test_glm45_writes_its_own_think() -> None:
    out = parse_all_ways("\n<think>Think.</think>\nAnswer.", "glm45")
    assert (out.reasoning, out.content) == ("Think.", "Answer.")
    out = parse_all_ways("\nAnswer.", "glm45", prompt_suffix=NO_THINK_45)
    assert (out.reasoning, out.content) == (None, "Answer.")


def test_close_tool_call_inside_a_string_value_is_data() -> None:
    value = "Wrap calls in <tool_call> and </tool_call>; keys go in <arg_key>."
    text = _call("write", ("path", "a"), ("content", value))
    out = parse_all_ways(text, "glm47", prompt_suffix=NO_THINK_47, tools=TOOLS)
    assert calls(out) == [("write", {"path": "a", "content": value})]


def test_missing_close_arg_value_before_close_tool_call() -> None:
    text = "<tool_call>write<arg_key>path</arg_key><arg_value>a.txt</tool_call>"
    out = parse_all_ways(text, "glm47", prompt_suffix=NO_THINK_47, tools=TOOLS)
    assert calls(out) == [("write", {"path": "a.txt"})]


def test_missing_close_arg_value_before_the_next_key() -> None:
    text = (
        "<tool_call>write<arg_key>path</arg_key><arg_value>a.txt"
        "<arg_key>content</arg_key><arg_value>hi</arg_value></tool_call>"
    )
    out = parse_all_ways(text, "glm47", prompt_suffix=NO_THINK_47, tools=TOOLS)
    assert calls(out) == [("write", {"path": "a.txt", "content": "hi"})]


def test_call_in_unclosed_reasoning_ends_it() -> None:
    text = "Need the timer." + _call("timer", ("seconds", "5"))
    out = parse_all_ways(text, "glm47", tools=TOOLS)
    assert (out.reasoning, out.content, calls(out)) == (
        "Need the timer.",
        None,
        [("timer", {"seconds": 5})],
    )


def test_truncated_call_is_dropped_and_earlier_calls_kept() -> None:
    first = _call("timer", ("seconds", "1"))
    for cut in (
        "<tool_call>timer<arg_key>seconds</arg_key><arg_value>",
        "<tool_call>timer<arg_key>seconds</arg_key><arg_value>2</arg_value>",
    ):
        out = parse_all_ways(
            first + cut, "glm47", prompt_suffix=NO_THINK_47, tools=TOOLS, truncated=True
        )
        assert (out.content, calls(out)) == (None, [("timer", {"seconds": 1})])


def test_each_call_is_emitted_at_its_own_close() -> None:
    parser = parser_for("zai-org/GLM-4.7", TOOLS, prompt_suffix=NO_THINK_47)
    first = _call("timer", ("seconds", "1"))
    events = parser.feed(first + "<tool_call>timer<arg_key>seconds</arg_key><arg_value>2")
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["timer"]


def test_turn_tokens_and_stray_closers_never_leak() -> None:
    out = parse_all_ways("Hi.</tool_call><|user|>", "glm47", prompt_suffix=NO_THINK_47)
    assert out.content == "Hi."


def test_block_that_is_not_a_call_comes_back_as_content() -> None:
    text = "Use <tool_call> two words</tool_call> please"
    out = parse_all_ways(text, "glm47", prompt_suffix=NO_THINK_47)
    assert (out.content, out.tool_calls) == ("Use <tool_call> two words please", [])


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   vLLM:      tests/tool_parsers/test_glm4_moe_tool_parser.py, test_glm47_moe_tool_parser.py
#   SGLang:    test/registered/function_call/test_glm47_moe_detector.py,
#              test_function_call_parser.py (Glm4MoeDetector)
#   llama.cpp: the GLM-4.6 and GLM-4.7-Flash blocks of tests/test-chat.cpp
# ---------------------------------------------------------------------------------------

_S = {"type": "string"}
_N = {"type": "number"}

ENGINE_TOOLS = [
    _tool("get_weather", city=_S, date=_S),
    _tool("get_current_weather", city=_S, state=_S, unit=_S),
    _tool("get_current_date"),
    _tool("calculate", operation=_S, a=_N, b=_N, enabled={"type": "boolean"}),
    _tool("send_message", recipient=_S, message=_S, greeting=_S, emoji=_S),
    _tool("apply_diff", s=_S),
    _tool("todo_write", todos={"type": "array"}),
    _tool("create_todos", priority=_N, count={"type": "integer"}, items={"type": "array"}),
    _tool("create_note", title=_S, content=_S),
    _tool("execute_command", command=_S),
    _tool("process_data", data={"type": "object"}),
    _tool("create_structure", empty_obj={"type": "object"}, empty_arr={"type": "array"}),
    _tool("create_task", title=_S, location=_S),
    _tool("edge", zero=_N, negative=_N, large=_N),
    _tool("action"),
    _tool("special_function", arg1={"type": "integer"}),
    _tool("special_function_with_opt", arg1={"type": "integer"}, arg2={"type": "integer"}),
]


def _glm(
    text: str, fmt: str = "glm47", prompt_suffix: str = NO_THINK_47, **kw: Any
) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    out = parse_all_ways(text, fmt, prompt_suffix=prompt_suffix, tools=ENGINE_TOOLS, **kw)
    return out.content, calls(out)


WEATHER_45 = (
    "<tool_call>get_current_weather\n"
    "    <arg_key>city</arg_key>\n    <arg_value>{city}</arg_value>\n"
    "    <arg_key>state</arg_key>\n    <arg_value>{state}</arg_value>\n"
    "    <arg_key>unit</arg_key>\n    <arg_value>{unit}</arg_value>\n"
    "    </tool_call>"
)


def _weather(city: str, state: str, unit: str) -> tuple[str, dict[str, Any]]:
    return ("get_current_weather", {"city": city, "state": state, "unit": unit})


# --- vLLM: GLM-4.5/4.6 ---


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        ("This is a test", "This is a test", []),
        (
            WEATHER_45.format(city="Dallas", state="TX", unit="fahrenheit"),
            None,
            [_weather("Dallas", "TX", "fahrenheit")],
        ),
        (
            WEATHER_45.format(city="Dallas", state="TX", unit="fahrenheit")
            + "\n    "
            + WEATHER_45.format(city="Orlando", state="FL", unit="fahrenheit"),
            None,
            [_weather("Dallas", "TX", "fahrenheit"), _weather("Orlando", "FL", "fahrenheit")],
        ),
        (
            # vLLM keeps the space before the call; toolwire strips the ends of content
            # by policy (docs/parsing.md, "Guarantees").
            "I'll help you check the weather. "
            + WEATHER_45.format(city="Seattle", state="WA", unit="celsius"),
            "I'll help you check the weather.",
            [_weather("Seattle", "WA", "celsius")],
        ),
        (
            "I will help you get the weather.<tool_call>get_weather\n"
            "    <arg_key>city</arg_key>\n    <arg_value>Beijing</arg_value>\n"
            "    <arg_key>date</arg_key>\n    <arg_value>2025-08-01</arg_value>\n    </tool_call>",
            "I will help you get the weather.",
            [("get_weather", {"city": "Beijing", "date": "2025-08-01"})],
        ),
    ],
    ids=["no-call", "indented", "two-calls", "content-before", "content-glued"],
)
def test_vllm_glm45_extraction(text: str, content: str | None, expected: list[Any]) -> None:
    assert _glm(text, "glm45", NO_THINK_45) == (content, expected)


def test_vllm_glm45_reasoning_content_and_a_call() -> None:
    text = (
        "<think>I want to get the weather.</think>\n\nI will help you get the weather.\n"
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>\n</tool_call>"
    )
    # vLLM's tool parser alone leaves `<think>…</think>` in the content; toolwire also reads
    # the reasoning.
    out = parse_all_ways(text, "glm45", tools=ENGINE_TOOLS)
    assert (out.reasoning, out.content) == (
        "I want to get the weather.",
        "I will help you get the weather.",
    )
    assert calls(out) == [("get_weather", {"city": "Beijing", "date": "2025-08-01"})]


def test_vllm_glm45_content_between_calls_and_typed_values() -> None:
    text = (
        "I will help you get the weather info.\n\n"
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "</tool_call>\n\nmeanwhile, I will also check Shanghai.\n\n"
        "<tool_call>calculate\n<arg_key>operation</arg_key>\n<arg_value>add</arg_value>\n"
        "<arg_key>a</arg_key>\n<arg_value>42</arg_value>\n<arg_key>b</arg_key>\n"
        "<arg_value>3.14</arg_value>\n<arg_key>enabled</arg_key>\n<arg_value>true</arg_value>\n"
        "</tool_call>"
    )
    # Content around calls is kept verbatim and in order (vLLM keeps only the first part).
    assert _glm(text, "glm45", NO_THINK_45) == (
        "I will help you get the weather info.\n\n\n\nmeanwhile, I will also check Shanghai.",
        [
            ("get_weather", {"city": "Beijing"}),
            ("calculate", {"operation": "add", "a": 42, "b": 3.14, "enabled": True}),
        ],
    )


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("    indented code    ", "s"),
        ('Hello "world"\nNew line', "message"),
        ("你好世界", "greeting"),
        ("🎉", "emoji"),
    ],
)
def test_vllm_glm45_string_values_are_kept_verbatim(value: str, key: str) -> None:
    tool = "apply_diff" if key == "s" else "send_message"
    text = (
        f"<tool_call>{tool}\n<arg_key>{key}</arg_key>\n<arg_value>{value}</arg_value>\n</tool_call>"
    )
    assert _glm(text, "glm45", NO_THINK_45) == (None, [(tool, {key: value})])


def test_vllm_glm45_zero_argument_calls() -> None:
    for text in (
        "<tool_call>get_current_date\n</tool_call>",
        "<tool_call>get_current_date</tool_call>",
    ):
        assert _glm(text, "glm45", NO_THINK_45) == (None, [("get_current_date", {})])


def test_vllm_glm45_malformed_key_comes_back_as_content() -> None:
    text = (
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Seattle</arg_value>\n"
        "<arg_key>incomplete_arg\n<arg_value>value</arg_value>\n</tool_call>"
    )
    out = parse_all_ways(text, "glm45", prompt_suffix=NO_THINK_45, tools=ENGINE_TOOLS)
    # vLLM only checks that it does not crash; toolwire returns the block as text, whole,
    # with a ParseFailure. The stray `</tool_call>` is dropped, as everywhere in this format.
    assert (out.content, out.tool_calls) == (text.removesuffix("\n</tool_call>"), [])
    assert [f.reason for f in out.failures] == ["invalid"]


@pytest.mark.parametrize(
    "text", ["<tool_call>   ", "<tool_call></tool_call>", "<tool_call>\n"], ids=repr
)
def test_vllm_and_sglang_glm45_block_without_a_name_is_not_a_call(text: str) -> None:
    out = parse_all_ways(text, "glm45", prompt_suffix=NO_THINK_45, tools=ENGINE_TOOLS)
    assert (out.content, out.tool_calls) == ("<tool_call>", [])
    assert [f.reason for f in out.failures] == ["invalid"]


def test_vllm_glm45_call_without_its_close_tag_at_the_end_of_the_output() -> None:
    text = (
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>"
    )
    # vLLM returns it as content. toolwire takes a call whose every argument was complete as
    # complete when the model stopped (as for DeepSeek and Kimi), and drops it when the output
    # was cut off (docs/parsing.md, "Calls are emitted when complete").
    finished = [("get_weather", {"city": "Beijing", "date": "2025-08-01"})]
    assert _glm(text, "glm45", NO_THINK_45) == (None, finished)
    assert _glm(text, "glm45", NO_THINK_45, truncated=True) == (None, [])


# --- vLLM: GLM-4.7 ---


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        ("<tool_call>get_current_date</tool_call>", None, [("get_current_date", {})]),
        ("<tool_call>get_current_date\n</tool_call>", None, [("get_current_date", {})]),
        (
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing</arg_value>"
            "</tool_call>",
            None,
            [("get_weather", {"city": "Beijing"})],
        ),
        (
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
            "</tool_call>",
            None,
            [("get_weather", {"city": "Beijing"})],
        ),
        (
            "Checking.<tool_call>get_current_date</tool_call>",
            "Checking.",
            [("get_current_date", {})],
        ),
        ("  \n  <tool_call>get_current_date</tool_call>", None, [("get_current_date", {})]),
    ],
    ids=["zero-arg", "zero-arg-newline", "compact", "newlines", "content-before", "ws-before"],
)
def test_vllm_glm47_extraction(text: str, content: str | None, expected: list[Any]) -> None:
    assert _glm(text) == (content, expected)


# --- SGLang: GLM-4.7 ---


def test_sglang_glm47_two_calls_and_text_around_them() -> None:
    one = (
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>{}</arg_value>"
        "<arg_key>date</arg_key><arg_value>2024-06-2{}</arg_value></tool_call>"
    )
    assert _glm(one.format("Beijing", 7) + one.format("Shanghai", 8)) == (
        None,
        [
            ("get_weather", {"city": "Beijing", "date": "2024-06-27"}),
            ("get_weather", {"city": "Shanghai", "date": "2024-06-28"}),
        ],
    )
    # SGLang once lost the text after a call; both parts are content.
    text = "First I'll do this.<tool_call>action</tool_call>Then I'll do that."
    assert _glm(text) == ("First I'll do this.Then I'll do that.", [("action", {})])


@pytest.mark.parametrize(
    "before", ["Sure, let me help.", "结构：", "问题。", "Complete!", "说明；"]
)
def test_sglang_glm47_text_before_a_call_in_any_script(before: str) -> None:
    text = before + "<tool_call>create_task<arg_key>title</arg_key><arg_value>Go to Beijing"
    text += (
        "</arg_value><arg_key>location</arg_key><arg_value>San Francisco</arg_value></tool_call>"
    )
    assert _glm(text) == (
        before,
        [("create_task", {"title": "Go to Beijing", "location": "San Francisco"})],
    )


def test_sglang_glm47_call_to_a_tool_not_offered() -> None:
    text = "<tool_call>nonexistent_function<arg_key>param</arg_key><arg_value>value</arg_value>"
    text += "</tool_call>"
    # SGLang drops it; toolwire returns it, marked (docs/parsing.md, "Where engines disagree").
    assert _glm(text) == (None, [("nonexistent_function", {"param": "value"})])
    out = parse_output(text, "zai-org/GLM-4.7", ENGINE_TOOLS, prompt_suffix=NO_THINK_47)
    assert [c.offered for c in out.tool_calls] == [False]


def test_sglang_glm47_values_typed_by_the_schema() -> None:
    text = (
        "<tool_call>create_todos<arg_key>priority</arg_key><arg_value>5.5</arg_value>"
        "<arg_key>count</arg_key><arg_value>10</arg_value><arg_key>items</arg_key>"
        '<arg_value>[{"description": "TestTodo 1"}, {"description": "TestTodo 2"}]</arg_value>'
        "</tool_call>"
        "<tool_call>edge<arg_key>zero</arg_key><arg_value>0</arg_value><arg_key>negative</arg_key>"
        "<arg_value>-42.5</arg_value><arg_key>large</arg_key><arg_value>1e10</arg_value>"
        "</tool_call>"
        "<tool_call>process_data<arg_key>data</arg_key>"
        '<arg_value>{"l1": {"l2": {"l3": {"l4": {"value": "deep"}}}}}</arg_value></tool_call>'
        "<tool_call>create_structure<arg_key>empty_obj</arg_key><arg_value>{}</arg_value>"
        "<arg_key>empty_arr</arg_key><arg_value>[]</arg_value></tool_call>"
    )
    assert _glm(text) == (
        None,
        [
            (
                "create_todos",
                {
                    "priority": 5.5,
                    "count": 10,
                    "items": [{"description": "TestTodo 1"}, {"description": "TestTodo 2"}],
                },
            ),
            ("edge", {"zero": 0, "negative": -42.5, "large": 1e10}),
            ("process_data", {"data": {"l1": {"l2": {"l3": {"l4": {"value": "deep"}}}}}}),
            ("create_structure", {"empty_obj": {}, "empty_arr": []}),
        ],
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [("content", ""), ("command", "echo 'Hello World'"), ("command", "echo Hello & World")],
)
def test_sglang_glm47_empty_and_special_string_values(key: str, value: str) -> None:
    tool = "create_note" if key == "content" else "execute_command"
    text = f"<tool_call>{tool}<arg_key>{key}</arg_key><arg_value>{value}</arg_value></tool_call>"
    assert _glm(text) == (None, [(tool, {key: value})])


@pytest.mark.parametrize("fmt", ["glm45", "glm47"])
def test_sglang_json_array_value_with_escapes(fmt: str) -> None:
    def todo(value: str) -> str:
        return (
            "<tool_call>todo_write\n<arg_key>todos</arg_key>\n"
            f"<arg_value>{value}</arg_value>\n</tool_call>"
        )

    todos = '[{"id": "1", "task": "Check the backend", "status": "in_progress"}]'
    windows = r'[{"id": "1", "task": "Check file at C:\\Users\\test.txt"}]'
    newline = r'[{"id": "1", "task": "Print \\n to see newline"}]'
    assert _glm(todo(todos) + todo(windows) + todo(newline), fmt) == (
        None,
        [
            (
                "todo_write",
                {"todos": [{"id": "1", "task": "Check the backend", "status": "in_progress"}]},
            ),
            ("todo_write", {"todos": [{"id": "1", "task": r"Check file at C:\Users\test.txt"}]}),
            ("todo_write", {"todos": [{"id": "1", "task": r"Print \n to see newline"}]}),
        ],
    )
    # SGLang also unescapes an array written with backslash-escaped quotes; toolwire keeps
    # text that fits no allowed type as written, for validation to report (docs/parsing.md).
    over_escaped = r"[{\"id\": \"1\"}]"
    assert _glm(todo(over_escaped), fmt) == (None, [("todo_write", {"todos": over_escaped})])


def test_sglang_glm47_output_cut_off_inside_a_value() -> None:
    text = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing"
    assert _glm(text, truncated=True) == (None, [])


# --- llama.cpp ---


def test_llamacpp_glm46_and_glm47_flash() -> None:
    glm46 = (
        "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n"
        "</tool_call>"
    )
    assert _glm(glm46, "glm45", NO_THINK_45) == (None, [("special_function", {"arg1": 1})])
    call = "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>"
    two = call + (
        "<tool_call>special_function_with_opt<arg_key>arg1</arg_key><arg_value>1</arg_value>"
        "<arg_key>arg2</arg_key><arg_value>2</arg_value></tool_call>"
    )
    assert _glm(two) == (
        None,
        [("special_function", {"arg1": 1}), ("special_function_with_opt", {"arg1": 1, "arg2": 2})],
    )
    assert _glm("Hello, world!\nWhat's up?") == ("Hello, world!\nWhat's up?", [])
    # GLM-4.7-Flash's prompt ends with `<think>`: the output starts in reasoning.
    for tail, content, found in (
        ("Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", []),
        (call, None, [("special_function", {"arg1": 1})]),
    ):
        out = parse_all_ways(
            "I'm\nthinking</think>" + tail,
            "glm47",
            prompt_suffix="<|assistant|><think>",
            tools=ENGINE_TOOLS,
        )
        assert (out.reasoning, out.content, calls(out)) == ("I'm\nthinking", content, found)
