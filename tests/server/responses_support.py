"""Helpers of the `/v1/responses` tests: the `openai` SDK's Responses API pointed at a
gateway on a real socket, raw SSE decoding with the protocol's own invariants checked,
and the tools both forms of request take."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import httpx
import openai
from live import LiveServer
from openai.types.responses import FunctionToolParam, Response, ResponseFunctionToolCall

MODEL: Final = "gpt"
TOOLS_DIR: Final = Path(__file__).parent
ALICE, BOB, OPS = "tw-alice", "tw-bob", "tw-ops"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


KEYS: Final = [
    {"name": "alice", "sha256": digest(ALICE), "scopes": ["reports"]},
    {"name": "bob", "sha256": digest(BOB), "approve": "none"},
    {"name": "ops", "sha256": digest(OPS), "admin": True},
]
"""alice (approves her own runs), bob (may not approve), ops (admin)."""


def sdk(server: LiveServer, key: str = "sk-anything") -> openai.OpenAI:
    """The official sync client pointed at the gateway, without retries."""
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)


def async_sdk(server: LiveServer, key: str = "sk-anything") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)


def function_tool(name: str, properties: Mapping[str, Any], description: str = "") -> Any:
    """A strict Responses function tool (the flat form), as the SDKs send it."""
    tool: FunctionToolParam = {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": dict(properties),
            "required": list(properties),
            "additionalProperties": False,
        },
        "strict": True,
    }
    return tool


WEATHER: Final = function_tool(
    "get_weather", {"city": {"type": "string"}}, "The current weather in a city."
)
TIME: Final = function_tool("get_time", {"city": {"type": "string"}}, "The local time in a city.")


def function_calls(response: Response) -> list[tuple[str, str, Any]]:
    """`(call_id, name, parsed arguments)` of each function_call item of the output."""
    return [
        (item.call_id, item.name, json.loads(item.arguments))
        for item in response.output
        if isinstance(item, ResponseFunctionToolCall)
    ]


def output_types(response: Response | Mapping[str, Any]) -> list[str]:
    items = response["output"] if isinstance(response, Mapping) else response.output
    return [i["type"] if isinstance(i, Mapping) else i.type for i in items]


def call_output(call_id: str, output: str) -> Any:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def approval_response(approval_id: str, approve: bool, reason: str | None = None) -> Any:
    item: dict[str, Any] = {
        "type": "mcp_approval_response",
        "approval_request_id": approval_id,
        "approve": approve,
    }
    if reason is not None:
        item["reason"] = reason
    return item


def post(
    server: LiveServer, body: Any, *, key: str = "sk-anything", content: bytes | None = None
) -> httpx.Response:
    """`POST /v1/responses` with raw httpx (for what the SDK would refuse to send)."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.url, timeout=10) as http:
        if content is not None:
            headers["content-type"] = "application/json"
            return http.post("/v1/responses", content=content, headers=headers)
        return http.post("/v1/responses", json=body, headers=headers)


def delete(server: LiveServer, response_id: str, key: str = "sk-anything") -> httpx.Response:
    """`DELETE /v1/responses/{id}` (the SDK's `delete` returns nothing to look at)."""
    with httpx.Client(base_url=server.url, timeout=10) as http:
        return http.delete(
            f"/v1/responses/{response_id}", headers={"Authorization": f"Bearer {key}"}
        )


def raw_events(
    server: LiveServer, body: Mapping[str, Any], *, key: str = "sk-anything"
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """Stream a request with plain httpx and decode every event.

    Checks what every Responses stream must hold: each event is `event: <type>` then
    `data: {...}` with the same `type`, and `sequence_number` counts up from 0.
    """
    events: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=server.url, timeout=10) as http,
        http.stream(
            "POST",
            "/v1/responses",
            json={**body, "stream": True},
            headers={"Authorization": f"Bearer {key}"},
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        kind: str | None = None
        for line in response.iter_lines():
            if not line:
                continue
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
                continue
            assert line.startswith("data: "), line
            data = json.loads(line.removeprefix("data: "))
            assert data["type"] == kind, (kind, data)
            assert data["sequence_number"] == len(events), data
            events.append(data)
            kind = None
    return response, events


def event_types(events: Sequence[Mapping[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The `error` object of an OpenAI-shaped error response, after checking its shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    return error
