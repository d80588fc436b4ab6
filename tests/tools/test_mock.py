"""`MockTools`: canned results, call history, assertions, failure modes."""

import asyncio
from typing import Any

import pytest

from toolwire.tools import (
    MockCall,
    MockTools,
    Toolbox,
    ToolContext,
    ToolDefinitionError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameterError,
    ToolProvider,
    tool,
)


@tool
def lookup(key: str) -> dict[str, str]:
    """Look something up."""
    return {"key": key, "value": key.upper()}


async def test_values_callables_and_tools() -> None:
    async def async_search(query: str, limit: int = 2) -> list[str]:
        return [query] * limit

    mock = MockTools(
        {
            "constant": {"temp": 21},
            "untyped": lambda **kw: sorted(kw),
            "search": async_search,
            "lookup": lookup,
        }
    )
    assert isinstance(mock, ToolProvider)
    ctx = ToolContext()
    assert (await mock.execute_tool("constant", {"anything": 1}, ctx)).result == {"temp": 21}
    assert (await mock.execute_tool("untyped", {"b": 1, "a": 2}, ctx)).result == ["a", "b"]
    assert (await mock.execute_tool("search", {"query": "x"}, ctx)).result == ["x", "x"]
    assert (await mock.execute_tool("lookup", {"key": "k"}, ctx)).result == {
        "key": "k",
        "value": "K",
    }
    # A typed callable gets a real schema (and validation); untyped ones accept anything.
    tools = {t.name: t for t in await mock.list_tools()}
    assert tools["search"].input_schema["required"] == ["query"]
    assert tools["untyped"].input_schema == {
        "type": "object",
        "properties": {},
        "additionalProperties": True,
    }
    with pytest.raises(ToolParameterError):
        await mock.execute_tool("search", {}, ctx)


async def test_built_from_tools() -> None:
    mock = MockTools([lookup])
    assert [t.name for t in mock.tools] == ["lookup"]
    with pytest.raises(ToolDefinitionError, match="Tools or a mapping"):
        MockTools([lambda: 1])  # type: ignore[list-item]


async def test_history_and_assertions() -> None:
    mock = MockTools({"a": 1, "b": 2})
    first, second = ToolContext(principal="p1"), ToolContext(principal="p2")
    arguments = {"x": [1]}
    await mock.execute_tool("a", arguments, first)
    arguments["x"].append(2)  # the history keeps the arguments as they were
    await mock.execute_tool("b", {"y": 2}, second)
    await mock.execute_tool("a", {"x": 3}, first)

    assert mock.calls[0] == MockCall(name="a", arguments={"x": [1]}, ctx=first)
    assert mock.calls[1].ctx is second
    assert mock.call_count() == 3
    assert mock.call_count("a") == 2
    assert [c.arguments for c in mock.calls_to("a")] == [{"x": [1]}, {"x": 3}]
    assert mock.last_call().name == "a"
    mock.assert_called("a")
    mock.assert_called("a", times=2)
    mock.assert_called_with("a", x=3)
    mock.assert_any_call("a", x=[1])
    mock.assert_calls("a", "b", "a")

    with pytest.raises(AssertionError, match=r"Expected 'b' to be called 2 time\(s\), got 1"):
        mock.assert_called("b", times=2)
    with pytest.raises(AssertionError, match="Last call to 'a' had arguments"):
        mock.assert_called_with("a", x=1)
    with pytest.raises(AssertionError, match=r"Calls: a\(\{'x': \[1\]\}\), b"):
        mock.assert_any_call("b", y=3)
    with pytest.raises(AssertionError, match="Expected no calls to 'a'"):
        mock.assert_not_called("a")

    mock.reset()
    mock.assert_not_called()
    with pytest.raises(AssertionError, match=r"No calls to 'a'\. No tools were called\."):
        mock.last_call("a")


async def test_unknown_tool() -> None:
    mock = MockTools({"a": 1})
    with pytest.raises(ToolNotFoundError, match="Available tools: 'a'"):
        await mock.execute_tool("z", {}, ToolContext())
    with pytest.raises(ToolNotFoundError):
        mock.fail("z")
    assert mock.calls == []


async def test_fail_modes() -> None:
    mock = MockTools({"a": "ok"})
    ctx = ToolContext()

    mock.fail("a")
    with pytest.raises(ToolExecutionError, match=r"Tool 'a' failed \(MockTools\)"):
        await mock.execute_tool("a", {}, ctx)
    mock.reset()

    mock.fail("a", "Backend unavailable.")
    with pytest.raises(ToolExecutionError, match=r"Backend unavailable\."):
        await mock.execute_tool("a", {}, ctx)
    mock.reset()

    mock.fail("a", ConnectionError("refused"))
    with pytest.raises(ConnectionError, match="refused"):
        await mock.execute_tool("a", {}, ctx)
    mock.reset()

    mock.fail("a", KeyError)
    with pytest.raises(KeyError):
        await mock.execute_tool("a", {}, ctx)
    assert mock.call_count("a") == 1  # failed calls are recorded too


async def test_fail_a_limited_number_of_times_then_recover() -> None:
    mock = MockTools({"a": "ok"})
    mock.fail("a", "flaky", times=2)
    outcomes: list[Any] = []
    for _ in range(3):
        try:
            outcomes.append((await mock.execute_tool("a", {}, ToolContext())).result)
        except ToolExecutionError as exc:
            outcomes.append(str(exc))
    assert outcomes == ["flaky", "flaky", "ok"]
    with pytest.raises(ValueError, match="times must be a positive number"):
        mock.fail("a", times=0)


async def test_hang_until_cancelled() -> None:
    mock = MockTools({"slow": "never"})
    mock.hang("slow")
    task = asyncio.create_task(mock.execute_tool("slow", {}, ToolContext()))
    await asyncio.sleep(0.01)
    assert not task.done()
    mock.assert_called("slow", times=1)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(task, timeout=0.01)
    assert task.cancelled()


async def test_delay_then_result() -> None:
    mock = MockTools({"slow": "done"})
    mock.delay("slow", 0.01, times=1)
    started = asyncio.create_task(mock.execute_tool("slow", {}, ToolContext()))
    await asyncio.sleep(0)
    assert not started.done()  # still waiting out its delay
    assert (await started).result == "done"
    assert (await mock.execute_tool("slow", {}, ToolContext())).result == "done"


async def test_works_inside_a_toolbox() -> None:
    mock = MockTools({"a": 1})
    box = Toolbox([mock, lookup])
    assert (await box.execute_tool("a", {"q": 1}, ToolContext())).result == 1
    mock.assert_called_with("a", q=1)


async def test_non_serialisable_canned_value() -> None:
    mock = MockTools({"a": object()})
    with pytest.raises(ToolExecutionError, match="type 'object' that is not JSON-serialisable"):
        await mock.execute_tool("a", {}, ToolContext())
