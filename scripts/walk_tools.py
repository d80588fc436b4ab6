"""The server tool `scripts/walk.py` sends its request to."""

from __future__ import annotations

from toolwire import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
