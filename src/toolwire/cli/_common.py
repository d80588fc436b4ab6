"""Helpers shared by the CLI commands: loading tool modules, one-line errors, consoles."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from toolwire.tools import ToolDefinitionError, ToolProvider
from toolwire.tools.demo import demo_toolbox
from toolwire.tools.toolbox import Toolbox

__all__ = ["CliError", "discover_config", "exit_with", "load_tools", "stderr_console"]

TOOLS_OPTION_HELP = (
    "Python module with @tool functions to load, e.g. myapp.tools (repeatable). "
    "The current directory is importable. Default: the built-in demo tools."
)


class CliError(Exception):
    """A problem the person running the command must fix; printed as one line."""


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def exit_with(error: CliError | str, code: int = 2) -> typer.Exit:
    """Print `error` as one red line on stderr and return the `typer.Exit` to raise."""
    message = " ".join(str(error).split())
    stderr_console().print(Text.assemble(("Error: ", "bold red"), message), soft_wrap=True)
    return typer.Exit(code)


def discover_config(given: Path | None) -> Path | None:
    """The gateway config to use: `--config`, else `$TOOLWIRE_CONFIG`, else
    `./toolwire.yaml` when it exists, else none (built-in defaults)."""
    if given is not None:
        return given
    from_env = os.environ.get("TOOLWIRE_CONFIG")
    if from_env:
        return Path(from_env)
    here = Path("toolwire.yaml")
    return here if here.is_file() else None


def load_tools(modules: Sequence[str]) -> ToolProvider:
    """The tools of `modules` (the demo tools when there are none), as one provider.

    Raises:
        CliError: A module failed to import or defines its tools wrongly.
    """
    if not modules:
        return demo_toolbox()
    boxes: list[ToolProvider] = []
    try:
        # from_module imports the module (the current directory is searched too) and
        # reports an import failure as one line naming the module and the error.
        boxes.extend(Toolbox.from_module(name) for name in modules)
        return boxes[0] if len(boxes) == 1 else Toolbox(boxes)
    except ToolDefinitionError as exc:
        raise CliError(str(exc)) from exc
