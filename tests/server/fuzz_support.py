"""Helpers of the route fuzz suite (issue 23): valid request shapes of every door, the
mutations applied to them, and the check every answer must pass.

A body is one of the door's valid shapes with one to three mutations, each at a node of
the body chosen at random: a value of another JSON type, a key removed or added, a value
nested around the gateway's depth limit or beyond what orjson writes, a huge string,
control characters, any unicode (lone surrogates included), huge numbers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import httpx
from hypothesis import strategies as st

from toolwire.server.http.json_depth import MAX_JSON_DEPTH

__all__ = [
    "HEADER_LIMIT",
    "SHAPES",
    "check_answer",
    "json_values",
    "mutated_body",
    "nested",
]

MODEL: Final = "gpt"
HEADER_LIMIT: Final = 8192
"""Bytes of one response header line (name and value) at most."""

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)

_USER: Final = [{"role": "user", "content": "What is 2 + 3?"}]
_CHAT_TOOL: Final = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
_ANTHROPIC_TOOL: Final = {
    "name": "get_weather",
    "description": "The weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
_RESPONSES_TOOL: Final = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}

SHAPES: Final[dict[str, list[dict[str, Any]]]] = {
    "/v1/chat/completions": [
        {"model": MODEL, "messages": _USER},
        {
            "model": MODEL,
            "messages": _USER,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        {"model": MODEL, "messages": _USER, "tools": [_CHAT_TOOL], "tool_choice": "auto"},
        {
            "model": MODEL,
            "messages": [
                *_USER,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
            ],
            "tools": [_CHAT_TOOL],
            "temperature": 0.2,
            "max_tokens": 64,
        },
    ],
    "/v1/messages": [
        {"model": MODEL, "max_tokens": 64, "messages": _USER},
        {
            "model": MODEL,
            "max_tokens": 64,
            "messages": _USER,
            "stream": True,
            "system": "Be brief.",
        },
        {
            "model": MODEL,
            "max_tokens": 64,
            "tools": [_ANTHROPIC_TOOL],
            "tool_choice": {"type": "auto"},
            "messages": [
                *_USER,
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "get_weather",
                            "input": {"city": "Oslo"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"}],
                },
            ],
        },
    ],
    "/v1/messages/count_tokens": [
        {"model": MODEL, "messages": _USER, "tools": [_ANTHROPIC_TOOL]},
    ],
    "/v1/responses": [
        {"model": MODEL, "input": "What is 2 + 3?", "store": False},
        {"model": MODEL, "input": "Hi", "stream": True, "instructions": "Be brief."},
        {
            "model": MODEL,
            "store": False,
            "tools": [_RESPONSES_TOOL],
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city": "Oslo"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
            ],
        },
        {
            "model": MODEL,
            "input": "Hi",
            "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
            "reasoning": {"effort": "low"},
            "previous_response_id": "resp_unknown",
        },
    ],
    "/v1/tools/add/invoke": [{"arguments": {"a": 2, "b": 3}}, {"arguments": {}, "id": "call_x"}],
    "/v1/approvals/apr_unknown": [{"decision": "approve", "reason": "ok"}, {"approve": False}],
    "/v1/runs/run_unknown/resume": [{"stream": False}, {"stream": True}],
    "/mcp": [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
        },
    ],
}
"""Valid request shapes of each door that takes a body."""


def nested(depth: int) -> Any:
    """A value `depth` levels deep, arrays and objects in turn."""
    value: Any = []
    for n in range(depth - 1):
        value = {"k": value} if n % 2 else [value]
    return value


_HUGE: Final = "x" * 100_000
_nasty_text = st.one_of(
    st.text(st.characters(max_codepoint=0x1F), min_size=1, max_size=8),  # control chars
    st.text(max_size=12),  # any unicode
    st.sampled_from(
        ["\r\nX-Injected: 1", "€", "\x00", "日本語", "\u2028", "\ud800", "a" * 9000, _HUGE]
    ),
)
_replacements = st.one_of(
    json_values,
    _nasty_text,
    st.sampled_from([MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 254, 300]).map(nested),
    st.sampled_from([2**64, -(2**63) - 1, 10**400 // 10**300, 1e308, -0.0, 0, -1, ""]),
)


def _paths(value: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield here
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*here, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*here, index))


def _mutate(body: Any, data: st.DataObject) -> Any:
    paths = list(_paths(body))
    path = data.draw(st.sampled_from(paths), label="at")
    if not path:
        return data.draw(_replacements, label="body")
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    action = data.draw(st.sampled_from(["replace", "replace", "drop", "add"]), label="action")
    if action == "drop":
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        key = data.draw(st.one_of(st.text(max_size=12), _nasty_text), label="key")
        parent[key] = data.draw(_replacements, label="value")
    else:
        parent[last] = data.draw(_replacements, label="value")
    return body


def mutated_body(path: str, data: st.DataObject) -> bytes:
    """One of `path`'s shapes with one to three mutations, as JSON text."""
    body = json.loads(json.dumps(data.draw(st.sampled_from(SHAPES[path]), label="shape")))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        body = _mutate(body, data)
    return json.dumps(body).encode("utf-8", "surrogatepass")


def _door(path: str) -> str:
    if path == "/mcp" or path.startswith("/mcp/"):
        return "mcp"
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return "anthropic"
    return "openai"


def check_answer(path: str, response: httpx.Response) -> None:
    """What every answer must be: no 5xx, errors as JSON in the door's own shape, no header
    line over `HEADER_LIMIT` bytes. (Read the whole body first.)"""
    where = f"{response.request.method} {path} -> {response.status_code}: {response.text[:300]!r}"
    assert response.status_code < 500, where
    for name, value in response.headers.raw:
        assert len(name) + len(value) + 2 <= HEADER_LIMIT, (where, name)
    if response.status_code < 400 or response.request.method == "HEAD":
        return
    door = _door(path)
    is_json = response.headers.get("content-type", "").startswith("application/json")
    assert is_json, where
    body = response.json()
    if body.get("error", {}).get("code") == "invalid_http":
        # The HTTP server's own answer to what it could not parse (an unknown method,
        # say): it comes before the request line is read, so it cannot know the door.
        door = "openai"
    if door == "anthropic":
        assert body.get("type") == "error", where
        assert set(body["error"]) == {"type", "message"}, where
        assert isinstance(body["error"]["message"], str), where
    elif door == "openai":
        assert set(body) == {"error"}, where
        assert set(body["error"]) == {"message", "type", "param", "code"}, where
        assert isinstance(body["error"]["message"], str), where
    assert "Traceback" not in response.text, where
