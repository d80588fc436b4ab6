"""A small MCP server written with the official SDK, run by the tests as a subprocess.

python mcp_test_server.py stdio
python mcp_test_server.py http PORT       # streamable HTTP at http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent, TextContent, ToolAnnotations

app = MCPServer("test-server")


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool(annotations=ToolAnnotations(destructiveHint=True))
def wipe(name: str) -> str:
    """Wipe a named thing (writes a line to $MCP_SIDE_EFFECTS)."""
    path = os.environ.get("MCP_SIDE_EFFECTS")
    if path:
        with open(path, "a") as f:
            f.write(f"wiped {name}\n")
    return f"wiped {name}"


@app.tool()
def note(text: str) -> str:
    """Keep a note (no annotations: a write tool)."""
    return f"noted: {text}"


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def boom() -> str:
    """Always fails."""
    raise ToolError("the boom tool always fails")


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "done"


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def picture() -> list[TextContent | ImageContent]:
    """A caption and a tiny image."""
    data = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()
    return [
        TextContent(type="text", text="a tiny image"),
        ImageContent(type="image", data=data, mime_type="image/png"),
    ]


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def whoami(ctx: Context) -> dict[str, str | None]:
    """The HTTP headers this call came with."""
    headers = ctx.headers or {}
    return {
        "authorization": headers.get("authorization"),
        "x-team": headers.get("x-team"),
    }


@app.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called `name` and announce the changed list."""

    def extra() -> str:
        return f"{name} was added at run time"

    app.add_tool(extra, name=name, description="Added at run time.")
    await ctx.notify_tools_changed()
    return f"added {name}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
