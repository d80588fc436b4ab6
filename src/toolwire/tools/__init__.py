"""Tool definitions, providers and results. Depends on nothing else in toolwire."""

from toolwire.tools.call import ErrorCode, ToolCall, ToolErrorInfo, ToolResult, new_call_id
from toolwire.tools.context import ToolContext
from toolwire.tools.errors import (
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameterError,
)
from toolwire.tools.provider import ToolProvider
from toolwire.tools.tool import Effects, Tool, ToolParameter

__all__ = [
    "Effects",
    "ErrorCode",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolErrorInfo",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolParameter",
    "ToolParameterError",
    "ToolProvider",
    "ToolResult",
    "new_call_id",
]
