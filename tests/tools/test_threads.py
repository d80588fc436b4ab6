"""Sync tools run on a pool of their own, and one tool cannot take all of it."""

from __future__ import annotations

import asyncio
import threading

from toolwire.runner import ToolRunner
from toolwire.tools import Toolbox, ToolCall, tool
from toolwire.tools.threads import TOOL_THREADS


async def test_a_busy_sync_tool_never_starves_another() -> None:
    release = threading.Event()
    running = 0
    most = 0
    lock = threading.Lock()

    @tool
    def slow_export(n: int) -> int:
        """Blocks until released, like a slow report export."""
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(timeout=30)
        with lock:
            running -= 1
        return n

    @tool
    def quick_lookup() -> str:
        """Answers at once."""
        return "fast"

    runner = ToolRunner(Toolbox([slow_export, quick_lookup]))
    slow = [
        asyncio.ensure_future(
            runner.exec(ToolCall(id=f"s{i}", name="slow_export", arguments=f'{{"n": {i}}}'))
        )
        for i in range(3 * TOOL_THREADS)
    ]
    try:
        await asyncio.sleep(0.05)
        # More slow calls than the default executor has threads are waiting; an unrelated
        # tool still runs at once.
        quick = await asyncio.wait_for(
            runner.exec(ToolCall(id="q", name="quick_lookup", arguments="{}")), timeout=10
        )
        assert quick.result == "fast"
        assert most <= TOOL_THREADS
    finally:
        release.set()
    results = await asyncio.gather(*slow)
    assert [r.result for r in results] == list(range(3 * TOOL_THREADS))
    assert most == TOOL_THREADS
