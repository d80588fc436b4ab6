"""Approvals over HTTP: a destructive server tool pauses the run, a person decides through
`/v1/approvals`, `/v1/runs/{id}/resume` continues it; the call runs exactly once.

The gateway runs on a real socket in front of the fake OpenAI server; clients are the
`openai` SDK and httpx.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from approval_tools import DELETED
from chat_support import extensions, native_upstream, raw_stream, sdk
from live import LiveServer
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse, tool_call
from toolwire.server import create_app
from toolwire.store import ApprovalRecord, open_store

ALICE, BOB, OPS = "tw-alice", "tw-bob", "tw-ops"
MODEL = "gpt"
DELETE = [{"role": "user", "content": "Delete demo-app."}]


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _config(upstream_url: str, **extra: Any) -> Any:
    return config_with(
        upstream=native_upstream(upstream_url),
        server_tools={"modules": ["approval_tools"]},
        keys=[
            {"name": "alice", "sha256": _digest(ALICE)},
            {"name": "bob", "sha256": _digest(BOB), "approve": "none"},
            {"name": "ops", "sha256": _digest(OPS), "admin": True},
        ],
        **({"store": "memory"} | extra),
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


def _http(server: LiveServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=10)


def _ask_delete(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        completion(
            "I'll delete demo-app.",
            tool_calls=[tool_call("delete_application", {"app_name": "demo-app"}, id="call_d")],
        )
    )


def _paused(server: LiveServer, openai_server: FakeOpenAIServer, key: str = ALICE) -> Any:
    _ask_delete(openai_server)
    response = sdk(server, key).chat.completions.create(model=MODEL, messages=DELETE)
    extension = (response.model_extra or {})["toolwire"]
    assert extension["status"] == "awaiting_approval"
    return response, extension


def test_a_destructive_call_pauses_the_run_and_names_its_approval(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    response, extension = _paused(server, openai_server)

    assert DELETED == []
    assert response.choices[0].finish_reason == "stop"
    assert "delete_application" in (response.choices[0].message.content or "")
    [pending] = extension["pending_approvals"]
    assert pending["id"].startswith("apr_")
    assert pending["call_id"] == "call_d"
    assert pending["name"] == "delete_application"
    assert json.loads(pending["arguments"]) == {"app_name": "demo-app"}
    assert extension["run_id"].startswith("run_")

    with _http(server, ALICE) as http:
        listed = http.get("/v1/approvals", params={"status": "pending"}).json()["data"]
        assert [a["id"] for a in listed] == [pending["id"]]
        one = http.get(f"/v1/approvals/{pending['id']}").json()
        assert one["status"] == "pending"
        assert one["requested_by"] == "alice"
        assert one["run_id"] == extension["run_id"]
        run = http.get(f"/v1/runs/{extension['run_id']}").json()
        assert run["status"] == "awaiting_approval"
        assert run["pending_approvals"][0]["id"] == pending["id"]


def test_approve_then_resume_runs_the_call_once_and_the_model_reports_it(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _, extension = _paused(server, openai_server)
    approval_id = extension["pending_approvals"][0]["id"]
    run_id = extension["run_id"]

    with _http(server, ALICE) as http:
        decided = http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "approved"
        assert decided.json()["decided_by"] == "alice"
        again = http.post(f"/v1/approvals/{approval_id}", json={"decision": "deny"})
        assert again.status_code == 409
        assert "approved" in again.json()["error"]["message"]

        openai_server.reply(completion("demo-app has been deleted."))
        resumed = http.post(f"/v1/runs/{run_id}/resume", json={})
        assert resumed.status_code == 200, resumed.text
        body = resumed.json()
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"] == "demo-app has been deleted."
        assert body["toolwire"]["status"] == "completed"
        assert DELETED == ["demo-app"]

        # The model saw the tool's result, paired with its call.
        sent = openai_server.requests[-1].json["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
        assert sent[2]["tool_call_id"] == "call_d"
        assert sent[2]["content"] == "Application demo-app deleted."

        twice = http.post(f"/v1/runs/{run_id}/resume", json={})
        assert twice.status_code == 409
        assert DELETED == ["demo-app"]
        assert http.get(f"/v1/approvals/{approval_id}").json()["status"] == "used"
        assert http.get(f"/v1/runs/{run_id}").json()["status"] == "completed"


def test_a_denied_call_goes_to_the_model_as_denied(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _, extension = _paused(server, openai_server)
    approval_id = extension["pending_approvals"][0]["id"]
    with _http(server, ALICE) as http:
        decided = http.post(
            f"/v1/approvals/{approval_id}", json={"approve": False, "reason": "wrong app"}
        )
        assert decided.status_code == 200
        openai_server.reply(completion("I did not delete it."))
        resumed = http.post(f"/v1/runs/{extension['run_id']}/resume")
        assert resumed.status_code == 200, resumed.text
    assert DELETED == []
    tool_message = openai_server.requests[-1].json["messages"][-1]
    error = json.loads(tool_message["content"])["error"]
    assert error["code"] == "denied"
    assert "wrong app" in error["message"]


def test_resume_before_a_decision_is_409_and_the_run_still_waits(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _, extension = _paused(server, openai_server)
    run_id = extension["run_id"]
    with _http(server, ALICE) as http:
        early = http.post(f"/v1/runs/{run_id}/resume")
        assert early.status_code == 409
        assert "decision" in early.json()["error"]["message"]
        assert http.get(f"/v1/runs/{run_id}").json()["status"] == "awaiting_approval"
        approval_id = extension["pending_approvals"][0]["id"]
        assert http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"}).is_success
        openai_server.reply(completion("Done."))
        final = http.post(f"/v1/runs/{run_id}/resume")
        assert final.status_code == 200, final.text
    assert DELETED == ["demo-app"]


def test_who_may_see_and_decide(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    _, extension = _paused(server, openai_server)
    approval_id = extension["pending_approvals"][0]["id"]
    with _http(server, BOB) as bob:
        assert bob.get("/v1/approvals").json()["data"] == []
        assert bob.get(f"/v1/approvals/{approval_id}").status_code == 404
        refused = bob.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        assert refused.status_code in (403, 404)
        assert bob.get("/v1/audit").status_code == 403
    with _http(server, OPS) as ops:
        assert approval_id in [a["id"] for a in ops.get("/v1/approvals").json()["data"]]
        assert ops.post(f"/v1/approvals/{approval_id}", json={"decision": "deny"}).is_success


def test_bad_decisions_are_clear_errors(server: LiveServer) -> None:
    with _http(server, ALICE) as http:
        missing = http.post("/v1/approvals/apr_nope", json={"decision": "approve"})
        assert missing.status_code == 404
        assert "apr_nope" in missing.json()["error"]["message"]
        assert http.get("/v1/runs/run_nope").status_code == 404
        assert http.post("/v1/runs/run_nope/resume").status_code == 404
        bad = http.post("/v1/approvals/apr_nope", json={"decision": "maybe"})
        assert bad.status_code == 400
        assert http.get("/v1/approvals", params={"status": "soon"}).status_code == 400


def test_a_streamed_run_announces_the_approval_and_its_status(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        sse(
            [
                delta(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_s",
                            "type": "function",
                            "function": {
                                "name": "delete_application",
                                "arguments": '{"app_name": "api-gateway"}',
                            },
                        }
                    ]
                ),
                delta(finish_reason="tool_calls"),
            ]
        )
    )
    _, chunks = raw_stream(server, {"model": MODEL, "messages": DELETE}, key=ALICE)
    kinds = [e["type"] for e in extensions(chunks)]
    # The request is announced once it is stored (after the call's awaiting result).
    assert kinds == ["tool_call", "tool_result", "approval_required", "run_status"]
    required = extensions(chunks)[2]
    assert required["id"].startswith("apr_")
    assert required["call_id"] == "call_s"
    status = extensions(chunks)[-1]
    assert status["status"] == "awaiting_approval"
    assert status["pending_approvals"][0]["id"] == required["id"]
    assert DELETED == []


def test_the_audit_log_records_who_approved_what(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _, extension = _paused(server, openai_server)
    approval_id = extension["pending_approvals"][0]["id"]
    with _http(server, ALICE) as alice:
        alice.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        openai_server.reply(completion("Deleted."))
        alice.post(f"/v1/runs/{extension['run_id']}/resume")
    with _http(server, OPS) as ops:
        records = ops.get("/v1/audit", params={"tool": "delete_application", "limit": 1000}).json()[
            "data"
        ]
    mine = [r for r in records if r["run_id"] == extension["run_id"]]
    events = [(r["event"], r["outcome"]) for r in mine]
    assert ("started", None) in events
    assert ("finished", "ok") in events
    finished = next(r for r in mine if r["event"] == "finished" and r["outcome"] == "ok")
    assert finished["approved_by"] == "alice"
    assert finished["approval_id"] == approval_id
    assert finished["key_name"] == "alice"
    assert finished["arguments"] == {"app_name": "demo-app"}
    assert finished["arguments_hash"].startswith("sha256:")
    text = json.dumps(records)
    assert ALICE not in text
    assert OPS not in text


def test_a_streaming_client_can_wait_for_the_decision(
    openai_server: FakeOpenAIServer,
) -> None:
    config = _config(openai_server.base_url, approvals={"wait_seconds": 10})
    with LiveServer(create_app(config)) as live:
        _ask_delete(openai_server)
        openai_server.reply(completion("It is gone."))

        def approve_when_listed() -> None:
            with _http(live, ALICE) as http:
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
        _, chunks = raw_stream(live, {"model": MODEL, "messages": DELETE}, key=ALICE)
        approver.join()
    kinds = [e["type"] for e in extensions(chunks)]
    assert "approval_required" in kinds
    assert "run_status" not in kinds
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content.endswith("It is gone.")
    assert DELETED == ["demo-app"]


def test_a_tool_that_names_its_approver_is_decided_only_by_that_key(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    arguments = {"cluster": "eu-1", "api_token": "s3cret-token"}
    openai_server.reply(completion(tool_calls=[tool_call("drain_cluster", arguments)]))
    response = sdk(server, ALICE).chat.completions.create(model=MODEL, messages=DELETE)
    extension = (response.model_extra or {})["toolwire"]
    approval_id = extension["pending_approvals"][0]["id"]

    with _http(server, ALICE) as alice:
        refused = alice.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        assert refused.status_code == 403
        assert "'ops'" in refused.json()["error"]["message"]
    with _http(server, OPS) as ops:
        assert ops.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"}).is_success
    with _http(server, ALICE) as alice:
        openai_server.reply(completion("Drained."))
        assert alice.post(f"/v1/runs/{extension['run_id']}/resume").status_code == 200
    assert DELETED == ["cluster eu-1"]

    with _http(server, OPS) as ops:
        records = ops.get("/v1/audit", params={"run_id": extension["run_id"]}).json()["data"]
    ran = [r for r in records if r["event"] == "finished" and r["outcome"] == "ok"]
    assert ran[0]["arguments"] == {"cluster": "eu-1", "api_token": "[redacted]"}
    assert ran[0]["approved_by"] == "ops"
    assert "s3cret-token" not in json.dumps(records)


def test_an_expired_approval_cannot_be_decided_and_reaches_the_model_as_denied(
    openai_server: FakeOpenAIServer,
) -> None:
    config = _config(openai_server.base_url, approvals={"ttl": 0.3})
    with LiveServer(create_app(config)) as live:
        _, extension = _paused(live, openai_server)
        approval_id = extension["pending_approvals"][0]["id"]
        threading.Event().wait(0.4)
        with _http(live, ALICE) as http:
            assert http.get(f"/v1/approvals/{approval_id}").json()["status"] == "expired"
            late = http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
            assert late.status_code == 409
            assert "expired" in late.json()["error"]["message"]
            openai_server.reply(completion("The approval expired; nothing was deleted."))
            resumed = http.post(f"/v1/runs/{extension['run_id']}/resume")
            assert resumed.status_code == 200, resumed.text
    assert DELETED == []
    error = json.loads(openai_server.requests[-1].json["messages"][-1]["content"])["error"]
    assert error["code"] == "denied"
    assert "expired" in error["message"]


def test_a_client_call_beside_a_destructive_call_comes_back_after_the_approval(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    # Issue 22: the approval of a turn that also called a client tool was never stored
    # (404 in /v1/approvals), and the destructive call vanished from what went upstream.
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    openai_server.reply(
        completion(
            "On it.",
            tool_calls=[
                tool_call("delete_application", {"app_name": "demo-app"}, id="call_d"),
                tool_call("get_weather", {"city": "Lisbon"}, id="call_w"),
            ],
        )
    )
    ask = [{"role": "user", "content": "Delete demo-app and tell me the weather in Lisbon."}]
    first = sdk(server, ALICE).chat.completions.create(model=MODEL, messages=ask, tools=[weather])  # type: ignore[arg-type]
    extension = (first.model_extra or {})["toolwire"]
    assert extension["status"] == "awaiting_approval"
    [pending] = extension["pending_approvals"]
    with _http(server, ALICE) as http:
        assert http.get(f"/v1/approvals/{pending['id']}").json()["status"] == "pending"
        assert (
            http.post(f"/v1/approvals/{pending['id']}", json={"decision": "approve"}).status_code
            == 200
        )
        resumed = http.post(f"/v1/runs/{extension['run_id']}/resume", json={}).json()
    assert DELETED == ["demo-app"]
    # The client's own call comes back now, as an ordinary tool call.
    assert resumed["choices"][0]["finish_reason"] == "tool_calls"
    [call] = resumed["choices"][0]["message"]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_w", "get_weather")

    # The client answers it; upstream sees the whole turn, the server call included.
    openai_server.reply(completion("Deleted, and sunny in Lisbon."))
    history = [
        *ask,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_w", "content": "Sunny"},
    ]
    answer = sdk(server, ALICE).chat.completions.create(
        model=MODEL, messages=history, tools=[weather]
    )  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "Deleted, and sunny in Lisbon."
    sent = openai_server.requests[-1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_d", "call_w"]
    assert {(m["tool_call_id"], m["content"]) for m in sent[2:]} == {
        ("call_d", "Application demo-app deleted."),
        ("call_w", "Sunny"),
    }


def test_an_announced_approval_can_be_decided_the_moment_it_arrives(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    # Issue 24: a streamed approval_required carried an id before the approval was in the
    # store; a client acting on it at once got 404.
    for round in range(20):
        openai_server.reply(
            sse(
                [
                    delta(
                        tool_calls=[
                            {
                                "index": 0,
                                "id": f"call_{round}",
                                "type": "function",
                                "function": {
                                    "name": "delete_application",
                                    "arguments": json.dumps({"app_name": f"app{round}"}),
                                },
                            }
                        ]
                    ),
                    delta(finish_reason="tool_calls"),
                ]
            )
        )
        body = {"model": MODEL, "messages": DELETE, "stream": True}
        headers = {"Authorization": f"Bearer {ALICE}"}
        with (
            httpx.Client(base_url=server.url, timeout=10) as http,
            http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as stream,
            _http(server, ALICE) as reader,
        ):
            for line in stream.iter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line.removeprefix("data: "))
                extension = chunk.get("toolwire") or {}
                if extension.get("type") == "approval_required":
                    seen = reader.get(f"/v1/approvals/{extension['id']}")
                    assert seen.status_code == 200, seen.text
                    assert seen.json()["status"] == "pending"
                    break
            else:
                pytest.fail("no approval_required event")
    assert DELETED == []


def test_approvals_page_past_a_thousand(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    store_url = f"sqlite:///{tmp_path / 'state.db'}"

    async def fill() -> None:
        store = open_store(store_url)
        await store.open()
        now = time.time()
        await store.add_approvals(
            [
                ApprovalRecord(
                    id=f"apr_{i:05d}",
                    run_id="run_x",
                    call_id=f"call_{i}",
                    tool="delete_application",
                    arguments="{}",
                    arguments_hash="sha256:x",
                    requested_by="alice",
                    created_at=now - i // 2,  # ties: the cursor must split them by id
                    expires_at=now + 3600,
                )
                for i in range(1050)
            ]
        )
        await store.aclose()

    asyncio.run(fill())
    with (
        LiveServer(create_app(_config(openai_server.base_url, store=store_url))) as live,
        _http(live, ALICE) as http,
    ):
        seen: list[str] = []
        params: dict[str, Any] = {"limit": 1000}
        while True:
            page = http.get("/v1/approvals", params=params).json()
            seen += [a["id"] for a in page["data"]]
            if not page["has_more"]:
                break
            params["after"] = page["last_id"]
        bad = http.get("/v1/approvals", params={"after": "apr_nope"})
    assert len(seen) == 1050
    assert len(set(seen)) == 1050
    assert (bad.status_code, bad.json()["error"]["param"]) == (400, "after")
