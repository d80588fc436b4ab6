"""Forgiving, then strict: argument repair, schema defaults and the retry budget."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from runner_support import RaisingProvider, call

from toolwire.runner import ArgumentError, ArgumentSpec, Policy, ToolRunner
from toolwire.tools import Tool, Toolbox, ToolContext, ToolResult, tool


class Filter(BaseModel):
    status: str = "open"
    limit: int = 10


received: list[dict[str, Any]] = []


@tool
def search(
    query: str,
    filter: Filter | None = None,
    tags: list[str] | None = None,
    max_results: int = 5,
    score: float = 0.5,
    exact: bool = False,
) -> dict[str, Any]:
    """Search tickets."""
    received.append(
        {
            "query": query,
            "filter": filter.model_dump() if filter else None,
            "tags": tags,
            "max_results": max_results,
            "score": score,
            "exact": exact,
        }
    )
    return received[-1]


@pytest.fixture
def runner() -> ToolRunner:
    received.clear()
    return ToolRunner(Toolbox([search]))


# --- repairs --------------------------------------------------------------------------------


async def test_scalars_sent_as_strings_are_repaired(runner: ToolRunner) -> None:
    args = {"query": "vpn", "max_results": "7", "score": "0.75", "exact": "true"}
    result = await runner.exec(call("search", args))
    assert result.success, result.error
    assert result.result["max_results"] == 7
    assert result.result["score"] == 0.75
    assert result.result["exact"] is True
    assert sorted(result.repaired) == [
        "'exact': string -> boolean",
        "'max_results': string -> integer",
        "'score': string -> number",
    ]


async def test_object_and_array_sent_as_json_strings_are_repaired(runner: ToolRunner) -> None:
    args = {"query": "vpn", "filter": '{"status": "closed", "limit": "3"}', "tags": '["a", "b"]'}
    result = await runner.exec(call("search", args))
    assert result.success, result.error
    assert result.result["filter"] == {"status": "closed", "limit": 3}
    assert result.result["tags"] == ["a", "b"]
    assert "'filter': string -> object" in result.repaired
    assert "'filter.limit': string -> integer" in result.repaired
    assert "'tags': string -> array" in result.repaired


async def test_double_encoded_arguments_are_repaired(runner: ToolRunner) -> None:
    result = await runner.exec(call("search", '"{\\"query\\": \\"vpn\\"}"'))
    assert result.success, result.error
    assert result.result["query"] == "vpn"
    assert result.repaired == ["arguments: JSON string -> object"]


async def test_valid_arguments_are_not_repaired(runner: ToolRunner) -> None:
    # A string where a string is wanted stays a string, even if it looks like a number.
    result = await runner.exec(call("search", {"query": "42", "max_results": 3}))
    assert result.success
    assert result.result["query"] == "42"
    assert result.repaired == []


async def test_unrepairable_strings_stay_invalid(runner: ToolRunner) -> None:
    result = await runner.exec(call("search", {"query": "vpn", "max_results": "seven"}))
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "Argument 'max_results' must be an integer (got a string 'seven')." in (
        result.error.message
    )


async def test_repairs_can_be_turned_off() -> None:
    received.clear()
    runner = ToolRunner(Toolbox([search]), policy=Policy(repair_arguments=False))
    result = await runner.exec(call("search", {"query": "vpn", "max_results": "7"}))
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    double = await runner.exec(call("search", '"{\\"query\\": \\"vpn\\"}"'))
    assert double.error is not None
    assert double.error.code == "invalid_json"
    assert received == []


@pytest.mark.parametrize(
    ("schema", "raw", "expected"),
    [
        ({"type": "integer"}, "3.0", 3),
        ({"type": "integer"}, " -12 ", -12),
        ({"type": "number"}, "1e3", 1000.0),
        ({"type": "number"}, "nan", "nan"),
        ({"type": "boolean"}, "False", False),
        ({"type": "boolean"}, "yes", "yes"),
        ({"type": ["integer", "null"]}, "null", None),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "8", 8),
        ({"type": "array", "items": {"type": "integer"}}, '["1", 2]', [1, 2]),
        ({"type": "object"}, "[1]", "[1]"),
    ],
)
def test_repair_table(schema: dict[str, Any], raw: str, expected: Any) -> None:
    spec = ArgumentSpec("t", {"type": "object", "properties": {"x": schema}})
    try:
        args, _ = spec.prepare(f'{{"x": {_json(raw)}}}')
    except ArgumentError:
        args = {"x": raw}  # left as it was, and rejected
    assert args["x"] == expected


def test_repair_through_refs() -> None:
    schema = {
        "type": "object",
        "$defs": {"Item": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
    }
    args, repaired = ArgumentSpec("t", schema).prepare('{"items": [{"qty": "2"}, {"qty": 3}]}')
    assert args == {"items": [{"qty": 2}, {"qty": 3}]}
    assert repaired == ["'items[0].qty': string -> integer"]


def _json(text: str) -> str:
    import orjson

    return orjson.dumps(text).decode()


# --- defaults -------------------------------------------------------------------------------


async def test_schema_defaults_are_applied_before_the_tool_runs() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days": {"type": "integer", "default": 1},
            "opts": {
                "type": "object",
                "properties": {"lang": {"type": "string", "default": "en"}},
                "default": {},
            },
            "tags": {"type": "array", "default": []},
        },
        "required": ["city"],
    }
    t = Tool(name="forecast", input_schema=schema)
    provider = RaisingProvider([t], returns=ToolResult.ok("", "forecast", "ok"))
    runner = ToolRunner(provider)
    await runner.exec(call("forecast", {"city": "Porto"}))
    await runner.exec(call("forecast", {"city": "Faro", "days": 3, "opts": {}}))
    first, second = (args for _, args in provider.executed)
    assert first == {"city": "Porto", "unit": "celsius", "days": 1, "opts": {}, "tags": []}
    assert second == {
        "city": "Faro",
        "unit": "celsius",
        "days": 3,
        "opts": {"lang": "en"},
        "tags": [],
    }
    # Mutable defaults are copies, never shared between calls.
    first["tags"].append("x")
    await runner.exec(call("forecast", {"city": "Braga"}))
    assert provider.executed[-1][1]["tags"] == []


async def test_pydantic_defaults_reach_the_function(runner: ToolRunner) -> None:
    result = await runner.exec(call("search", {"query": "vpn", "filter": {}}))
    assert result.success, result.error
    assert result.result["filter"] == {"status": "open", "limit": 10}
    assert result.result["max_results"] == 5


# --- retry budget ---------------------------------------------------------------------------


async def test_retry_budget_stops_a_model_that_keeps_sending_invalid_arguments() -> None:
    runner = ToolRunner(Toolbox([search]), policy=Policy(max_invalid_attempts=2))
    ctx = ToolContext()
    codes = []
    for _ in range(4):
        result = await runner.exec(call("search", {"max_results": 1}), ctx)
        assert result.error is not None
        codes.append(result.error.code)
    assert codes == [
        "invalid_arguments",
        "invalid_arguments",
        "retry_budget_exhausted",
        "retry_budget_exhausted",
    ]
    assert result.error is not None
    assert "Missing required argument 'query'." in result.error.message
    assert "Stop calling tool 'search'" in result.error.message
    assert "limit is 2" in result.error.message
    assert ctx.invalid_attempts == {"search": 4}


async def test_retry_budget_counts_invalid_json_per_tool_and_per_context() -> None:
    runner = ToolRunner(Toolbox([search]), policy=Policy(max_invalid_attempts=1))
    ctx = ToolContext()
    first = await runner.exec(call("search", "{not json"), ctx)
    second = await runner.exec(call("search", "[]"), ctx)
    assert first.error is not None
    assert first.error.code == "invalid_json"
    assert second.error is not None
    assert second.error.code == "retry_budget_exhausted"
    # A new run (a new context) starts with a fresh budget.
    fresh = await runner.exec(call("search", "[]"), ToolContext())
    assert fresh.error is not None
    assert fresh.error.code == "invalid_json"
    # Valid calls still run after the budget is spent.
    ok = await runner.exec(call("search", {"query": "vpn"}), ctx)
    assert ok.success


@pytest.mark.parametrize("depth", [300, 900, 1000])
async def test_deeply_nested_arguments_are_invalid_arguments_not_an_internal_error(
    depth: int,
) -> None:
    from toolwire.runner import ToolRunner
    from toolwire.tools import Toolbox, ToolCall, tool

    @tool
    def total(x: list[int]) -> int:
        """Add numbers."""
        return sum(x)

    deep = "[" * depth + "]" * depth
    result = await ToolRunner(Toolbox([total])).exec(
        ToolCall(id="c", name="total", arguments='{"x": ' + deep + "}")
    )
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "nested too deeply" in result.error.message
