"""The built-in demo tools."""

import datetime
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire.tools import ToolContext, ToolExecutionError, ToolParameterError
from toolwire.tools.demo import (
    DEMO_TOOLS,
    calculate,
    demo_toolbox,
    evaluate_arithmetic,
    get_current_time,
    get_weather,
)


def test_demo_tools_are_listed_with_valid_schemas() -> None:
    assert [t.name for t in DEMO_TOOLS] == ["get_current_time", "get_weather", "calculate"]
    for t in DEMO_TOOLS:
        jsonschema_rs.meta.validate(t.input_schema)
        assert t.effects == "read"
        assert t.description
    assert get_weather.input_schema["properties"]["unit"] == {
        "type": "string",
        "enum": ["celsius", "fahrenheit"],
        "default": "celsius",
        "description": "Temperature unit.",
    }
    assert get_weather.input_schema["required"] == ["city"]
    assert "not real weather" in get_weather.description
    assert get_weather.result_fields is not None
    assert "source" in get_weather.result_fields


async def test_toolbox_runs_every_demo_tool() -> None:
    box = demo_toolbox()
    ctx = ToolContext()
    assert [t.name for t in await box.list_tools()] == [t.name for t in DEMO_TOOLS]
    weather = await box.execute_tool("get_weather", {"city": "Lisbon"}, ctx)
    assert weather.result["source"] == "toolwire demo data (not real weather)"
    calc = await box.execute_tool("calculate", {"expression": "6 * 7"}, ctx)
    assert calc.result == {"expression": "6 * 7", "result": 42}
    now = await box.execute_tool("get_current_time", {}, ctx)
    assert now.result["timezone"] == "UTC"


def test_current_time_is_the_real_clock() -> None:
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    result = get_current_time("UTC")
    after = datetime.datetime.now(datetime.UTC)
    reported = datetime.datetime.fromisoformat(result["iso"])
    assert before <= reported <= after
    assert result["utc_offset"] == "+00:00"
    assert result["weekday"] == reported.strftime("%A")


@pytest.mark.parametrize(
    ("given", "zone"),
    [
        ("Europe/Lisbon", "Europe/Lisbon"),
        ("america/new_york", "America/New_York"),
        ("Tokyo", "Asia/Tokyo"),
        ("New York", "America/New_York"),
        ("gmt", "UTC"),
    ],
)
def test_time_zone_names_and_cities(given: str, zone: str) -> None:
    result = get_current_time(given)
    assert result["timezone"] == zone
    offset = datetime.datetime.fromisoformat(result["iso"]).utcoffset()
    assert offset is not None
    assert result["utc_offset"].startswith(("+", "-"))


def test_unknown_time_zone_is_a_clear_parameter_error() -> None:
    with pytest.raises(ToolParameterError) as exc:
        get_current_time("Mars/Olympus")
    assert exc.value.field == "timezone"
    assert "Unknown time zone 'Mars/Olympus'" in str(exc.value)
    assert "Europe/Lisbon" in str(exc.value)


def test_weather_is_deterministic_fake_data() -> None:
    first = get_weather("Lisbon")
    assert first == get_weather("  lisbon ")
    assert first["source"] == "toolwire demo data (not real weather)"
    assert first["city"] == "Lisbon"
    assert first["unit"] == "celsius"
    assert -5 <= first["temperature"] <= 31
    fahrenheit = get_weather("Lisbon", "fahrenheit")
    assert fahrenheit["temperature"] == pytest.approx(first["temperature"] * 9 / 5 + 32, abs=0.1)
    assert get_weather("Oslo") != first
    with pytest.raises(ToolParameterError, match="'city' must not be empty"):
        get_weather("  ")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("2 ** 10", 1024),
        ("2^10", 1024),
        ("-3 ** 2", -9),
        ("-(-4)", 4),
        ("+5", 5),
        ("sqrt(16) + abs(-2)", 6.0),
        ("round(2.567, 2)", 2.57),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("floor(2.7) + ceil(2.1)", 5),
        ("2 × 3 ÷ 4", 1.5),
        ("pi", 3.141592653589793),
        ("log10(1000)", 3.0),
        ("1e3 + 0.5", 1000.5),
        ("---1", -1),
        ("(" * 150 + "1" + ")" * 150, 1),
    ],
)
def test_calculate(expression: str, expected: Any) -> None:
    assert evaluate_arithmetic(expression) == pytest.approx(expected)
    assert calculate(expression) == {
        "expression": expression,
        "result": evaluate_arithmetic(expression),
    }


@pytest.mark.parametrize(
    ("expression", "error", "message"),
    [
        ("1 / 0", ToolExecutionError, "Division by zero"),
        ("5 % 0", ToolExecutionError, "Division by zero"),
        ("0 ** -1", ToolExecutionError, "Division by zero"),
        ("10 ** 10000", ToolExecutionError, "Exponents are limited"),
        ("9 ** 9 ** 9", ToolExecutionError, "Exponents are limited"),
        ("(10 ** 900) ** 900", ToolExecutionError, "too large"),
        ("exp(1000)", ToolExecutionError, "too large"),
        ("sqrt(-1)", ToolExecutionError, "math domain error"),
        ("(-8) ** 0.5", ToolExecutionError, "complex"),
        ("round(1, -1000000000)", ToolExecutionError, "between -100 and 100"),
        ("__import__('os')", ToolParameterError, "Unknown name '__import__'"),
        ("__import__('os').system('ls')", ToolParameterError, "Unsupported syntax"),
        ("open('/etc/passwd')", ToolParameterError, "Unknown name 'open'"),
        ("x + 1", ToolParameterError, "Unknown name 'x'"),
        ("'a' * 3", ToolParameterError, "Only numbers are allowed"),
        ("True + 1", ToolParameterError, "Only numbers are allowed"),
        ("[1, 2]", ToolParameterError, "Unsupported syntax"),
        ("(1).real", ToolParameterError, "Unsupported syntax"),
        ("1 if 1 else 2", ToolParameterError, "Unsupported syntax"),
        ("lambda: 1", ToolParameterError, "Unsupported syntax"),
        ("1 < 2", ToolParameterError, "Unsupported syntax"),
        ("1 << 2", ToolParameterError, "Unsupported syntax"),
        ("sqrt(x=4)", ToolParameterError, "positional numbers only"),
        ("2 * (3", ToolParameterError, "not a valid arithmetic expression"),
        ("", ToolParameterError, "is empty"),
        ("1+" * 400 + "1", ToolParameterError, "too long"),
    ],
)
def test_calculate_rejects_and_fails_clearly(
    expression: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        evaluate_arithmetic(expression)


def _expressions() -> st.SearchStrategy[tuple[str, int]]:
    leaves = st.integers(min_value=0, max_value=10**6).map(lambda n: (str(n), n))

    def combine(children: st.SearchStrategy[tuple[str, int]]) -> st.SearchStrategy[Any]:
        ops = st.sampled_from(
            [("+", lambda a, b: a + b), ("-", lambda a, b: a - b), ("*", lambda a, b: a * b)]
        )
        binary = st.tuples(children, ops, children).map(
            lambda t: (f"({t[0][0]} {t[1][0]} {t[2][0]})", t[1][1](t[0][1], t[2][1]))
        )
        negated = children.map(lambda c: (f"-{c[0]}", -c[1]))
        return binary | negated

    return st.recursive(leaves, combine, max_leaves=12)


@given(_expressions())
def test_calculate_agrees_with_integer_arithmetic(case: tuple[str, int]) -> None:
    expression, expected = case
    assert evaluate_arithmetic(expression) == expected
