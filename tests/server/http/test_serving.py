"""How `toolwire serve` runs the app: the header deadline (slowloris), and worker
processes sharing one socket and one store."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live import LiveServer
from served import ServeProcess

from toolwire.server import create_app
from toolwire.server.http._httptools_protocol import GatewayHttpProtocol
from toolwire.server.http.serving import GatewayServer, H11WithHeaderDeadline, ServeOptions

HEADER_TIMEOUT = 0.5


@pytest.fixture(params=[GatewayHttpProtocol, H11WithHeaderDeadline], ids=["httptools", "h11"])
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    app = create_app()
    config = ServeOptions(log_level="warning", header_timeout=HEADER_TIMEOUT).uvicorn_config(app)
    config.http = request.param
    with LiveServer(app, server=GatewayServer(config, drain_seconds=1)) as live:
        yield live


def _connect(server: LiveServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def _read_all(sock: socket.socket) -> tuple[bytes, float]:
    """Everything until the server closes the connection, and how long that took."""
    started = time.monotonic()
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data, time.monotonic() - started


def _response(sock: socket.socket) -> bytes:
    """One whole response with a content-length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":", 1)[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_half_sent_headers_get_408_and_the_connection_closes(server: LiveServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        data, took = _read_all(sock)
    assert data.startswith(b"HTTP/1.1 408 ")
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"connection: close" in head
    assert json.loads(body)["error"]["code"] == "timeout"
    assert HEADER_TIMEOUT * 0.8 < took < HEADER_TIMEOUT + 2


def test_a_connection_that_never_sends_a_request_is_closed(server: LiveServer) -> None:
    with _connect(server) as sock:
        data, took = _read_all(sock)
    assert data == b""
    assert took < HEADER_TIMEOUT + 2


def test_the_next_request_on_a_kept_alive_connection_has_the_same_deadline(
    server: LiveServer,
) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        assert _response(sock).startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        data, _ = _read_all(sock)
    assert data.startswith(b"HTTP/1.1 408 ")


def test_headers_sent_slowly_within_the_deadline_are_served(server: LiveServer) -> None:
    with _connect(server) as sock:
        for piece in (b"GET /healthz HT", b"TP/1.1\r\nhost:", b" x\r\n\r\n"):
            sock.sendall(piece)
            time.sleep(HEADER_TIMEOUT / 5)
        assert _response(sock).startswith(b"HTTP/1.1 200 ")


def test_the_deadline_ends_with_the_headers_not_with_the_body(server: LiveServer) -> None:
    # The body has its own, longer deadline (limits.body_timeout, 30 s by default).
    body = json.dumps(
        {"model": "toolwire-offline", "messages": [{"role": "user", "content": "hi"}]}
    )
    raw = body.encode()
    with _connect(server) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(raw)}\r\n\r\n".encode()
        )
        for i in range(0, len(raw), len(raw) // 3 + 1):
            time.sleep(HEADER_TIMEOUT * 0.8)
            sock.sendall(raw[i : i + len(raw) // 3 + 1])
        assert _response(sock).startswith(b"HTTP/1.1 200 ")


def test_serve_uses_the_configured_header_timeout(tmp_path: Path) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"limits": {"header_timeout": HEADER_TIMEOUT}, "store": "memory"}))
    gateway = ServeProcess(config, {**os.environ, "TOOLWIRE_LOG_LEVEL": "warning"})
    try:
        port = int(gateway.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            data, took = _read_all(sock)
        assert data.startswith(b"HTTP/1.1 408 ")
        assert took < HEADER_TIMEOUT + 2
    finally:
        gateway.stop()


# --- workers -------------------------------------------------------------------------------


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command may hold spaces and parentheses: the fields start after the last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def _workers(pid: int, expected: int) -> set[int]:
    # multiprocessing's spawn also starts a resource tracker; the workers are the
    # children that run `multiprocessing.spawn`.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        workers = {
            child
            for child in _children(pid)
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()
        }
        if len(workers) == expected:
            return workers
        time.sleep(0.1)
    raise AssertionError(f"expected {expected} workers of {pid}, found {_children(pid)}")


def _chat(http: httpx.Client) -> None:
    body = {"model": "toolwire-offline", "messages": [{"role": "user", "content": "hi"}]}
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text


def test_workers_serve_one_port_replace_a_dead_worker_and_stop_together(tmp_path: Path) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        json.dumps(
            {
                "store": f"sqlite:///{tmp_path / 'state.db'}",
                "server_tools": {"modules": ["toolwire.tools.demo"]},
            }
        )
    )
    env = {**os.environ, "TOOLWIRE_LOG_LEVEL": "info"}
    gateway = ServeProcess(config, env, "--workers", "2")
    try:
        first = _workers(gateway.proc.pid, 2)
        with gateway.http() as http:
            for _ in range(20):
                _chat(http)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            now = _workers(gateway.proc.pid, 2)
            if victim not in now:
                break
            time.sleep(0.1)
        assert victim not in now
        assert len(now) == 2
        with httpx.Client(base_url=gateway.url, timeout=15) as http:
            for _ in range(20):
                _chat(http)
        gateway.proc.send_signal(signal.SIGTERM)
        assert gateway.proc.wait(timeout=20) == 0
        for pid in now:
            assert (
                not Path(f"/proc/{pid}").exists()
                or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            )
    finally:
        gateway.stop()
    assert any("exited with -9" in line for line in gateway.output), "".join(gateway.output)


def test_workers_need_a_shared_store(tmp_path: Path) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"store": "memory"}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolwire.cli.main",
            "serve",
            "-c",
            str(config),
            "--port",
            "0",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "needs a store the workers can share" in out.stderr


@pytest.mark.parametrize("value", ["0", "many", "-3"])
def test_workers_must_be_a_count_or_auto(tmp_path: Path, value: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "toolwire.cli.main", "serve", "--port", "0", "--workers", value],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    assert out.returncode == 2
    assert "--workers must be a number from 1 to 256 or 'auto'" in out.stderr
