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


# ---------------------------------------------------------------------------------------
# Cases other engines test, rewritten as ours. Each text is parsed whole and in every split
# (per character, every two-piece cut, seeded random pieces): all must agree.
#
#   vLLM:      tests/tool_parsers/test_llama3_json_tool_parser.py (no tools offered),
#              test_pythonic_tool_parser.py, test_llama4_pythonic_tool_parser.py
#   SGLang:    test/registered/function_call/test_function_call_parser.py, TestLlama32Detector
#              (tools get_weather(city), get_tourist_attractions(city)) and
#              TestPythonicDetector (get_weather(location, unit), search(query))
#   llama.cpp: the Llama 3.1 / 3.2 / 3.3 blocks of tests/test-chat.cpp
#              (special_function(arg1: integer), python(code))
# ---------------------------------------------------------------------------------------


def _tool(name: str, **props: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


LLAMA32_TOOLS = [
    _tool("get_weather", city={"type": "string"}),
    _tool("get_tourist_attractions", city={"type": "string"}),
]
LLAMACPP_TOOLS = [
    _tool("special_function", arg1={"type": "integer"}),
    _tool("python", code={"type": "string"}),
]
PYTHONIC_TOOLS = [
    _tool(
        "get_weather",
        location={"type": "string"},
        unit={"type": "string", "enum": ["celsius", "fahrenheit"]},
    ),
    _tool("search", query={"type": "string"}),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # vLLM
            '{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}',
            [("searchTool", {"query": "test query", "limit": 10})],
        ),
        (  # vLLM
            '{"name": "searchTool", "arguments": {"query": "test"}}',
            [("searchTool", {"query": "test"})],
        ),
        (  # vLLM: five levels deep
            '{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": '
            '{"level4": {"value": "deep"}}}}}}',
            [("complexTool", {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}})],
        ),
        (  # vLLM: braces and brackets inside strings
            '{"name": "searchTool", "parameters": {"query": "test {value} [complex]",'
            '"nested": {"inner": "more {brackets}"}}}',
            [
                (
                    "searchTool",
                    {"query": "test {value} [complex]", "nested": {"inner": "more {brackets}"}},
                )
            ],
        ),
        (  # vLLM: escaped quotes around braces
            '{"name": "parserTool", "parameters": {"text": "He said \\"Hello {world}\\""}}',
            [("parserTool", {"text": 'He said "Hello {world}"'})],
        ),
        (  # llama.cpp
            '{"name": "special_function", "parameters": {"arg1": 1}}',
            [("special_function", {"arg1": 1})],
        ),
    ],
)
def test_engines_llama3_single_json_call(text: str, expected: list[Any]) -> None:
    out = parse_all_ways(text, "llama3_json")
    assert (out.content, calls(out), out.failures) == (None, expected, [])


@pytest.mark.parametrize("separator", ["; ", ";", ";\n", "\n", " ; "])
def test_vllm_llama3_parallel_json_separators(separator: str) -> None:
    text = (
        '{"name": "simpleTool", "parameters": {"value": "test"}}'
        + separator
        + '{"name": "complexTool", "parameters": '
        '{"config": {"database": {"connection": {"pool": {"size": 10}}}}}}'
        + separator
        + '{"name": "getOpenIncidentsTool", "parameters": {}}'
    )
    out = parse_all_ways(text, "llama3_json")
    assert out.content is None
    assert calls(out) == [
        ("simpleTool", {"value": "test"}),
        ("complexTool", {"config": {"database": {"connection": {"pool": {"size": 10}}}}}),
        ("getOpenIncidentsTool", {}),
    ]


@pytest.mark.parametrize(
    "text",
    [
        # vLLM finds a call object anywhere in the text; SGLang's Llama32Detector only at
        # the start or after <|python_tag|>, which is toolwire's rule (see the module doc):
        # JSON inside prose stays prose.
        'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} '
        "Would you like to know more?",
        'Here are the results: {"name": "searchTool", "parameters": {"query": "test1"}}; '
        '{"name": "getOpenIncidentsTool", "parameters": {}} Would you like to know more?',
        # vLLM and SGLang: no JSON, invalid JSON, a name without parameters/arguments.
        "This is just some text without any tool calls",
        '{"name": "invalidTool", "parameters": {invalid json}',
        '{"name": "toolWithoutParams"}',
        # SGLang finds the inner object of this malformed one; an unclosed bare object
        # only might have been a call, so toolwire keeps it as content (no failure).
        '{"name": "get_weather", "parameters": {{"name": "get_weather", "parameters": {}}',
    ],
)
def test_engines_llama3_text_that_is_not_a_call(text: str) -> None:
    out = parse_all_ways(text, "llama3_json", tools=LLAMA32_TOOLS)
    assert (out.content, out.tool_calls, out.failures) == (text, [], [])


@pytest.mark.parametrize(
    ("text", "content"),
    [
        # vLLM: braces or a JSON fragment in the prose after a call do not lose the call.
        (
            '{"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for this.',
            "I used {searchTool} for this.",
        ),
        (
            '{"name": "searchTool", "parameters": {"query": "test"}} '
            'The arguments I passed were {"query": "test"}',
            'The arguments I passed were {"query": "test"}',
        ),
    ],
)
def test_vllm_llama3_prose_after_a_call_stays_content(text: str, content: str) -> None:
    out = parse_all_ways(text, "llama3_json")
    assert (out.content, calls(out)) == (content, [("searchTool", {"query": "test"})])


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        (
            '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}};'
            '{"name": "get_tourist_attractions", "parameters": {"city": "Paris"}}',
            None,
            [("get_weather", {"city": "Paris"}), ("get_tourist_attractions", {"city": "Paris"})],
        ),
        (
            '<|python_tag|>{"name": "get_weather", "parameters": {}}'
            '<|python_tag|>{"name": "get_tourist_attractions", "parameters": {}}',
            None,
            [("get_weather", {}), ("get_tourist_attractions", {})],
        ),
        (
            '{"name": "get_weather", "parameters": {}} Some follow-up text',
            "Some follow-up text",
            [("get_weather", {})],
        ),
        (
            'Some intro. <|python_tag|>{"name": "get_weather", "parameters": {}}',
            "Some intro.",
            [("get_weather", {})],
        ),
    ],
)
def test_sglang_llama32_calls(text: str, content: str | None, expected: list[Any]) -> None:
    out = parse_all_ways(text, "llama3_json", tools=LLAMA32_TOOLS)
    assert (out.content, calls(out)) == (content, expected)
    assert all(c.offered for c in out.tool_calls)


def test_llamacpp_llama3_plain_text_with_tools_offered() -> None:
    out = parse_all_ways("Hello, world!\nWhat's up?", "llama3_json", tools=LLAMACPP_TOOLS)
    assert (out.content, out.tool_calls) == ("Hello, world!\nWhat's up?", [])


# Llama 3.1 built-in tools, as its template renders them (llama.cpp parses them; vLLM and
# SGLang do not): `<|python_tag|>name.call(k="v")`.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<|python_tag|>python.call(code=\"print('hey')\")", ("python", {"code": "print('hey')"})),
        (
            "<|python_tag|>code_interpreter.call(code=\"print('hey')\")",
            ("code_interpreter", {"code": "print('hey')"}),
        ),
    ],
)
def test_llamacpp_llama31_builtin_tool_call(text: str, expected: Any) -> None:
    out = parse_all_ways(text, "llama3_json", tools=LLAMACPP_TOOLS)
    assert (out.content, calls(out), out.failures) == (None, [expected], [])


def test_llama31_builtin_tool_call_after_content_and_its_failures() -> None:
    text = 'Sure. <|python_tag|>brave_search.call(query="x (y)")<|eom_id|>'
    out = parse_all_ways(text, "llama3_json")
    assert (out.content, calls(out)) == ("Sure.", [("brave_search", {"query": "x (y)"})])
    # Positional arguments or raw code after the tag are not a call: text, with a failure.
    for text in ('<|python_tag|>python.call("x")', "<|python_tag|>import math\nprint(1)"):
        out = parse_all_ways(text, "llama3_json")
        assert (out.content, out.tool_calls) == (text, [])
        assert [f.reason for f in out.failures] == ["invalid"]
    # Cut off by the token limit: dropped, never announced.
    out = parse_all_ways('<|python_tag|>brave_search.call(query="x', "llama3_json", truncated=True)
    assert (out.content, out.tool_calls) == (None, [])


# -- pythonic ---------------------------------------------------------------------------

_MORE_TYPES = (
    "register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, "
    "role=None, passed_test=True, aliases=['John', 'Johnny'])"
)
_MORE_TYPES_CALL = (
    "register_user",
    {
        "name": "John Doe",
        "age": 37,
        "address": {"city": "San Francisco", "state": "CA"},
        "role": None,
        "passed_test": True,
        "aliases": ["John", "Johnny"],
    },
)
_SIMPLE = "get_weather(city='San Francisco', metric='celsius')"
_SIMPLE_CALL = ("get_weather", {"city": "San Francisco", "metric": "celsius"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"[{_SIMPLE}]", [_SIMPLE_CALL]),
        (f"[{_MORE_TYPES}]", [_MORE_TYPES_CALL]),
        ("[get_weather()]", [("get_weather", {})]),
        (
            "[do_something_cool(additional_data={})]",
            [("do_something_cool", {"additional_data": {}})],
        ),
        ("[do_something_cool(steps=[])]", [("do_something_cool", {"steps": []})]),
        (
            r"[get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')]",
            [("get_weather", {"city": "Martha's Vineyard", "metric": '"cool units"'})],
        ),
        (f"[{_SIMPLE}, {_MORE_TYPES}]", [_SIMPLE_CALL, _MORE_TYPES_CALL]),
        (  # Llama 4: no spaces between calls
            "[get_weather(city='LA',metric='C'),register_user(name='Doe',age=9)]",
            [
                ("get_weather", {"city": "LA", "metric": "C"}),
                ("register_user", {"name": "Doe", "age": 9}),
            ],
        ),
        (  # Llama 4: <|python_start|> with and without <|python_end|>
            "<|python_start|>[get_weather(city='LA', metric='C')]<|python_end|>",
            [("get_weather", {"city": "LA", "metric": "C"})],
        ),
        (
            "<|python_start|>[get_weather(city='LA', metric='C'), "
            "register_user(name='Doe', age=9)]",
            [
                ("get_weather", {"city": "LA", "metric": "C"}),
                ("register_user", {"name": "Doe", "age": 9}),
            ],
        ),
        (
            "<|python_start|>[get_weather(city='LA', metric='C'), get_weather(), "
            "do_something_cool(steps=[])]<|python_end|>",
            [
                ("get_weather", {"city": "LA", "metric": "C"}),
                ("get_weather", {}),
                ("do_something_cool", {"steps": []}),
            ],
        ),
    ],
)
def test_vllm_pythonic_calls(text: str, expected: list[Any]) -> None:
    out = parse_all_ways(text, "pythonic")
    assert (out.content, calls(out), out.failures) == (None, expected, [])


@pytest.mark.parametrize(
    "text",
    [
        # vLLM keeps the sibling calls it can convert and drops the one it cannot (a bytes
        # literal, an overflowing 1e999, a broken quote). A list with a call that is not
        # valid is not a valid block, and toolwire returns the whole list as text, so
        # nothing the model wrote is dropped (docs/parsing.md "Guarantees").
        f"[bad(x=b'z'), {_SIMPLE}]",
        f"[calc(x=1e999), {_SIMPLE}]",
        f"[{_SIMPLE}, f(a='x 'y', b='z')]",
        # vLLM and toolwire agree: nothing parses, everything is content.
        "[f(a='x 'y' 'z), g(b='p 'q' 'r)]",
        "[foo(x=1])]",
    ],
)
def test_vllm_pythonic_list_with_an_invalid_call_is_text(text: str) -> None:
    out = parse_all_ways(text, "pythonic")
    assert (out.content, out.tool_calls) == (text, [])


def test_vllm_pythonic_mismatched_brackets_after_python_start_are_reported() -> None:
    # The block comes back whole, its markers as a pair (never half the markup).
    text = "<|python_start|>[foo(x=1])]<|python_end|>"
    out = parse_all_ways(text, "pythonic")
    assert (out.content, out.tool_calls) == (text, [])
    assert [f.reason for f in out.failures] == ["invalid"]


@pytest.mark.parametrize(
    ("text", "content", "expected"),
    [
        (
            "Here's a tool call: [get_weather(location='New York', unit='celsius')]",
            "Here's a tool call:",
            [("get_weather", {"location": "New York", "unit": "celsius"})],
        ),
        (
            "[get_weather(location='Tokyo')] Here's the forecast:",
            "Here's the forecast:",
            [("get_weather", {"location": "Tokyo"})],
        ),
        (
            "[get_weather(location='Berlin')] and [search(query='restaurants')]",
            "and",
            [("get_weather", {"location": "Berlin"}), ("search", {"query": "restaurants"})],
        ),
        (
            "[get_weather(location='Paris', data=[10, 20]), search(query='test', "
            "filters=['a', 'b'], config={'options': [1, 2], 'nested': {'key': 'value'}})]",
            None,
            [
                ("get_weather", {"location": "Paris", "data": [10, 20]}),
                (
                    "search",
                    {
                        "query": "test",
                        "filters": ["a", "b"],
                        "config": {"options": [1, 2], "nested": {"key": "value"}},
                    },
                ),
            ],
        ),
        (  # Content on both sides of <|python_start|>…<|python_end|>, kept verbatim between.
            "User wants to get the weather in Mars. <|python_start|>[get_weather("
            "location='Mars', unit='celsius')]<|python_end|> In this way we will get the "
            "weather in Mars.",
            "User wants to get the weather in Mars.  In this way we will get the weather in Mars.",
            [("get_weather", {"location": "Mars", "unit": "celsius"})],
        ),
        ("Let's try this: [", "Let's try this: [", []),
    ],
)
def test_sglang_pythonic_calls_and_prose(
    text: str, content: str | None, expected: list[Any]
) -> None:
    out = parse_all_ways(text, "pythonic", tools=PYTHONIC_TOOLS)
    assert (out.content, calls(out), out.failures) == (content, expected, [])


def test_sglang_pythonic_cut_off_call_is_dropped_and_prose_kept() -> None:
    text = "Let me check the weather: [get_weather(location='Tokyo', data=[1, 2"
    out = parse_all_ways(text, "pythonic", tools=PYTHONIC_TOOLS, truncated=True)
    assert (out.content, out.tool_calls) == ("Let me check the weather:", [])
