"""Approvals through the Responses API: a destructive server tool's call comes back as an
`mcp_approval_request` item (status `completed`, as OpenAI does); an
`mcp_approval_response` item with `previous_response_id` decides it, by the same rules
and with the same audit record as `POST /v1/approvals/{id}`, and the paused run goes on:
the call runs exactly once and the model's answer is the new response.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from approval_tools import DELETED
from chat_support import native_upstream
from live import LiveServer
from openai.types.responses import Response
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall
from responses_support import (
    ALICE,
    BOB,
    KEYS,
    MODEL,
    OPS,
    approval_response,
    event_types,
    output_types,
    raw_events,
    sdk,
)
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse, tool_call
from toolwire.server import create_app

DELETE = "Delete demo-app."


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    config = config_with(
        upstream=native_upstream(_openai_server_session.base_url),
        server_tools={"modules": ["approval_tools"]},
        keys=KEYS,
        store="memory",
    )
    with LiveServer(create_app(config, environ={})) as live:
        yield live


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    DELETED.clear()
    yield
    DELETED.clear()


def _ask_delete(openai_server: FakeOpenAIServer, tool: str = "delete_application") -> None:
    arguments = (
        {"app_name": "demo-app"}
        if tool == "delete_application"
        else {
            "cluster": "eu-1",
            "api_token": "tok-Sekr3t",
        }
    )
    openai_server.reply(
        completion("I'll do it.", tool_calls=[tool_call(tool, arguments, id="call_d")])
    )


def _paused(
    server: LiveServer, openai_server: FakeOpenAIServer, key: str = ALICE, **options: Any
) -> tuple[Response, McpApprovalRequest]:
    _ask_delete(openai_server, options.pop("tool", "delete_application"))
    with sdk(server, key) as client:
        response = client.responses.create(
            model=MODEL, input=DELETE, instructions="You manage apps.", **options
        )
    assert response.status == "completed"
    request = response.output[-1]
    assert isinstance(request, McpApprovalRequest)
    return response, request


def _answer(
    server: LiveServer,
    previous: Response,
    approval_id: str,
    approve: bool,
    key: str = ALICE,
    reason: str | None = None,
) -> Response:
    with sdk(server, key) as client:
        return client.responses.create(
            model=MODEL,
            previous_response_id=previous.id,
            input=[approval_response(approval_id, approve, reason)],
        )


def _http(server: LiveServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=10)


def test_a_destructive_call_comes_back_as_an_approval_request(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    response, request = _paused(server, openai_server)
    assert DELETED == []
    assert output_types(response) == ["message", "mcp_approval_request"]
    assert request.id.startswith("apr_")
    assert (request.server_label, request.name) == ("toolwire", "delete_application")
    assert json.loads(request.arguments) == {"app_name": "demo-app"}
    extension = (response.model_extra or {})["toolwire"]
    assert extension["status"] == "awaiting_approval"
    # The same approval as the HTTP approval API's.
    with _http(server, ALICE) as http:
        approval = http.get(f"/v1/approvals/{request.id}").json()
    assert (approval["status"], approval["run_id"]) == ("pending", extension["run_id"])
    assert approval["requested_by"] == "alice"


@pytest.mark.parametrize("stream", [False, True])
def test_approving_runs_the_call_once_and_the_answer_comes_back(
    server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    paused, request = _paused(server, openai_server)
    if stream:
        openai_server.reply(sse([delta("demo-app is gone."), delta(finish_reason="stop")]))
        with (
            sdk(server, ALICE) as client,
            client.responses.stream(
                model=MODEL,
                previous_response_id=paused.id,
                input=[approval_response(request.id, True)],
            ) as s,
        ):
            answer = s.get_final_response()
    else:
        openai_server.reply(completion("demo-app is gone."))
        answer = _answer(server, paused, request.id, True)
    assert DELETED == ["demo-app"]
    assert answer.output_text == "demo-app is gone."
    assert answer.previous_response_id == paused.id
    call = answer.output[0]
    assert isinstance(call, McpCall)
    assert (call.name, call.approval_request_id, call.status) == (
        "delete_application",
        request.id,
        "completed",
    )
    assert call.output == "Application demo-app deleted."
    # The model saw the result paired with its call, under the run's instructions.
    sent = openai_server.requests[-1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": "call_d",
        "content": "Application demo-app deleted.",
    }
    with _http(server, OPS) as http:
        approval = http.get(f"/v1/approvals/{request.id}").json()
        audit = http.get("/v1/audit", params={"run_id": approval["run_id"]}).json()["data"]
    assert (approval["status"], approval["decided_by"]) == ("used", "alice")
    # The decision, then the resume (who resumed, before anything ran), then the call.
    assert [r["outcome"] for r in audit if r["event"] == "finished"][-3:] == [
        "approval_approved",
        "run_resumed",
        "ok",
    ]

    # Answering again cannot run it twice.
    with pytest.raises(openai.ConflictError):
        _answer(server, paused, request.id, True)
    assert DELETED == ["demo-app"]

    # The conversation goes on from the answer, without the instructions.
    openai_server.reply(completion("You're welcome."))
    with sdk(server, ALICE) as client:
        client.responses.create(model=MODEL, previous_response_id=answer.id, input="Thanks!")
    sent = openai_server.requests[-1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]


def test_streamed_approval_request_on_the_wire(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _ask_delete(openai_server)
    _, events = raw_events(server, {"model": MODEL, "input": DELETE}, key=ALICE)
    assert event_types(events)[-3:] == [
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    item = events[-2]["item"]
    assert item["type"] == "mcp_approval_request"
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert final["output"][-1] == item


def test_denying_tells_the_model(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    paused, request = _paused(server, openai_server)
    openai_server.reply(completion("I left demo-app in place."))
    answer = _answer(server, paused, request.id, False, reason="not on a Friday")
    assert DELETED == []
    assert answer.output_text == "I left demo-app in place."
    call = answer.output[0]
    assert isinstance(call, McpCall)
    assert call.status == "failed"
    tool_message = openai_server.requests[-1].json["messages"][-1]
    assert tool_message["role"] == "tool"
    assert json.loads(tool_message["content"])["error"]["code"] == "denied"
    assert "not on a Friday" in tool_message["content"]


def test_a_decision_taken_through_the_approval_api_stands(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    paused, request = _paused(server, openai_server)
    with _http(server, ALICE) as http:
        decided = http.post(f"/v1/approvals/{request.id}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    # The other decision conflicts with it; the same one goes on.
    with pytest.raises(openai.ConflictError) as caught:
        _answer(server, paused, request.id, False)
    assert caught.value.code == "approval_not_pending"
    openai_server.reply(completion("Deleted."))
    assert _answer(server, paused, request.id, True).output_text == "Deleted."
    assert DELETED == ["demo-app"]


def test_who_may_decide(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    # bob's key may not approve (approve: none), even his own runs' calls.
    paused, request = _paused(server, openai_server, key=BOB)
    with pytest.raises(openai.PermissionDeniedError) as caught:
        _answer(server, paused, request.id, True, key=BOB)
    assert caught.value.code == "approval_forbidden"
    # drain_cluster must be approved by the ops key, not by alice who asked.
    paused, request = _paused(server, openai_server, tool="drain_cluster")
    with pytest.raises(openai.PermissionDeniedError) as caught:
        _answer(server, paused, request.id, True)
    assert "'ops'" in caught.value.message
    assert DELETED == []


def test_approval_mistakes(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    paused, request = _paused(server, openai_server)
    cases: list[tuple[dict[str, Any], str | None, str]] = [
        (
            {"input": [approval_response(request.id, True)]},
            "previous_response_id",
            "missing_previous_response",
        ),
        (
            {"previous_response_id": paused.id, "input": [approval_response("apr_nope", True)]},
            "input[0].approval_request_id",
            "unknown_approval_request",
        ),
        (
            {
                "previous_response_id": paused.id,
                "input": [approval_response(request.id, True), {"role": "user", "content": "and?"}],
            },
            "input[1]",
            "unexpected_input_item",
        ),
        ({"previous_response_id": paused.id, "input": "Never mind."}, "input", "approval_required"),
    ]
    for options, param, code in cases:
        with sdk(server, ALICE) as client, pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model=MODEL, **options)
        assert (caught.value.param, caught.value.code) == (param, code), options
    assert DELETED == []
    # Another key cannot even find the response to answer.
    with pytest.raises(openai.NotFoundError):
        _answer(server, paused, request.id, True, key=OPS)


def test_answering_one_of_two_approvals_at_a_time_runs_both_once(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    # Issue 22: the first answer's approval was used by a resume that was then refused
    # (the other one was pending); every retry got 409 and the client was stuck.
    openai_server.reply(
        completion(
            "Deleting both.",
            tool_calls=[
                tool_call("delete_application", {"app_name": "one"}, id="call_1"),
                tool_call("delete_application", {"app_name": "two"}, id="call_2"),
            ],
        )
    )
    with sdk(server, ALICE) as client:
        paused = client.responses.create(model=MODEL, input="Delete one and two.")
    first, second = (i for i in paused.output if isinstance(i, McpApprovalRequest))
    with pytest.raises(openai.ConflictError, match=second.id):
        _answer(server, paused, first.id, True)
    with _http(server, ALICE) as http:
        assert http.get(f"/v1/approvals/{first.id}").json()["status"] == "approved"
    assert DELETED == []
    # A retry of the same answer is refused the same way, and changes nothing either.
    with pytest.raises(openai.ConflictError, match=second.id):
        _answer(server, paused, first.id, True)

    openai_server.reply(completion("Both are gone."))
    answer = _answer(server, paused, second.id, True)
    assert answer.output_text == "Both are gone."
    assert sorted(DELETED) == ["one", "two"]
    with _http(server, ALICE) as http:
        statuses = [http.get(f"/v1/approvals/{a.id}").json()["status"] for a in (first, second)]
    assert statuses == ["used", "used"]
