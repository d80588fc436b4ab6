"""`toolwire mcp serve`: tools served to a local MCP client over stdio."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from toolwire.cli._common import TOOLS_OPTION_HELP, CliError, exit_with, load_tools

__all__ = ["app"]

app = typer.Typer(
    help="toolwire and the Model Context Protocol.", no_args_is_help=True, add_completion=False
)


@app.command("serve")
def serve(
    tools: Annotated[list[str] | None, typer.Option("--tools", help=TOOLS_OPTION_HELP)] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Let destructive tools run. Without it they answer with an error and do "
            "not run (the MCP client has no way to ask toolwire's approvals).",
        ),
    ] = False,
) -> None:
    """Serve tools over MCP on stdin/stdout, for a local client such as Claude Desktop.

    Every call goes through toolwire's runner (validation, timeouts, redaction). Nothing
    but the protocol is written to stdout.
    """
    from toolwire.server.protocols.mcp import mcp_available, serve_stdio

    if not mcp_available():
        raise exit_with("toolwire mcp serve needs the MCP SDK: pip install 'toolwire[mcp]'")
    try:
        provider = load_tools(tools or [])
    except CliError as exc:
        raise exit_with(exc) from None
    from toolwire.runner import Policy, ToolRunner

    runner = ToolRunner(provider, policy=Policy())
    asyncio.run(serve_stdio(runner, allow_destructive=yes))
