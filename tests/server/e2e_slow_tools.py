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
    for event in (started, cancelled, finished):
        event.clear()


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
