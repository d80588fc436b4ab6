"""Seed 003 (`003_130aea9a57b7bfd5.txt`): the agent loop with HTTP tools over the
platform API, the user's own token, errors fed back with `is_error`, at most 5
iterations, and a confirmation before a destructive action.

The gateway runs on a real socket with HTTP tools calling a real local API; the model is
a fake OpenAI upstream scripted turn by turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from e2e_chat_support import live_gateway, openai_upstream
from live import LiveServer
from platform_api import PlatformApi
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, tool_call

KEY = "tw-platform-user-key"
USER_TOKEN = "user-session-token-123"
HEADERS = {"Authorization": f"Bearer {KEY}", "X-Forwarded-Authorization": f"Bearer {USER_TOKEN}"}


def _http_tools(api: str) -> list[dict[str, Any]]:
    name_only = {
        "type": "object",
        "properties": {
            "app_name": {"type": "string", "description": "The name of the application"}
        },
        "required": ["app_name"],
    }
    return [
        {
            "name": "list_applications",
            "description": "List the user's applications.",
            "endpoint": f"{api}/api/applications",
            "method": "GET",
            "forward_auth": True,
        },
        {
            "name": "get_application",
            "description": "Get detailed information about a specific application.",
            "endpoint": f"{api}/api/applications/{{app_name}}",
            "method": "GET",
            "parameters": name_only,
            "forward_auth": True,
        },
        {
            "name": "delete_application",
            "description": "Delete an application and all its resources.",
            "endpoint": f"{api}/api/applications/{{app_name}}",
            "method": "DELETE",
            "parameters": name_only,
            "forward_auth": True,
            "effects": "destructive",
        },
    ]


@pytest.fixture
def platform() -> Iterator[tuple[PlatformApi, LiveServer]]:
    api = PlatformApi()
    with LiveServer(api.app()) as live:
        yield api, live


@pytest.fixture
def gateway(
    platform: tuple[PlatformApi, LiveServer], openai_server: FakeOpenAIServer
) -> Iterator[LiveServer]:
    config = config_with(
        upstream=openai_upstream(openai_server.base_url, {"claude": "claude-sonnet"}),
        server_tools={"http": _http_tools(platform[1].url)},
        keys=[{"name": "platform-user", "sha256": hashlib.sha256(KEY.encode()).hexdigest()}],
        store="memory",
    )
    with live_gateway(config) as live:
        yield live


def _chat(gateway: LiveServer, text: str) -> dict[str, Any]:
    with httpx.Client(base_url=gateway.url, headers=HEADERS, timeout=10) as http:
        response = http.post(
            "/v1/chat/completions",
            json={"model": "claude", "messages": [{"role": "user", "content": text}]},
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_list_my_applications_uses_the_users_token(
    gateway: LiveServer,
    platform: tuple[PlatformApi, LiveServer],
    openai_server: FakeOpenAIServer,
) -> None:
    api, _ = platform
    openai_server.reply(
        completion("I'll list your applications.", tool_calls=[tool_call("list_applications", {})]),
        completion("You have 3 applications:\n• demo-app (production) - 5 resources"),
    )
    body = _chat(gateway, "list my applications")

    assert body["choices"][0]["message"]["content"].endswith("5 resources")
    assert api.requests == [("GET", "/api/applications", f"Bearer {USER_TOKEN}")]
    tool_message = openai_server.requests[1].json["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "demo-app" in tool_message["content"]
    # The gateway key never reaches the platform API.
    assert KEY not in json.dumps(api.requests)


def test_a_404_reaches_the_model_as_an_error_with_the_apis_message(
    gateway: LiveServer,
    platform: tuple[PlatformApi, LiveServer],
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(
        completion(
            None, tool_calls=[tool_call("get_application", {"app_name": "nonexistent-app"})]
        ),
        completion("The application 'nonexistent-app' was not found."),
    )
    body = _chat(gateway, "tell me about nonexistent-app")

    assert "was not found" in body["choices"][0]["message"]["content"]
    [result] = body["toolwire"]["tool_calls"]
    assert result["result"]["success"] is False
    sent = openai_server.requests[1].json["messages"][-1]
    assert sent["role"] == "tool"
    assert "Application not found" in sent["content"]
    assert USER_TOKEN not in sent["content"]


def test_confirm_then_delete_sends_one_delete_and_the_model_reports_it(
    gateway: LiveServer,
    platform: tuple[PlatformApi, LiveServer],
    openai_server: FakeOpenAIServer,
) -> None:
    api, _ = platform
    openai_server.reply(
        completion(
            "This will delete demo-app and all its resources.",
            tool_calls=[tool_call("delete_application", {"app_name": "demo-app"}, id="toolu_1")],
        )
    )
    paused = _chat(gateway, "delete demo-app")

    extension = paused["toolwire"]
    assert extension["status"] == "awaiting_approval"
    [pending] = extension["pending_approvals"]
    assert pending["name"] == "delete_application"
    assert [m for m, _, _ in api.requests] == []  # nothing was sent yet

    with httpx.Client(base_url=gateway.url, headers=HEADERS, timeout=10) as http:
        # The user confirms ("yes").
        decided = http.post(f"/v1/approvals/{pending['id']}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        openai_server.reply(completion("Deleted demo-app and its 5 resources."))
        resumed = http.post(f"/v1/runs/{extension['run_id']}/resume")
        assert resumed.status_code == 200, resumed.text
        again = http.post(f"/v1/runs/{extension['run_id']}/resume")
        assert again.status_code == 409

    assert resumed.json()["choices"][0]["message"]["content"] == (
        "Deleted demo-app and its 5 resources."
    )
    deletes = [r for r in api.requests if r[0] == "DELETE"]
    assert deletes == [("DELETE", "/api/applications/demo-app", f"Bearer {USER_TOKEN}")]
    assert "demo-app" not in api.applications
    tool_message = openai_server.requests[-1].json["messages"][-1]
    assert tool_message["tool_call_id"] == "toolu_1"
    assert json.loads(tool_message["content"]) == {"deleted": "demo-app"}


def test_the_loop_stops_after_five_iterations(
    gateway: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    for i in range(5):
        openai_server.reply(
            completion(None, tool_calls=[tool_call("list_applications", {}, id=f"call_{i}")])
        )
    body = _chat(gateway, "keep listing")

    assert len(openai_server.requests) == 5
    assert body["toolwire"]["status"] == "max_iterations"
    assert "max_iterations=5" in body["choices"][0]["message"]["content"]
