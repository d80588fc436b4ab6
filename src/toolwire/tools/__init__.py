"""Tool definitions, providers and results. Depends on nothing else in toolwire."""

from toolwire.tools.call import (
    ErrorCode,
    ToolArguments,
    ToolCall,
    ToolErrorInfo,
    ToolResult,
    new_call_id,
)
from toolwire.tools.context import ToolContext
from toolwire.tools.decorator import FunctionTool, tool
from toolwire.tools.errors import (
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameterError,
)
from toolwire.tools.http import HttpTool, HttpTools
from toolwire.tools.mcp import McpTools
from toolwire.tools.mock import MockCall, MockToolProvider, MockTools
from toolwire.tools.provider import (
    AnyToolProvider,
    ContextFreeToolProvider,
    ToolProvider,
    ToolProviderProtocol,
    as_provider,
)
from toolwire.tools.schema import FunctionSchema, function_schema
from toolwire.tools.tool import Effects, Tool, ToolParameter
from toolwire.tools.toolbox import Toolbox, to_jsonable

__all__ = [
    "AnyToolProvider",
    "ContextFreeToolProvider",
    "Effects",
    "ErrorCode",
    "FunctionSchema",
    "FunctionTool",
    "HttpTool",
    "HttpTools",
    "McpTools",
    "MockCall",
    "MockToolProvider",
    "MockTools",
    "Tool",
    "ToolArguments",
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
    "ToolProviderProtocol",
    "ToolResult",
    "Toolbox",
    "as_provider",
    "function_schema",
    "new_call_id",
    "to_jsonable",
    "tool",
]
