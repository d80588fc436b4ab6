"""Exceptions of the tools layer.

```
ToolError                      raised by providers; the runner turns it into an error code
├── ToolNotFoundError          -> unknown_tool
├── ToolParameterError         -> invalid_arguments
└── ToolExecutionError         -> execution_error
ToolDefinitionError            a developer mistake in a tool's definition (bad annotation,
                               duplicate name, a provider that does not fit the protocol);
                               raised when the tool, toolbox or runner is built
```

Each takes the message as its first argument, as the provider-protocol seed raises them
(`raise ToolNotFoundError(f"Tool '{name}' not found")`); that message is what the model
sees, so it should say what was wrong and what to do instead.
"""

from __future__ import annotations

from collections.abc import Iterable

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
    """The provider has no tool of that name.

    Args:
        message: Shown to the model as is.
        name: The tool that was asked for, when known.
        available: The tools that do exist, when known.
    """

    def __init__(
        self, message: str, *, name: str | None = None, available: Iterable[str] = ()
    ) -> None:
        self.name = name
        self.available = list(available)
        super().__init__(message)

    @classmethod
    def unknown(cls, name: str, available: Iterable[str] = ()) -> ToolNotFoundError:
        """The runner's message: `Unknown tool 'x'. Available tools: 'a', 'b'.`"""
        names = list(available)
        listed = ", ".join(repr(n) for n in names) or "none"
        return cls(f"Unknown tool {name!r}. Available tools: {listed}.", name=name, available=names)


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
    """A tool, toolbox or provider is defined wrongly; the message says what to change."""
