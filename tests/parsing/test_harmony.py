"""Harmony (gpt-oss): channels, recipients in either header position, stop tokens cut."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streaming import calls, parse_all_ways, summary

from toolwire.parsing import (
    ParsedOutput,
    ToolCallStart,
    assemble,
    format_for,
    parse_output,
    parser_for,
)
from toolwire.parsing.formats.harmony import MARKERS

ANALYSIS = "<|channel|>analysis<|message|>Need the weather.<|end|>"
ROLE_CALL = (
    "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
    '<|message|>{"city": "Paris"}'
)
WEATHER = [("get_weather", {"city": "Paris"})]


def harmony(text: str, **kw: Any) -> ParsedOutput:
    return parse_all_ways(text, "harmony", **kw)


def test_gpt_oss_model_ids_select_harmony() -> None:
    for model in ("openai/gpt-oss-20b", "openai/gpt-oss-120b", "gpt-oss:20b"):
        assert format_for(model) == "harmony"


def test_analysis_then_call_with_recipient_in_role_header() -> None:
    out = harmony(ANALYSIS + ROLE_CALL)
    assert (out.reasoning, out.content, calls(out)) == ("Need the weather.", None, WEATHER)


@pytest.mark.parametrize(
    "header",
    [
        "<|channel|>commentary to=functions.get_weather <|constrain|>json",
        "<|channel|>commentary to=functions.get_weather<|constrain|>json",
        " to=functions.get_weather<|channel|>commentary json",
        " to=functions.get_weather<|channel|>commentary",
        " to=functions.get_weather<|channel|>analysis <|constrain|>json",
    ],
    ids=["channel", "constrain-adjacent", "role-json-text", "no-content-type", "on-analysis"],
)
def test_every_header_spelling_is_the_same_call(header: str) -> None:
    out = harmony(header + '<|message|>{"city": "Paris"}')
    assert (out.reasoning, out.content, calls(out)) == (None, None, WEATHER)


def test_end_of_output_ends_the_call_because_call_token_is_cut() -> None:
    assert calls(harmony(ROLE_CALL)) == WEATHER
    assert calls(harmony(ROLE_CALL + "<|call|>")) == WEATHER
    assert calls(harmony(ROLE_CALL + "<|end|>")) == WEATHER


def test_call_is_emitted_at_its_call_token_not_later() -> None:
    parser = parser_for("openai/gpt-oss-20b")
    events = parser.feed(ANALYSIS + ROLE_CALL)
    assert not any(isinstance(e, ToolCallStart) for e in events)
    events = parser.feed("<|call|>")
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["get_weather"]


def test_sequential_calls_then_final_answer() -> None:
    text = (
        ANALYSIS
        + ROLE_CALL
        + "<|call|><|start|>assistant to=functions.get_time<|channel|>commentary json"
        '<|message|>{"tz": "UTC"}<|call|><|start|>assistant<|channel|>final<|message|>Done.'
    )
    out = harmony(text)
    assert calls(out) == [*WEATHER, ("get_time", {"tz": "UTC"})]
    assert (out.reasoning, out.content) == ("Need the weather.", "Done.")


def test_commentary_without_recipient_is_a_preamble_in_content() -> None:
    text = "<|channel|>commentary<|message|>Checking — one moment.<|end|>" + ROLE_CALL
    out = harmony(text)
    assert (out.content, calls(out)) == ("Checking — one moment.", WEATHER)


def test_final_only_and_json_lookalike_stay_content() -> None:
    text = '<|channel|>final<|message|>{"name": "get_weather", "arguments": {}}'
    out = harmony(text)
    assert (out.content, out.tool_calls) == ('{"name": "get_weather", "arguments": {}}', [])


def test_marker_text_inside_json_argument_strings_is_data() -> None:
    value = 'Ends with <|call|> or <|end|>; "quoted" \\ <|start|>assistant<|channel|>final'
    text = (
        " to=functions.write<|channel|>commentary <|constrain|>json<|message|>"
        '{"text": "Ends with <|call|> or <|end|>; \\"quoted\\" \\\\ '
        '<|start|>assistant<|channel|>final"}<|call|>'
    )
    out = harmony(text)
    assert calls(out) == [("write", {"text": value})]
    assert out.content is None


def test_marker_text_inside_reasoning_is_data() -> None:
    text = "<|channel|>analysis<|message|>Never write <|call|> or <|channel|>final.<|end|>"
    out = harmony(text + ROLE_CALL)
    assert out.reasoning == "Never write <|call|> or <|channel|>final."
    assert calls(out) == WEATHER


def test_builtin_recipient_is_not_a_function_call() -> None:
    text = (
        ANALYSIS
        + "<|start|>assistant<|channel|>commentary to=python <|constrain|>code"
        + '<|message|>print("hi")'
    )
    out = harmony(text)
    assert (out.reasoning, out.content, out.tool_calls) == ("Need the weather.", None, [])


def test_bare_recipient_naming_an_offered_tool_is_a_call() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    text = ' to=get_weather<|channel|>commentary<|message|>{"city": "Paris"}'
    out = parse_output(text, "openai/gpt-oss-20b", tools)
    assert calls(out) == WEATHER
    assert parse_output(text, "openai/gpt-oss-20b").tool_calls == []


def test_malformed_headers_are_skipped_and_parsing_goes_on() -> None:
    garbled = "<|channel|>??<|end|><|start|>assistant<|channel|>analysis<|message|>Thinking."
    assert harmony(garbled).reasoning == "Thinking."
    stray = "<|channel|>commentary to=assistant<|channel|>analysis<|message|>Hm.<|end|>"
    out = harmony(stray + "<|start|>assistant<|channel|>final<|message|>Hi!")
    assert (out.reasoning, out.content, out.tool_calls) == ("Hm.", "Hi!", [])
    unknown = harmony("<|channel|>comment<|message|>some text<|end|>")
    assert (unknown.content, unknown.reasoning, unknown.tool_calls) == (None, None, [])


def test_truncated_inside_arguments_never_emits_the_call() -> None:
    text = ANALYSIS + ROLE_CALL[:-3]
    parser = parser_for("openai/gpt-oss-20b")
    events = [e for ch in text for e in parser.feed(ch)] + parser.finish(truncated=True)
    assert not any(isinstance(e, ToolCallStart) for e in events)
    out = harmony(text, truncated=True)
    assert (out.reasoning, out.content, out.tool_calls) == ("Need the weather.", None, [])


def test_truncated_complete_json_is_still_unfinished() -> None:
    out = harmony(ROLE_CALL, truncated=True)
    assert out.tool_calls == []


def test_truncated_inside_header_keeps_the_reasoning() -> None:
    out = harmony(ANALYSIS + ROLE_CALL.split("<|message|>")[0], truncated=True)
    assert (out.reasoning, out.content, out.tool_calls) == ("Need the weather.", None, [])


def test_earlier_calls_survive_truncation_of_a_later_one() -> None:
    text = ROLE_CALL + "<|call|>" + ROLE_CALL[:-5]
    assert calls(harmony(text, truncated=True)) == WEATHER


def test_invalid_arguments_degrade_to_content() -> None:
    out = harmony(' to=functions.f<|channel|>commentary<|message|>{"a": 1<|call|>')
    assert (out.content, out.tool_calls) == ('{"a": 1', [])


def test_unbalanced_quote_cannot_hide_the_rest_of_the_output() -> None:
    text = (
        ' to=functions.f<|channel|>commentary<|message|>{"a": "x}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>Sorry."
    )
    out = harmony(text)
    assert (out.content, out.tool_calls) == ('{"a": "x}\n\nSorry.', [])


def test_prompt_suffix_says_where_output_starts() -> None:
    final = "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>"
    assert harmony("Hello!", prompt_suffix=final).content == "Hello!"
    analysis = "<|start|>assistant<|channel|>analysis<|message|>"
    out = harmony(
        "Hmm.<|end|><|start|>assistant<|channel|>final<|message|>Hi", prompt_suffix=analysis
    )
    assert (out.reasoning, out.content) == ("Hmm.", "Hi")
    role_call = ROLE_CALL.removeprefix("<|start|>assistant")
    assert calls(harmony(role_call, prompt_suffix="<|start|>assistant")) == WEATHER


def test_output_without_any_marker_is_plain_content() -> None:
    assert harmony("Just text, no channels.").content == "Just text, no channels."


_PIECES = st.sampled_from(
    [
        *MARKERS,
        " to=functions.f",
        "analysis",
        "final",
        "commentary",
        '{"a": 1}',
        '"',
        "\\",
        "x y",
        " json",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_PIECES, max_size=14), st.booleans(), st.randoms(use_true_random=False))
def test_any_text_never_raises_and_any_split_agrees(
    parts: list[str], truncated: bool, rng: Any
) -> None:
    text = "".join(parts)
    whole = parse_output(text, "openai/gpt-oss-20b", truncated=truncated)
    for pieces in (list(text), _random_pieces(text, rng)):
        parser = parser_for("openai/gpt-oss-20b")
        events = [e for p in pieces for e in parser.feed(p)] + parser.finish(truncated=truncated)
        assert summary(assemble(events)) == summary(whole)


def _random_pieces(text: str, rng: Any) -> list[str]:
    pieces, pos = [], 0
    while pos < len(text):
        size = rng.randint(1, 6)
        pieces.append(text[pos : pos + size])
        pos += size
    return pieces


def test_a_preamble_and_the_final_answer_are_kept_apart() -> None:
    text = (
        "<|channel|>commentary<|message|>Checking the weather.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>"
    )
    assert harmony(text).content == "Checking the weather.\n\nIt is sunny."
