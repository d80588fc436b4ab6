"""A server tool that takes long and records whether it was cancelled, for the gateway's
disconnect tests. Loaded by module name, so the tests and the gateway share its state."""

from __future__ import annotations

import asyncio
import threading

from toolwire import tool

started = threading.Event()
"""Set when `slow_lookup` begins."""
cancelled = threading.Event()
"""Set when `slow_lookup` is cancelled before it finishes."""
finished = threading.Event()
"""Set when `slow_lookup` returns."""


def reset() -> None:
    for event in (started, cancelled, finished, sync_started, sync_release):
        event.clear()
    sync_written.clear()


@tool
async def slow_lookup(query: str) -> str:
    """Look something up, slowly.

    Args:
        query: What to look up.
    """
    started.set()
    try:
        await asyncio.sleep(20)
    except asyncio.CancelledError:
        cancelled.set()
        raise
    finished.set()
    return f"found {query}"


sync_started = threading.Event()
"""Set when `slow_sync_write` begins (in its thread)."""
sync_release = threading.Event()
"""Lets `slow_sync_write` go on."""
sync_written: list[str] = []
"""What `slow_sync_write` really wrote."""


@tool(effects="write")
def slow_sync_write(name: str) -> str:
    """Write a record, slowly (a sync tool: it runs in a thread that cannot be stopped).

    Args:
        name: The record.
    """
    sync_started.set()
    sync_release.wait(timeout=20)
    sync_written.append(name)
    return f"wrote {name}"
