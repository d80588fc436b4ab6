"""Every error code of `ToolRunner.exec`, and that none of them escapes as an exception."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Literal

import pytest
from runner_support import RaisingProvider, call

from toolwire.runner import Policy, ToolRunner
from toolwire.tools import (
    Tool,
    Toolbox,
    ToolContext,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameter,
    ToolParameterError,
    ToolResult,
    tool,
)


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Demo weather.

    Args:
        city: City name.
        unit: Temperature unit.
    """
    return f"{city}: 20 {unit}"


@tool
def get_time() -> str:
    """The time."""
    return "12:00"


@pytest.fixture
def runner() -> ToolRunner:
    return ToolRunner(Toolbox([get_weather, get_time]))


async def test_valid_call_succeeds_and_records_duration(runner: ToolRunner) -> None:
    result = await runner.exec(call("get_weather", {"city": "Lisbon"}, id="call_abc"))
    assert result.success
    assert result.call_id == "call_abc"
    assert result.name == "get_weather"
    assert result.result == "Lisbon: 20 celsius"
    assert result.error is None
    assert result.duration_ms > 0


# --- unknown_tool ---------------------------------------------------------------------------


async def test_unknown_tool_lists_available_names_and_suggests(runner: ToolRunner) -> None:
    result = await runner.exec(call("get_wether", {"city": "Lisbon"}))
    assert not result.success
    assert result.error is not None
    assert result.error.code == "unknown_tool"
    assert "'get_wether'" in result.error.message
    assert "Available tools: 'get_time', 'get_weather'" in result.error.message
    assert "Did you mean 'get_weather'?" in result.error.message


async def test_unknown_tool_refreshes_the_listing_once_per_miss() -> None:
    late = Tool.from_parameters("late", "Added later", [], handler=lambda: "here")
    provider = RaisingProvider([], returns=ToolResult.ok("", "late", "here"))
    runner = ToolRunner(provider)
    assert (await runner.exec(call("late"))).error is not None
    assert provider.listings == 1  # first use lists; the miss finds nothing new
    provider.tools.append(late)
    result = await runner.exec(call("late"))
    assert result.success, result.error
    assert result.result == "here"
    assert provider.listings == 2
    await runner.exec(call("late"))
    assert provider.listings == 2  # known now: no further listing


async def test_provider_tool_not_found_becomes_unknown_tool() -> None:
    t = Tool.from_parameters("gone", "", [])
    runner = ToolRunner(RaisingProvider([t], raises=ToolNotFoundError.unknown("gone", ["other"])))
    result = await runner.exec(call("gone"))
    assert result.error is not None
    assert result.error.code == "unknown_tool"
    assert "Available tools: 'other'" in result.error.message


async def test_failing_tool_listing_is_an_error_result() -> None:
    class Broken:
        async def list_tools(self) -> list[Tool]:
            raise ConnectionError("db password=hunter2")

        async def execute_tool(self, name: str, arguments: dict, ctx: ToolContext) -> ToolResult:  # type: ignore[type-arg]
            raise AssertionError("never called")

    result = await ToolRunner(Broken()).exec(call("x"))
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "hunter2" not in result.error.message


# --- invalid_json ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"city": "Lisbon"', "not valid JSON"),
        ("{'city': 'Lisbon'}", "not valid JSON"),
        ("city=Lisbon secret-token-123", "not valid JSON"),
        ('["Lisbon"]', "must be a JSON object, not an array"),
        ('"Lisbon"', "must be a JSON object, not a string"),
        ("42", "must be a JSON object, not an integer"),
        ("null", "must be a JSON object, not null"),
    ],
)
async def test_invalid_json(runner: ToolRunner, raw: str, fragment: str) -> None:
    result = await runner.exec(call("get_weather", raw))
    assert not result.success
    assert result.error is not None
    assert result.error.code == "invalid_json"
    assert fragment in result.error.message
    assert "Expected arguments: city (string, required)" in result.error.message
    # The raw arguments are never echoed back.
    assert "Lisbon" not in result.error.message
    assert "secret-token-123" not in result.error.message


async def test_empty_arguments_mean_an_empty_object(runner: ToolRunner) -> None:
    for raw in ("", "  ", "{}"):
        result = await runner.exec(call("get_time", raw))
        assert result.success, (raw, result.error)
        assert result.result == "12:00"


# --- invalid_arguments ----------------------------------------------------------------------


async def test_enum_violation_names_field_choices_and_value(runner: ToolRunner) -> None:
    result = await runner.exec(call("get_weather", {"city": "Lisbon", "unit": "kelvin"}))
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert (
        "Argument 'unit' must be one of 'celsius', 'fahrenheit' (got 'kelvin')."
        in result.error.message
    )


async def test_missing_required_names_the_field(runner: ToolRunner) -> None:
    result = await runner.exec(call("get_weather", {"unit": "celsius"}))
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "Missing required argument 'city'." in result.error.message


async def test_wrong_type_and_unexpected_argument(runner: ToolRunner) -> None:
    result = await runner.exec(call("get_weather", {"city": ["Lisbon"], "country": "PT"}))
    assert result.error is not None
    message = result.error.message
    assert "Argument 'city' must be a string (got an array)." in message
    assert "Unexpected argument 'country'. Valid arguments: 'city', 'unit'." in message


async def test_nested_field_and_limits_are_named() -> None:
    schema = {
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 50}},
                "required": ["limit"],
            },
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["filter"],
    }
    t = Tool(name="search", input_schema=schema)
    runner = ToolRunner(RaisingProvider([t], returns=ToolResult.ok("", "search", [])))
    result = await runner.exec(call("search", {"filter": {"limit": 500}, "tags": ["a", 3]}))
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "Argument 'filter.limit' must be at most 50 (got 500)." in result.error.message
    assert "Argument 'tags[1]' must be a string (got an integer 3)." in result.error.message
    missing = await runner.exec(call("search", {"filter": {}}))
    assert missing.error is not None
    assert "Missing required argument 'filter.limit'." in missing.error.message


async def test_provider_parameter_error_becomes_invalid_arguments() -> None:
    t = Tool.from_parameters("t", "", [])
    error = ToolParameterError("Argument 'when' must be a future date.", field="when")
    runner = ToolRunner(RaisingProvider([t], raises=error))
    result = await runner.exec(call("t"))
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert result.error.message == "Argument 'when' must be a future date."


# --- forbidden ------------------------------------------------------------------------------


async def test_missing_scope_is_forbidden_and_the_tool_does_not_run() -> None:
    ran: list[str] = []

    @tool(scopes=["admin", "billing"])
    def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    runner = ToolRunner(Toolbox([refund]))
    result = await runner.exec(
        call("refund", {"order_id": "A1"}), ToolContext(scopes=frozenset({"billing"}))
    )
    assert result.error is not None
    assert result.error.code == "forbidden"
    assert "'admin'" in result.error.message
    assert ran == []
    allowed = ToolContext(scopes=frozenset({"admin", "billing", "other"}))
    assert (await runner.exec(call("refund", {"order_id": "A1"}), allowed)).success
    assert ran == ["A1"]


# --- execution_error ------------------------------------------------------------------------


async def test_exception_gives_safe_message_and_logs_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def leaky(query: str) -> str:
        """Fails with a secret in its message."""
        raise RuntimeError(f"connect failed: postgres://admin:hunter2@db/{query}")

    runner = ToolRunner(Toolbox([leaky]))
    with caplog.at_level(logging.ERROR, logger="toolwire.runner"):
        result = await runner.exec(call("leaky", {"query": "x"}))
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert result.error.message == "Tool 'leaky' failed: RuntimeError."
    assert "hunter2" not in result.error.message
    assert "Traceback" not in result.error.message
    records = [r for r in caplog.records if r.name == "toolwire.runner"]
    assert records
    assert records[0].exc_info is not None
    assert "hunter2" in str(records[0].exc_info[1])  # the developer sees the details


async def test_tool_execution_error_message_is_passed_on() -> None:
    @tool
    def lookup(sku: str) -> str:
        """Look up a product."""
        raise ToolExecutionError(f"No product with SKU {sku!r}; check the SKU and retry.")

    result = await ToolRunner(Toolbox([lookup])).exec(call("lookup", {"sku": "Z9"}))
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert result.error.message == "No product with SKU 'Z9'; check the SKU and retry."


async def test_failed_result_from_provider_keeps_its_error() -> None:
    t = Tool.from_parameters("t", "", [])
    failed = ToolResult.fail("", "t", "execution_error", "Upstream said no.")
    result = await ToolRunner(RaisingProvider([t], returns=failed)).exec(call("t", id="c9"))
    assert result.call_id == "c9"
    assert result.error is not None
    assert (result.error.code, result.error.message) == ("execution_error", "Upstream said no.")


async def test_unserialisable_result_is_an_execution_error() -> None:
    t = Tool.from_parameters("t", "", [])
    provider = RaisingProvider([t], returns=ToolResult.ok("", "t", {"handle": object()}))
    result = await ToolRunner(provider).exec(call("t"))
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "cannot be sent as JSON" in result.error.message


async def test_toolbox_unserialisable_result_is_an_execution_error() -> None:
    @tool
    def handle() -> object:
        """Returns an opaque object."""
        return threading.Lock()

    result = await ToolRunner(Toolbox([handle])).exec(call("handle"))
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "not JSON-serialisable" in result.error.message


# --- timeout --------------------------------------------------------------------------------


async def test_hanging_async_tool_times_out() -> None:
    never = asyncio.Event()

    @tool(timeout=0.05)
    async def hang() -> str:
        """Never finishes."""
        await never.wait()
        return "done"

    result = await ToolRunner(Toolbox([hang])).exec(call("hang"))
    assert result.error is not None
    assert result.error.code == "timeout"
    assert "0.05 seconds" in result.error.message


async def test_hanging_sync_tool_times_out_without_blocking() -> None:
    release = threading.Event()

    @tool
    def hang_sync() -> str:
        """Blocks its thread."""
        release.wait(10)
        return "done"

    runner = ToolRunner(Toolbox([hang_sync]), policy=Policy(default_timeout=0.05))
    try:
        result = await runner.exec(call("hang_sync"))
    finally:
        release.set()  # let the worker thread finish so the loop can shut down
    assert result.error is not None
    assert result.error.code == "timeout"
    assert "0.05 seconds" in result.error.message


async def test_timeout_error_raised_by_the_tool_is_not_a_runner_timeout() -> None:
    @tool(timeout=10)
    async def inner_timeout() -> str:
        """Its own wait times out."""
        async with asyncio.timeout(0):
            await asyncio.sleep(1)
        return "unreachable"

    result = await ToolRunner(Toolbox([inner_timeout])).exec(call("inner_timeout"))
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert result.error.message == "Tool 'inner_timeout' failed: TimeoutError."


# --- result size ----------------------------------------------------------------------------


async def test_ten_megabyte_result_is_refused() -> None:
    @tool
    def dump() -> str:
        """Returns far too much."""
        return "x" * 10_000_000

    result = await ToolRunner(Toolbox([dump])).exec(call("dump"))
    assert result.error is not None
    assert result.error.code == "result_too_large"
    assert "256 KiB" in result.error.message
    assert "262144 bytes" in result.error.message
    assert result.result is None


async def test_large_result_is_truncated_with_a_note() -> None:
    @tool
    def rows() -> list[dict[str, object]]:
        """Many rows."""
        return [{"id": i, "name": f"row {i} é"} for i in range(100_000)]

    policy = Policy(max_result_bytes=4096, truncate_large_results=True)
    result = await ToolRunner(Toolbox([rows]), policy=policy).exec(call("rows"))
    assert result.success, result.error
    assert isinstance(result.result, str)
    assert result.result.startswith('[{"id":0,"name":"row 0 é"}')
    assert "[truncated: the full result was" in result.result
    assert "4 KiB" in result.result
    assert len(result.to_model_text().encode()) <= 4096


async def test_truncating_a_long_string_result_respects_the_limit() -> None:
    t = Tool.from_parameters("t", "", [])
    text = 'quote " and newline \n ' * 2000
    provider = RaisingProvider([t], returns=ToolResult.ok("", "t", text))
    policy = Policy(max_result_bytes=1000, truncate_large_results=True)
    result = await ToolRunner(provider, policy=policy).exec(call("t"))
    assert isinstance(result.result, str)
    assert result.result.startswith('quote " and newline \n')
    import orjson

    assert len(orjson.dumps(result.result)) <= 1000


async def test_tool_parameters_are_definable_by_toolparameter() -> None:
    t = Tool.from_parameters(
        "add",
        "Add numbers",
        [ToolParameter(name="a", type="integer"), ToolParameter(name="b", type="integer")],
        handler=lambda a, b: a + b,
    )
    provider = Toolbox([t])
    result = await ToolRunner(provider).exec(call("add", {"a": 2, "b": 3}))
    assert result.result == 5


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {"a": [1.0, float("-inf")]}])
async def test_a_non_finite_number_is_an_error_not_a_silent_null(value: object) -> None:
    from toolwire.runner import ToolRunner
    from toolwire.tools import Toolbox, ToolCall, tool

    @tool
    def measure() -> object:
        """A measurement."""
        return value

    result = await ToolRunner(Toolbox([measure])).exec(
        ToolCall(id="c1", name="measure", arguments="{}")
    )
    assert not result.success
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "not finite" in result.error.message
