"""`POST /v1/runs/{id}/resume` answers in the protocol of the door the run started on:
a Messages message for a `/v1/messages` run, a response object continuing the paused
response (`previous_response_id`) for a `/v1/responses` run, a chat completion otherwise;
streamed and whole. Each answer is read with its official SDK's types."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from approval_tools import DELETED
from chat_support import native_upstream
from live import LiveServer
from messages_support import sdk as anthropic_sdk
from openai.types.chat import ChatCompletion
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall
from responses_support import ALICE, KEYS, MODEL
from responses_support import sdk as openai_sdk
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from toolwire.agent.state import RunState
from toolwire.server import create_app

DELETE = "Delete demo-app."
DONE = "demo-app has been deleted."


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


def _ask_delete(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        completion(
            "I'll delete demo-app.",
            tool_calls=[tool_call("delete_application", {"app_name": "demo-app"}, id="call_d")],
        )
    )


def _approve(server: LiveServer, approval_id: str) -> None:
    with httpx.Client(base_url=server.url, headers={"x-api-key": ALICE}, timeout=10) as http:
        decided = http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text


def _paused_message(server: LiveServer, openai_server: FakeOpenAIServer) -> tuple[str, str]:
    _ask_delete(openai_server)
    with anthropic_sdk(server, ALICE) as client:
        message = client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": DELETE}]
        )
    run = (message.model_extra or {})["toolwire"]
    assert run["status"] == "awaiting_approval"
    return run["run_id"], run["pending_approvals"][0]["id"]


def _paused_response(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> tuple[Response, str, str]:
    _ask_delete(openai_server)
    with openai_sdk(server, ALICE) as client:
        response = client.responses.create(
            model=MODEL, input=DELETE, instructions="You manage apps."
        )
    request = response.output[-1]
    assert isinstance(request, McpApprovalRequest)
    run_id = (response.model_extra or {})["toolwire"]["run_id"]
    return response, run_id, request.id


@pytest.mark.parametrize("stream", [False, True])
def test_a_messages_run_resumes_as_a_messages_answer(
    server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    run_id, approval_id = _paused_message(server, openai_server)
    _approve(server, approval_id)
    openai_server.reply(completion(DONE))
    with anthropic_sdk(server, ALICE) as client:
        if not stream:
            message = client.post(f"/v1/runs/{run_id}/resume", body={}, cast_to=Message)
            assert message.type == "message"
            assert message.role == "assistant"
            assert message.stop_reason == "end_turn"
            [block] = message.content
            assert block.type == "text"
            assert block.text.endswith(DONE)
            assert (message.model_extra or {})["toolwire"]["status"] == "completed"
        else:
            events = list(
                client.post(
                    f"/v1/runs/{run_id}/resume",
                    body={"stream": True},
                    cast_to=Message,
                    stream=True,
                    stream_cls=anthropic.Stream[RawMessageStreamEvent],
                )
            )
            kinds = [e.type for e in events]
            assert kinds[0] == "message_start"
            assert kinds[-2:] == ["message_delta", "message_stop"]
            text = "".join(
                e.delta.text
                for e in events
                if e.type == "content_block_delta" and e.delta.type == "text_delta"
            )
            assert text.endswith(DONE)
    assert DELETED == ["demo-app"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_run_resumes_as_a_response_that_continues_the_chain(
    server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    paused, run_id, approval_id = _paused_response(server, openai_server)
    _approve(server, approval_id)
    openai_server.reply(completion(DONE))
    with openai_sdk(server, ALICE) as client:
        if not stream:
            resumed = client.post(f"/runs/{run_id}/resume", body={}, cast_to=Response)
        else:
            events = list(
                client.post(
                    f"/runs/{run_id}/resume",
                    body={"stream": True},
                    cast_to=Response,
                    stream=True,
                    stream_cls=openai.Stream[ResponseStreamEvent],
                )
            )
            assert events[0].type == "response.created"
            last = events[-1]
            assert last.type == "response.completed"
            resumed = last.response
        assert resumed.object == "response"
        assert resumed.status == "completed"
        assert resumed.previous_response_id == paused.id
        assert resumed.instructions == "You manage apps."
        [call, _answer] = resumed.output
        assert isinstance(call, McpCall)
        assert call.approval_request_id == approval_id
        assert resumed.output_text == DONE
        # Kept as the next link: GET finds it, and a next turn continues from it.
        assert client.responses.retrieve(resumed.id).id == resumed.id
        openai_server.reply(completion("Nothing else to delete."))
        later = client.responses.create(
            model=MODEL, previous_response_id=resumed.id, input="Anything else?"
        )
    assert later.output_text == "Nothing else to delete."
    sent = [(m["role"], m.get("content")) for m in openai_server.last.json["messages"]]
    assert [role for role, _ in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[3][1] == DONE
    assert DELETED == ["demo-app"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_run_resumes_as_a_chat_completion(
    server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    _ask_delete(openai_server)
    with openai_sdk(server, ALICE) as client:
        first = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": DELETE}]
        )
        run: dict[str, Any] = (first.model_extra or {})["toolwire"]
        _approve(server, run["pending_approvals"][0]["id"])
        openai_server.reply(completion(DONE))
        path = f"/runs/{run['run_id']}/resume"
        if not stream:
            resumed = client.post(path, body={}, cast_to=ChatCompletion)
            assert resumed.object == "chat.completion"
            assert resumed.choices[0].message.content == DONE
        else:
            chunks = list(
                client.post(
                    path,
                    body={"stream": True},
                    cast_to=ChatCompletion,
                    stream=True,
                    stream_cls=openai.Stream[openai.types.chat.ChatCompletionChunk],
                )
            )
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text == DONE
            assert chunks[-1].choices[0].finish_reason == "stop"
    assert DELETED == ["demo-app"]


def test_a_run_keeps_its_door_and_an_older_state_reads_as_no_door() -> None:
    state = RunState(run_id="run_1", status="completed", output="", messages=[], door="messages")
    assert RunState.from_json(state.to_json()).door == "messages"
    older = {k: v for k, v in state.to_json().items() if k != "door"}
    # Resumed as a chat completion, as every run was before runs kept their door.
    assert RunState.from_json(older).door == ""


def test_a_responses_run_made_with_store_false_resumes_as_a_response_kept_nowhere(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _ask_delete(openai_server)
    with openai_sdk(server, ALICE) as client:
        paused = client.responses.create(model=MODEL, input=DELETE, store=False)
        request = paused.output[-1]
        assert isinstance(request, McpApprovalRequest)
        _approve(server, request.id)
        openai_server.reply(completion(DONE))
        run_id = (paused.model_extra or {})["toolwire"]["run_id"]
        resumed = client.post(f"/runs/{run_id}/resume", body={}, cast_to=Response)
        assert resumed.output_text == DONE
        assert (resumed.previous_response_id, resumed.store) == (None, False)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(resumed.id)
    assert DELETED == ["demo-app"]
