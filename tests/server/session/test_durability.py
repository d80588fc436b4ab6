"""Crashes and replicas, with real processes: `toolwire serve` killed with SIGKILL and
started again on the same SQLite file; two gateways sharing one Redis; Redis going away.

Each gateway is a subprocess in front of the test's fake OpenAI server. The server tools
write what they really did to a file, so a test can tell what ran, and how often.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from chat_support import native_upstream
from live import LiveServer
from served import ServeProcess
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse, tool_call
from toolwire.server import create_app

TOOLS = '''
import os
import time

from toolwire import tool


def _log(line: str) -> None:
    with open(os.environ["DURABLE_SIDE_EFFECTS"], "a") as f:
        f.write(line + "\\n")
        f.flush()
        os.fsync(f.fileno())


@tool(effects="destructive")
def delete_application(app_name: str) -> str:
    """Delete an application."""
    _log(f"delete {app_name}")
    return f"deleted {app_name}"


@tool(effects="write", timeout=120)
def slow_write(name: str) -> str:
    """Write a record; takes a long time."""
    _log(f"started {name}")
    time.sleep(60)
    _log(f"finished {name}")
    return "written"


@tool(effects="write")
def write_then_lose_the_store(name: str) -> str:
    """Write a record; the store dies while it runs."""
    _log(f"wrote {name}")
    os.kill(int(os.environ["DURABLE_REDIS_PID"]), 9)
    return "written"


@tool(cache_ttl=60)
def cached_lookup(key: str) -> dict[str, str]:
    """Look a key up (slowly, so its results are cached)."""
    _log(f"lookup {key}")
    return {"key": key, "value": key.upper()}
'''

ASK = [{"role": "user", "content": "Delete demo-app."}]


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The tool module and the environment of a gateway process."""
    (tmp_path / "durable_tools.py").write_text(TOOLS)
    env = {
        **os.environ,
        "DURABLE_SIDE_EFFECTS": str(tmp_path / "side_effects.txt"),
        "TOOLWIRE_LOG_LEVEL": "warning",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    env.pop("TOOLWIRE_STORE", None)
    return tmp_path, env


def _config(tmp_path: Path, upstream: str, store: str) -> Path:
    path = tmp_path / "toolwire.yaml"
    config = {
        "upstream": native_upstream(upstream),
        "server_tools": {"modules": [str(tmp_path / "durable_tools.py")]},
        "store": store,
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def _side_effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "side_effects.txt"
    return path.read_text().splitlines() if path.exists() else []


def _pause(gateway: ServeProcess, openai_server: FakeOpenAIServer) -> dict[str, Any]:
    openai_server.reply(
        completion(tool_calls=[tool_call("delete_application", {"app_name": "demo-app"})])
    )
    with gateway.http() as http:
        response = http.post("/v1/chat/completions", json={"model": "gpt", "messages": ASK})
    assert response.status_code == 200, response.text
    extension: dict[str, Any] = response.json()["toolwire"]
    assert extension["status"] == "awaiting_approval"
    return extension


# --- SQLite, one node, kill -9 ----------------------------------------------------------------


def test_a_pending_approval_survives_kill_9_and_resumes_once(
    setup: tuple[Path, dict[str, str]], openai_server: FakeOpenAIServer
) -> None:
    tmp_path, env = setup
    config = _config(tmp_path, openai_server.base_url, f"sqlite:///{tmp_path / 'state.db'}")
    first = ServeProcess(config, env)
    try:
        extension = _pause(first, openai_server)
    finally:
        first.kill()

    second = ServeProcess(config, env)
    try:
        approval_id = extension["pending_approvals"][0]["id"]
        with second.http() as http:
            listed = http.get("/v1/approvals", params={"status": "pending"}).json()["data"]
            assert approval_id in [a["id"] for a in listed]
            decided = http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
            assert decided.status_code == 200, decided.text
            openai_server.reply(completion("demo-app is deleted."))
            resumed = http.post(f"/v1/runs/{extension['run_id']}/resume")
            assert resumed.status_code == 200, resumed.text
            assert resumed.json()["choices"][0]["message"]["content"] == "demo-app is deleted."
            assert http.post(f"/v1/runs/{extension['run_id']}/resume").status_code == 409
    finally:
        second.stop()
    assert _side_effects(tmp_path) == ["delete demo-app"]


def test_a_write_cut_by_kill_9_is_interrupted_and_never_rerun(
    setup: tuple[Path, dict[str, str]], openai_server: FakeOpenAIServer
) -> None:
    tmp_path, env = setup
    config = _config(tmp_path, openai_server.base_url, f"sqlite:///{tmp_path / 'state.db'}")
    openai_server.reply(completion(tool_calls=[tool_call("slow_write", {"name": "order-7"})]))
    first = ServeProcess(config, env)

    def ask() -> None:
        with contextlib.suppress(httpx.TransportError), first.http() as http:
            http.post(
                "/v1/chat/completions",
                json={"model": "gpt", "messages": [{"role": "user", "content": "write"}]},
            )

    client = threading.Thread(target=ask, daemon=True)
    client.start()
    for _ in range(1000):
        if _side_effects(tmp_path):
            break
        threading.Event().wait(0.01)
    assert _side_effects(tmp_path) == ["started order-7"]
    first.kill()
    client.join(timeout=10)

    second = ServeProcess(config, env)
    try:
        with second.http() as http:
            records = http.get("/v1/audit", params={"tool": "slow_write"}).json()["data"]
            assert [r["event"] for r in records] == ["started"]
            started = records[0]
            assert started["arguments"] == {"name": "order-7"}
            run = http.get(f"/v1/runs/{started['run_id']}").json()
            assert run["status"] == "interrupted"
        threading.Event().wait(0.5)
    finally:
        second.stop()
    # At most once: nothing ran it again, before or after the restart.
    assert _side_effects(tmp_path) == ["started order-7"]


def test_a_store_that_cannot_be_opened_stops_the_start_with_one_line(
    setup: tuple[Path, dict[str, str]], openai_server: FakeOpenAIServer
) -> None:
    tmp_path, env = setup
    not_a_db = tmp_path / "state.db"
    not_a_db.write_text("this is not a SQLite database\n" * 100)
    config = _config(tmp_path, openai_server.base_url, f"sqlite:///{not_a_db}")
    out = subprocess.run(
        [sys.executable, "-m", "toolwire.cli.main", "serve", "-c", str(config), "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr + out.stdout
    [line] = out.stderr.strip().splitlines()
    assert str(not_a_db) in line


_FRONT_DOORS = {
    "chat": ("/v1/chat/completions", {"model": "gpt", "messages": ASK, "stream": True}),
    "messages": (
        "/v1/messages",
        {"model": "gpt", "messages": ASK, "max_tokens": 100, "stream": True},
    ),
    "responses": ("/v1/responses", {"model": "gpt", "input": "Delete demo-app.", "stream": True}),
}


def _last_event(front_door: str, lines: list[str]) -> tuple[str | None, dict[str, Any]]:
    """The last SSE event of a stream: its `event:` name (if any) and its data."""
    name = None
    events: list[tuple[str | None, dict[str, Any]]] = []
    for line in lines:
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:") and line != "data: [DONE]":
            events.append((name, json.loads(line.removeprefix("data:"))))
    assert events, f"{front_door}: no events in {lines!r}"
    return events[-1]


@pytest.mark.parametrize("front_door", sorted(_FRONT_DOORS))
def test_sigterm_ends_open_streams_with_an_error_event_at_the_drain_deadline(
    setup: tuple[Path, dict[str, str]], openai_server: FakeOpenAIServer, front_door: str
) -> None:
    tmp_path, env = setup
    config = _config(tmp_path, openai_server.base_url, "memory")
    openai_server.reply(sse([delta("slow"), delta(finish_reason="stop")], interval=60))
    gateway = ServeProcess(config, env, "--drain-seconds", "1")
    path, body = _FRONT_DOORS[front_door]
    streaming = threading.Event()
    lines: list[str] = []

    def stream() -> None:
        with (
            gateway.http() as http,
            http.stream("POST", path, json=body, headers={"x-api-key": "unused"}) as response,
        ):
            for line in response.iter_lines():
                lines.append(line)
                streaming.set()

    client = threading.Thread(target=stream, daemon=True)
    client.start()
    assert streaming.wait(10)
    started = time.monotonic()
    gateway.proc.send_signal(signal.SIGTERM)
    gateway.proc.wait(timeout=15)
    took = time.monotonic() - started
    client.join(timeout=10)
    assert not client.is_alive()
    gateway.stop()
    assert 0.9 < took < 6
    # The stream ended cleanly (the client saw the end of the body, not a reset) with
    # the protocol's own error event.
    name, data = _last_event(front_door, lines)
    if front_door == "chat":
        assert data["error"]["code"] == "shutting_down"
        assert "retry" in data["error"]["message"]
    elif front_door == "messages":
        assert name == "error"
        assert data["type"] == "error"
        assert data["error"]["type"] == "overloaded_error"
    else:
        assert name == "response.failed"
        assert data["response"]["status"] == "failed"
        assert data["response"]["error"]["code"] == "shutting_down"


def test_sigterm_answers_503_to_a_request_still_waiting_for_its_first_byte(
    setup: tuple[Path, dict[str, str]], openai_server: FakeOpenAIServer
) -> None:
    tmp_path, env = setup
    config = _config(tmp_path, openai_server.base_url, "memory")
    openai_server.reply(sse([delta("late"), delta(finish_reason="stop")], delay=60))
    openai_server.reply(dataclasses.replace(completion("late"), delay=60))
    gateway = ServeProcess(config, env, "--drain-seconds", "1")
    answers: dict[str, httpx.Response] = {}

    def call(stream: bool) -> None:
        body = {"model": "gpt", "messages": ASK, "stream": stream}
        with gateway.http() as http:
            answers["stream" if stream else "plain"] = http.post("/v1/chat/completions", json=body)

    clients = [threading.Thread(target=call, args=(s,), daemon=True) for s in (True, False)]
    for client in clients:
        client.start()
    deadline = time.monotonic() + 10
    while len(openai_server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(openai_server.requests) == 2
    gateway.proc.send_signal(signal.SIGTERM)
    gateway.proc.wait(timeout=15)
    for client in clients:
        client.join(timeout=10)
    gateway.stop()
    for kind in ("stream", "plain"):
        response = answers[kind]
        assert response.status_code == 503, (kind, response.text)
        assert response.headers["retry-after"] == "1"
        assert response.json()["error"]["code"] == "shutting_down"


# --- two replicas on one Redis or one PostgreSQL --------------------------------------------------


@pytest.fixture(params=["redis", "postgres"])
def shared_store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The shared Redis under a key prefix of its own, or the shared PostgreSQL database
    in a schema of its own; deleted afterwards."""
    if request.param == "postgres":
        import psycopg

        url: str = request.getfixturevalue("postgres_url")
        schema = f"tw_test_{uuid.uuid4().hex[:12]}"
        yield f"{url}{'&' if '?' in url else '?'}schema={schema}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return
    import redis

    url = request.getfixturevalue("redis_url")
    prefix = f"tw-test-{uuid.uuid4().hex[:8]}:"
    yield f"{url}?prefix={prefix}&allow_volatile=true"  # the test Redis has no AOF
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def test_two_replicas_share_approvals_runs_and_the_cache(
    setup: tuple[Path, dict[str, str]], openai_server: FakeOpenAIServer, shared_store: str
) -> None:
    tmp_path, env = setup
    config = _config(tmp_path, openai_server.base_url, shared_store)
    a, b = ServeProcess(config, env), ServeProcess(config, env)
    try:
        extension = _pause(a, openai_server)
        approval_id = extension["pending_approvals"][0]["id"]

        # Two people approve at the same moment, one through each replica.
        barrier = threading.Barrier(2)
        statuses: list[int] = []

        def decide(gateway: ServeProcess) -> None:
            with gateway.http() as http:
                barrier.wait()
                reply = http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
                statuses.append(reply.status_code)

        threads = [threading.Thread(target=decide, args=(g,)) for g in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(statuses) == [200, 409]

        openai_server.reply(completion("Deleted."))
        with b.http() as http:
            assert http.get(f"/v1/approvals/{approval_id}").json()["status"] == "approved"
            resumed = http.post(f"/v1/runs/{extension['run_id']}/resume")
            assert resumed.status_code == 200, resumed.text
        with a.http() as http:
            assert http.post(f"/v1/runs/{extension['run_id']}/resume").status_code == 409
            assert http.get(f"/v1/runs/{extension['run_id']}").json()["status"] == "completed"

        # A read tool's cached result made through A is served by B.
        arguments = {"arguments": {"key": "k1"}}
        with a.http() as http:
            first = http.post("/v1/tools/cached_lookup/invoke", json=arguments).json()
        with b.http() as http:
            second = http.post("/v1/tools/cached_lookup/invoke", json=arguments).json()
        assert (first["cached"], second["cached"]) == (False, True)
        assert second["result"] == {"key": "k1", "value": "K1"}
    finally:
        a.stop()
        b.stop()
    assert _side_effects(tmp_path) == ["delete demo-app", "lookup k1"]


# --- Redis going away ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A Redis server of this test's own, so the test can stop it."""
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed (CI=true requires it)")
        pytest.skip("redis-server is not installed")
    port = _free_port()
    proc = subprocess.Popen(
        # Durable as toolwire requires of a Redis store: every write on disk before the reply.
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(500):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
            break
        threading.Event().wait(0.01)
    try:
        yield url, proc
    finally:
        proc.kill()
        proc.wait()


def test_without_redis_stateful_requests_are_503_and_the_rest_works(
    setup: tuple[Path, dict[str, str]],
    openai_server: FakeOpenAIServer,
    private_redis: tuple[str, subprocess.Popen[bytes]],
) -> None:
    tmp_path, env = setup
    os.environ["DURABLE_SIDE_EFFECTS"] = env["DURABLE_SIDE_EFFECTS"]
    sys.path.insert(0, str(tmp_path))
    url, redis_proc = private_redis
    config = config_with(
        upstream=native_upstream(openai_server.base_url),
        server_tools={"modules": ["durable_tools"]},
        store=f"{url}?allow_volatile=true",
    )
    try:
        with (
            LiveServer(create_app(config)) as live,
            httpx.Client(base_url=live.url, timeout=15) as http,
        ):
            invoke = {"arguments": {"key": "k2"}}
            assert http.post("/v1/tools/cached_lookup/invoke", json=invoke).status_code == 200

            redis_proc.kill()
            redis_proc.wait()

            # A question the model answers without tools needs no state.
            openai_server.reply(completion("Hello!"))
            hello = http.post(
                "/v1/chat/completions",
                json={"model": "gpt", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert hello.status_code == 200, hello.text
            assert hello.json()["choices"][0]["message"]["content"] == "Hello!"

            for response in (
                http.post("/v1/tools/cached_lookup/invoke", json=invoke),
                http.get("/v1/approvals"),
            ):
                assert response.status_code == 503, response.text
                error = response.json()["error"]
                assert error["code"] == "store_unavailable"
                assert "unavailable" in error["message"]

            openai_server.reply(completion(tool_calls=[tool_call("cached_lookup", {"key": "k3"})]))
            stateful = http.post("/v1/chat/completions", json={"model": "gpt", "messages": ASK})
            assert stateful.status_code == 503, stateful.text
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("durable_tools", None)
        del os.environ["DURABLE_SIDE_EFFECTS"]


def test_a_store_lost_after_a_write_ran_is_not_answered_as_retryable(
    setup: tuple[Path, dict[str, str]],
    openai_server: FakeOpenAIServer,
    private_redis: tuple[str, subprocess.Popen[bytes]],
) -> None:
    # Issue 22: the `finished` record failed after the write ran, and the client got 503
    # with Retry-After; its retry ran the write twice.
    tmp_path, env = setup
    os.environ["DURABLE_SIDE_EFFECTS"] = env["DURABLE_SIDE_EFFECTS"]
    url, redis_proc = private_redis
    os.environ["DURABLE_REDIS_PID"] = str(redis_proc.pid)
    sys.path.insert(0, str(tmp_path))
    config = config_with(
        upstream=native_upstream(openai_server.base_url),
        server_tools={"modules": ["durable_tools"]},
        store=url,
    )
    try:
        with (
            LiveServer(create_app(config)) as live,
            httpx.Client(base_url=live.url, timeout=15) as http,
        ):
            openai_server.reply(
                completion(tool_calls=[tool_call("write_then_lose_the_store", {"name": "r1"})]),
                completion("The record is written."),
            )
            response = http.post("/v1/chat/completions", json={"model": "gpt", "messages": ASK})
            assert response.status_code == 200, response.text
            assert "retry-after" not in response.headers
            assert response.json()["choices"][0]["message"]["content"] == "The record is written."
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("durable_tools", None)
        del os.environ["DURABLE_SIDE_EFFECTS"], os.environ["DURABLE_REDIS_PID"]
    assert _side_effects(tmp_path) == ["wrote r1"]
