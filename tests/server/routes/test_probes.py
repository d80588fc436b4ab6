"""`/readyz` says what is down; every response carries an `X-Request-Id` that the audit log
keeps (issue 13's probes and request ids)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from e2e_chat_support import live_gateway, openai_upstream
from server_support import TOOLS_MODULE, config_with

from fakes.openai_server import FakeOpenAIServer


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_ready_when_the_upstream_answers_and_the_store_is_open(
    openai_server: FakeOpenAIServer,
) -> None:
    config = config_with(
        upstream=openai_upstream(openai_server.base_url, {"gpt": "gpt-4o"}),
        server_tools={"modules": [TOOLS_MODULE]},
        store="memory",
    )
    with live_gateway(config) as live:
        response = httpx.get(f"{live.url}/readyz", timeout=10)
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"upstream": "ok", "store": "ok"}}


def test_not_ready_names_what_is_down_and_nothing_more(tmp_path: Path) -> None:
    import os
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed (CI=true requires it)")
        pytest.skip("redis-server is not installed")
    redis_port = _closed_port()
    redis = subprocess.Popen(
        [binary, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", redis_port), 0.1).close()
                break
            except OSError:
                threading_wait(0.02)
        upstream_port = _closed_port()
        config = config_with(
            upstream=openai_upstream(f"http://127.0.0.1:{upstream_port}/v1", {"gpt": "gpt-4o"}),
            server_tools={"modules": [TOOLS_MODULE]},
            store=f"redis://127.0.0.1:{redis_port}/0?allow_volatile=true",
        )
        with live_gateway(config) as live:
            redis.kill()
            redis.wait()
            response = httpx.get(f"{live.url}/readyz", timeout=20)
            assert httpx.get(f"{live.url}/healthz").status_code == 200
    finally:
        redis.kill()
        redis.wait()
    assert response.status_code == 503
    body = response.json()
    assert body["checks"] == {"upstream": "unreachable", "store": "unavailable"}
    assert str(upstream_port) not in response.text


def threading_wait(seconds: float) -> None:
    import threading

    threading.Event().wait(seconds)


def test_every_response_has_a_request_id_and_a_clients_own_is_kept(
    openai_server: FakeOpenAIServer,
) -> None:
    config = config_with(
        upstream=openai_upstream(openai_server.base_url, {"gpt": "gpt-4o"}),
        server_tools={"modules": [TOOLS_MODULE]},
        store="memory",
    )
    with live_gateway(config) as live, httpx.Client(base_url=live.url) as http:
        made = http.get("/v1/models").headers["x-request-id"]
        kept = http.post(
            "/v1/tools/add/invoke",
            json={"arguments": {"a": 1, "b": 2}},
            headers={"X-Request-Id": "lb-7f3a"},
        )
        odd = http.get("/v1/models", headers={"X-Request-Id": "bad id\twith spaces"})
        audit = http.get("/v1/audit", params={"tool": "add"}).json()["data"]
    assert made.startswith("req_")
    assert kept.headers["x-request-id"] == "lb-7f3a"
    assert [r["request_id"] for r in audit] == ["lb-7f3a"]
    assert odd.headers["x-request-id"].startswith("req_")
