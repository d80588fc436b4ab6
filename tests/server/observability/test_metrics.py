"""`/metrics` after real requests, and the access log of a real `toolwire serve`."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from chat_support import UPSTREAM_MODEL, native_upstream
from live import LiveServer
from served import ServeProcess
from server_support import TOOLS_MODULE, config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, error, sse, tool_call
from toolwire.server import create_app

ADMIN, USER = "tw-metrics-admin", "tw-metrics-user"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the Prometheus text `text`."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        match = re.fullmatch(r"([a-zA-Z_:]+)(?:\{(.*)\})? (\S+)", line)
        if match is None or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return None


@pytest.fixture
def server(openai_server: FakeOpenAIServer) -> Iterator[LiveServer]:
    config = config_with(
        upstream=native_upstream(openai_server.base_url),
        server_tools={"modules": [TOOLS_MODULE, "approval_tools"]},
        keys=[
            {"name": "admin", "sha256": _digest(ADMIN), "admin": True, "scopes": ["reports"]},
            {"name": "user", "sha256": _digest(USER)},
            # drain_cluster's approver: a tool's approver must be a configured key.
            {"name": "ops", "sha256": _digest("tw-ops"), "admin": True},
        ],
        store="memory",
    )
    with LiveServer(create_app(config)) as live:
        yield live


def _http(server: LiveServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=10)


def test_requests_streams_tools_and_approvals_are_counted(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    ask = [{"role": "user", "content": "hi"}]
    openai_server.reply(
        completion("hello"),
        sse([delta("hel"), delta("lo"), delta(finish_reason="stop")]),
        completion(tool_calls=[tool_call("delete_application", {"app_name": "x"})]),
    )
    with _http(server, ADMIN) as http:
        assert http.post("/v1/chat/completions", json={"model": "gpt", "messages": ask}).is_success
        body = {"model": "gpt", "messages": ask, "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as stream:
            assert stream.read()
        missing = http.post("/v1/chat/completions", json={"model": "nope", "messages": ask})
        assert missing.status_code == 404
        add = http.post("/v1/tools/add/invoke", json={"arguments": {"a": 1, "b": 2}})
        assert add.is_success
        bad = http.post("/v1/tools/add/invoke", json={"arguments": {"a": "x"}})
        assert bad.json()["error"]["code"] == "invalid_arguments"
        paused = http.post("/v1/chat/completions", json={"model": "gpt", "messages": ask})
        assert paused.json()["toolwire"]["status"] == "awaiting_approval"
        text = http.get("/metrics").text
    route = "/v1/chat/completions"
    assert _sample(text, "toolwire_requests_total", route=route, status="200", model="gpt") == 3
    # An unknown model is counted as `other`: clients do not choose label values.
    assert _sample(text, "toolwire_requests_total", route=route, status="404", model="other") == 1
    assert _sample(text, "toolwire_request_duration_seconds_count", route=route) == 4
    assert _sample(text, "toolwire_stream_first_byte_seconds_count", route=route) == 1
    assert _sample(text, "toolwire_streams_active") == 0
    assert _sample(text, "toolwire_requests_in_flight") == 1  # the scrape itself
    assert _sample(text, "toolwire_tool_calls_total", tool="add", outcome="ok") == 1
    assert _sample(text, "toolwire_tool_calls_total", tool="add", outcome="invalid_arguments") == 1
    assert _sample(text, "toolwire_tool_duration_seconds_count", tool="add") == 2
    assert _sample(text, "toolwire_approvals", status="pending") == 1
    # Route templates, not raw paths: an id never becomes a label value.
    with _http(server, ADMIN) as http:
        http.get("/v1/approvals/apr_does_not_exist")
        text = http.get("/metrics").text
    assert "apr_does_not_exist" not in text
    assert _sample(text, "toolwire_requests_total", route="/v1/approvals/{id}", status="404")


def test_requests_and_streams_in_flight_are_read_while_they_are(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    ask = [{"role": "user", "content": "hi"}]
    openai_server.reply(
        sse([delta("one"), delta(" two"), delta(finish_reason="stop")], interval=0.3)
    )
    body = {"model": "gpt", "messages": ask, "stream": True}
    with _http(server, ADMIN) as http, _http(server, ADMIN) as scraper:
        with http.stream("POST", "/v1/chat/completions", json=body) as stream:
            lines = stream.iter_lines()
            next(lines)  # the stream's first line: it is being answered
            during = scraper.get("/metrics").text
            for _ in lines:
                pass
        after = scraper.get("/metrics").text
    assert _sample(during, "toolwire_streams_active") == 1
    assert _sample(during, "toolwire_requests_in_flight") == 2  # the stream and the scrape
    assert _sample(after, "toolwire_streams_active") == 0
    assert _sample(after, "toolwire_requests_in_flight") == 1


def test_upstream_latency_failures_and_unparsed_calls_are_counted(
    openai_server: FakeOpenAIServer,
) -> None:
    upstream = {
        **native_upstream(openai_server.base_url),
        "tool_calls": "parse:hermes",
        "retries": 0,
    }
    ask = [{"role": "user", "content": "hi"}]
    openai_server.reply(
        completion("fine"),
        sse([delta("a "), delta('<tool_call>{"name": "x", '), delta(finish_reason="stop")]),
        completion('<tool_call>{"name": oops}</tool_call>'),
        error(500, "the upstream broke", type="server_error"),
    )
    with (
        LiveServer(create_app(config_with(upstream=upstream))) as live,
        httpx.Client(base_url=live.url, timeout=10) as http,
    ):
        assert http.post("/v1/chat/completions", json={"model": "gpt", "messages": ask}).is_success
        body = {"model": "gpt", "messages": ask, "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as stream:
            assert b"<tool_call>" in stream.read()  # the text stays, as content
        broken = http.post("/v1/chat/completions", json={"model": "gpt", "messages": ask})
        assert (
            broken.json()["choices"][0]["message"]["content"]
            == '<tool_call>{"name": oops}</tool_call>'
        )
        failed = http.post("/v1/chat/completions", json={"model": "gpt", "messages": ask})
        assert failed.status_code == 502
        text = http.get("/metrics").text
    model = UPSTREAM_MODEL
    count = "toolwire_upstream_duration_seconds_count"
    assert _sample(text, count, model=model, stream="false") == 2
    assert _sample(text, count, model=model, stream="true") == 1
    assert _sample(text, "toolwire_upstream_first_event_seconds_count", model=model) == 1
    assert _sample(text, "toolwire_upstream_errors_total", model=model, kind="status") == 1
    parse = "toolwire_parse_failures_total"
    assert _sample(text, parse, format="hermes", reason="unfinished") == 1
    assert _sample(text, parse, format="hermes", reason="invalid") == 1


def test_an_unreachable_upstream_is_counted_by_kind() -> None:
    upstream = {**native_upstream("http://127.0.0.1:9/v1"), "retries": 0}
    ask = [{"role": "user", "content": "hi"}]
    with (
        LiveServer(create_app(config_with(upstream=upstream))) as live,
        httpx.Client(base_url=live.url, timeout=10) as http,
    ):
        failed = http.post("/v1/chat/completions", json={"model": "gpt", "messages": ask})
        assert failed.status_code == 502
        text = http.get("/metrics").text
    kinds = re.findall(r'toolwire_upstream_errors_total\{.*kind="(\w+)".*\} 1\.0', text)
    assert kinds == ["unreachable"]


def test_metrics_need_an_admin_key_when_keys_are_configured(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/metrics").status_code == 401
    with _http(server, USER) as http:
        assert http.get("/metrics").status_code == 403
    with _http(server, ADMIN) as http:
        scraped = http.get("/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")


def test_metrics_can_be_public_or_off(openai_server: FakeOpenAIServer) -> None:
    keys = [{"name": "admin", "sha256": _digest(ADMIN), "admin": True}]
    public = config_with(keys=keys, metrics={"public": True}, store="memory")
    off = config_with(metrics={"enabled": False}, store="memory")
    with LiveServer(create_app(public)) as live, httpx.Client(base_url=live.url) as http:
        assert http.get("/metrics").status_code == 200
    with LiveServer(create_app(off)) as live, httpx.Client(base_url=live.url) as http:
        assert http.get("/metrics").status_code == 404


def test_the_access_log_is_json_lines_without_secrets(
    tmp_path: Path, openai_server: FakeOpenAIServer
) -> None:
    secret_argument = "s3cr3t-argument-value"
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        json.dumps(
            {
                "upstream": native_upstream(openai_server.base_url),
                "server_tools": {"modules": [TOOLS_MODULE]},
                "keys": [{"name": "alice", "sha256": _digest(ADMIN)}],
                "store": "memory",
            }
        )
    )
    env = {**os.environ, "TOOLWIRE_LOG_LEVEL": "info", "NO_COLOR": "1"}
    gateway = ServeProcess(config, env, "--log-format", "json")
    openai_server.reply(completion("fine"))
    try:
        with gateway.http() as http:
            headers = {"Authorization": f"Bearer {ADMIN}"}
            chat = http.post(
                "/v1/chat/completions",
                json={"model": "gpt", "messages": [{"role": "user", "content": "hi"}]},
                headers=headers,
            )
            invoke = http.post(
                "/v1/tools/add/invoke",
                json={"arguments": {"a": 1, "b": secret_argument}},
                headers=headers,
            )
            added = http.post(
                "/v1/tools/add/invoke", json={"arguments": {"a": 1, "b": 2}}, headers=headers
            )
            refused = http.get("/v1/tools", headers={"Authorization": "Bearer wrong-key-value"})
    finally:
        gateway.stop()
    assert chat.status_code == 200
    assert invoke.status_code == 200
    assert refused.status_code == 401
    output = "".join(gateway.output)
    records = []
    for line in gateway.output:
        if line.startswith("{"):
            records.append(json.loads(line))
    access = [r for r in records if r["logger"] == "toolwire.access"]
    [chat_line] = [r for r in access if r.get("request_id") == chat.headers["x-request-id"]]
    assert chat_line["key"] == "alice"
    assert chat_line["model"] == "gpt"
    assert chat_line["status"] == 200
    assert chat_line["route"] == "/v1/chat/completions"
    assert chat_line["duration_ms"] > 0
    assert chat_line["time"].endswith("+00:00")
    assert any(r["status"] == 401 for r in access)
    [tool_line] = [r for r in access if r.get("request_id") == added.headers["x-request-id"]]
    assert tool_line["tool_calls"] == 1
    assert "tool_calls" not in chat_line  # it ran none
    for secret in (ADMIN, secret_argument, "wrong-key-value"):
        assert secret not in output
