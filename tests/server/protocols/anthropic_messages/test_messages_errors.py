"""Failures on `POST /v1/messages` and `/v1/messages/count_tokens`, all in Anthropic's error
shape with Anthropic's statuses, so the `anthropic` SDK raises its own exception classes:
bad bodies, unknown models, keys, limits, orphan results, upstream and store failures.
Also the `count_tokens` estimate."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from e2e_chat_support import UPSTREAM_SECRET, live_gateway, openai_upstream
from live import LiveServer
from messages_support import MODEL, WEATHER, anthropic_error, post, sdk, text_of, user
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, Reply, completion, delta, dropped, error, sse

KEY = "tw-messages-key"
HEADERS = {"x-api-key": KEY}
CALL: Any = {"type": "tool_use", "id": "call_w", "name": "get_weather", "input": {"city": "Oslo"}}


def _config(upstream_url: str, **extra: Any) -> Any:
    return config_with(
        upstream=openai_upstream(upstream_url, {MODEL: "gpt-4o"}, retries=0),
        keys=[{"name": "alice", "sha256": hashlib.sha256(KEY.encode()).hexdigest()}],
        limits={"max_messages": 6, "max_tools": 2, "max_body_bytes": 64 * 1024},
        store="memory",
        **extra,
    )


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    with live_gateway(_config(_openai_server_session.base_url)) as live:
        yield live


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 100, "messages": user(), **fields}


# --- keys -------------------------------------------------------------------------------------


def test_a_missing_key_is_401(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    response = post(server, _body())
    error_ = anthropic_error(response, 401)
    assert error_["type"] == "authentication_error"
    assert "x-api-key" in error_["message"]
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert openai_server.requests == []


def test_a_wrong_key_raises_the_sdks_authentication_error(server: LiveServer) -> None:
    with sdk(server, "tw-wrong") as client, pytest.raises(anthropic.AuthenticationError) as info:
        client.messages.create(model=MODEL, max_tokens=10, messages=user())
    assert info.value.status_code == 401
    assert isinstance(info.value.body, dict)
    assert info.value.body["error"]["type"] == "authentication_error"
    assert "tw-wrong" not in str(info.value)


@pytest.mark.parametrize("how", ["x-api-key", "bearer"])
def test_the_key_as_x_api_key_or_bearer(
    server: LiveServer, openai_server: FakeOpenAIServer, how: str
) -> None:
    openai_server.reply(completion("Hi."))
    client = (
        sdk(server, KEY)
        if how == "x-api-key"
        else anthropic.Anthropic(base_url=server.url, auth_token=KEY, max_retries=0)
    )
    with client:
        assert text_of(client.messages.create(model=MODEL, max_tokens=10, messages=user())) == "Hi."


# --- bad requests -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([1, 2], "must be a JSON object"),
        ({"model": MODEL, "messages": user()}, "max_tokens"),
        (_body(max_tokens="100"), "max_tokens"),
        (_body(messages=[]), "messages"),
        (_body(temperature=1.5), "temperature"),
        (_body(stream="yes"), "stream"),
        (_body(messages=[{"role": "system", "content": "x"}]), "messages.0.role"),
        (_body(messages=[{"role": "user", "content": ""}]), "messages.0.content"),
        (
            _body(messages=[{"role": "user", "content": [{"type": "audio"}]}]),
            "messages.0.content.0.type",
        ),
        (_body(system=[{"type": "image"}]), "system.0"),
        (
            _body(messages=[*user(), {"role": "assistant", "content": [CALL]}, *user("and?")]),
            "messages.1.content.0.id",
        ),
        (
            _body(messages=[*user(), {"role": "assistant", "content": [CALL]}]),
            "messages.1.content.0.id",
        ),
        (
            _body(
                messages=[
                    *user(),
                    {"role": "assistant", "content": [{**CALL, "input": "Oslo"}]},
                ]
            ),
            "messages.1.content.0.input",
        ),
        (
            _body(
                messages=[
                    *user(),
                    {"role": "assistant", "content": [CALL]},
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "call_w",
                                "content": [{"type": "image", "source": {}}],
                            }
                        ],
                    },
                ]
            ),
            "messages.2.content.0.content.0",
        ),
        (
            _body(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}],
                    }
                ]
            ),
            "messages.0.content.0.source",
        ),
        (_body(tools=[{"type": "web_search_20250305", "name": "web_search"}]), "tools.0.type"),
        (_body(tools=[{"name": "bad name!", "input_schema": {"type": "object"}}]), "tools.0.name"),
        (_body(tools=[{"name": "t"}]), "tools.0.input_schema"),
        (
            _body(tools=[{"name": "t", "input_schema": {"type": "object", "properties": 3}}]),
            "tools.0.input_schema",
        ),
        (_body(tools=[WEATHER, WEATHER]), "tools.1.name"),
        (_body(tools=[WEATHER], tool_choice={"type": "tool", "name": "nope"}), "tool_choice.name"),
        (_body(tool_choice={"type": "any"}), "tool_choice"),
        (_body(tools=[WEATHER], tool_choice="auto"), "tool_choice"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(
    server: LiveServer, openai_server: FakeOpenAIServer, body: Any, field: str
) -> None:
    response = post(server, body, headers=HEADERS)
    error_ = anthropic_error(response, 400)
    assert error_["type"] == "invalid_request_error"
    assert field in error_["message"], error_["message"]
    assert openai_server.requests == []


def test_malformed_json_is_a_400(server: LiveServer) -> None:
    error_ = anthropic_error(post(server, content=b'{"model": ', headers=HEADERS), 400)
    assert "not valid JSON" in error_["message"]


def test_a_bad_request_raises_the_sdks_bad_request_error(server: LiveServer) -> None:
    with sdk(server, KEY) as client, pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(
            model=MODEL,
            max_tokens=10,
            messages=user(),
            tools=[{"name": "t", "input_schema": {"type": "string"}}],
        )
    assert "tools.0.input_schema.type" in info.value.message


def test_an_unknown_model_is_404(server: LiveServer) -> None:
    with sdk(server, KEY) as client, pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(model="claude-nope", max_tokens=10, messages=user())
    assert isinstance(info.value.body, dict)
    assert info.value.body["error"]["type"] == "not_found_error"
    assert "'gpt'" in info.value.body["error"]["message"]


def test_a_wrong_method_is_405_in_the_same_shape(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        answer = http.get("/v1/messages", headers=HEADERS)
    assert anthropic_error(answer, 405)["type"] == "invalid_request_error"
    assert answer.headers["allow"] == "POST"


# --- limits -----------------------------------------------------------------------------------


def test_limits(server: LiveServer) -> None:
    too_large = post(server, _body(system="x" * 70_000), headers=HEADERS)
    assert anthropic_error(too_large, 413)["type"] == "request_too_large"
    many = [*user(), {"role": "assistant", "content": "ok"}] * 4
    assert (
        "max_messages"
        in anthropic_error(post(server, _body(messages=many), headers=HEADERS), 400)["message"]
    )
    tools = [WEATHER, {**WEATHER, "name": "b"}, {**WEATHER, "name": "c"}]
    assert (
        "max_tools"
        in anthropic_error(post(server, _body(tools=tools), headers=HEADERS), 400)["message"]
    )
    with sdk(server, KEY) as client, pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(model=MODEL, max_tokens=10, messages=user(), system="x" * 70_000)
    assert info.value.status_code == 413


# --- orphan tool results ----------------------------------------------------------------------

ORPHAN: Any = [
    *user(),
    {"role": "assistant", "content": [CALL]},
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_w", "content": "Rain"},
            {"type": "tool_result", "tool_use_id": "call_ghost", "content": "?"},
            {"type": "tool_result", "tool_use_id": "call_w", "content": "again"},
        ],
    },
]


RESULT: Any = [
    *user(),
    {"role": "assistant", "content": [CALL]},
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_w", "content": "Rain"}],
    },
]


def test_orphan_results_are_dropped_and_named(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Rain in Oslo."))
    with sdk(server, KEY) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=10, messages=ORPHAN, tools=[WEATHER]
        )
    assert text_of(raw.parse()) == "Rain in Oslo."
    assert raw.headers["toolwire-dropped-tool-results"] == "call_ghost,call_w"
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["content"] == "Rain"


def test_strict_mode_refuses_an_orphan(openai_server: FakeOpenAIServer) -> None:
    with live_gateway(_config(openai_server.base_url, strict_tool_results=True)) as live:
        response = post(live, _body(messages=ORPHAN, tools=[WEATHER]), headers=HEADERS)
    error_ = anthropic_error(response, 400)
    assert "messages.2.content.1.tool_use_id" in error_["message"]
    assert "strict_tool_results" in error_["message"]


# --- upstream failures ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_an_unreachable_or_failing_upstream_is_502_api_error(
    server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.fail(1, 503, message=f"overloaded (key {UPSTREAM_SECRET})")
    response = post(server, _body(stream=stream), headers=HEADERS)
    assert anthropic_error(response, 502)["type"] == "api_error"
    assert UPSTREAM_SECRET not in response.text
    openai_server.fail(1, 500)
    with sdk(server, KEY) as client, pytest.raises(anthropic.InternalServerError):
        client.messages.create(model=MODEL, max_tokens=10, messages=user())


@pytest.mark.parametrize(
    ("status", "kind", "exception"),
    [
        (400, "invalid_request_error", anthropic.BadRequestError),
        (429, "rate_limit_error", anthropic.RateLimitError),
    ],
)
def test_an_upstream_4xx_is_relayed(
    server: LiveServer,
    openai_server: FakeOpenAIServer,
    status: int,
    kind: str,
    exception: type[Exception],
) -> None:
    openai_server.reply(error(status, "context length exceeded"))
    response = post(server, _body(), headers=HEADERS)
    error_ = anthropic_error(response, status)
    assert (error_["type"], error_["message"]) == (kind, "context length exceeded")
    openai_server.reply(error(status, "context length exceeded"))
    with sdk(server, KEY) as client, pytest.raises(exception):
        client.messages.create(model=MODEL, max_tokens=10, messages=user())


def test_a_failure_mid_stream_ends_with_an_error_event_the_sdk_raises(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(dropped([delta("The weather "), delta("in Paris is")]))
    received: list[str] = []
    with (
        sdk(server, KEY) as client,
        pytest.raises(anthropic.APIStatusError) as info,
        client.messages.stream(model=MODEL, max_tokens=10, messages=user()) as stream,
    ):
        received.extend(stream.text_stream)
    assert "".join(received) == "The weather in Paris is"
    assert isinstance(info.value.body, dict)
    assert info.value.body["type"] == "error"
    assert info.value.body["error"]["type"] == "api_error"
    assert UPSTREAM_SECRET not in str(info.value)


def test_a_stream_ending_without_its_finish_is_an_error(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse([delta("half an ans")], done=False))
    with (
        sdk(server, KEY) as client,
        pytest.raises(anthropic.APIStatusError),
        client.messages.stream(model=MODEL, max_tokens=10, messages=user()) as stream,
    ):
        stream.get_final_message()


# --- the store --------------------------------------------------------------------------------


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A Redis server of this test's own, so the test can stop it."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed (CI=true requires it)")
        pytest.skip("redis-server is not installed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(500):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
            break
        threading.Event().wait(0.01)
    try:
        yield f"redis://127.0.0.1:{port}/0", proc
    finally:
        proc.kill()
        proc.wait()


def test_a_store_that_went_away_is_503(
    openai_server: FakeOpenAIServer, private_redis: tuple[str, subprocess.Popen[bytes]]
) -> None:
    # The one config here with a real store: the failure under test is the store's.
    url, redis_proc = private_redis
    config = config_with(
        upstream=openai_upstream(openai_server.base_url, {MODEL: "gpt-4o"}),
        server_tools={"modules": ["messages_tools"]},
        store=f"{url}?allow_volatile=true",  # a Redis of the test's own, without AOF
    )
    with live_gateway(config) as live:
        redis_proc.kill()
        redis_proc.wait()
        # Results of a tool call: the gateway looks for its own steps of that turn.
        response = post(live, _body(messages=RESULT))
        error_ = anthropic_error(response, 503)
        assert error_["type"] == "api_error"
        assert "store" in error_["message"]
        assert response.headers["retry-after"] == "5"
        with sdk(live) as client, pytest.raises(anthropic.InternalServerError) as info:
            client.messages.create(model=MODEL, max_tokens=10, messages=RESULT)
        assert info.value.status_code == 503
    assert openai_server.requests == []


# --- count_tokens -----------------------------------------------------------------------------


def test_count_tokens_is_an_estimate(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    with sdk(server, KEY) as client:
        plain = client.messages.count_tokens(model=MODEL, messages=user("x" * 40))
        # 40 characters / 4, plus 3 for the message.
        assert plain.input_tokens == 13
        with_tools = client.messages.count_tokens(
            model=MODEL, messages=user("x" * 40), system="y" * 8, tools=[WEATHER]
        )
        assert with_tools.input_tokens > plain.input_tokens + 2 + 3
        with pytest.raises(anthropic.NotFoundError):
            client.messages.count_tokens(model="nope", messages=user())
        with pytest.raises(anthropic.BadRequestError):
            client.messages.count_tokens(model=MODEL, messages=[])
    assert openai_server.requests == []  # never asks the upstream
    assert anthropic_error(post(server, _body(), path="/v1/messages/count_tokens"), 401)


# --- the client going away --------------------------------------------------------------------


def test_a_client_leaving_a_stream_closes_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse([delta(f"word {i} ") for i in range(50)], interval=0.2))
    with (
        httpx.Client(base_url=server.url, timeout=10) as http,
        http.stream("POST", "/v1/messages", json=_body(stream=True), headers=HEADERS) as response,
    ):
        assert response.status_code == 200
        first = next(line for line in response.iter_lines() if line.startswith("event: "))
        assert first == "event: message_start"
        # Leaving the block closes the connection mid-stream.
    assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
    assert openai_server.completed == 0


def test_a_client_leaving_a_whole_answer_closes_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    body = completion("slow").body
    openai_server.reply(Reply(body=body, pieces=[body[:10], body[10:]], interval=20))
    with httpx.Client(base_url=server.url) as http, pytest.raises(httpx.ReadTimeout):
        http.post(
            "/v1/messages", json=_body(), headers=HEADERS, timeout=httpx.Timeout(10, read=0.3)
        )
    assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
    assert openai_server.completed == 0
