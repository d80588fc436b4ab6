"""ToolRunner benchmarks: concurrent I/O-bound calls, and per-call overhead.

Run: `python benchmarks/bench_runner.py` (prints figures; no assertions).

1. `exec_many` of 20 async tools that each sleep 100 ms: median wall time over several
   rounds (target: under 150 ms, i.e. the calls really overlap).
2. Runner overhead for a small valid call with a trivial async tool: median µs per
   `runner.exec` (resolve + parse + validate + scopes + execute through the `Toolbox` +
   redact + size check + record), next to the cost of calling the tool function directly
   (target: overhead under 50 µs).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from toolwire.runner import Policy, ToolRunner
from toolwire.tools import Toolbox, ToolCall, ToolContext, tool


@tool
async def io_bound(n: int) -> int:
    """Waits 100 ms, like a slow HTTP call."""
    await asyncio.sleep(0.1)
    return n


@tool
async def lookup(city: str, days: int = 1) -> dict[str, Any]:
    """A trivial tool: returns a small dict."""
    return {"city": city, "days": days}


async def bench_exec_many(rounds: int = 7) -> None:
    calls = [ToolCall(id=f"c{i}", name="io_bound", arguments=f'{{"n": {i}}}') for i in range(20)]
    print("1. exec_many: 20 async tools, each sleeping 100 ms")
    for label, policy in (
        ("Policy() (default max_concurrency=32)", Policy()),
        ("Policy(max_concurrency=8)", Policy(max_concurrency=8)),
    ):
        runner = ToolRunner(Toolbox([io_bound]), policy=policy)
        await runner.exec_many(calls[:1])  # warm up: listing, validator compile
        walls = []
        for _ in range(rounds):
            start = time.perf_counter()
            results = await runner.exec_many(calls)
            walls.append((time.perf_counter() - start) * 1000)
            assert all(r.success for r in results)
        print(
            f"   {label:<38} median {statistics.median(walls):6.1f} ms  "
            f"(min {min(walls):.1f}, max {max(walls):.1f}, {rounds} rounds)"
        )
    print("   target: < 150 ms with the default policy")


async def _median_us(fn: Callable[[], Awaitable[Any]], iterations: int) -> float:
    for _ in range(min(2000, iterations // 10)):  # warm up
        await fn()
    samples = []
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for _ in range(iterations):
            start = clock()
            await fn()
            samples.append(clock() - start)
    finally:
        gc.enable()
    return statistics.median(samples) / 1000


async def bench_overhead(iterations: int = 20000) -> None:
    toolbox = Toolbox([lookup])
    runner = ToolRunner(toolbox)
    ctx = ToolContext()
    call = ToolCall(id="call_1", name="lookup", arguments='{"city": "Lisbon", "days": 3}')
    result = await runner.exec(call, ctx)
    assert result.success, result.error
    fn = lookup.fn

    async def direct() -> Any:
        return await fn("Lisbon", 3)

    async def provider() -> Any:
        return await toolbox.execute_tool("lookup", {"city": "Lisbon", "days": 3}, ctx)

    async def through_runner() -> Any:
        return await runner.exec(call, ctx)

    direct_us = await _median_us(direct, iterations)
    provider_us = await _median_us(provider, iterations)
    runner_us = await _median_us(through_runner, iterations)
    print(f"2. Per-call cost of a small valid call (median of {iterations} calls)")
    print(f"   tool function called directly            {direct_us:7.2f} µs")
    print(f"   Toolbox.execute_tool (no runner)          {provider_us:7.2f} µs")
    print(f"   ToolRunner.exec (whole path)              {runner_us:7.2f} µs")
    print(f"   runner overhead (exec - direct call)      {runner_us - direct_us:7.2f} µs")
    print(f"   of which runner alone (exec - Toolbox)    {runner_us - provider_us:7.2f} µs")
    print("   target: runner overhead < 50 µs")


async def main() -> None:
    print(f"Python {sys.version.split()[0]} on {sys.platform}")
    await bench_exec_many()
    await bench_overhead()


if __name__ == "__main__":
    asyncio.run(main())
