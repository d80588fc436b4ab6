"""`/mcp` approvals bind the validated call (what would run), and are found by the call
itself, however many other approvals the key has."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2
import pytest
from live import LiveServer
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from permission_tools import RAN
from server_support import config_with

from toolwire.server import create_app
from toolwire.store.base import ApprovalRecord, arguments_hash

CAROL = "tw-mcp-carol"


@pytest.fixture(scope="module")
def app() -> Any:
    digest = hashlib.sha256(CAROL.encode()).hexdigest()
    return create_app(
        config_with(
            server_tools={"modules": ["permission_tools"]},
            keys=[
                {"name": "carol", "sha256": digest},
                # The approvers permission_tools names must be configured keys.
                *(
                    {"name": n, "sha256": hashlib.sha256(n.encode()).hexdigest()}
                    for n in ("ops", "lead")
                ),
            ],
            store="memory",
        )
    )


@pytest.fixture(scope="module")
def server(app: Any) -> Iterator[LiveServer]:
    with LiveServer(app) as live:
        yield live


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


@contextlib.asynccontextmanager
async def _client(server: LiveServer) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {CAROL}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
    ):
        yield client


def _http(server: LiveServer) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {CAROL}"}
    return httpx.AsyncClient(base_url=server.url, headers=headers, timeout=10)


def _approval_id(result: Any) -> str:
    text = "\n".join(block.text for block in result.content)
    assert "needs approval" in text, text
    return text.split("Approval ", 1)[1].split()[0]


async def test_the_approval_binds_the_validated_arguments(server: LiveServer) -> None:
    async with _client(server) as carol, _http(server) as http:
        # "3" is repaired to 3 and the default filled in: that is the call that would run.
        first = await carol.call_tool("scale", {"app": "web", "replicas": "3"})
        approval_id = _approval_id(first)
        pending = (await http.get(f"/v1/approvals/{approval_id}")).json()
        validated = {"app": "web", "replicas": 3, "dry_run": False}
        assert pending["arguments_hash"] == arguments_hash(validated)
        assert pending["arguments"] == '{"app":"web","dry_run":false,"replicas":3}'
        decided = await http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        assert decided.status_code == 200
        # The same call written the other way is the approved call: it runs, once.
        ran = await carol.call_tool("scale", {"app": "web", "replicas": 3, "dry_run": False})
        assert not ran.is_error
        again = await carol.call_tool("scale", {"app": "web", "replicas": 3})
        assert again.is_error
    assert RAN == ["scale:web:3"]


async def test_an_approval_is_found_behind_hundreds_of_newer_ones(
    server: LiveServer, app: Any
) -> None:
    async with _client(server) as carol, _http(server) as http:
        approval_id = _approval_id(await carol.call_tool("scale", {"app": "api", "replicas": 2}))
        decided = await http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        assert decided.status_code == 200
        # 250 newer approvals of the same key (other calls) push it out of any "newest N".
        now = time.time()
        others = [
            ApprovalRecord(
                id=f"apr_other{i}",
                run_id=f"mcp_other{i}",
                call_id=f"call_{i}",
                tool="scale",
                arguments="{}",
                arguments_hash=arguments_hash({"i": i}),
                requested_by="carol",
                created_at=now + 1 + i,
                expires_at=now + 3600,
            )
            for i in range(250)
        ]
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: asyncio.run(app.state.gateway.store.add_approvals(others))
        )
        ran = await carol.call_tool("scale", {"app": "api", "replicas": 2})
        assert not ran.is_error
    assert RAN == ["scale:api:2"]


async def test_the_stored_approval_keeps_no_nested_secret(server: LiveServer, app: Any) -> None:
    settings = {"region": "eu", "password": "hunter2", "nodes": [{"token": "t-1"}]}
    async with _client(server) as carol:
        approval_id = _approval_id(
            await carol.call_tool("connect", {"name": "db", "settings": settings})
        )
    record = await asyncio.get_running_loop().run_in_executor(
        None, lambda: asyncio.run(app.state.gateway.store.get_approval(approval_id))
    )
    assert record is not None
    assert "hunter2" not in record.arguments
    assert "t-1" not in record.arguments
    # The hash binds the real arguments (what runs), not the shown ones.
    assert record.arguments_hash == arguments_hash({"name": "db", "settings": settings})
