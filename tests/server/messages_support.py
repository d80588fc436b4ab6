"""Helpers of the `/v1/messages` tests: the `anthropic` SDK pointed at a live gateway, raw
SSE decoding with a check of Anthropic's event grammar, and the Anthropic error shape."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anthropic
import httpx
from anthropic.types import Message, ToolUseBlock
from live import LiveServer

MODEL: Final = "gpt"
"""The public model id the test gateways route upstream."""

# Typed `Any`: they go both to the SDK (TypedDict parameters) and into raw JSON bodies.
WEATHER: Final[Any] = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city's name."}},
        "required": ["city"],
    },
}
TIME: Final[Any] = {
    "name": "get_time",
    "description": "The local time in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}

_STREAM_EVENTS: Final = frozenset(
    {
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "toolwire",
        "error",
    }
)


def sdk(server: LiveServer, key: str = "sk-anything", **options: Any) -> anthropic.Anthropic:
    """The official client pointed at the gateway; retries off so each call is one request."""
    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, **options)


def async_sdk(server: LiveServer, key: str = "sk-anything") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.url, api_key=key, max_retries=0)


def user(text: str = "What is the weather in Paris?") -> list[Any]:
    return [{"role": "user", "content": text}]


def tool_uses(message: Message) -> list[tuple[str, str, Any]]:
    """`(id, name, input)` of each `tool_use` block of a message."""
    return [
        (block.id, block.name, block.input)
        for block in message.content
        if isinstance(block, ToolUseBlock)
    ]


def text_of(message: Message) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


def post(
    server: LiveServer,
    body: Any = None,
    *,
    path: str = "/v1/messages",
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """A raw POST (for what the SDK would refuse to send)."""
    with httpx.Client(base_url=server.url, timeout=10) as http:
        if content is not None:
            return http.post(
                path,
                content=content,
                headers={"content-type": "application/json", **(headers or {})},
            )
        return http.post(path, json=body, headers=headers)


def anthropic_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The `error` object of an Anthropic-shaped error response, after checking its shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"type", "error"}, body
    assert body["type"] == "error"
    error: dict[str, Any] = body["error"]
    assert set(error) == {"type", "message"}, error
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


def raw_events(
    server: LiveServer, body: Mapping[str, Any], *, key: str = "sk-anything"
) -> tuple[httpx.Response, list[tuple[str, dict[str, Any]]]]:
    """POST a streamed request with plain httpx; every SSE event as `(event name, data)`.

    Each event must have an `event:` line naming its data's `type`, as Anthropic's do.
    """
    out: list[tuple[str, dict[str, Any]]] = []
    with (
        httpx.Client(base_url=server.url, timeout=10) as http,
        http.stream(
            "POST", "/v1/messages", json={**body, "stream": True}, headers={"x-api-key": key}
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        name: str | None = None
        for line in response.iter_lines():
            if not line:
                continue
            if line.startswith("event: "):
                assert name is None, f"two event lines in a row: {line}"
                name = line.removeprefix("event: ")
                continue
            assert line.startswith("data: "), line
            data = json.loads(line.removeprefix("data: "))
            assert name is not None, f"data without an event line: {line}"
            assert name in _STREAM_EVENTS, name
            assert data["type"] == name, (name, data)
            out.append((name, data))
            name = None
    return response, out


def check_grammar(events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Check that a stream follows Anthropic's event sequence and return its content blocks
    rebuilt from the events.

    `message_start` first (then a `ping`), blocks opened, filled and closed one at a time
    with indexes 0, 1, 2, …, then one `message_delta` and `message_stop` last; `toolwire`
    events may come anywhere in between.
    """
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"], names
    assert names[-2:] == ["message_delta", "message_stop"], names
    assert names.count("message_delta") == 1
    blocks: list[dict[str, Any]] = []
    json_parts: dict[int, list[str]] = {}
    open_index: int | None = None
    for name, data in events[2:-2]:
        if name == "toolwire":
            continue
        if name == "content_block_start":
            assert open_index is None, "a block opened before the last one closed"
            assert data["index"] == len(blocks)
            open_index = data["index"]
            blocks.append(dict(data["content_block"]))
        elif name == "content_block_delta":
            assert data["index"] == open_index
            delta = data["delta"]
            block = blocks[open_index]
            if delta["type"] == "text_delta":
                assert block["type"] == "text"
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                assert block["type"] == "thinking"
                block["thinking"] += delta["thinking"]
            else:
                assert delta["type"] == "input_json_delta"
                assert block["type"] == "tool_use"
                json_parts.setdefault(open_index, []).append(delta["partial_json"])
        else:
            assert name == "content_block_stop", name
            assert data["index"] == open_index
            open_index = None
    assert open_index is None, "the last block was never closed"
    for index, parts in json_parts.items():
        blocks[index]["input"] = json.loads("".join(parts))
    return blocks
