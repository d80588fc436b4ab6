"""Timeouts say what really happened: a stopped tool, or one that goes on (issue 12)."""

from __future__ import annotations

import asyncio
import threading

from toolwire.runner import ToolRunner
from toolwire.store import AuditQuery, MemoryStore
from toolwire.tools import Toolbox, ToolCall, tool


async def test_an_async_tool_that_stops_is_reported_stopped() -> None:
    @tool(timeout=0.05)
    async def wait_forever() -> str:
        """Waits."""
        await asyncio.sleep(30)
        return "never"

    result = await ToolRunner(Toolbox([wait_forever])).exec(
        ToolCall(id="c", name="wait_forever", arguments="{}")
    )
    assert result.error is not None
    assert result.error.code == "timeout"
    assert "was stopped" in result.error.message


async def test_a_sync_tool_past_its_timeout_is_not_called_stopped_and_its_late_end_is_logged() -> (
    None
):
    release = threading.Event()
    effects: list[str] = []

    @tool(effects="write", timeout=0.05)
    def write_report(name: str) -> str:
        """Writes a report; slowly."""
        release.wait(timeout=10)
        effects.append(name)
        return "written"

    store = MemoryStore()
    runner = ToolRunner(Toolbox([write_report]), audit=store)
    result = await runner.exec(ToolCall(id="c", name="write_report", arguments='{"name": "q3"}'))

    assert result.error is not None
    assert result.error.code == "timeout"
    assert "was stopped" not in result.error.message
    assert "may still complete" in result.error.message
    release.set()
    for _ in range(200):
        records = await store.list_audit(AuditQuery(tool="write_report"))
        if any(r.outcome == "finished_late" for r in records):
            break
        await asyncio.sleep(0.01)
    assert effects == ["q3"]
    assert [(r.event, r.outcome) for r in records] == [
        ("started", None),
        ("finished", "timeout"),
        ("finished", "finished_late"),
    ]


async def test_an_async_tool_that_ignores_cancellation_is_a_timeout_not_a_success() -> None:
    @tool(timeout=0.05)
    async def stubborn() -> str:
        """Ignores being cancelled."""
        try:
            await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.1)
        return "done anyway"

    result = await ToolRunner(Toolbox([stubborn])).exec(
        ToolCall(id="c", name="stubborn", arguments="{}")
    )
    assert not result.success
    assert result.error is not None
    assert result.error.code == "timeout"
    assert "only after" in result.error.message
