"""Approvals behind `POST /v1/messages`: a destructive server tool pauses the run; the
message ends with the explanation as text and the run id and pending approvals in its
`toolwire` field (streams: `toolwire` events); the approval API decides, and
`/v1/runs/{id}/resume` runs the call exactly once."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from approval_tools import DELETED
from chat_support import native_upstream
from live import LiveServer
from messages_support import MODEL, check_grammar, raw_events, sdk, text_of, user
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from toolwire.server import create_app

ALICE = "tw-alice"
DELETE = user("Delete demo-app.")


def _config(upstream_url: str, **extra: Any) -> Any:
    return config_with(
        upstream=native_upstream(upstream_url),
        server_tools={"modules": ["approval_tools"]},
        keys=[
            {"name": "alice", "sha256": hashlib.sha256(ALICE.encode()).hexdigest()},
            # drain_cluster's approver: a tool's approver must be a configured key.
            {"name": "ops", "sha256": hashlib.sha256(b"tw-ops").hexdigest(), "admin": True},
        ],
        store="memory",
        **extra,
    )


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    with LiveServer(create_app(_config(_openai_server_session.base_url))) as live:
        yield live


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    DELETED.clear()
    yield
    DELETED.clear()


def _ask_delete(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        completion(
            "I'll delete demo-app.",
            tool_calls=[tool_call("delete_application", {"app_name": "demo-app"}, id="call_d")],
        )
    )


def _http(server: LiveServer) -> httpx.Client:
    # The approval API takes the gateway key as x-api-key too.
    return httpx.Client(base_url=server.url, headers={"x-api-key": ALICE}, timeout=10)


def test_a_paused_run_ends_the_message_with_its_approvals_then_resumes(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _ask_delete(openai_server)
    with sdk(server, ALICE) as client:
        message = client.messages.create(model=MODEL, max_tokens=100, messages=DELETE)
    assert DELETED == []
    assert message.stop_reason == "end_turn"
    assert [b.type for b in message.content] == ["text"]
    text = text_of(message)
    assert text.startswith("I'll delete demo-app.\n\n")
    assert "Waiting for approval to run delete_application" in text
    run = (message.model_extra or {})["toolwire"]
    assert run["status"] == "awaiting_approval"
    assert run["run_id"].startswith("run_")
    [pending] = run["pending_approvals"]
    assert pending["id"].startswith("apr_")
    assert (pending["call_id"], pending["name"]) == ("call_d", "delete_application")
    assert json.loads(pending["arguments"]) == {"app_name": "demo-app"}

    with _http(server) as http:
        decided = http.post(f"/v1/approvals/{pending['id']}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["decided_by"] == "alice"
        openai_server.reply(completion("demo-app has been deleted."))
        resumed = http.post(f"/v1/runs/{run['run_id']}/resume", json={})
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["toolwire"]["status"] == "completed"
    assert DELETED == ["demo-app"]
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["content"] == "Application demo-app deleted."


def test_a_streamed_pause_announces_the_approval_and_the_run_status(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _ask_delete(openai_server)
    _, events = raw_events(
        server, {"model": MODEL, "max_tokens": 100, "messages": DELETE}, key=ALICE
    )
    [block] = check_grammar(events)
    assert block["type"] == "text"
    assert "Waiting for approval" in block["text"]
    extensions = [data["toolwire"] for name, data in events if name == "toolwire"]
    assert [e["type"] for e in extensions] == [
        "tool_call",
        "tool_result",
        "approval_required",
        "run_status",
    ]
    required, status = extensions[2], extensions[-1]
    assert required["id"].startswith("apr_")
    assert status["status"] == "awaiting_approval"
    assert status["pending_approvals"][0]["id"] == required["id"]
    assert "tool_calls" not in status
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert DELETED == []


def test_a_streaming_client_can_wait_for_the_decision(openai_server: FakeOpenAIServer) -> None:
    config = _config(openai_server.base_url, approvals={"wait_seconds": 10})
    with LiveServer(create_app(config)) as live:
        _ask_delete(openai_server)
        openai_server.reply(completion("It is gone."))

        def approve_when_listed() -> None:
            with _http(live) as http:
                for _ in range(200):
                    pending = http.get("/v1/approvals", params={"status": "pending"}).json()
                    if pending["data"]:
                        http.post(
                            f"/v1/approvals/{pending['data'][0]['id']}",
                            json={"decision": "approve"},
                        )
                        return
                    threading.Event().wait(0.05)

        approver = threading.Thread(target=approve_when_listed)
        approver.start()
        with (
            sdk(live, ALICE) as client,
            client.messages.stream(model=MODEL, max_tokens=100, messages=DELETE) as stream,
        ):
            final = stream.get_final_message()
        approver.join()
    assert text_of(final) == "I'll delete demo-app.\n\nIt is gone."
    assert final.stop_reason == "end_turn"
    assert DELETED == ["demo-app"]
