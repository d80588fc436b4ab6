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


# --- whose result: the cache never hands one caller's data to another ----------------------


def identity_runner() -> tuple[ToolRunner, list[str]]:
    runs: list[str] = []

    @tool(cache_ttl=60)
    def my_orders(ctx: ToolContext) -> dict[str, object]:
        """The caller's own orders, fetched with the caller's token."""
        runs.append(f"{ctx.principal}/{ctx.auth_token}/{sorted(ctx.scopes)}")
        return {"token": ctx.auth_token, "principal": ctx.principal, "scopes": sorted(ctx.scopes)}

    @tool(cache_ttl=60, cache_shared=True)
    def exchange_rate(currency: str) -> float:
        """The same for everyone."""
        runs.append(f"rate {currency}")
        return 1.1

    return ToolRunner(Toolbox([my_orders, exchange_rate])), runs


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (ToolContext(auth_token="alice-token"), ToolContext(auth_token="bob-token")),
        (
            ToolContext(principal="portal", auth_token="end-user-1"),
            ToolContext(principal="portal", auth_token="end-user-2"),
        ),
        (ToolContext(principal="alice"), ToolContext(principal="bob")),
        (
            ToolContext(principal="k", scopes=frozenset({"orders"})),
            ToolContext(principal="k", scopes=frozenset({"orders", "admin"})),
        ),
    ],
    ids=["open gateway, two tokens", "one key, two forwarded tokens", "two keys", "two scopes"],
)
async def test_a_cached_result_is_only_reused_for_the_same_caller(
    first: ToolContext, second: ToolContext
) -> None:
    runner, runs = identity_runner()
    a = await runner.exec(call("my_orders", "{}"), first)
    b = await runner.exec(call("my_orders", "{}"), second)
    again = await runner.exec(call("my_orders", "{}"), first)

    assert len(runs) == 2
    assert a.result != b.result
    assert b.result["token"] == second.auth_token
    assert again.cached
    assert again.result == a.result


async def test_a_shared_result_is_reused_across_callers() -> None:
    runner, runs = identity_runner()
    await runner.exec(call("exchange_rate", '{"currency": "EUR"}'), ToolContext(principal="a"))
    shared = await runner.exec(
        call("exchange_rate", '{"currency": "EUR"}'), ToolContext(principal="b")
    )
    assert shared.cached
    assert runs == ["rate EUR"]


def test_the_cache_key_never_holds_the_token() -> None:
    from toolwire.runner.cache import cache_key

    key = cache_key("my_orders", {}, ToolContext(principal="p", auth_token="secret-token-123"))
    assert "secret-token-123" not in key


def test_cache_shared_needs_a_ttl() -> None:
    with pytest.raises(ToolDefinitionError, match="cache_shared"):

        @tool(cache_shared=True)
        def f() -> int:
            """F."""
            return 1


async def test_identical_concurrent_calls_of_a_cached_tool_run_it_once() -> None:
    import asyncio

    runs: list[str] = []

    @tool(cache_ttl=60)
    async def slow_rate(currency: str) -> dict[str, object]:
        """Exchange rate, slowly."""
        runs.append(currency)
        await asyncio.sleep(0.05)
        return {"currency": currency, "rate": 1.1}

    runner = ToolRunner(Toolbox([slow_rate]))
    ctx = ToolContext(principal="a")
    results = await asyncio.gather(
        *(
            runner.exec(call("slow_rate", '{"currency": "EUR"}', id=f"c{i}"), ctx)
            for i in range(20)
        ),
        runner.exec(call("slow_rate", '{"currency": "USD"}', id="usd"), ctx),
    )
    assert sorted(runs) == ["EUR", "USD"]
    assert [r.call_id for r in results[:20]] == [f"c{i}" for i in range(20)]
    assert all(r.success and r.result == {"currency": "EUR", "rate": 1.1} for r in results[:20])
    assert sum(not r.cached for r in results[:20]) == 1


async def test_a_follower_runs_the_call_itself_when_the_leader_is_cancelled() -> None:
    import asyncio

    runs: list[str] = []

    @tool(cache_ttl=60)
    async def slow(x: int) -> int:
        """Slow."""
        runs.append("run")
        await asyncio.sleep(0.05)
        return x

    runner = ToolRunner(Toolbox([slow]))
    ctx = ToolContext()
    leader = asyncio.ensure_future(runner.exec(call("slow", '{"x": 1}', id="lead"), ctx))
    await asyncio.sleep(0.01)
    follower = asyncio.ensure_future(runner.exec(call("slow", '{"x": 1}', id="follow"), ctx))
    await asyncio.sleep(0.01)
    leader.cancel()
    result = await follower
    assert result.success
    assert result.result == 1
    assert result.call_id == "follow"
    assert runs == ["run", "run"]
