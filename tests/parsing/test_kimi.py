"""Kimi tool calls: K2.x section tokens (`kimi_k2`, `kimi_k2_thinking`), K3 XTML (`kimi_k3`)."""

from __future__ import annotations

import pytest
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


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   vLLM:      tests/tool_parsers/test_kimi_k2_tool_parser.py
#   SGLang:    test/registered/function_call/test_kimik2_detector.py
#   llama.cpp: the Kimi-K2 / Kimi-K2-Thinking blocks of tests/test-chat.cpp
# ---------------------------------------------------------------------------------------

ARG_BEGIN, CALL_END = "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def _engine_call(call_id: str, args: str) -> str:
    # vLLM's fixtures write a space between the call id and the argument marker.
    return f"<|tool_call_begin|>{call_id} {ARG_BEGIN}{args}{CALL_END}"


def _section(*calls_: str) -> str:
    return SECTION_BEGIN + "".join(calls_) + SECTION_END


def _tool(name: str, **props: dict[str, str]) -> dict[str, object]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


def _ids(text: str, fmt: str = "kimi_k2", **kw: object) -> tuple[str | None, list[object]]:
    out = parse_all_ways(text, fmt, **kw)  # type: ignore[arg-type]
    return out.content, [(c.id, c.name, c.arguments) for c in out.tool_calls]


# --- vLLM ---


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        (
            "I'll check. "
            + _section(_engine_call("functions.get_weather:0", '{"city": "Beijing"}')),
            "I'll check. ",
            [("functions.get_weather:0", "get_weather", {"city": "Beijing"})],
        ),
        (
            "Multiple tasks. "
            + _section(
                _engine_call("functions.get_weather:0", '{"city": "New York"}'),
                _engine_call("functions.get_news:1", '{"topic": "technology"}'),
                _engine_call(
                    "functions.send_email:2", '{"to": "user@example.com", "subject": "Daily"}'
                ),
            ),
            "Multiple tasks. ",
            [
                ("functions.get_weather:0", "get_weather", {"city": "New York"}),
                ("functions.get_news:1", "get_news", {"topic": "technology"}),
                (
                    "functions.send_email:2",
                    "send_email",
                    {"to": "user@example.com", "subject": "Daily"},
                ),
            ],
        ),
        (
            _section(_engine_call("functions.process_html:0", '{"html": "<div>content</div>"}')),
            None,
            [("functions.process_html:0", "process_html", {"html": "<div>content</div>"})],
        ),
        (
            _section(
                _engine_call("functions.process_data:0", '{\n  "name": "test",\n  "v": 123\n}')
            ),
            None,
            [("functions.process_data:0", "process_data", {"name": "test", "v": 123})],
        ),
        (
            "No prefix. " + _section(_engine_call("get_weather:0", '{"city": "Tokyo"}')),
            "No prefix. ",
            [("get_weather:0", "get_weather", {"city": "Tokyo"})],
        ),
        (
            _section(_engine_call("functions.test:0", "{}")),
            None,
            [("functions.test:0", "test", {})],
        ),
    ],
    ids=["single", "three-tools", "angle-brackets", "multiline-json", "no-prefix", "empty-args"],
)
def test_vllm_extraction(text: str, content: str | None, expected: list[object]) -> None:
    # Kimi templates put nothing between content and calls, so its trailing space is content.
    assert _ids(text) == (content, expected)


def test_vllm_invalid_json_call_comes_back_as_content_and_the_next_call_is_kept() -> None:
    bad = _engine_call("functions.bad:0", '{"city": "Beijing"')
    text = (
        "Help. " + SECTION_BEGIN + bad + _engine_call("functions.good:1", '{"c": 1}') + SECTION_END
    )
    out = parse_all_ways(text, "kimi_k2")
    # vLLM returns the broken call with its raw arguments; toolwire returns its text, whole,
    # with a ParseFailure (docs/parsing.md, "Where engines disagree").
    assert calls(out) == [("good", {"c": 1})]
    assert out.content == "Help. " + SECTION_BEGIN + bad
    assert [f.reason for f in out.failures] == ["invalid"]


def test_vllm_malformed_call_id_is_a_call_to_a_tool_not_offered() -> None:
    text = "Help. " + _section(
        _engine_call("functions.invalid.0", '{"city": "Beijing"}'),
        _engine_call("functions.valid:1", '{"city": "Shanghai"}'),
    )
    tools = [_tool("valid", city={"type": "string"})]
    # vLLM skips an id without `:N`; toolwire returns the call like any call to a tool that
    # was not offered, marked so (docs/parsing.md, "Where engines disagree").
    assert calls(parse_all_ways(text, "kimi_k2", tools=tools)) == [
        ("invalid.0", {"city": "Beijing"}),
        ("valid", {"city": "Shanghai"}),
    ]
    out = parse_output(text, "moonshotai/Kimi-K2-Instruct", tools)
    assert [c.offered for c in out.tool_calls] == [False, True]


def test_vllm_bare_counter_id_names_the_only_tool_offered() -> None:
    tools = [_tool("get_weather", city={"type": "string"}, unit={"type": "string"})]
    text = "Let me check. " + _section(_engine_call("0", '{"city": "Tokyo", "unit": "celsius"}'))
    out = parse_all_ways(text, "kimi_k2", tools=tools)
    assert [(c.id, c.name) for c in out.tool_calls] == [("0", "get_weather")]
    # With several tools offered nothing tells which: the call keeps its name, unoffered.
    out = parse_all_ways(text, "kimi_k2", tools=[*tools, _tool("get_time")])
    assert [(c.name, c.offered) for c in out.tool_calls] == [("0", False)]


def test_vllm_empty_section_and_text_after_the_section() -> None:
    assert _ids("Reasoning. " + SECTION_BEGIN + SECTION_END) == ("Reasoning. ", [])
    text = "Before. " + _section(_engine_call("functions.w:0", '{"city": "Tokyo"} ')) + " After."
    # vLLM drops text after the section; toolwire never loses text.
    assert _ids(text) == ("Before.  After.", [("functions.w:0", "w", {"city": "Tokyo"})])


def test_vllm_output_cut_off_inside_the_arguments_announces_no_call() -> None:
    text = "I'll check. " + SECTION_BEGIN + "<|tool_call_begin|>functions.get_weather:0 "
    text += ARG_BEGIN + '{"city": "Bei'
    # vLLM streams the partial call; toolwire drops it (docs/parsing.md, "Calls are emitted
    # when complete").
    assert _ids(text, truncated=True) == ("I'll check. ", [])


# --- SGLang ---


def test_sglang_hyphenated_names_and_the_models_own_counters() -> None:
    text = _section(
        _k2_call("functions.mcp__portal__search-documents:5", '{"path": "/docs"}'),
        _k2_call("functions.list-files:6", '{"path": "/home"}'),
    )
    assert _ids(text) == (
        None,
        [
            (
                "functions.mcp__portal__search-documents:5",
                "mcp__portal__search-documents",
                {"path": "/docs"},
            ),
            ("functions.list-files:6", "list-files", {"path": "/home"}),
        ],
    )


def test_sglang_a_literal_angle_bracket_at_the_end_stays_content() -> None:
    assert parse_all_ways("normal text <", "kimi_k2").content == "normal text <"


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("normal text" + SECTION_END, "normal text"),
        ("text" + ARG_BEGIN + "more", "textmore"),
        ("done." + CALL_END, "done."),
    ],
)
def test_sglang_stray_call_tokens_never_reach_content(text: str, content: str) -> None:
    out = parse_all_ways(text, "kimi_k2")
    assert (out.content, out.tool_calls) == (content, [])


def test_sglang_reasoning_then_calls_and_calls_inside_unclosed_reasoning() -> None:
    section = _section(_k2_call("functions.ReadFile:0", '{"path": "/test.py"}'))
    for text, reasoning in (
        ("<think>I need to check the file.</think>" + section, "I need to check the file."),
        ("<think>Let me read this file..." + section, "Let me read this file..."),
    ):
        out = parse_all_ways(text, "kimi_k2")
        assert (out.reasoning, out.content) == (reasoning, None)
        assert calls(out) == [("ReadFile", {"path": "/test.py"})]


def test_sglang_content_between_reasoning_and_two_back_to_back_sections() -> None:
    text = (
        "<think>Thinking about it...</think>This is a content:"
        + _section(_k2_call("functions.get_weather:0", '{"city": "London"}'))
        + _section(_k2_call("functions.get_weather:1", '{"city": "Delhi"}'))
    )
    out = parse_all_ways(text, "kimi_k2")
    assert (out.reasoning, out.content) == ("Thinking about it...", "This is a content:")
    assert calls(out) == [("get_weather", {"city": "London"}), ("get_weather", {"city": "Delhi"})]


def test_sglang_forced_reasoning_before_the_answer() -> None:
    out = parse_all_ways("I should analyze this...</think>Here is the answer.", "kimi_k2_thinking")
    assert (out.reasoning, out.content) == ("I should analyze this...", "Here is the answer.")


# --- llama.cpp ---


@pytest.mark.parametrize(
    ("text", "reasoning", "content", "expected"),
    [
        (
            "Hello, world!\nWhat's up?"
            + _section(_k2_call("functions.special_function:0", '{"arg1": 1}')),
            None,
            "Hello, world!\nWhat's up?",
            [("functions.special_function:0", "special_function", {"arg1": 1})],
        ),
        (
            "<think>I need to call two functions</think>"
            + _section(
                _k2_call("functions.special_function:0", '{"arg1": 1}'),
                _k2_call("functions.python:1", '{"code": "print(\'hey\')"}'),
            ),
            "I need to call two functions",
            None,
            [
                ("functions.special_function:0", "special_function", {"arg1": 1}),
                ("functions.python:1", "python", {"code": "print('hey')"}),
            ],
        ),
        (
            _section(
                _k2_call(
                    "functions.python:0",
                    '{"code": "def hello():\\n    print(\\"Hello, world!\\")\\n\\nhello()"}',
                ),
                _k2_call("functions.html:1", '{"markup": "<p>test</p>"}'),
            ),
            None,
            None,
            [
                (
                    "functions.python:0",
                    "python",
                    {"code": 'def hello():\n    print("Hello, world!")\n\nhello()'},
                ),
                ("functions.html:1", "html", {"markup": "<p>test</p>"}),
            ],
        ),
        (
            # A call without a section and without its end marker, at the end of the output.
            "<|tool_call_begin|>functions.execute_command:0<|tool_call_argument_begin|>"
            '{"command": "ls -lah", "cwd": "/home/jarvis", "timeout": 10}',
            None,
            None,
            [
                (
                    "functions.execute_command:0",
                    "execute_command",
                    {"command": "ls -lah", "cwd": "/home/jarvis", "timeout": 10},
                )
            ],
        ),
    ],
    ids=["content-then-call", "reasoning-then-calls", "code-and-markup", "bare-unclosed-call"],
)
def test_llamacpp_kimi_k2_thinking(
    text: str, reasoning: str | None, content: str | None, expected: list[object]
) -> None:
    out = parse_all_ways(text, "kimi_k2")
    assert (out.reasoning, out.content) == (reasoning, content)
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == expected


def test_llamacpp_calls_inside_reasoning_without_section_or_end_markers() -> None:
    # The model left out `<|tool_call_end|>`: the next call's begin marker ends the first.
    text = (
        "<think>I need to call two functions"
        "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>"
        '{"arg1": 1}'
        "<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>"
        '{"code": "print(\'hey\')"}'
    )
    for fmt in ("kimi_k2", "kimi_k2_thinking"):
        out = parse_all_ways(text, fmt)
        assert (out.reasoning, out.content) == ("I need to call two functions", None)
        assert calls(out) == [
            ("special_function", {"arg1": 1}),
            ("python", {"code": "print('hey')"}),
        ]
    # Cut off inside the second call: the first one was complete.
    out = parse_all_ways(text[: text.rindex('"}')], "kimi_k2_thinking", truncated=True)
    assert calls(out) == [("special_function", {"arg1": 1})]
