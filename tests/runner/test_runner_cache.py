"""The result cache for read tools with `cache_ttl`."""

from __future__ import annotations

import pytest
from runner_support import call

from toolwire.runner import MemoryResultCache, ToolRunner
from toolwire.tools import Toolbox, ToolContext, ToolDefinitionError, ToolExecutionError, tool


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_runner(clock: Clock) -> tuple[ToolRunner, list[str]]:
    calls: list[str] = []

    @tool(cache_ttl=60)
    def rate(currency: str) -> dict[str, object]:
        """Exchange rate."""
        calls.append(currency)
        if currency == "XXX":
            raise ToolExecutionError("Unknown currency 'XXX'.")
        return {"currency": currency, "rate": len(calls)}

    @tool(effects="write")
    def bump(currency: str) -> int:
        """Not cached: it changes things."""
        calls.append(f"bump {currency}")
        return len(calls)

    cache = MemoryResultCache(clock=clock)
    return ToolRunner(Toolbox([rate, bump]), cache=cache), calls


async def test_hit_returns_the_cached_result(clock: Clock) -> None:
    runner, calls = make_runner(clock)
    first = await runner.exec(call("rate", '{"currency": "EUR"}'))
    # Same arguments in another order and spacing: same canonical key.
    second = await runner.exec(call("rate", '{ "currency" : "EUR" }', id="call_second"))
    assert first.success
    assert second.success
    assert (first.cached, second.cached) == (False, True)
    assert second.result == first.result == {"currency": "EUR", "rate": 1}
    assert second.call_id == "call_second"
    assert calls == ["EUR"]
    other = await runner.exec(call("rate", {"currency": "USD"}))
    assert not other.cached
    assert calls == ["EUR", "USD"]


async def test_entries_expire_after_the_ttl(clock: Clock) -> None:
    runner, calls = make_runner(clock)
    await runner.exec(call("rate", {"currency": "EUR"}))
    clock.now += 59.9
    assert (await runner.exec(call("rate", {"currency": "EUR"}))).cached
    clock.now += 0.2
    again = await runner.exec(call("rate", {"currency": "EUR"}))
    assert not again.cached
    assert again.result == {"currency": "EUR", "rate": 2}
    assert calls == ["EUR", "EUR"]


async def test_errors_are_never_cached(clock: Clock) -> None:
    runner, calls = make_runner(clock)
    for _ in range(2):
        result = await runner.exec(call("rate", {"currency": "XXX"}))
        assert result.error is not None
        assert not result.cached
    assert calls == ["XXX", "XXX"]


async def test_write_tools_are_not_cached(clock: Clock) -> None:
    runner, _ = make_runner(clock)
    a = await runner.exec(call("bump", {"currency": "EUR"}))
    b = await runner.exec(call("bump", {"currency": "EUR"}))
    assert (a.result, b.result, a.cached, b.cached) == (1, 2, False, False)

    with pytest.raises(ToolDefinitionError, match="only allowed for read tools"):

        @tool(effects="write", cache_ttl=10)
        def not_allowed() -> int:
            """Write tools cannot be cached."""
            return 1


async def test_callers_do_not_share_cached_results(clock: Clock) -> None:
    runner, calls = make_runner(clock)
    await runner.exec(call("rate", {"currency": "EUR"}), ToolContext(principal="ana"))
    bob = await runner.exec(call("rate", {"currency": "EUR"}), ToolContext(principal="bob"))
    assert not bob.cached
    assert calls == ["EUR", "EUR"]


async def test_cached_results_are_independent_copies(clock: Clock) -> None:
    runner, _ = make_runner(clock)
    first = await runner.exec(call("rate", {"currency": "EUR"}))
    first.result["rate"] = 999
    second = await runner.exec(call("rate", {"currency": "EUR"}))
    assert second.result == {"currency": "EUR", "rate": 1}


async def test_memory_cache_is_bounded(clock: Clock) -> None:
    cache = MemoryResultCache(max_entries=2, clock=clock)
    await cache.set("a", b"1", 10)
    await cache.set("b", b"2", 10)
    assert await cache.get("a") == b"1"  # "a" is now the most recently used
    await cache.set("c", b"3", 10)
    assert (await cache.get("a"), await cache.get("b"), await cache.get("c")) == (b"1", None, b"3")
    assert len(cache) == 2
