"""`POST /v1/responses` on the agent path: the gateway has server tools and runs them.

Server tools show as `mcp_call` items (server label `toolwire`), client tools as
`function_call` items. The gateway runs on a real socket in front of the fake OpenAI
server; every upstream turn is scripted, and the assertions look at what the client gets
and at what the gateway sent upstream on each turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from chat_support import native_upstream
from live import LiveServer
from openai.types.responses.response_output_item import McpCall
from responses_support import (
    ALICE,
    BOB,
    KEYS,
    MODEL,
    WEATHER,
    call_output,
    event_types,
    function_calls,
    output_types,
    raw_events,
    sdk,
)
from server_support import TOOLS_MODULE, config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, dropped, sse, tool_call
from toolwire.server import create_app

SERVER_TOOLS = ["whoami", "add", "quarterly_report", "lookup_order"]


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    config = config_with(
        upstream=native_upstream(_openai_server_session.base_url),
        server_tools={"modules": [TOOLS_MODULE, "responses_tools"]},
        keys=KEYS,
        limits={"max_iterations": 2},
        store="memory",
    )
    with LiveServer(create_app(config, environ={})) as live:
        yield live


@pytest.fixture
def client(server: LiveServer) -> Iterator[openai.OpenAI]:
    """alice's client."""
    with sdk(server, ALICE) as alice:
        yield alice


def _add_then_answer(openai_server: FakeOpenAIServer, answer: str = "2 + 3 = 5.") -> None:
    openai_server.reply(
        completion("Adding.", tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="call_add")]),
        completion(answer),
    )


def _mcp_calls(output: list[Any]) -> list[McpCall]:
    return [item for item in output if isinstance(item, McpCall)]


def _sent(openai_server: FakeOpenAIServer, n: int = -1) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = openai_server.requests[n].json["messages"]
    return messages


def test_a_server_tool_runs_and_shows_as_an_mcp_call(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _add_then_answer(openai_server)
    response = client.responses.create(model=MODEL, input="What is 2 + 3?")
    assert response.status == "completed"
    assert output_types(response) == ["message", "mcp_call", "message"]
    [call] = _mcp_calls(response.output)
    assert (call.server_label, call.name, call.status) == ("toolwire", "add", "completed")
    assert json.loads(call.arguments) == {"a": 2, "b": 3}
    assert call.output == "5"
    # One message per model turn: what it said before the tool, then its answer.
    assert response.output_text == "Adding.2 + 3 = 5."
    assert (response.model_extra or {})["toolwire"] == {"status": "completed"}
    first, second = openai_server.requests
    assert [t["function"]["name"] for t in first.json["tools"]] == SERVER_TOOLS
    assert [m["role"] for m in second.json["messages"]] == ["user", "assistant", "tool"]
    assert second.json["messages"][2]["content"] == "5"


def test_a_streamed_run_on_the_wire(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        sse(
            [
                delta(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_add",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                        }
                    ]
                ),
                delta(finish_reason="tool_calls"),
            ]
        ),
        sse([delta("Five"), delta("."), delta(finish_reason="stop")], interval=0.02),
    )
    _, events = raw_events(server, {"model": MODEL, "input": "2 + 3?"}, key=ALICE)
    assert event_types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, done = events[2]["item"], events[7]["item"]
    assert added["type"] == done["type"] == "mcp_call"
    assert added["id"] == done["id"] == events[4]["item_id"]
    assert (added["status"], added["arguments"], added["output"]) == ("in_progress", "", None)
    assert events[4]["delta"] == events[5]["arguments"] == done["arguments"] == '{"a": 2, "b": 3}'
    assert (done["status"], done["output"]) == ("completed", "5")
    final = events[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["mcp_call", "message"]
    assert final["output"][1]["content"][0]["text"] == "Five."


def test_a_failed_server_call_streams_as_a_failed_mcp_call(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    bad = '{"a": "two", "b": 3}'
    call = {"index": 0, "id": "call_add", "type": "function"}
    openai_server.reply(
        sse(
            [
                delta(tool_calls=[{**call, "function": {"name": "add", "arguments": bad}}]),
                delta(finish_reason="tool_calls"),
            ]
        ),
        sse([delta("Sorry."), delta(finish_reason="stop")]),
    )
    _, events = raw_events(server, {"model": MODEL, "input": "2 + 3?"}, key=ALICE)
    kinds = event_types(events)
    assert kinds[2:8] == [
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.failed",
        "response.output_item.done",
    ]
    done = events[7]["item"]
    assert (done["status"], done["output"], done["arguments"]) == ("failed", None, bad)
    assert done["error"]["type"] == "mcp_tool_execution_error"
    assert events[-1]["response"]["output"][0] == done


def test_the_sdk_stream_helper_on_the_agent_path(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _add_then_answer(openai_server)
    with client.responses.stream(model=MODEL, input="2 + 3?") as stream:
        final = stream.get_final_response()
    assert output_types(final) == ["message", "mcp_call", "message"]
    assert final.output_text == "Adding.2 + 3 = 5."


def test_the_callers_key_reaches_the_tool(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("whoami", {}, id="call_who")]),
        completion("You are alice."),
    )
    response = client.responses.create(model=MODEL, input="Who am I?")
    [call] = _mcp_calls(response.output)
    assert call.output is not None
    assert json.loads(call.output)["principal"] == "alice"


def test_a_failing_tool_is_reported_to_the_model_and_the_client(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("lookup_order", {"order_id": "A1"}, id="call_o")]),
        completion("The order system is down; try again later."),
    )
    response = client.responses.create(model=MODEL, input="Where is order A1?")
    [call] = _mcp_calls(response.output)
    assert (call.status, call.output) == ("failed", None)
    assert call.error is not None
    assert "execution_error" in json.dumps(call.error.model_dump())
    assert response.output_text == "The order system is down; try again later."
    tool_message = _sent(openai_server)[2]
    assert tool_message["role"] == "tool"
    assert json.loads(tool_message["content"])["error"]["code"] == "execution_error"


def test_a_scoped_tool_refuses_a_key_without_the_scope(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("quarterly_report", {"quarter": "Q3"}, id="call_r")]),
        completion("You may not read it."),
    )
    with sdk(server, BOB) as client:
        response = client.responses.create(model=MODEL, input="Q3 report?")
    [call] = _mcp_calls(response.output)
    assert call.status == "failed"
    assert "forbidden" in json.dumps(call.error.model_dump() if call.error else None)


@pytest.mark.parametrize("stream", [False, True])
def test_a_server_and_a_client_call_in_one_turn_via_previous_response_id(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(
        completion(
            "Both at once.",
            tool_calls=[
                tool_call("add", {"a": 2, "b": 3}, id="call_add"),
                tool_call("get_weather", {"city": "Oslo"}, id="call_w"),
            ],
        )
    )
    if stream:
        with client.responses.stream(model=MODEL, input="2+3, and Oslo?", tools=[WEATHER]) as s:
            first = s.get_final_response()
    else:
        first = client.responses.create(model=MODEL, input="2+3, and Oslo?", tools=[WEATHER])
    assert output_types(first) == ["message", "mcp_call", "function_call"]
    assert function_calls(first) == [("call_w", "get_weather", {"city": "Oslo"})]
    assert (first.model_extra or {})["toolwire"]["status"] == "client_tool_calls"

    openai_server.reply(completion("5, and sunny in Oslo."))
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[call_output("call_w", "sunny")],
        tools=[WEATHER],
    )
    assert second.output_text == "5, and sunny in Oslo."
    # The follow-up shows the model both calls and both results.
    sent = _sent(openai_server)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_add", "call_w"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [
        ("call_add", "5"),
        ("call_w", "sunny"),
    ]


def test_a_server_and_a_client_call_in_one_turn_sending_the_whole_conversation(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(
            tool_calls=[
                tool_call("add", {"a": 2, "b": 3}, id="call_add2"),
                tool_call("get_weather", {"city": "Oslo"}, id="call_w2"),
            ]
        )
    )
    first = client.responses.create(model=MODEL, input="2+3, Oslo?", tools=[WEATHER], store=False)
    openai_server.reply(completion("Done."))
    history: list[Any] = [{"role": "user", "content": "2+3, Oslo?"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    client.responses.create(
        model=MODEL, input=[*history, call_output("call_w2", "sunny")], tools=[WEATHER], store=False
    )
    # The gateway put back the server call it made, from its memory of its own steps.
    sent = _sent(openai_server)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_add2", "call_w2"]
    assert [m["tool_call_id"] for m in sent[2:]] == ["call_add2", "call_w2"]


def test_a_run_stopped_by_max_iterations_explains_itself(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        *(completion(tool_calls=[tool_call("add", {"a": 1, "b": i}, id=f"c{i}")]) for i in range(2))
    )
    response = client.responses.create(model=MODEL, input="Keep adding.")
    assert output_types(response) == ["mcp_call", "mcp_call", "message"]
    assert "max_iterations=2" in response.output_text
    assert (response.model_extra or {})["toolwire"]["status"] == "max_iterations"


def test_an_upstream_failure_after_a_tool_ran_ends_the_stream_with_response_failed(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="call_add")]),
        dropped([delta("Fi")]),
    )
    openai_server.fail(5, 503)
    _, events = raw_events(server, {"model": MODEL, "input": "2 + 3?"}, key=ALICE)
    failed = events[-1]
    assert failed["type"] == "response.failed"
    assert [i["type"] for i in failed["response"]["output"]][:1] == ["mcp_call"]
    assert failed["response"]["error"]["message"]
