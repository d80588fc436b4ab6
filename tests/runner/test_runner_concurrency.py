"""`exec_many`: order, the concurrency bound, and sync tools off the event loop."""

from __future__ import annotations

import asyncio
import threading

from runner_support import call

from toolwire.runner import Policy, ToolRunner
from toolwire.tools import Toolbox, ToolContext, tool


async def test_results_come_back_in_call_order() -> None:
    @tool
    async def wait(ms: int) -> int:
        """Sleeps, then echoes."""
        await asyncio.sleep(ms / 1000)
        return ms

    runner = ToolRunner(Toolbox([wait]))
    delays = [30, 1, 20, 5, 0, 10]
    calls = [call("wait", {"ms": d}, id=f"c{i}") for i, d in enumerate(delays)]
    results = await runner.exec_many(calls)
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert [r.result for r in results] == delays


async def test_concurrency_is_bounded_by_the_policy() -> None:
    in_flight = 0
    peak = 0

    @tool
    async def work(n: int) -> int:
        """Tracks how many run at once."""
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return n

    runner = ToolRunner(Toolbox([work]), policy=Policy(max_concurrency=3))
    results = await runner.exec_many([call("work", {"n": i}) for i in range(10)])
    assert [r.result for r in results] == list(range(10))
    assert peak == 3


async def test_calls_run_concurrently_and_share_the_context() -> None:
    started = 0
    all_started = asyncio.Event()

    @tool
    async def gather_point(ctx: ToolContext) -> str | None:
        """Finishes only once every call has started."""
        nonlocal started
        started += 1
        if started == 4:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), timeout=5)
        return ctx.principal

    runner = ToolRunner(Toolbox([gather_point]))
    ctx = ToolContext(principal="ana")
    results = await runner.exec_many([call("gather_point") for _ in range(4)], ctx)
    assert [r.result for r in results] == ["ana"] * 4


async def test_errors_do_not_disturb_the_other_calls() -> None:
    @tool
    async def ok() -> str:
        """Fine."""
        return "ok"

    runner = ToolRunner(Toolbox([ok]))
    results = await runner.exec_many([call("ok"), call("nope"), call("ok", "[")])
    assert [r.success for r in results] == [True, False, False]
    assert [r.error.code for r in results if r.error] == ["unknown_tool", "invalid_json"]
    assert await runner.exec_many([]) == []


async def test_a_sync_tool_does_not_block_the_event_loop() -> None:
    loop_ran = threading.Event()

    @tool
    def blocking() -> bool:
        """Waits in its thread until the event loop proves it is still running."""
        return loop_ran.wait(timeout=5)

    async def ticker() -> None:
        for _ in range(3):
            await asyncio.sleep(0.001)
        loop_ran.set()

    runner = ToolRunner(Toolbox([blocking]))
    result, _ = await asyncio.gather(runner.exec(call("blocking")), ticker())
    assert result.success, result.error
    assert result.result is True  # False would mean the loop was blocked until the timeout


def test_a_runner_can_be_reused_across_event_loops() -> None:
    @tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    runner = ToolRunner(Toolbox([echo]))

    async def turn(text: str) -> list[object]:
        # Unknown names make every call refresh the listing at once: the lock is contended.
        calls = [call("missing"), call("echo", {"text": text}), call("missing")]
        results = await asyncio.gather(*(runner.exec(c) for c in calls))
        return [r.result if r.error is None else r.error.code for r in results]

    expected_codes = ["unknown_tool", "unknown_tool"]
    first = asyncio.run(turn("a"))
    second = asyncio.run(turn("b"))
    assert [first[1], second[1]] == ["a", "b"]
    assert [first[0], first[2]] == [second[0], second[2]] == expected_codes
