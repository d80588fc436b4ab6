"""Exceptions of the tools layer.

```
ToolError                      raised by providers; the runner turns it into an error code
├── ToolNotFoundError          -> unknown_tool
├── ToolParameterError         -> invalid_arguments
└── ToolExecutionError         -> execution_error
ToolDefinitionError            a developer mistake in a tool's definition (bad annotation,
                               duplicate name); raised when the tool or toolbox is built
```
"""

from __future__ import annotations

__all__ = [
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolParameterError",
]


class ToolError(Exception):
    """Base class of the errors a `ToolProvider` raises while listing or executing tools."""


class ToolNotFoundError(ToolError):
    """The provider has no tool of that name."""

    def __init__(self, name: str, available: list[str] | None = None) -> None:
        self.name = name
        self.available = list(available or [])
        listed = ", ".join(repr(n) for n in self.available) or "none"
        super().__init__(f"Unknown tool {name!r}. Available tools: {listed}.")


class ToolParameterError(ToolError):
    """The arguments do not fit the tool's parameters.

    `message` is written for the model: what was wrong and how to fix it.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class ToolExecutionError(ToolError):
    """The tool ran and failed. `message` is safe to show to a model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class ToolDefinitionError(Exception):
    """A tool or toolbox is defined wrongly; the message says what to change."""
