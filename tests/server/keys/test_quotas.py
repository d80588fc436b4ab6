"""Per-key limits through the gateway: requests, concurrency, tokens from upstream usage,
tool calls before they run, refusals in each door's shape with OpenAI's headers, and
counts shared by two `toolwire serve` replicas on one Redis."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from e2e_chat_support import live_gateway, user
from live import LiveServer
from served import ServeProcess
from server_support import TOOLS_MODULE, config_with

from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from toolwire.server import parse_config

ALICE = "tw-alice-limits"
BOB = "tw-bob-limits"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _fresh_minute() -> None:
    """Wait out the end of a minute: the windows are the clock's minutes."""
    left = 60 - time.time() % 60
    if left < 6:
        time.sleep(left + 0.05)


@pytest.fixture(scope="module")
def _upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def upstream(_upstream: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    _upstream.reset()
    _upstream.set_default(completion("ok", usage={"prompt_tokens": 60, "completion_tokens": 40}))
    yield _upstream
    _upstream.set_default(None)


def _gateway(upstream: FakeOpenAIServer, per_key: dict[str, Any], **alice: Any) -> Any:
    return live_gateway(
        config_with(
            upstream={
                "kind": "openai",
                "base_url": upstream.base_url,
                "models": {"m": "fake-model"},
                "retries": 0,
            },
            server_tools={"modules": [TOOLS_MODULE]},
            keys=[
                {"name": "alice", "sha256": _digest(ALICE), "limits": alice},
                {"name": "bob", "sha256": _digest(BOB)},
            ],
            limits={"per_key": per_key},
            store="memory",
            metrics={"public": True},
        )
    )


def _chat(server: LiveServer, key: str, **extra: Any) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        return http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": user("hi"), **extra},
            headers={"authorization": f"Bearer {key}"},
        )


def test_limits_are_validated() -> None:
    doc = parse_config(
        "keys:\n"
        "  - {name: a, env: A, limits: {requests_per_minute: 0, tools: {x: 0}}}\n"
        "limits:\n"
        "  per_key: {budget: -5}\n",
        source="tw.yaml",
    )
    problems = [str(p) for p in doc.problems]
    assert any(p.startswith("tw.yaml:2: keys[0].limits.requests_per_minute") for p in problems)
    assert any("limit of tool 'x' must be at least 1" in p for p in problems)
    assert any(p.startswith("tw.yaml:4: limits.per_key.budget") for p in problems)


def test_requests_per_minute_in_each_doors_shape(upstream: FakeOpenAIServer) -> None:
    _fresh_minute()
    with _gateway(upstream, {"requests_per_minute": 3}) as server:
        answers = [_chat(server, ALICE) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert [a.headers["x-ratelimit-remaining-requests"] for a in answers] == ["2", "1", "0"]
        assert answers[0].headers["x-ratelimit-limit-requests"] == "3"
        assert answers[0].headers["x-ratelimit-reset-requests"].endswith("s")
        refused = _chat(server, ALICE)
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert refused.json()["error"]["code"] == "rate_limit_exceeded"
        with httpx.Client(base_url=server.url, timeout=10) as http:
            messages = http.post(
                "/v1/messages",
                json={"model": "m", "max_tokens": 5, "messages": user("hi")},
                headers={"x-api-key": ALICE},
            )
        assert messages.status_code == 429
        assert messages.json()["error"]["type"] == "rate_limit_error"
        assert messages.json()["type"] == "error"
        # Another key has its own count; the refused requests never reached the upstream.
        assert _chat(server, BOB).status_code == 200
        assert len(upstream.requests) == 4


def test_a_keys_own_limits_win_over_the_defaults(upstream: FakeOpenAIServer) -> None:
    _fresh_minute()
    with _gateway(upstream, {"requests_per_minute": 1}, requests_per_minute=2) as server:
        assert [_chat(server, ALICE).status_code for _ in range(3)] == [200, 200, 429]
        assert [_chat(server, BOB).status_code for _ in range(2)] == [200, 429]
        with httpx.Client(base_url=server.url, timeout=10) as http:
            metrics = http.get("/metrics").text
        for key in ("alice", "bob"):
            hit = f'key="{key}",limit="requests_per_minute"'
            assert f"toolwire_limit_refusals_total{{{hit}}} 1.0" in metrics


def test_a_request_counts_against_the_key_it_is_served_as(upstream: FakeOpenAIServer) -> None:
    # Two `Authorization` headers: the limits must read the same one as the door (the
    # first), or a second key with no limits would carry the first key's requests.
    _fresh_minute()
    both = [("authorization", f"Bearer {ALICE}"), ("authorization", f"Bearer {BOB}")]
    with (
        _gateway(upstream, {}, requests_per_minute=1) as server,
        httpx.Client(base_url=server.url, timeout=10) as http,
    ):
        answers = [
            http.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": user("hi")},
                headers=both,
            )
            for _ in range(2)
        ]
        assert [a.status_code for a in answers] == [200, 429]
        assert answers[0].headers["x-ratelimit-limit-requests"] == "1"
        assert _chat(server, BOB).status_code == 200  # bob's own requests have no limit


def test_concurrent_requests(upstream: FakeOpenAIServer) -> None:
    slow = completion("slow")
    slow.delay = 1.0
    upstream.reply(slow)
    with _gateway(upstream, {"concurrent_requests": 1}) as server:
        first: list[httpx.Response] = []
        thread = threading.Thread(target=lambda: first.append(_chat(server, ALICE)))
        thread.start()
        upstream.wait_until(lambda: len(upstream.requests) == 1)
        second = _chat(server, ALICE)
        thread.join()
        assert second.status_code == 429
        assert second.headers["retry-after"] == "1"
        assert first[0].status_code == 200
        # Released when the first ended.
        assert _chat(server, ALICE).status_code == 200


def test_tokens_per_minute_from_upstream_usage(upstream: FakeOpenAIServer) -> None:
    _fresh_minute()
    with _gateway(upstream, {"tokens_per_minute": 150}) as server:
        first = _chat(server, ALICE)
        assert first.headers["x-ratelimit-remaining-tokens"] == "150"
        second = _chat(server, ALICE)  # 100 used, 50 left: admitted
        assert second.headers["x-ratelimit-remaining-tokens"] == "50"
        refused = _chat(server, ALICE)  # 200 used
        assert refused.status_code == 429
        assert refused.headers["x-ratelimit-limit-tokens"] == "150"
        assert refused.headers["x-ratelimit-remaining-tokens"] == "0"


def test_a_runaway_tool_loop_is_stopped_before_the_tool_runs(upstream: FakeOpenAIServer) -> None:
    _fresh_minute()
    upstream.set_default(completion(tool_calls=[tool_call("add", {"a": 1, "b": 2})]))
    with _gateway(upstream, {}, tool_calls_per_minute=2, tools={"add": 5}) as server:
        _chat(server, ALICE)
    results = [m["content"] for m in upstream.requests[-1].json["messages"] if m["role"] == "tool"]
    # limits.max_iterations turns: two calls ran, the rest were refused without running.
    assert results[:2] == ["3", "3"]
    assert results[2:]
    assert all("may make 2 tool calls per minute" in r for r in results[2:])


@pytest.fixture
def redis_store(redis_url: str) -> Iterator[str]:
    import redis

    prefix = f"tw-limits-{uuid.uuid4().hex[:8]}:"
    yield f"{redis_url}?prefix={prefix}&allow_volatile=true"  # the test Redis has no AOF
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def test_two_replicas_on_one_redis_allow_n_in_total(
    upstream: FakeOpenAIServer, redis_store: str, tmp_path: Path
) -> None:
    config = {
        "upstream": {
            "kind": "openai",
            "base_url": upstream.base_url,
            "models": {"m": "fake-model"},
        },
        "keys": [{"name": "alice", "sha256": _digest(ALICE)}],
        "limits": {"per_key": {"requests_per_minute": 5}},
        "store": redis_store,
    }
    path = tmp_path / "toolwire.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "TOOLWIRE_LOG_LEVEL": "warning"}
    env.pop("TOOLWIRE_STORE", None)
    _fresh_minute()
    a, b = ServeProcess(path, env), ServeProcess(path, env)
    try:
        statuses = []
        for i in range(12):
            replica = (a, b)[i % 2]
            with replica.http() as http:
                reply = http.post(
                    "/v1/chat/completions",
                    json={"model": "m", "messages": user("hi")},
                    headers={"authorization": f"Bearer {ALICE}"},
                )
            statuses.append(reply.status_code)
    finally:
        a.stop()
        b.stop()
    assert statuses.count(200) == 5
    assert statuses.count(429) == 7
