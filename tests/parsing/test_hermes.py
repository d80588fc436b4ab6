"""Hermes-style tool calls as Qwen3 (hybrid, Thinking-2507, Instruct-2507) write them."""

from __future__ import annotations

from streaming import calls, parse_all_ways

from toolwire.parsing import ContentDelta, ToolCallStart, format_for, parser_for

NO_THINK = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
PREFILLED = "<|im_start|>assistant\n<think>\n"


def test_qwen3_model_ids_select_hermes() -> None:
    for model in ("Qwen/Qwen3-8B", "Qwen/Qwen3-4B-Thinking-2507", "qwen2.5-7b-instruct"):
        assert format_for(model) == "hermes"


def test_thinking_then_call() -> None:
    out = parse_all_ways(
        '<think>\nNeed weather.\n</think>\n\n<tool_call>\n{"name": "w", "arguments": {"c": "Oslo"}}'
        "\n</tool_call>",
        "hermes",
    )
    assert (out.reasoning, out.content, calls(out)) == (
        "Need weather.",
        None,
        [("w", {"c": "Oslo"})],
    )


def test_prefilled_think_starts_in_reasoning() -> None:
    out = parse_all_ways("Simple.\n</think>\n\n2 + 2 = 4.", "hermes", prompt_suffix=PREFILLED)
    assert (out.reasoning, out.content) == ("Simple.", "2 + 2 = 4.")


def test_prefilled_think_truncated_keeps_reasoning() -> None:
    out = parse_all_ways("The user wants", "hermes", prompt_suffix=PREFILLED, truncated=True)
    assert (out.reasoning, out.content) == ("The user wants", None)


def test_thinking_disabled_prompt_does_not_start_in_reasoning() -> None:
    out = parse_all_ways("Hello!", "hermes", prompt_suffix=NO_THINK)
    assert (out.reasoning, out.content) == (None, "Hello!")


def test_parameters_instead_of_arguments() -> None:
    out = parse_all_ways(
        '<tool_call>{"name": "f", "parameters": {"a": [1, 2]}}</tool_call>', "hermes"
    )
    assert calls(out) == [("f", {"a": [1, 2]})]


def test_markers_inside_argument_strings_are_data() -> None:
    text = (
        '<tool_call>\n{"name": "echo", "arguments": {"t": "<tool_call> </tool_call> <think>"}}\n'
        "</tool_call>"
    )
    out = parse_all_ways(text, "hermes")
    assert calls(out) == [("echo", {"t": "<tool_call> </tool_call> <think>"})]
    assert out.content is None


def test_stray_end_tokens_and_closers_never_leak() -> None:
    out = parse_all_ways(
        '</think>\n\nHi.</tool_call><tool_call>{"name": "f", "arguments": {}}</tool_call>'
        "<|im_end|>",
        "hermes",
    )
    assert (out.content, calls(out)) == ("Hi.", [("f", {})])


def test_block_that_is_not_a_call_comes_back_verbatim() -> None:
    text = "<tool_call>not valid json</tool_call>"
    assert parse_all_ways(text, "hermes").content == text
    text = '<tool_call>{"name": "f", "arguments": [1]}</tool_call>'
    assert parse_all_ways(text, "hermes").content == text


def test_missing_closer_at_stop_still_calls() -> None:
    out = parse_all_ways('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n', "hermes")
    assert calls(out) == [("f", {"a": 1})]


def test_truncated_second_call_keeps_first_and_drops_markup() -> None:
    text = (
        'I will check.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": {"q": "caf'
    )
    out = parse_all_ways(text, "hermes", truncated=True)
    assert (out.content, calls(out)) == ("I will check.", [("a", {})])


def test_call_is_emitted_only_once_closed_and_text_held_minimally() -> None:
    parser = parser_for("Qwen/Qwen3-8B")
    assert parser.feed("Let me check <tool") == [ContentDelta("Let me check")]
    assert parser.feed('_call>{"name": "f", "arguments": {}}') == []
    events = parser.feed("</tool_call>")
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["f"]
    # The space held back after "check" is released with the next visible text.
    assert parser.feed(" <b>ok") == [ContentDelta("  <b>ok")]


def test_a_call_inside_reasoning_never_closed_ends_the_reasoning() -> None:
    # Qwen3 with thinking on may call a tool without writing </think> first.
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    for text, suffix in (
        ("I should check." + call, "<think>\n"),
        ("<think>I should check." + call, ""),
    ):
        out = parse_all_ways(text, "hermes", prompt_suffix=suffix)
        assert out.reasoning == "I should check."
        assert calls(out) == [("get_weather", {"city": "Paris"})]
        assert out.content is None


def test_a_late_think_closer_after_such_a_call_does_not_leak() -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    out = parse_all_ways("<think>Hmm." + call + "</think>Checking.", "hermes")
    assert (out.reasoning, out.content) == ("Hmm.", "Checking.")
    assert calls(out) == [("get_weather", {"city": "Paris"})]
