"""A call the output opens in a format's markup but does not write validly is reported as
a `ParseFailure` (for metrics and logs), and its text still comes back as content."""

from __future__ import annotations

import pytest

from toolwire.parsing import ParseFailure, parse_output, parser_for

BROKEN = [
    ("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>', "invalid"),
    ("hermes", '<tool_call>{"name": "get_we', "unfinished"),
    ("mistral_v3", "[TOOL_CALLS] not json", "invalid"),
    ("mistral_v3", '[TOOL_CALLS][{"name": "x", "arguments": {}}, {"na', "unfinished"),
    ("mistral_v11", '[TOOL_CALLS]get_weather[ARGS]{"city": ', "unfinished"),
    ("llama3_json", '<|python_tag|>{"name": "x", "parameters": {', "unfinished"),
    ("qwen3_xml", "<tool_call>\n<function=\n</tool_call>", "invalid"),
    ("glm45", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par", "unfinished"),
    ("gemma4", '<|tool_call>call:get_weather{city:<|"|>Par', "unfinished"),
    (
        "kimi_k2",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": <|tool_call_end|><|tool_calls_section_end|>',
        "invalid",
    ),
    (
        "deepseek_v3",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"city": \n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        "invalid",
    ),
]


@pytest.mark.parametrize(("fmt", "text", "reason"), BROKEN)
def test_a_broken_call_is_reported_and_its_text_kept(fmt: str, text: str, reason: str) -> None:
    out = parse_output(f"Sure. {text}", "any-model", format=fmt)
    assert out.tool_calls == []
    [failure] = out.failures
    assert failure.reason == reason
    assert failure.text.strip()
    assert failure.text.strip() in (out.content or "")


@pytest.mark.parametrize(("fmt", "text", "reason"), BROKEN)
def test_the_report_is_the_same_for_any_split(fmt: str, text: str, reason: str) -> None:
    parser = parser_for("any-model", format=fmt)
    events = [e for ch in text for e in parser.feed(ch)] + parser.finish()
    failures = [e for e in events if isinstance(e, ParseFailure)]
    assert [(f.reason, f.text) for f in failures] == [
        (f.reason, f.text) for f in parse_output(text, "any-model", format=fmt).failures
    ]


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("hermes", "Just an answer, no call."),
        (
            "hermes",
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
        ),
        # A bare JSON answer might have been a call, but it opened no call markup.
        ("json", '{"answer": 42'),
        ("llama3_json", '{"answer": '),
    ],
)
def test_text_and_valid_calls_report_no_failure(fmt: str, text: str) -> None:
    assert parse_output(text, "any-model", format=fmt).failures == []


def test_a_call_cut_off_by_the_token_limit_is_dropped_not_failed() -> None:
    out = parse_output('<tool_call>{"name": "get_we', "any-model", format="hermes", truncated=True)
    assert out.failures == []
    assert out.tool_calls == []


def test_calls_to_tools_not_offered_are_returned_and_marked() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "launch_rocket", "arguments": {}}</tool_call>'
    )
    out = parse_output(text, "any-model", tools, format="hermes")
    assert [(c.name, c.offered) for c in out.tool_calls] == [
        ("get_weather", True),
        ("launch_rocket", False),
    ]
    # Without tools to check against, nothing is marked either way.
    assert {c.offered for c in parse_output(text, "any-model", format="hermes").tool_calls} == {
        None
    }


THINK_FORMATS = [
    "hermes",
    "pre_json",
    "json_fence",
    "json",
    "tool_request",
    "qwen3_xml",
    "mistral_v11",
    "deepseek_v3",
    "deepseek_v32",
    "kimi_k2",
    "kimi_k2_thinking",
    "glm45",
    "glm47",
]


@pytest.mark.parametrize("fmt", THINK_FORMATS)
@pytest.mark.parametrize(
    ("suffix", "in_reasoning"),
    [
        ("<|assistant|>\n<think>\n", True),
        # The template (or the client) pre-filled the first words of the reasoning.
        ("<|assistant|>\n<think>\nThe user wants", True),
        ("<|assistant|>\n<think></think>\n", False),
        # An earlier turn's reasoning was closed; this turn's prompt opens none.
        ("<think>old</think>answer<|user|>hi<|assistant|>\n", False),
    ],
)
def test_every_format_reads_a_prefilled_think_by_one_rule(
    fmt: str, suffix: str, in_reasoning: bool
) -> None:
    out = parse_output("plan</think>answer", "any", format=fmt, prompt_suffix=suffix)
    if in_reasoning:
        assert (out.reasoning, out.content) == ("plan", "answer")
    else:
        # Outside reasoning a stray `</think>` is dropped, except by the formats whose
        # reasoning may only open the output (a bare JSON answer may quote the marker).
        stray = "</think>" if fmt in ("json", "tool_request") else ""
        assert (out.reasoning, out.content) == (None, f"plan{stray}answer")
