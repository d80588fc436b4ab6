"""Llama 3 JSON calls and Llama 4 pythonic calls."""

from __future__ import annotations

from typing import Any

import pytest
from streaming import calls, parse_all_ways

from toolwire.parsing import ContentDelta, ToolCallStart, format_for, parse_output, parser_for


def test_model_ids_select_json_or_pythonic() -> None:
    assert format_for("meta-llama/Llama-3.3-70B-Instruct") == "llama3_json"
    assert format_for("meta-llama/Llama-3.2-3B-Instruct") == "llama3_json"
    assert format_for("meta-llama/Llama-4-Scout-17B-16E-Instruct") == "pythonic"


# -- Llama 3 JSON -------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["parameters", "arguments"])
def test_whole_output_json_call(key: str) -> None:
    out = parse_all_ways(f' {{"name": "f", "{key}": {{"q": "t", "n": 10}}}}', "llama3_json")
    assert (out.content, calls(out)) == (None, [("f", {"q": "t", "n": 10})])


def test_python_tag_after_text_and_type_key() -> None:
    text = 'Let me check. <|python_tag|>{"type": "function", "name": "w", "parameters": {}}'
    out = parse_all_ways(text, "llama3_json")
    assert (out.content, calls(out)) == ("Let me check.", [("w", {})])


def test_several_calls_separated_by_semicolons_or_newlines() -> None:
    text = (
        '{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}\n'
        '{"name": "c", "parameters": {}}'
    )
    out = parse_all_ways(text, "llama3_json")
    assert calls(out) == [("a", {}), ("b", {"x": 1}), ("c", {})]


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        '{"parameters": {}}',
        '{"a": 1} is a dict',
        '{"capital": "Paris", "country": "France"}',
        '{"name": "Paris", "country": "France"}',
        "{not json}",
        'The call is {"name": "f", "parameters": {}}',
    ],
)
def test_json_that_is_not_a_call_is_content_verbatim(text: str) -> None:
    out = parse_all_ways(text, "llama3_json")
    assert (out.content, out.tool_calls) == (text, [])


def test_leading_brace_that_cannot_be_json_is_released_at_once() -> None:
    parser = parser_for("meta-llama/Llama-3.3-70B-Instruct")
    assert parser.feed("{") == []
    assert parser.feed("x") == [ContentDelta("{"), ContentDelta("x")]


def test_marker_text_inside_an_argument_is_data() -> None:
    text = '{"name": "w", "parameters": {"c": "<|python_tag|> <|eot_id|> }"}}'
    out = parse_all_ways(text, "llama3_json")
    assert calls(out) == [("w", {"c": "<|python_tag|> <|eot_id|> }"})]


def test_truncated_bare_json_comes_back_as_content() -> None:
    text = '{"name": "f", "parameters": {"a": 1,'
    out = parse_all_ways(text, "llama3_json", truncated=True)
    assert (out.content, out.tool_calls) == (text, [])


def test_truncated_after_python_tag_is_dropped() -> None:
    out = parse_all_ways('Sure <|python_tag|>{"name": "f", "par', "llama3_json", truncated=True)
    assert (out.content, out.tool_calls) == ("Sure", [])


def test_end_of_turn_tokens_are_dropped() -> None:
    out = parse_all_ways('<|python_tag|>{"name": "f", "parameters": {}}<|eom_id|>', "llama3_json")
    assert (out.content, calls(out)) == (None, [("f", {})])


# -- Llama 4 pythonic ---------------------------------------------------------------------


def test_pythonic_literals_map_to_json_types() -> None:
    text = (
        "[reg(name='Doe', age=9, addr={'city': 'LA'}, role=None, ok=True, al=['J', 2.5], t=(1,))]"
    )
    out = parse_all_ways(text, "pythonic")
    assert calls(out) == [
        ("reg", {"name": "Doe", "age": 9, "addr": {"city": "LA"}, "role": None, "ok": True,
                 "al": ["J", 2.5], "t": [1]}),
    ]  # fmt: skip


def test_pythonic_parallel_escapes_and_parameterless() -> None:
    text = '[w(city=\'Martha\\\'s (x)\', m="\\"c\\""),g(),search(_limit=-5)]'
    out = parse_all_ways(text, "pythonic")
    assert calls(out) == [
        ("w", {"city": "Martha's (x)", "m": '"c"'}),
        ("g", {}),
        ("search", {"_limit": -5}),
    ]


def test_pythonic_inside_python_start_end() -> None:
    out = parse_all_ways("<|python_start|>[f(a='<|python_end|>')]<|python_end|>", "pythonic")
    assert (out.content, calls(out)) == (None, [("f", {"a": "<|python_end|>"})])


@pytest.mark.parametrize(
    "text",
    [
        "[Note](https://example.com) is a link",
        "[1, 2, 3] are numbers",
        "[]",
        "[f(1)]",
        "[f(a=__import__('os').system('x'))]",
        "[f(a=b)]",
        "[f(**kw)]",
        "[f(a={1, 2})]",
        "[f(a=float('nan'))]",
        "How can I help you today?",
    ],
)
def test_pythonic_non_calls_are_content_verbatim(text: str) -> None:
    out = parse_all_ways(text, "pythonic")
    assert (out.content, out.tool_calls) == (text, [])


def test_pythonic_prose_in_brackets_is_released_early() -> None:
    parser = parser_for("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert parser.feed("[Note") == []
    released = parser.feed(" that")
    assert "".join(e.text for e in released if isinstance(e, ContentDelta)) == "[Note that"


def test_pythonic_call_waits_for_the_list_to_close() -> None:
    parser = parser_for("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert parser.feed("[f(a=')]'), g(") == []
    events = parser.feed(")]")
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["f", "g"]


def test_pythonic_truncated_is_not_a_call() -> None:
    text = '[get_weather(city="San Francisco"), get_weather(city="Seattle'
    out = parse_all_ways(text, "pythonic", truncated=True)
    assert out.tool_calls == []


def test_pythonic_absurd_nesting_degrades_to_content() -> None:
    text = "[f(a=" + "[" * 50_000 + "]" * 50_000 + ")]"
    out = parse_output(text, "meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert (out.content, out.tool_calls) == (text, [])


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        (
            'Here is the call: [get_weather(city="Paris")]',
            "Here is the call:",
            [("get_weather", {"city": "Paris"})],
        ),
        ('Sure.\n[get_weather(city="Paris")]', "Sure.", [("get_weather", {"city": "Paris"})]),
        (
            '[a link](x) then [get_weather(city="Rome"), get_time()] done',
            "[a link](x) then  done",
            [("get_weather", {"city": "Rome"}), ("get_time", {})],
        ),
        # Brackets that hold no call list are text, and never a parse failure.
        ("see [1] for details", "see [1] for details", []),
        ("x[foo()] is an index, not a call", "x[foo()] is an index, not a call", []),
        ("use [f(x)] maybe", "use [f(x)] maybe", []),
    ],
)
def test_pythonic_calls_after_prose(text: str, content: str, expected: list[Any]) -> None:
    out = parse_all_ways(text, "pythonic")
    assert (out.content, calls(out), out.failures) == (content, expected, [])
