"""`toolwire.tools.__all__` stays honest."""

import toolwire.tools


def test_every_exported_name_exists() -> None:
    missing = [n for n in toolwire.tools.__all__ if not hasattr(toolwire.tools, n)]
    assert missing == []
    assert sorted(toolwire.tools.__all__) == toolwire.tools.__all__


def test_public_tools_names_are_exported() -> None:
    expected = {
        "tool",
        "Tool",
        "ToolParameter",
        "ToolCall",
        "ToolResult",
        "ToolContext",
        "ToolProvider",
        "ToolProviderProtocol",
        "MockToolProvider",
        "Toolbox",
        "MockTools",
        "ToolError",
        "ToolNotFoundError",
        "ToolParameterError",
        "ToolExecutionError",
        "ToolDefinitionError",
    }
    assert expected <= set(toolwire.tools.__all__)
