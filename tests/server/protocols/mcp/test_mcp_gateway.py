"""MCP servers' tools in the gateway (`mcp_servers:`): a real MCP server (the SDK's,
`tests/tools/mcp_test_server.py`) as a subprocess, the gateway on a real socket in front
of the fake OpenAI server, the `openai` SDK and httpx as clients."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from chat_support import native_upstream, sdk
from live import LiveServer
from served import ServeProcess
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse, tool_call
from fakes.processes import alive
from toolwire.server import ConfigError, create_app, parse_config

SERVER = Path(__file__).parents[3] / "tools" / "mcp_test_server.py"
OPS, DEV = "tw-ops-key", "tw-dev-key"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _mcp(**extra: Any) -> dict[str, Any]:
    return {"name": "demo", "command": [sys.executable, str(SERVER), "stdio"], **extra}


@pytest.fixture
def side_effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "side_effects.txt"
    monkeypatch.setenv("MCP_SIDE_EFFECTS", str(path))
    return path


@pytest.fixture
def server(openai_server: FakeOpenAIServer, side_effects: Path) -> Iterator[LiveServer]:
    config = config_with(
        upstream=native_upstream(openai_server.base_url),
        mcp_servers=[_mcp(env_from=["MCP_SIDE_EFFECTS"], scopes=["ops"])],
        keys=[
            {"name": "ops", "sha256": _digest(OPS), "scopes": ["ops"], "admin": True},
            {"name": "dev", "sha256": _digest(DEV)},
        ],
        store="memory",
    )
    with LiveServer(create_app(config)) as live:
        yield live


def _http(server: LiveServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=15)


def test_the_tools_are_listed_for_keys_with_the_scope_only(server: LiveServer) -> None:
    with _http(server, OPS) as http:
        names = {t["function"]["name"] for t in http.get("/v1/tools").json()["data"]}
    assert {"demo__add", "demo__wipe", "demo__note"} <= names
    with _http(server, DEV) as http:
        assert http.get("/v1/tools").json()["data"] == []
        refused = http.post("/v1/tools/demo__add/invoke", json={"arguments": {"a": 1, "b": 2}})
    assert refused.json()["error"]["code"] == "forbidden"


def test_a_model_uses_an_mcp_tool_through_the_gateway_streamed(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        sse(
            [
                delta(tool_calls=[{**tool_call("demo__add", {"a": 20, "b": 22}), "index": 0}]),
                delta(finish_reason="tool_calls"),
            ]
        ),
        sse([delta("The sum is 42."), delta(finish_reason="stop")]),
    )
    stream = sdk(server, OPS).chat.completions.create(
        model="gpt", messages=[{"role": "user", "content": "20 + 22?"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "The sum is 42."
    first, second = openai_server.requests[-2:]
    offered = {t["function"]["name"] for t in first.json["tools"]}
    assert "demo__add" in offered
    tool_message = second.json["messages"][-1]
    assert tool_message["role"] == "tool"
    assert json.loads(tool_message["content"]) == {"result": 42}


def test_a_destructive_mcp_tool_waits_for_approval_and_runs_once(
    server: LiveServer, openai_server: FakeOpenAIServer, side_effects: Path
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("demo__wipe", {"name": "cache"}, id="call_w")])
    )
    with _http(server, OPS) as http:
        paused = http.post(
            "/v1/chat/completions",
            json={"model": "gpt", "messages": [{"role": "user", "content": "Wipe the cache."}]},
        ).json()
        extension = paused["toolwire"]
        assert extension["status"] == "awaiting_approval"
        assert not side_effects.exists()  # nothing ran before the decision
        [approval] = extension["pending_approvals"]
        assert approval["name"] == "demo__wipe"
        decided = http.post(f"/v1/approvals/{approval['id']}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        openai_server.reply(completion("The cache is wiped."))
        resumed = http.post(f"/v1/runs/{extension['run_id']}/resume", json={})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["choices"][0]["message"]["content"] == "The cache is wiped."
        again = http.post(f"/v1/runs/{extension['run_id']}/resume", json={})
        assert again.status_code == 409
    assert side_effects.read_text().splitlines() == ["wiped cache"]


def test_readyz_names_the_mcp_server(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        body = http.get("/readyz").json()
    assert body["checks"]["mcp:demo"] == "ok"


def test_a_server_that_cannot_start_makes_readyz_503_and_the_rest_works(
    openai_server: FakeOpenAIServer,
) -> None:
    config = config_with(
        upstream=native_upstream(openai_server.base_url),
        mcp_servers=[
            _mcp(),
            {"name": "broken", "command": [sys.executable, "-c", "raise SystemExit(2)"]},
        ],
        store="memory",
    )
    with LiveServer(create_app(config)) as live, httpx.Client(base_url=live.url) as http:
        ready = http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["mcp:broken"] == "down"
        assert ready.json()["checks"]["mcp:demo"] == "ok"
        ran = http.post("/v1/tools/demo__add/invoke", json={"arguments": {"a": 1, "b": 2}})
        assert ran.json()["result"] == {"result": 3}


def test_two_servers_with_one_tool_name_are_refused_at_start(tmp_path: Path) -> None:
    config = tmp_path / "toolwire.yaml"
    servers = [_mcp(name="a", prefix=""), _mcp(name="b", prefix="")]
    config.write_text(json.dumps({"mcp_servers": servers, "store": "memory"}))
    out = subprocess.run(
        [sys.executable, "-m", "toolwire.cli.main", "serve", "-c", str(config), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert out.returncode != 0
    assert "Duplicate tool name 'add'" in out.stderr + out.stdout


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "x"}, "exactly one of 'command'"),
        ({"name": "x", "command": ["a"], "url": "http://h/mcp"}, "exactly one of 'command'"),
        ({"name": "x", "url": "ftp://h"}, "not an http(s) URL"),
        ({"name": "x y", "command": ["a"]}, "not a server name"),
        ({"name": "x", "command": ["a"], "headers": {"A": "b"}}, "for an HTTP server"),
        ({"name": "x", "url": "http://h/mcp", "env": {"A": "b"}}, "for a stdio server"),
        ({"name": "x", "command": []}, "give the program"),
    ],
)
def test_bad_mcp_server_entries_are_located(entry: dict[str, Any], message: str) -> None:
    doc = parse_config(json.dumps({"mcp_servers": [entry]}), source="toolwire.yaml")
    assert doc.config is None
    assert any(p.path.startswith("mcp_servers[0]") and message in p.message for p in doc.errors)


def test_duplicate_server_names_are_located() -> None:
    entry = {"name": "x", "command": ["a"]}
    doc = parse_config(json.dumps({"mcp_servers": [entry, entry]}), source="toolwire.yaml")
    assert any("duplicate MCP server name 'x'" in p.message for p in doc.errors)


def test_a_missing_secret_variable_stops_the_gateway() -> None:
    config = config_with(
        mcp_servers=[
            {"name": "x", "url": "http://127.0.0.1:9/mcp", "headers_env": {"X-Key": "NO_SUCH_TW"}}
        ]
    )
    with pytest.raises(ConfigError, match="NO_SUCH_TW"):
        create_app(config, environ={})


def test_sigterm_leaves_no_mcp_server_process(tmp_path: Path) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"mcp_servers": [_mcp()], "store": "memory"}))
    gateway = ServeProcess(config, {**os.environ, "TOOLWIRE_LOG_LEVEL": "warning"})
    try:
        with gateway.http() as http:
            pid = http.post("/v1/tools/demo__pid/invoke", json={"arguments": {}}).json()
        server_pid = pid["result"]["result"]
        assert alive(server_pid)
        gateway.proc.send_signal(signal.SIGTERM)
        # uvicorn ends the process with the signal it received, after shutting down.
        assert gateway.proc.wait(timeout=20) in (0, -signal.SIGTERM)
        deadline = time.monotonic() + 5
        while alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(server_pid)
    finally:
        gateway.stop()
