"""OfflineModel: deterministic tool choice, argument filling, parsing, answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolwire.models import (
    AssistantMessage,
    ModelContentDelta,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    OfflineModel,
    ToolMessage,
    UserMessage,
)
from toolwire.models.offline import PARSER_MODEL
from toolwire.parsing import parse_output
from toolwire.tools import Tool, ToolCall, ToolResult
from toolwire.tools.demo import DEMO_TOOLS

TOOLS: list[Tool] = list(DEMO_TOOLS)


def schema(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


async def calls_for(text: str, tools: list[Tool] = TOOLS, **kw: Any) -> list[tuple[str, Any]]:
    response = await OfflineModel().complete([UserMessage(content=text)], tools, **kw)
    return [(c.name, json.loads(c.arguments)) for c in response.message.tool_calls]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What's the weather in Lisbon?", [("get_weather", {"city": "Lisbon"})]),
        (
            "what's the weather in são paulo in fahrenheit",
            [("get_weather", {"city": "são paulo", "unit": "fahrenheit"})],
        ),
        ("Is it going to rain in Rio de Janeiro?", [("get_weather", {"city": "Rio de Janeiro"})]),
        ("How hot is it in Berlin right now?", [("get_weather", {"city": "Berlin"})]),
        ("What time is it in New York?", [("get_current_time", {"timezone": "New York"})]),
        ("what's the date today", [("get_current_time", {})]),
        # No place given: the required city is left out, so the runner explains it.
        ("weather?", [("get_weather", {})]),
        ("What is 17 times 23?", [("calculate", {"expression": "17 * 23"})]),
        ("Calculate (2 + 3) * 4", [("calculate", {"expression": "(2 + 3) * 4"})]),
        ("square root of 16", [("calculate", {"expression": "sqrt(16)"})]),
        ("What is 1,000 / 8?", [("calculate", {"expression": "1000 / 8"})]),
        ("compute 3^5 - 10", [("calculate", {"expression": "3 ^ 5 - 10"})]),
        (
            "What's 2+2 and the weather in Paris?",
            [("calculate", {"expression": "2 + 2"}), ("get_weather", {"city": "Paris"})],
        ),
        (
            "Weather and time in Tokyo",
            [("get_weather", {"city": "Tokyo"}), ("get_current_time", {"timezone": "Tokyo"})],
        ),
    ],
)
async def test_demo_requests(text: str, expected: list[tuple[str, Any]]) -> None:
    assert await calls_for(text) == expected


async def test_deterministic() -> None:
    text = "What's 2+2 and the weather in Paris?"
    assert await calls_for(text) == await calls_for(text)


@pytest.mark.parametrize("text", ["Hi there", "tell me a joke", ""])
async def test_no_matching_tool_says_it_is_the_stand_in(text: str) -> None:
    response = await OfflineModel().complete([UserMessage(content=text)], TOOLS)
    assert response.message.tool_calls == ()
    assert response.finish_reason == "stop"
    content = response.message.content or ""
    assert "offline stand-in model" in content
    assert "get_current_time, get_weather, calculate" in content


async def test_no_tools_at_all() -> None:
    response = await OfflineModel().complete([UserMessage(content="weather in Oslo")], [])
    assert "no tools are available" in (response.message.content or "")


async def test_schema_driven_arguments_for_any_tool() -> None:
    search = Tool(
        name="search_flights",
        description="Search flights between airports",
        input_schema=schema(
            {
                "destination": {"type": "string"},
                "passengers": {"type": "integer", "default": 1},
                "cabin": {"type": "string", "enum": ["economy", "business", "first"]},
                "max_price": {"type": "number"},
                "direct_only": {"type": "boolean"},
                "note": {"type": "string"},
            },
            required=["destination"],
        ),
    )
    other = Tool(name="book_hotel", description="Book a hotel room", input_schema=schema({}))
    calls = await calls_for(
        "Search flights to Rome for 3 passengers in business, max price 450.5, "
        'not direct only, note "window seat"',
        [other, search],
    )
    assert calls == [
        (
            "search_flights",
            {
                "destination": "Rome",
                "passengers": 3,
                "cabin": "business",
                "max_price": 450.5,
                "direct_only": False,
                "note": "window seat",
            },
        )
    ]


async def test_required_values_fall_back_to_schema_and_positional_numbers() -> None:
    add = Tool(
        name="add_numbers",
        description="Add two numbers",
        input_schema=schema(
            {
                "a": {"type": "integer"},
                "b": {"type": "integer"},
                "mode": {"type": "string", "enum": ["exact", "approx"]},
                "scale": {"type": "string", "default": "linear"},
            },
            required=["a", "b", "mode", "scale"],
        ),
    )
    assert await calls_for("please add numbers 3 and 5", [add]) == [
        ("add_numbers", {"a": 3, "b": 5, "mode": "exact", "scale": "linear"})
    ]


async def test_tool_choice() -> None:
    # "none" forbids calls; a named tool or "required" forces one even without a match.
    none = ModelSettings(tool_choice="none")
    assert await calls_for("weather in Oslo", settings=none) == []
    named = ModelSettings(tool_choice="calculate")
    # A required string with nothing better goes as the request itself; the tool's own
    # error message then tells what it needed.
    assert await calls_for("weather in Oslo", settings=named) == [
        ("calculate", {"expression": "weather in Oslo"})
    ]
    required = ModelSettings(tool_choice="required")
    assert [n for n, _ in await calls_for("hello", settings=required)] == ["get_current_time"]


async def test_output_is_hermes_text_through_the_real_parser() -> None:
    model = OfflineModel()
    messages = [UserMessage(content="weather in Lisbon")]
    text = model.write(messages, TOOLS)
    assert text == (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n</tool_call>'
    )
    parsed = parse_output(text, PARSER_MODEL, format="hermes")
    response = await model.complete(messages, TOOLS)
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [
        (c.name, c.arguments_json) for c in parsed.tool_calls
    ]
    assert response.finish_reason == "tool_calls"
    assert response.model == "toolwire-offline"
    assert model.name == "toolwire-offline"
    assert "stand-in" in (OfflineModel.__doc__ or "")


async def test_stream_feeds_the_parser_in_pieces() -> None:
    model = OfflineModel(chunk_size=5)
    events: list[ModelStreamEvent] = [
        ev
        async for ev in model.stream(
            [UserMessage(content="What's 2+2 and the weather in Paris?")], TOOLS
        )
    ]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert sum(isinstance(e, ModelResponse) for e in events) == 1
    starts = [e for e in events if isinstance(e, ModelToolCallStart)]
    assert [(s.index, s.name) for s in starts] == [(0, "calculate"), (1, "get_weather")]
    assert [c.id for c in final.message.tool_calls] == [s.id for s in starts]
    for index, call in enumerate(final.message.tool_calls):
        text = "".join(
            e.text for e in events if isinstance(e, ModelToolCallArgsDelta) and e.index == index
        )
        assert text == call.arguments


def history(request: str, *results: tuple[str, ToolResult]) -> list[Any]:
    calls = tuple(ToolCall(id=r.call_id, name=name, arguments="{}") for name, r in results)
    return [
        UserMessage(content="earlier question"),
        AssistantMessage(content="earlier answer"),
        UserMessage(content=request),
        AssistantMessage(tool_calls=calls),
        *[
            ToolMessage(
                call_id=r.call_id, name=name, content=r.to_model_text(), is_error=not r.success
            )
            for name, r in results
        ],
    ]


async def test_answers_from_tool_results() -> None:
    weather = ToolResult.ok(
        "a",
        "get_weather",
        {"city": "Lisbon", "temperature": 21.3, "unit": "celsius", "condition": "sunny"},
    )
    calc = ToolResult.ok("b", "calculate", {"expression": "17 * 23", "result": 391})
    messages = history(
        "weather in Lisbon and 17 * 23", ("get_weather", weather), ("calculate", calc)
    )
    response = await OfflineModel().complete(messages, TOOLS)
    assert response.message.tool_calls == ()
    assert response.message.content == (
        "From get_weather: city Lisbon, temperature 21.3, unit celsius, condition sunny. "
        "From calculate: the result is 391 (expression 17 * 23)."
    )


async def test_answer_says_what_failed() -> None:
    failed = ToolResult.fail(
        "a", "get_weather", "invalid_arguments", "'city' is required: give a city name."
    )
    response = await OfflineModel().complete(history("weather?", ("get_weather", failed)), TOOLS)
    assert response.message.content == (
        "The call to get_weather failed (invalid_arguments): 'city' is required: give a city name."
    )


async def test_answer_streams_as_content() -> None:
    result = ToolResult.ok("a", "get_current_time", "12:00")
    events = [
        ev
        async for ev in OfflineModel(chunk_size=4).stream(
            history("time?", ("get_current_time", result)), TOOLS
        )
    ]
    pieces = [e.text for e in events if isinstance(e, ModelContentDelta)]
    assert len(pieces) > 1
    assert "".join(pieces) == "From get_current_time: 12:00."
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.content == "From get_current_time: 12:00."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Delete the application demo-app.", "demo-app"),
        ("delete the app called api-gateway", "api-gateway"),
        ("Delete demo-app please", "demo-app"),
        ("Remove the thing", "Remove the thing"),  # nothing better: the request itself
    ],
)
def test_a_required_string_is_the_span_the_request_names(text: str, expected: str) -> None:
    from toolwire.models._offline_args import fill_arguments

    schema = {"type": "object", "properties": {"app_name": {"type": "string"}}}
    schema["required"] = ["app_name"]
    assert fill_arguments(schema, text, text) == {"app_name": expected}


def test_a_path_argument_is_the_path_in_the_request() -> None:
    from toolwire.models._offline_args import fill_arguments

    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    text = "Read the file notes/todo.txt"
    assert fill_arguments(schema, text, text) == {"path": "notes/todo.txt"}


@pytest.mark.parametrize(
    ("text", "cities"),
    [
        ("What's the weather in Paris and London?", ["Paris", "London"]),
        ("Compare the weather in Lisbon and in Porto", ["Lisbon", "Porto"]),
        ("weather in Rio de Janeiro, Tokyo and New York", ["Rio de Janeiro", "Tokyo", "New York"]),
        ("weather in São Paulo or Buenos Aires?", ["São Paulo", "Buenos Aires"]),
        # A lower-case word after "and" starts another request, not another place.
        ("weather in Paris and tell me about it", ["Paris"]),
        ("weather in Paris and Paris", ["Paris"]),
    ],
)
async def test_several_places_are_several_calls(text: str, cities: list[str]) -> None:
    assert await calls_for(text) == [("get_weather", {"city": c}) for c in cities]


async def test_several_places_and_another_tool_in_one_request() -> None:
    assert await calls_for("weather in Paris and London, and what is 2+3?") == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "London"}),
        ("calculate", {"expression": "2 + 3"}),
    ]


def test_several_quoted_values_for_a_tool_of_one_string_are_several_calls() -> None:
    from toolwire.models._offline_args import fill_calls

    one = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    text = "delete the notes 'groceries' and 'todo'"
    assert fill_calls(one, text, text) == [{"title": "groceries"}, {"title": "todo"}]
    # Two strings ("rename 'a' to 'b'"): the quotes are two arguments, not two calls.
    two = {
        "type": "object",
        "properties": {"old": {"type": "string"}, "new": {"type": "string"}},
    }
    text = "rename 'draft' to 'final'"
    assert len(fill_calls(two, text, text)) == 1
