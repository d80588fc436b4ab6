"""Server tools for the gateway tests, loaded by path (`server_tools.modules`)."""

from __future__ import annotations

from toolwire import tool
from toolwire.tools import ToolContext


@tool
def whoami(ctx: ToolContext) -> dict[str, object]:
    """Say who is calling: the gateway key's name and scopes."""
    return {
        "principal": ctx.principal,
        "scopes": sorted(ctx.scopes),
        "has_token": ctx.auth_token is not None,
    }


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool(scopes=["reports"])
def quarterly_report(quarter: str) -> str:
    """The quarterly report; needs the 'reports' scope.

    Args:
        quarter: For example 'Q3'.
    """
    return f"Report for {quarter}: all good."
