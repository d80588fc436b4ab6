"""GLM-4.5/4.6 (`glm45`) and GLM-4.7/5.x (`glm47`) tool calls."""

from __future__ import annotations

from typing import Any

import pytest
from streaming import calls, parse_all_ways

from toolwire.parsing import ToolCallStart, format_for, parser_for

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
