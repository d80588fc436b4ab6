"""The gateway as an MCP server (`/mcp`) and `toolwire mcp serve`, driven by the official
`mcp` SDK's own client over streamable HTTP and stdio."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from approval_tools import DELETED
from live import LiveServer
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from server_support import config_with

from toolwire.server import create_app

OPS, DEV, BOB = "tw-mcp-ops", "tw-mcp-dev", "tw-mcp-bob"
GATEWAY_TOOLS = str(Path(__file__).parents[2] / "gateway_tools.py")


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    config = config_with(
        server_tools={"modules": ["approval_tools", GATEWAY_TOOLS]},
        keys=[
            {"name": "ops", "sha256": _digest(OPS), "admin": True, "scopes": ["reports"]},
            {"name": "dev", "sha256": _digest(DEV)},
            {"name": "bob", "sha256": _digest(BOB), "approve": "none"},
        ],
        store="memory",
    )
    with LiveServer(create_app(config)) as live:
        yield live


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    DELETED.clear()
    yield
    DELETED.clear()


@contextlib.asynccontextmanager
async def _client(server: LiveServer, key: str) -> AsyncIterator[Client]:
    """The SDK's client on `/mcp` with a gateway key (its HTTP client closed after)."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
    ):
        yield client


def _http(server: LiveServer) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {OPS}"}
    return httpx.AsyncClient(base_url=server.url, headers=headers, timeout=10)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def test_tools_are_listed_with_schemas_and_annotations(server: LiveServer) -> None:
    async with _client(server, OPS) as ops:
        tools = {t.name: t for t in (await ops.list_tools()).tools}
    assert {"delete_application", "list_applications", "drain_cluster"} <= tools.keys()
    delete = tools["delete_application"]
    assert delete.annotations is not None
    assert delete.annotations.destructive_hint is True
    assert delete.annotations.read_only_hint is False
    assert tools["list_applications"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert delete.input_schema["required"] == ["app_name"]
    assert "cannot be undone" in (delete.description or "")


async def test_a_read_tool_runs_and_returns_structured_content(server: LiveServer) -> None:
    async with _client(server, OPS) as ops:
        result = await ops.call_tool("list_applications", {})
    assert not result.is_error
    assert _text(result) == '["demo-app","api-gateway"]'


async def test_bad_arguments_and_unknown_tools_are_clear_errors(server: LiveServer) -> None:
    async with _client(server, OPS) as ops:
        bad = await ops.call_tool("delete_application", {"app_name": 42})
        unknown = await ops.call_tool("no_such_tool", {})
    assert bad.is_error
    assert "app_name" in _text(bad)
    assert "needs approval" not in _text(bad)
    assert DELETED == []
    assert unknown.is_error
    assert "Unknown tool 'no_such_tool'" in _text(unknown)


async def test_a_key_sees_and_calls_only_the_tools_its_scopes_allow(server: LiveServer) -> None:
    async with _client(server, DEV) as dev:
        names = {t.name for t in (await dev.list_tools()).tools}
        refused = await dev.call_tool("quarterly_report", {})
    async with _client(server, OPS) as ops:
        ops_names = {t.name for t in (await ops.list_tools()).tools}
    scoped = ops_names - names
    assert scoped, "gateway_tools should have a tool that needs the 'reports' scope"
    assert refused.is_error


def test_a_missing_or_wrong_key_is_401_before_the_protocol(server: LiveServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with httpx.Client(base_url=server.url) as http:
        missing = http.post("/mcp", json=body)
        wrong = http.post("/mcp", json=body, headers={"Authorization": "Bearer nope"})
    assert missing.status_code == 401
    assert wrong.status_code == 401
    # In the transport's own shape (a JSON-RPC error), not OpenAI's.
    assert _jsonrpc_error(wrong, 401, -32600, None) == "Invalid gateway key."
    assert wrong.headers["www-authenticate"].startswith("Bearer")


_ACCEPT = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {OPS}"}


def _jsonrpc_error(response: httpx.Response, status: int, code: int, id: str | int | None) -> str:
    """The message of a JSON-RPC error answer, after checking its shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "error"}, body
    assert body["jsonrpc"] == "2.0"
    assert body["id"] == id
    assert body["error"]["code"] == code
    message: str = body["error"]["message"]
    assert len(message) < 300, message  # a sentence, not a dump of the validator's report
    return message


def test_what_is_not_one_json_rpc_message_gets_a_json_rpc_error(server: LiveServer) -> None:
    # Before: a batch got -32602 with a whole pydantic report; `id: null` or `1.5` was
    # taken as a notification (202, dropped); a wrong Content-Type was a plain-text 400.
    with httpx.Client(base_url=server.url, headers=_ACCEPT, timeout=10) as http:

        def post(content: bytes, **headers: str) -> httpx.Response:
            headers.setdefault("content-type", "application/json")
            return http.post("/mcp", content=content, headers=headers)

        assert "Parse error" in _jsonrpc_error(post(b"{nope"), 400, -32700, None)
        batch = b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]'
        assert "batch" in _jsonrpc_error(post(batch), 400, -32600, None)
        for id_ in (b"null", b"1.5", b"true", b"[1]"):
            message = b'{"jsonrpc": "2.0", "id": ' + id_ + b', "method": "ping"}'
            assert "'id'" in _jsonrpc_error(post(message), 400, -32600, None)
        old = b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}'
        assert "jsonrpc" in _jsonrpc_error(post(old), 400, -32600, 7)
        params = b'{"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": [1]}'
        assert "params" in _jsonrpc_error(post(params), 400, -32602, "a")
        assert _jsonrpc_error(post(b"5"), 400, -32600, None)
        wrong_type = post(
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', **{"content-type": "text/plain"}
        )
        assert "Content-Type" in _jsonrpc_error(wrong_type, 415, -32600, None)
        put = http.put("/mcp", content=b"{}")
        assert "PUT" in _jsonrpc_error(put, 405, -32600, None)
        assert put.headers["allow"] == "GET, POST, DELETE"
        # A valid message still works.
        ping = post(b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}')
        assert ping.status_code == 200, ping.text
        assert ping.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_a_body_over_the_limit_gets_a_json_rpc_413(server: LiveServer) -> None:
    # Before: the SDK's plain-text "Request body too large".
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            + f"Authorization: Bearer {OPS}\r\nContent-Length: {5 * 1024 * 1024}\r\n\r\n".encode()
        )
        answer = sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 "), head
    error = json.loads(body)
    assert error["jsonrpc"] == "2.0"
    assert error["id"] is None
    assert "limits.max_body_bytes" in error["error"]["message"]


def test_an_argument_past_64_bits_is_invalid_params_with_the_request_id(
    server: LiveServer,
) -> None:
    # Before: {"error": {"code": 0, "message": "Integer exceeds 64-bit range"}}.
    call = (
        b'{"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": '
        b'"list_applications", "arguments": {"n": 123456789012345678901234567890}}}'
    )
    headers = {**_ACCEPT, "content-type": "application/json"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as http:
        answer = http.post("/mcp", content=call)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["id"] == 41
    assert body["error"]["code"] == -32602
    assert "64-bit" in body["error"]["message"]


async def test_a_destructive_tool_waits_for_approval_and_runs_exactly_once(
    server: LiveServer,
) -> None:
    async with _client(server, OPS) as ops, _http(server) as http:
        await _approve_once(ops, http)


async def _approve_once(ops: Client, http: httpx.AsyncClient) -> None:
    first = await ops.call_tool("delete_application", {"app_name": "demo-app"})
    assert first.is_error
    assert DELETED == []
    message = _text(first)
    assert "needs approval" in message
    approval_id = message.split("Approval ", 1)[1].split()[0]
    # Asking again before anyone decided does not make a second approval.
    again = await ops.call_tool("delete_application", {"app_name": "demo-app"})
    assert approval_id in _text(again)
    pending = (await http.get(f"/v1/approvals/{approval_id}")).json()
    assert pending["status"] == "pending"
    assert pending["name"] == "delete_application"
    decided = await http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    # Other arguments are not what was approved.
    other = await ops.call_tool("delete_application", {"app_name": "other-app"})
    assert other.is_error
    assert DELETED == []
    ran = await ops.call_tool("delete_application", {"app_name": "demo-app"})
    assert not ran.is_error, _text(ran)
    assert DELETED == ["demo-app"]
    # The approval is used up: the next call needs a new one.
    once_more = await ops.call_tool("delete_application", {"app_name": "demo-app"})
    assert once_more.is_error
    assert DELETED == ["demo-app"]
    assert (await http.get(f"/v1/approvals/{approval_id}")).json()["status"] == "used"
    params = {"tool": "delete_application"}
    audit = (await http.get("/v1/audit", params=params)).json()["data"]
    decisions = [r for r in audit if r["outcome"] == "approval_approved"]
    assert [r["approval_id"] for r in decisions] == [approval_id]
    [ran_record] = [
        r for r in audit if r["event"] == "finished" and r["approval_id"] and r not in decisions
    ]
    assert ran_record["approval_id"] == approval_id
    assert ran_record["key_name"] == "ops"
    assert ran_record["approved_by"] == "ops"


async def test_a_denied_call_does_not_run(server: LiveServer) -> None:
    async with _client(server, OPS) as ops, _http(server) as http:
        first = await ops.call_tool("delete_application", {"app_name": "keep-me"})
        approval_id = _text(first).split("Approval ", 1)[1].split()[0]
        await http.post(f"/v1/approvals/{approval_id}", json={"decision": "deny"})
        after = await ops.call_tool("delete_application", {"app_name": "keep-me"})
    assert after.is_error
    assert "needs approval" in _text(after)  # a new request for a person, not a run
    assert approval_id not in _text(after)
    assert DELETED == []


async def test_toolwire_mcp_serve_over_stdio(tmp_path: Path) -> None:
    tools = tmp_path / "stdio_tools.py"
    tools.write_text(
        "from toolwire import tool\n\n"
        "@tool\n"
        "def shout(text: str) -> str:\n"
        '    """Upper-case some text."""\n'
        "    return text.upper()\n\n"
        "@tool(effects='destructive')\n"
        "def erase(name: str) -> str:\n"
        '    """Erase a thing."""\n'
        "    return 'erased ' + name\n"
    )
    command = [sys.executable, "-m", "toolwire.cli.main", "mcp", "serve", "--tools", str(tools)]
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(tmp_path))
    async with Client(params) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {"shout", "erase"}
        assert listed["erase"].annotations.destructive_hint is True  # type: ignore[union-attr]
        shouted = await client.call_tool("shout", {"text": "hi"})
        assert _text(shouted) == "HI"
        refused = await client.call_tool("erase", {"name": "x"})
        assert refused.is_error
        assert "--yes" in _text(refused)
        invalid = await client.call_tool("shout", {})
        assert invalid.is_error
    params = StdioServerParameters(command=command[0], args=[*command[1:], "--yes"])
    async with Client(params) as client:
        erased = await client.call_tool("erase", {"name": "x"})
        assert _text(erased) == "erased x"


def test_the_sdk_is_loaded_only_when_an_mcp_client_comes() -> None:
    # A quarter of an idle worker's memory: most gateways never see an MCP client.
    import subprocess

    code = (
        "import sys\n"
        "from starlette.testclient import TestClient\n"
        "from toolwire.server import create_app\n"
        "with TestClient(create_app()) as client:\n"
        "    assert client.get('/healthz').status_code == 200\n"
        "    print('before', 'mcp.server.lowlevel' in sys.modules)\n"
        "    client.post('/mcp', json={'jsonrpc': '2.0', 'id': 1, 'method': 'ping'},\n"
        "                headers={'accept': 'application/json, text/event-stream'})\n"
        "    print('after', 'mcp.server.lowlevel' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["before", "False", "after", "True"], out.stderr
