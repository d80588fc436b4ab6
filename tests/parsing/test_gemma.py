"""Gemma 4: `<|tool_call>call:NAME{…}<tool_call|>` object notation and the thought channel."""

from __future__ import annotations

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
