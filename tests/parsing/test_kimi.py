"""Kimi tool calls: K2.x section tokens (`kimi_k2`, `kimi_k2_thinking`), K3 XTML (`kimi_k3`)."""

from __future__ import annotations

from streaming import calls, parse_all_ways

from toolwire.parsing import ToolCallStart, format_for, parse_output, parser_for

K2_NO_THINK = "<|im_assistant|>assistant<|im_middle|><think></think>"
K3_RESPONSE = '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>'

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def _k2_call(call_id: str, args: str) -> str:
    return f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{args}<|tool_call_end|>"


def _k3_arg(key: str, value: str, kind: str = "string") -> str:
    return f'<|open|>argument key="{key}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>'


def _k3_call(name: str, *args: str) -> str:
    return f'<|open|>call tool="{name}" index="1"<|sep|>{"".join(args)}<|close|>call<|sep|>'


def _k3_tools(*call_texts: str) -> str:
    return (
        "<|close|>response<|sep|><|open|>tools<|sep|>"
        + "".join(call_texts)
        + "<|close|>tools<|sep|>"
    )


def test_model_ids_select_the_sub_format() -> None:
    assert format_for("moonshotai/Kimi-K2-Instruct-0905") == "kimi_k2"
    for model in ("moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.6"):
        assert format_for(model) == "kimi_k2_thinking"
    assert format_for("moonshotai/Kimi-K3") == "kimi_k3"


# ---------------------------------------------------------------------------- K2


def test_name_and_id_come_from_the_call_id() -> None:
    text = SECTION_BEGIN + _k2_call("functions.get_weather:3", '{"city": "Oslo"}') + SECTION_END
    out = parse_output(text, "moonshotai/Kimi-K2-Instruct")
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("functions.get_weather:3", "get_weather", {"city": "Oslo"})
    ]
    text = SECTION_BEGIN + _k2_call("get_weather:0", "{}") + SECTION_END
    assert calls(parse_all_ways(text, "kimi_k2")) == [("get_weather", {})]


def test_call_end_marker_inside_a_json_string_is_data() -> None:
    args = '{"content": "stop at <|tool_call_end|> please"}'
    out = parse_all_ways(SECTION_BEGIN + _k2_call("functions.w:0", args) + SECTION_END, "kimi_k2")
    assert calls(out) == [("w", {"content": "stop at <|tool_call_end|> please"})]


def test_noise_in_a_section_is_dropped_and_content_around_it_kept_verbatim() -> None:
    text = f"Before. {SECTION_BEGIN} noise {_k2_call('functions.f:0', '{}')} {SECTION_END} After."
    out = parse_all_ways(text, "kimi_k2")
    assert (out.content, calls(out)) == ("Before.  After.", [("f", {})])


def test_each_call_is_emitted_at_its_own_end_marker() -> None:
    parser = parser_for("moonshotai/Kimi-K2-Instruct", prompt_suffix="")
    events = parser.feed(
        SECTION_BEGIN + _k2_call("functions.a:0", "{}") + "<|tool_call_begin|>functions.b:1"
    )
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["a"]


def test_truncated_in_the_second_call_keeps_the_first() -> None:
    text = (
        SECTION_BEGIN + _k2_call("functions.a:0", '{"x": 1}') + _k2_call("functions.b:1", '{"y": ')
    )
    out = parse_all_ways(text[: -len("<|tool_call_end|>")], "kimi_k2", truncated=True)
    assert (out.content, calls(out)) == (None, [("a", {"x": 1})])


def test_thinking_models_start_in_reasoning_unless_the_prompt_closed_it() -> None:
    text = "Look it up.</think>" + SECTION_BEGIN + _k2_call("functions.f:0", "{}") + SECTION_END
    out = parse_all_ways(text, "kimi_k2_thinking")
    assert (out.reasoning, out.content, calls(out)) == ("Look it up.", None, [("f", {})])
    out = parse_all_ways("Hello.", "kimi_k2_thinking", prompt_suffix=K2_NO_THINK)
    assert (out.reasoning, out.content) == (None, "Hello.")


def test_section_in_unclosed_reasoning_ends_it() -> None:
    text = "Need data." + SECTION_BEGIN + _k2_call("functions.f:0", "{}") + SECTION_END
    out = parse_all_ways(text, "kimi_k2_thinking")
    assert (out.reasoning, calls(out)) == ("Need data.", [("f", {})])


def test_arguments_that_are_not_an_object_come_back_as_content() -> None:
    text = SECTION_BEGIN + _k2_call("functions.f:0", "[1, 2]") + SECTION_END
    out = parse_all_ways(text, "kimi_k2")
    assert (out.content, out.tool_calls) == (text.removesuffix(SECTION_END), [])


# ---------------------------------------------------------------------------- K3


def test_k3_channels() -> None:
    text = (
        "Think.<|close|>think<|sep|><|open|>response<|sep|>Answer.<|close|>response<|sep|>"
        "<|close|>message<|sep|>"
    )
    out = parse_all_ways(text, "kimi_k3")
    assert (out.reasoning, out.content) == ("Think.", "Answer.")
    out = parse_all_ways("Hi.<|close|>response<|sep|>", "kimi_k3", prompt_suffix=K3_RESPONSE)
    assert (out.reasoning, out.content) == (None, "Hi.")


def test_k3_skipped_think_channel_is_content() -> None:
    text = "<|open|>response<|sep|>Hello<|close|>response<|sep|><|close|>message<|sep|>"
    out = parse_all_ways(text, "kimi_k3")
    assert (out.reasoning, out.content) == (None, "Hello")


def test_k3_values_typed_by_their_type_attribute() -> None:
    call = _k3_call(
        "ev",
        _k3_arg("title", "15"),
        _k3_arg("minutes", "15", "number"),
        _k3_arg("all_day", "false", "boolean"),
        _k3_arg("remind", "null", "null"),
        _k3_arg("tags", '["a"]', "array"),
    )
    out = parse_all_ways(_k3_tools(call), "kimi_k3", prompt_suffix=K3_RESPONSE)
    assert calls(out) == [
        ("ev", {"title": "15", "minutes": 15, "all_day": False, "remind": None, "tags": ["a"]})
    ]


def test_k3_attribute_values_are_unescaped_and_bodies_raw() -> None:
    call = _k3_call("s", _k3_arg("q&amp;a", 'say "hi" &amp; go'))
    out = parse_all_ways(_k3_tools(call), "kimi_k3", prompt_suffix=K3_RESPONSE)
    assert calls(out) == [("s", {"q&a": 'say "hi" &amp; go'})]


def test_k3_marker_text_inside_a_body_is_data() -> None:
    value = "<|close|>argument<|sep|> is how args end"
    call = _k3_call("w", _k3_arg("path", "x"), _k3_arg("content", value))
    out = parse_all_ways(_k3_tools(call), "kimi_k3", prompt_suffix=K3_RESPONSE)
    assert calls(out) == [("w", {"path": "x", "content": value})]


def test_k3_truncated_inside_the_tools_element_leaks_nothing() -> None:
    text = _k3_tools(_k3_call("a"), '<|open|>call tool="b" index="2"')
    text = text[: text.rindex("<|close|>tools")]
    out = parse_all_ways(text, "kimi_k3", prompt_suffix=K3_RESPONSE, truncated=True)
    assert (out.content, calls(out)) == (None, [("a", {})])


def test_k3_marker_text_that_is_no_element_stays_content() -> None:
    out = parse_all_ways("Type <|open|> to begin.", "kimi_k3", prompt_suffix=K3_RESPONSE)
    assert out.content == "Type <|open|> to begin."


def test_k3_call_element_without_a_tool_name_is_not_a_call() -> None:
    # Regression: this once re-opened a block at the same spot forever.
    text = "<|open|>call<|sep|>x<|close|>call<|sep|>"
    out = parse_all_ways(text, "kimi_k3", prompt_suffix=K3_RESPONSE)
    assert (out.content, out.tool_calls) == ("<|open|>call<|sep|>x<|close|>call<|sep|>", [])


def test_k2_reasoning_after_calls_inside_think_stays_reasoning() -> None:
    section = (
        "<|tool_calls_section_begin|>"
        + _k2_call("functions.get_weather:0", '{"city": "Paris"}')
        + "<|tool_calls_section_end|>"
    )
    for fmt in ("kimi_k2", "kimi_k2_thinking"):
        out = parse_all_ways("<think>Plan. " + section + "More thought.</think>Answer.", fmt)
        assert out.reasoning == "Plan. More thought."
        assert out.content == "Answer."
        assert calls(out) == [("get_weather", {"city": "Paris"})]
        # No </think> after the calls: what follows them is the answer.
        out = parse_all_ways("<think>Plan. " + section + "The answer.", fmt)
        assert (out.reasoning, out.content) == ("Plan. ", "The answer.")
