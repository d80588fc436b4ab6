"""`McpTools` against real MCP servers written with the official SDK
(`mcp_test_server.py`), run as subprocesses over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from fakes.processes import alive, wait_for_port
from toolwire import Agent, Toolbox, ToolContext
from toolwire.models.messages import AssistantMessage
from toolwire.models.scripted import ScriptedModel
from toolwire.runner import Policy, ToolRunner
from toolwire.tools import ToolCall, ToolDefinitionError
from toolwire.tools.mcp import McpTools

SERVER = Path(__file__).with_name("mcp_test_server.py")
STDIO = [sys.executable, str(SERVER), "stdio"]


@pytest.fixture
async def stdio() -> AsyncIterator[McpTools]:
    async with McpTools(command=STDIO, name="t") as tools:
        yield tools


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def http_url() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def _eventually(predicate: Callable[[], bool], seconds: float) -> bool:
    """Whether `predicate` became true within `seconds` (polled)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def _pid(tools: McpTools) -> int:
    result = await tools.execute_tool("t__pid", {})
    assert result.success, result.error
    pid: int = result.result["result"]
    return pid


# --- listing ---------------------------------------------------------------------------------


async def test_tools_are_namespaced_and_annotations_become_effects(stdio: McpTools) -> None:
    tools = {t.name: t for t in await stdio.list_tools()}
    assert {"t__add", "t__wipe", "t__note", "t__boom"} <= tools.keys()
    assert tools["t__add"].effects == "read"
    assert tools["t__wipe"].effects == "destructive"
    assert tools["t__note"].effects == "write"  # no annotations: the cautious default
    assert tools["t__add"].description == "Add two numbers."
    assert tools["t__add"].input_schema["required"] == ["a", "b"]
    assert stdio.status == "up"


async def test_prefix_include_exclude_and_effect_overrides() -> None:
    async with McpTools(
        command=STDIO,
        name="t",
        prefix="",
        include=["add", "note", "wipe"],
        exclude=["wipe"],
        effects={"note": "destructive"},
        scopes=["ops"],
    ) as tools:
        listed = {t.name: t for t in await tools.list_tools()}
    assert set(listed) == {"add", "note"}
    assert listed["note"].effects == "destructive"
    assert listed["add"].scopes == ("ops",)


def test_bad_definitions_are_refused_with_what_to_give() -> None:
    with pytest.raises(ToolDefinitionError, match="exactly one of command"):
        McpTools()
    with pytest.raises(ToolDefinitionError, match="exactly one of command"):
        McpTools(command=STDIO, url="http://x/mcp")
    with pytest.raises(ToolDefinitionError, match="as a list"):
        McpTools(command="python server.py")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="not an http"):
        McpTools(url="ftp://x/mcp")
    with pytest.raises(ToolDefinitionError, match="HTTP server"):
        McpTools(command=STDIO, forward_auth=True)


# --- results ---------------------------------------------------------------------------------


async def test_results_errors_and_content_parts(stdio: McpTools) -> None:
    added = await stdio.execute_tool("t__add", {"a": 2, "b": 40})
    assert added.success
    assert added.result == {"result": 42}  # the server's structured content
    failed = await stdio.execute_tool("t__boom", {})
    assert not failed.success
    assert failed.error is not None
    assert failed.error.code == "execution_error"
    assert "boom" in failed.error.message
    picture = await stdio.execute_tool("t__picture", {})
    assert picture.success
    caption, image = picture.result
    assert caption == "a tiny image"
    assert image == {"type": "image", "mime_type": "image/png", "bytes": 32}


async def test_the_runner_validates_and_times_out_mcp_tools() -> None:
    async with McpTools(command=STDIO, name="t", timeout=0.5) as tools:
        runner = ToolRunner(Toolbox([tools]), policy=Policy())
        bad = await runner.exec(ToolCall(id="c1", name="t__add", arguments='{"a": "x"}'))
        assert bad.error is not None
        assert bad.error.code == "invalid_arguments"
        slow = await runner.exec(ToolCall(id="c2", name="t__slow", arguments='{"seconds": 5}'))
        assert slow.error is not None
        assert slow.error.code == "timeout"
        # The connection is still good after the timed-out call.
        ok = await runner.exec(ToolCall(id="c3", name="t__add", arguments='{"a": 1, "b": 1}'))
        assert ok.success


# --- lifecycle -------------------------------------------------------------------------------


async def test_a_crashed_server_fails_only_its_own_tools_and_comes_back() -> None:
    async with (
        McpTools(command=STDIO, name="t") as crashing,
        McpTools(command=STDIO, name="other") as other,
    ):
        first = await _pid(crashing)
        result = await crashing.execute_tool("t__crash", {})
        assert not result.success
        assert result.error is not None
        assert result.error.code == "unavailable"
        assert "'t' is unavailable" in result.error.message
        # The other server's tools are not affected.
        assert (await other.execute_tool("other__add", {"a": 1, "b": 2})).success
        assert await _eventually(lambda: crashing.status == "up", 15)
        second = await _pid(crashing)
        assert second != first
        assert not alive(first)


async def test_a_server_that_never_starts_is_unavailable_not_an_exception() -> None:
    tools = McpTools(
        command=[sys.executable, "-c", "raise SystemExit(1)"], name="dead", start_timeout=1
    )
    try:
        assert await tools.list_tools() == []
        assert tools.status in ("down", "starting")
        assert tools.last_error
    finally:
        await tools.aclose()


async def test_a_changed_tool_list_is_listed_again(stdio: McpTools) -> None:
    changes: list[int] = []
    stdio.on_change = lambda: changes.append(1)
    grown = await stdio.execute_tool("t__grow", {"name": "extra"})
    assert grown.success
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if "t__extra" in {t.name for t in await stdio.list_tools()}:
            break
        await asyncio.sleep(0.05)
    assert "t__extra" in {t.name for t in await stdio.list_tools()}
    assert changes
    extra = await stdio.execute_tool("t__extra", {})
    assert extra.result == {"result": "extra was added at run time"}


async def test_closing_ends_the_server_process() -> None:
    tools = McpTools(command=STDIO, name="t")
    await tools.start()
    pid = await _pid(tools)
    assert alive(pid)
    await tools.aclose()
    assert await _eventually(lambda: not alive(pid), 5)
    assert tools.status == "closed"


# --- streamable HTTP -------------------------------------------------------------------------


async def test_streamable_http_with_headers(http_url: str) -> None:
    async with McpTools(url=http_url, name="t", headers={"X-Team": "ops"}) as tools:
        assert "t__add" in {t.name for t in await tools.list_tools()}
        assert (await tools.execute_tool("t__add", {"a": 1, "b": 2})).result == {"result": 3}
        seen = await tools.execute_tool("t__whoami", {}, ToolContext(auth_token="secret-1"))
    assert seen.result == {"x-team": "ops", "authorization": None}  # no token by default


async def test_forward_auth_sends_the_callers_token(http_url: str) -> None:
    async with McpTools(url=http_url, name="t", forward_auth=True) as tools:
        alice = await tools.execute_tool("t__whoami", {}, ToolContext(auth_token="alice-token"))
        bob = await tools.execute_tool("t__whoami", {}, ToolContext(auth_token="bob-token"))
    assert alice.result["authorization"] == "Bearer alice-token"
    assert bob.result["authorization"] == "Bearer bob-token"


# --- in an agent -----------------------------------------------------------------------------


async def test_an_agent_uses_an_mcp_tool(stdio: McpTools) -> None:
    call = ToolCall(id="c1", name="t__add", arguments='{"a": 20, "b": 22}')
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "The sum is 42."])
    agent = Agent(model, Toolbox([stdio]))
    result = await agent.run("What is 20 + 22?")
    assert result.output == "The sum is 42."
    [tool_result] = result.steps[0].tool_results
    assert tool_result.success
    assert tool_result.result == {"result": 42}
    # The model was offered the MCP tool with the server's schema.
    offered = {t.name: t for t in model.requests[0].tools}
    assert offered["t__add"].input_schema["required"] == ["a", "b"]


def test_no_orphan_when_the_loop_ends_without_closing() -> None:
    # A script that forgets `aclose()`: asyncio.run cancels the supervisor, and the SDK
    # ends the subprocess on the way out.
    pids: list[int] = []

    async def main() -> None:
        tools = McpTools(command=STDIO, name="t")
        pids.append(await _pid(tools))

    asyncio.run(main())
    deadline = time.monotonic() + 5
    while alive(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pids[0])
    assert os.getpid() != pids[0]
