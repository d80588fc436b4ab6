"""Bad requests to `/v1/chat/completions` over a real socket: each gets the right status
and an OpenAI-shaped error naming the field at fault, and none reaches the upstream."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from e2e_chat_support import (
    UPSTREAM_SECRET,
    WEATHER_TOOL,
    live_gateway,
    openai_error,
    openai_upstream,
    post_chat,
    sdk,
    user,
)
from live import LiveServer
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion

KEY = "tw-errors-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def _config(fake: FakeOpenAIServer, **extra: Any) -> Any:
    return config_with(
        upstream=openai_upstream(fake.base_url, {"gpt": "gpt-4o-mini"}),
        keys=[{"name": "tester", "sha256": hashlib.sha256(KEY.encode()).hexdigest()}],
        limits={"max_body_bytes": 8192, "max_messages": 8, "max_tools": 2},
        **extra,
    )


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    with live_gateway(_config(_openai_server_session)) as live:
        yield live


@pytest.fixture(scope="module")
def strict_server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    with live_gateway(_config(_openai_server_session, strict_tool_results=True)) as live:
        yield live


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt", "messages": user(), **fields}


# --- malformed and invalid bodies ------------------------------------------------------------


def test_malformed_json(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    response = post_chat(server, content=b'{"model": "gpt", "messages": [', headers=AUTH)
    error = openai_error(response, 400)
    assert error["code"] == "invalid_json"
    assert error["type"] == "invalid_request_error"
    assert openai_server.requests == []


def test_body_that_is_not_an_object(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    error = openai_error(post_chat(server, [1, 2], headers=AUTH), 400)
    assert "JSON object" in error["message"]
    assert openai_server.requests == []


@pytest.mark.parametrize("missing", ["model", "messages"])
def test_missing_required_field(
    server: LiveServer, openai_server: FakeOpenAIServer, missing: str
) -> None:
    body = _body()
    del body[missing]
    error = openai_error(post_chat(server, body, headers=AUTH), 400)
    assert error["param"] == missing
    assert missing in error["message"]
    assert openai_server.requests == []


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"model": 4}, "model"),
        ({"messages": "hello"}, "messages"),
        ({"messages": []}, "messages"),
        ({"temperature": "0.5"}, "temperature"),
        ({"temperature": 7}, "temperature"),
        ({"stream": 1}, "stream"),
        ({"max_tokens": "many"}, "max_tokens"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"stop": [1, 2]}, "stop"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"content": "hi"}]}, "messages[0].role"),
        ({"messages": ["hi"]}, "messages[0]"),
        ({"tools": {"type": "function"}}, "tools"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name"),
        ({"tool_choice": "always"}, "tool_choice"),
    ],
)
def test_wrong_types_name_the_field(
    server: LiveServer, openai_server: FakeOpenAIServer, fields: dict[str, Any], param: str
) -> None:
    error = openai_error(post_chat(server, _body(**fields), headers=AUTH), 400)
    assert error["param"] == param
    assert param in error["message"]
    assert "\n" not in error["message"]
    assert openai_server.requests == []


def test_unknown_model_is_404(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    with sdk(server, KEY) as client, pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-9", messages=user())
    assert info.value.status_code == 404
    assert info.value.code == "model_not_found"
    assert info.value.param == "model"
    assert "'gpt'" in info.value.message  # the valid choices are listed
    assert openai_server.requests == []


def test_oversized_body_is_413(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    big = "x" * 10_000
    with sdk(server, KEY) as client, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="gpt", messages=user(big))
    assert info.value.status_code == 413
    assert info.value.code == "request_too_large"
    assert "max_body_bytes" in info.value.message
    assert openai_server.requests == []


def test_oversized_chunked_body_is_413(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"model": "gpt", "messages": [{"role": "user", "content": "'
        for _ in range(20):
            yield b"x" * 1000
        yield b'"}]}'

    import httpx

    with httpx.Client(base_url=server.url, timeout=10) as http:
        response = http.post("/v1/chat/completions", content=chunks(), headers=AUTH)
    assert openai_error(response, 413)["code"] == "request_too_large"
    assert openai_server.requests == []


def test_too_many_messages(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    messages = [{"role": "user", "content": f"message {i}"} for i in range(9)]
    error = openai_error(post_chat(server, _body(messages=messages), headers=AUTH), 400)
    assert error["param"] == "messages"
    assert error["code"] == "too_many_messages"
    assert "max_messages" in error["message"]
    assert openai_server.requests == []


def test_too_many_tools(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    tools: list[Any] = [
        {"type": "function", "function": {"name": f"tool_{i}", "parameters": {"type": "object"}}}
        for i in range(3)
    ]
    with sdk(server, KEY) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt", messages=user(), tools=tools)
    assert info.value.param == "tools"
    assert info.value.code == "too_many_tools"
    assert "max_tools" in info.value.message
    assert openai_server.requests == []


@pytest.mark.parametrize(
    ("parameters", "param"),
    [
        (
            {"type": "object", "properties": {"city": {"type": "town"}}},
            "tools[0].function.parameters",
        ),
        ({"type": "object", "required": "city"}, "tools[0].function.parameters"),
        ({"type": "string"}, "tools[0].function.parameters.type"),
        ("a string", "tools[0].function.parameters"),
    ],
)
def test_bad_tool_schema(
    server: LiveServer, openai_server: FakeOpenAIServer, parameters: Any, param: str
) -> None:
    tools: list[Any] = [
        {"type": "function", "function": {"name": "get_weather", "parameters": parameters}}
    ]
    with sdk(server, KEY) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt", messages=user(), tools=tools)
    assert info.value.param == param
    assert info.value.code == "invalid_tool_schema"
    assert "get_weather" in info.value.message
    assert openai_server.requests == []


def test_tool_choice_naming_an_unknown_tool(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    with sdk(server, KEY) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="gpt",
            messages=user(),
            tools=[WEATHER_TOOL],
            tool_choice={"type": "function", "function": {"name": "get_stock_price"}},
        )
    assert info.value.param == "tool_choice.function.name"
    assert "get_stock_price" in info.value.message
    assert "'get_weather'" in info.value.message  # the valid choices
    assert openai_server.requests == []


def test_tool_choice_required_without_tools(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    error = openai_error(post_chat(server, _body(tool_choice="required"), headers=AUTH), 400)
    assert error["param"] == "tool_choice"
    assert openai_server.requests == []


def test_n_above_one_is_refused(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    with sdk(server, KEY) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt", messages=user(), n=2)
    assert info.value.param == "n"
    assert info.value.code == "unsupported_parameter"
    assert openai_server.requests == []


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {"functions": [{"name": "get_weather", "parameters": {"type": "object"}}]},
            "functions",
        ),
        ({"function_call": "auto"}, "function_call"),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "get_weather", "arguments": "{}"},
                    },
                ]
            },
            "messages[1].function_call",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "function", "name": "get_weather", "content": "sunny"},
                ]
            },
            "messages[1].role",
        ),
    ],
)
def test_legacy_functions_are_refused(
    server: LiveServer, openai_server: FakeOpenAIServer, fields: dict[str, Any], param: str
) -> None:
    error = openai_error(post_chat(server, _body(**fields), headers=AUTH), 400)
    assert error["param"] == param
    assert "tool" in error["message"]  # says what to send instead
    assert openai_server.requests == []


# --- gateway keys ----------------------------------------------------------------------------


def test_missing_gateway_key_is_401(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    response = post_chat(server, _body())
    error = openai_error(response, 401)
    assert error["code"] == "invalid_api_key"
    assert "Authorization: Bearer" in error["message"]
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert openai_server.requests == []


def test_wrong_gateway_key_is_401(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    with (
        sdk(server, "tw-not-the-key") as client,
        pytest.raises(openai.AuthenticationError) as info,
    ):
        client.chat.completions.create(model="gpt", messages=user())
    assert info.value.status_code == 401
    assert "tw-not-the-key" not in str(info.value.body)
    assert openai_server.requests == []


def test_bad_key_is_checked_before_the_body(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    # An unauthenticated caller learns nothing about the request's validity.
    response = post_chat(server, content=b"{not json", headers={"Authorization": "Bearer nope"})
    openai_error(response, 401)
    assert openai_server.requests == []


# --- pairing of tool calls and results --------------------------------------------------------


def _call(call_id: str, city: str = "Paris") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'},
    }


def test_call_left_without_a_result_is_400(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    messages = [
        *user(),
        {"role": "assistant", "content": None, "tool_calls": [_call("call_a"), _call("call_b")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
        {"role": "user", "content": "And?"},
    ]
    with sdk(server, KEY) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt", messages=messages, tools=[WEATHER_TOOL])
    assert info.value.param == "messages[1].tool_calls[1].id"
    assert "call_b" in info.value.message
    assert openai_server.requests == []


def test_call_unanswered_at_the_end_is_400(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    messages = [*user(), {"role": "assistant", "tool_calls": [_call("call_a")]}]
    error = openai_error(post_chat(server, _body(messages=messages), headers=AUTH), 400)
    assert error["param"] == "messages[1].tool_calls[0].id"
    assert "call_a" in error["message"]
    assert openai_server.requests == []


def _with_orphan() -> list[Any]:
    return [
        *user(),
        {"role": "assistant", "content": None, "tool_calls": [_call("call_a")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_ghost", "content": "stale"},
        {"role": "assistant", "content": "It is 18C."},
        {"role": "tool", "tool_call_id": "call_a", "content": "late duplicate"},
        {"role": "user", "content": "Thanks"},
    ]


def test_orphan_tool_results_are_dropped_and_named(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("You're welcome."))
    with sdk(server, KEY) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt",
            messages=_with_orphan(),
            tools=[WEATHER_TOOL],
        )
    answer = raw.parse()
    assert answer.choices[0].message.content == "You're welcome."
    assert raw.headers["toolwire-dropped-tool-results"] == "call_ghost,call_a"
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert [m.get("content") for m in sent if m["role"] == "tool"] == ["18C"]


def test_no_dropped_header_when_nothing_is_dropped(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Hi"))
    with sdk(server, KEY) as client:
        raw = client.chat.completions.with_raw_response.create(model="gpt", messages=user())
    assert "toolwire-dropped-tool-results" not in raw.headers


def test_strict_tool_results_refuse_an_orphan(
    strict_server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    with sdk(strict_server, KEY) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt", messages=_with_orphan())
    assert info.value.param == "messages[3].tool_call_id"
    assert info.value.code == "orphan_tool_result"
    assert "call_ghost" in info.value.message
    assert openai_server.requests == []


def test_no_error_echoes_the_upstream_key(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    bodies = [
        post_chat(server, content=b"{", headers=AUTH),
        post_chat(server, _body(model="nope"), headers=AUTH),
        post_chat(server, _body(), headers={"Authorization": f"Bearer {UPSTREAM_SECRET}"}),
    ]
    for response in bodies:
        assert response.status_code >= 400
        assert UPSTREAM_SECRET not in response.text
    assert openai_server.requests == []
