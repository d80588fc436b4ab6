"""The `ToolProvider` protocol: anything that lists tools and executes them."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from toolwire.tools.call import ToolResult
from toolwire.tools.context import ToolContext
from toolwire.tools.tool import Tool

__all__ = ["ToolProvider"]


@runtime_checkable
class ToolProvider(Protocol):
    """Lists tools and executes them by name.

    `execute_tool` receives arguments the runner has already parsed and validated. It may
    raise `ToolNotFoundError`, `ToolParameterError` or `ToolExecutionError`; any other
    exception counts as an execution error too. The returned `ToolResult.call_id` may be
    empty: the runner sets it. Code outside the runner should not call `execute_tool`
    directly; go through `ToolRunner` so validation, permissions and redaction apply.
    """

    async def list_tools(self) -> list[Tool]: ...

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult: ...
