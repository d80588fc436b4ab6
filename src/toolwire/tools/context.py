"""Per-call context handed to tools and to the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolContext"]


@dataclass(kw_only=True)
class ToolContext:
    """Who is calling and with which rights.

    A tool function that declares a parameter annotated `ToolContext` receives it; the
    parameter is never shown to the model. One context is used for one agent run, so
    per-run bookkeeping (the invalid-arguments retry budget) lives here too.
    """

    scopes: frozenset[str] = frozenset()
    """Permissions of the caller; a tool's `scopes` must all be in here."""
    principal: str | None = None
    """Name of the caller (a gateway key's name, a user id)."""
    auth_token: str | None = None
    """The caller's bearer token, forwarded by tools that call an HTTP API for the caller."""
    run_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    invalid_attempts: dict[str, int] = field(default_factory=dict)
    """Invalid-argument attempts per tool name in this run (the runner's retry budget)."""
