"""Helpers of the `/v1/chat/completions` tests driven by the `openai` SDK over a socket."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import openai
from live import LiveServer
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
)

MODEL = "gpt"
"""The public model id the gateway routes to `UPSTREAM_MODEL`."""
UPSTREAM_MODEL = "gpt-4o"


def native_upstream(base_url: str) -> dict[str, Any]:
    """The `upstream` section for the fake OpenAI server, tool calls `native`."""
    return {"kind": "openai", "base_url": base_url, "models": {MODEL: UPSTREAM_MODEL}}


def function_calls(message: ChatCompletionMessage) -> list[ChatCompletionMessageFunctionToolCall]:
    """The message's tool calls, each checked to be a function call."""
    calls = message.tool_calls
    assert calls is not None, "the message has no tool_calls"
    out = []
    for call in calls:
        assert isinstance(call, ChatCompletionMessageFunctionToolCall), call
        out.append(call)
    return out


def sdk(server: LiveServer, key: str = "sk-anything") -> openai.OpenAI:
    """The official sync client pointed at the gateway, without retries."""
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)


def async_sdk(server: LiveServer, key: str = "sk-anything") -> openai.AsyncOpenAI:
    """The official async client pointed at the gateway, without retries."""
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)


def function_tool(
    name: str,
    properties: Mapping[str, Any],
    *,
    description: str = "",
    strict: bool = True,
) -> ChatCompletionFunctionToolParam:
    """A client tool. Strict by default: the SDK's stream helper only takes strict tools
    (and then parses the arguments of every call it assembles)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": dict(properties),
                "required": list(properties),
                "additionalProperties": False,
            },
            "strict": strict,
        },
    }


WEATHER = function_tool(
    "get_weather",
    {"city": {"type": "string"}},
    description="Get the weather of a city",
)
BOOK_FLIGHT = function_tool(
    "book_flight",
    {"city": {"type": "string"}},
    description="Book a flight to a city",
)


def raw_stream(
    server: LiveServer, body: Mapping[str, Any], *, key: str = "sk-anything"
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """POST a streaming request with plain httpx and decode every SSE event.

    Returns:
        The response (headers, status) and the JSON of each `data:` event in order. The
        stream must end with `data: [DONE]`, which is not in the list.
    """
    chunks: list[dict[str, Any]] = []
    done = False
    with (
        httpx.Client(base_url=server.url, timeout=10) as http,
        http.stream(
            "POST",
            "/v1/chat/completions",
            json={**body, "stream": True},
            headers={"Authorization": f"Bearer {key}"},
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            payload = line.removeprefix("data: ")
            assert not done, "an event after [DONE]"
            if payload == "[DONE]":
                done = True
                continue
            chunks.append(json.loads(payload))
    assert done, "the stream ended without data: [DONE]"
    return response, chunks


def extensions(chunks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The `toolwire` objects of the extension chunks, in order."""
    out: list[dict[str, Any]] = []
    for chunk in chunks:
        if "toolwire" in chunk:
            assert chunk["choices"] == [], "an extension chunk must have no choices"
            out.append(chunk["toolwire"])
    return out


def streamed_content(chunks: Sequence[Mapping[str, Any]]) -> str:
    """The content deltas of raw chunks, joined."""
    return "".join(
        choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"]
    )


def streamed_tool_calls(chunks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every `tool_calls` delta entry of raw chunks, in order."""
    return [
        call
        for chunk in chunks
        for choice in chunk["choices"]
        for call in choice["delta"].get("tool_calls") or ()
    ]


def finish_reasons(chunks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The non-null finish reasons of raw chunks."""
    return [
        choice["finish_reason"]
        for chunk in chunks
        for choice in chunk["choices"]
        if choice["finish_reason"] is not None
    ]
