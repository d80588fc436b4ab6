"""Small helpers shared by the runner tests."""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from toolwire.tools import Tool, ToolCall, ToolContext, ToolResult

_ids = itertools.count(1)


def call(name: str, arguments: str | dict[str, Any] = "{}", *, id: str | None = None) -> ToolCall:
    """A `ToolCall`; dict arguments are encoded as JSON, strings are sent as they are."""
    raw = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=raw)


class RaisingProvider:
    """A provider whose `execute_tool` raises the given exception (or returns `returns`)."""

    def __init__(
        self, tools: list[Tool], *, raises: BaseException | None = None, returns: Any = None
    ) -> None:
        self.tools = tools
        self.raises = raises
        self.returns = returns
        self.listings = 0
        self.executed: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self) -> list[Tool]:
        self.listings += 1
        return list(self.tools)

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        self.executed.append((name, arguments))
        if self.raises is not None:
            raise self.raises
        return self.returns  # type: ignore[no-any-return]
