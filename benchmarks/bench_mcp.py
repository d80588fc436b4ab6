"""The cost of a tool call through `McpTools`, against calling the same function directly.

Run: `python benchmarks/bench_mcp.py [--calls 500]` (prints figures; no assertions).

One MCP server written with the official SDK (`MCPServer`, one `add` tool) runs as a
subprocess, over stdio and over streamable HTTP on 127.0.0.1. Each path is warmed up,
then timed call by call: the function itself, `McpTools.execute_tool` (the provider),
and `ToolRunner.exec` (validation, policy and the provider: what an agent pays).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from toolwire import McpTools, Toolbox
from toolwire.runner import Policy, ToolRunner
from toolwire.tools import ToolCall

SERVER = """
import sys
from mcp.server.mcpserver import MCPServer

app = MCPServer("bench")


@app.tool()
def add(a: int, b: int) -> int:
    return a + b


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
"""


def add(a: int, b: int) -> int:
    return a + b


async def timed(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    for _ in range(min(50, calls)):
        await call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def measure(tools: McpTools, calls: int) -> dict[str, list[float]]:
    async with tools:
        runner = ToolRunner(Toolbox([tools]), policy=Policy())
        call = ToolCall(id="c1", name="b__add", arguments='{"a": 1, "b": 2}')

        async def provider() -> object:
            result = await tools.execute_tool("b__add", {"a": 1, "b": 2})
            assert result.success, result.error
            return result

        async def through_runner() -> object:
            result = await runner.exec(call)
            assert result.success, result.error
            return result

        return {
            "McpTools.execute_tool": await timed(provider, calls),
            "ToolRunner.exec": await timed(through_runner, calls),
        }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def direct(calls: int) -> list[float]:
    async def call() -> object:
        return add(1, 2)

    return await timed(call, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = Path(tmp) / "bench_mcp_server.py"
        server.write_text(SERVER)
        rows = [("function called directly", asyncio.run(direct(opts.calls)))]
        stdio = McpTools(command=[sys.executable, str(server), "stdio"], name="b")
        for label, samples in asyncio.run(measure(stdio, opts.calls)).items():
            rows.append((f"stdio, {label}", samples))
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, str(server), "http", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            http = McpTools(url=f"http://127.0.0.1:{port}/mcp", name="b")
            for label, samples in asyncio.run(measure(http, opts.calls)).items():
                rows.append((f"streamable HTTP, {label}", samples))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    base = statistics.median(rows[0][1])
    print(f"\n{opts.calls} calls each, after 50 warm-up calls; ms per call\n")
    print(f"{'path':<44} {'median':>9} {'p95':>9} {'added':>9}")
    for label, samples in rows:
        ordered = sorted(samples)
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        median = statistics.median(samples)
        print(f"{label:<44} {median:>9.3f} {p95:>9.3f} {median - base:>+9.3f}")


if __name__ == "__main__":
    main()
