"""`POST /v1/responses` on the direct path (no server tools), driven by the `openai` SDK.

The gateway runs on a real socket (uvicorn) in front of the fake OpenAI Chat Completions
server; the client is the SDK's `responses` API, streamed and not. The assertions look
at what the client gets (and what the SDK's own stream accumulator rebuilds) and at what
the gateway sent upstream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from e2e_chat_support import ENVIRON, UPSTREAM_SECRET, openai_upstream
from live import LiveServer
from openai.types.responses import ResponseOutputMessage
from responses_support import (
    ALICE,
    BOB,
    KEYS,
    MODEL,
    TIME,
    WEATHER,
    async_sdk,
    call_output,
    delete,
    event_types,
    function_calls,
    openai_error,
    output_types,
    post,
    raw_events,
    sdk,
)
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, dropped, error, sse, tool_call
from toolwire.server import create_app

USAGE = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    config = config_with(
        upstream=openai_upstream(_openai_server_session.base_url, {MODEL: "gpt-4o"}),
        keys=KEYS,
        store="memory",
    )
    with LiveServer(create_app(config, environ=ENVIRON)) as live:
        yield live


@pytest.fixture
def client(server: LiveServer) -> Iterator[openai.OpenAI]:
    """alice's client."""
    with sdk(server, ALICE) as alice:
        yield alice


def _text_sse(*pieces: str, finish: str = "stop") -> Any:
    # Apart in time, so that each piece reaches the client as its own delta.
    events = [*(delta(p) for p in pieces), delta(finish_reason=finish), delta(usage=USAGE)]
    return sse(events, interval=0.02)


def _weather_call_sse(call_id: str = "call_w", city: str = "Oslo") -> Any:
    arguments = json.dumps({"city": city})
    return sse(
        [
            delta(
                tool_calls=[
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": arguments[:5]},
                    }
                ]
            ),
            delta(tool_calls=[{"index": 0, "function": {"arguments": arguments[5:]}}]),
            delta(finish_reason="tool_calls"),
        ],
        interval=0.02,
    )


def _upstream_messages(openai_server: FakeOpenAIServer) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = openai_server.requests[-1].json["messages"]
    return sent


# --- a plain answer ---------------------------------------------------------------------------


def test_a_plain_answer(client: openai.OpenAI, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion("Hello!", usage=USAGE))
    response = client.responses.create(
        model=MODEL, input="Hi", instructions="Be brief.", temperature=0.3, max_output_tokens=50
    )
    assert response.id.startswith("resp_")
    assert (response.object, response.status, response.model) == ("response", "completed", MODEL)
    assert response.output_text == "Hello!"
    [message] = response.output
    assert isinstance(message, ResponseOutputMessage)
    assert (message.role, message.status) == ("assistant", "completed")
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 4)
    assert response.usage.total_tokens == 15
    assert response.usage.input_tokens_details.cached_tokens == 0
    assert (response.instructions, response.temperature, response.max_output_tokens) == (
        "Be brief.",
        0.3,
        50,
    )
    sent = openai_server.requests[-1].json
    assert sent["model"] == "gpt-4o"
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert (sent["temperature"], sent["max_tokens"]) == (0.3, 50)


def test_a_streamed_answer_on_the_wire(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(_text_sse("Hel", "lo"))
    _, events = raw_events(server, {"model": MODEL, "input": "Hi"}, key=ALICE)
    assert event_types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    created, final = events[0]["response"], events[-1]["response"]
    assert (created["status"], created["output"]) == ("in_progress", [])
    assert created["id"] == final["id"]
    assert [e["delta"] for e in events if e["type"] == "response.output_text.delta"] == [
        "Hel",
        "lo",
    ]
    item_id = events[2]["item"]["id"]
    assert all(e["item_id"] == item_id for e in events[3:8])
    assert events[6]["text"] == "Hello"
    assert final["status"] == "completed"
    assert final["output"] == [events[8]["item"]]
    assert final["output"][0]["content"][0]["text"] == "Hello"
    assert final["usage"]["total_tokens"] == 15


def test_the_sdk_stream_helper_rebuilds_the_response(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(_text_sse("Bon", "jour"))
    with client.responses.stream(model=MODEL, input="Hi") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert deltas == ["Bon", "jour"]
    assert final.output_text == "Bonjour"
    stored = client.responses.retrieve(final.id)
    assert stored.model_dump() == final.model_dump(
        exclude={"output": {0: {"content": {0: {"parsed"}}}}}
    )


async def test_async_streaming(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(_text_sse("a", "b"))
    async with async_sdk(server, ALICE) as client:
        stream = await client.responses.create(model=MODEL, input="x", stream=True)
        types = [event.type async for event in stream]
    assert types[0] == "response.created"
    assert types[-1] == "response.completed"


# --- client tools -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_tool_round_trip_through_previous_response_id(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    if stream:
        openai_server.reply(_weather_call_sse())
        with client.responses.stream(model=MODEL, input="Weather in Oslo?", tools=[WEATHER]) as s:
            argument_deltas = [
                e.delta for e in s if e.type == "response.function_call_arguments.delta"
            ]
            first = s.get_final_response()
        assert "".join(argument_deltas) == '{"city": "Oslo"}'
        assert len(argument_deltas) == 2  # streamed as the upstream wrote them
    else:
        openai_server.reply(
            completion(tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="call_w")])
        )
        first = client.responses.create(model=MODEL, input="Weather in Oslo?", tools=[WEATHER])
    assert first.status == "completed"
    assert function_calls(first) == [("call_w", "get_weather", {"city": "Oslo"})]
    assert [t.name for t in first.tools if t.type == "function"] == ["get_weather"]

    openai_server.reply(completion("Sunny in Oslo."))
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[call_output("call_w", "sunny, 21°C")],
        tools=[WEATHER],
    )
    assert second.output_text == "Sunny in Oslo."
    assert second.previous_response_id == first.id
    sent = _upstream_messages(openai_server)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == "call_w"
    assert sent[2] == {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21°C"}


def test_a_client_tool_round_trip_sending_the_whole_conversation(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(
            "Let me look.",
            tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="call_w")],
        )
    )
    first = client.responses.create(
        model=MODEL, input="Weather in Oslo?", tools=[WEATHER], store=False
    )
    assert output_types(first) == ["message", "function_call"]
    openai_server.reply(completion("Sunny."))
    history: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    second = client.responses.create(
        model=MODEL,
        input=[*history, call_output("call_w", "sunny")],
        tools=[WEATHER],
        store=False,
    )
    assert second.output_text == "Sunny."
    sent = _upstream_messages(openai_server)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["content"] == "Let me look."
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_parallel_client_calls(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(
            tool_calls=[
                tool_call("get_weather", {"city": "Oslo"}, id="call_w"),
                tool_call("get_time", {"city": "Oslo"}, id="call_t"),
            ]
        )
    )
    first = client.responses.create(
        model=MODEL,
        input="Weather and time in Oslo?",
        tools=[WEATHER, TIME],
        parallel_tool_calls=True,
    )
    assert [c[:2] for c in function_calls(first)] == [
        ("call_w", "get_weather"),
        ("call_t", "get_time"),
    ]
    assert openai_server.requests[-1].json["parallel_tool_calls"] is True

    # Every call needs its output.
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model=MODEL, previous_response_id=first.id, input=[call_output("call_w", "sun")]
        )
    assert caught.value.code == "missing_tool_result"
    assert caught.value.param == "input"
    assert "call_t" in caught.value.message

    openai_server.reply(completion("Sunny, and it is noon."))
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[call_output("call_t", "12:00"), call_output("call_w", "sun")],
    )
    assert second.output_text == "Sunny, and it is noon."
    sent = _upstream_messages(openai_server)
    assert [(m["role"], m.get("tool_call_id")) for m in sent[1:]] == [
        ("assistant", None),
        ("tool", "call_w"),
        ("tool", "call_t"),
    ]


def test_parallel_calls_streamed_on_the_wire(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        sse(
            [
                delta("Checking both."),
                delta(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_w",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                        }
                    ]
                ),
                delta(
                    tool_calls=[
                        {
                            "index": 1,
                            "id": "call_t",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": '{"city": "Oslo"}'},
                        }
                    ]
                ),
                delta(finish_reason="tool_calls"),
            ]
        )
    )
    body = {"model": MODEL, "input": "Both?", "tools": [WEATHER, TIME]}
    _, events = raw_events(server, body, key=ALICE)
    assert event_types(events)[2:] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]["response"]
    assert [(i["type"], i.get("call_id")) for i in final["output"]] == [
        ("message", None),
        ("function_call", "call_w"),
        ("function_call", "call_t"),
    ]
    assert {e["output_index"] for e in events if e["type"] == "response.output_item.done"} == {
        0,
        1,
        2,
    }


# --- what the model may not finish ------------------------------------------------------------


def test_a_cut_short_answer_is_incomplete(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("It was a dark and", finish_reason="length"))
    response = client.responses.create(model=MODEL, input="A story", max_output_tokens=5)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output[0].status == "incomplete"  # type: ignore[union-attr]

    openai_server.reply(_text_sse("It was", finish="length"))
    _, events = raw_events(server, {"model": MODEL, "input": "A story"}, key=ALICE)
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_an_upstream_that_fails_mid_stream_ends_with_response_failed(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(dropped([delta("Hel")]))
    _, events = raw_events(server, {"model": MODEL, "input": "Hi"}, key=ALICE)
    assert event_types(events)[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    failed = events[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "server_error"
    assert UPSTREAM_SECRET not in json.dumps(events)


# --- errors -----------------------------------------------------------------------------------


def test_errors_are_the_sdks_exception_classes(client: openai.OpenAI, server: LiveServer) -> None:
    with pytest.raises(openai.NotFoundError) as not_found:
        client.responses.create(model="nope", input="x")
    assert not_found.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, input=[{"role": "user", "content": 5}])  # type: ignore[list-item]
    assert bad.value.param == "input[0].content"
    with pytest.raises(openai.NotFoundError) as previous:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_nope")
    assert previous.value.param == "previous_response_id"
    with sdk(server, "wrong") as stranger, pytest.raises(openai.AuthenticationError):
        stranger.responses.create(model=MODEL, input="x")
    with pytest.raises(openai.BadRequestError) as tools:
        client.responses.create(model=MODEL, input="x", tools=[{"type": "web_search"}])
    assert tools.value.param == "tools[0].type"


def test_errors_have_openais_shape(server: LiveServer) -> None:
    error = openai_error(post(server, {"model": MODEL}, key=ALICE), 400)
    assert error["param"] == "input"
    error = openai_error(post(server, None, key=ALICE, content=b"{nope"), 400)
    assert error["code"] == "invalid_json"
    error = openai_error(post(server, {"model": MODEL, "input": "x"}, key="wrong"), 401)
    assert error["code"] == "invalid_api_key"


def test_an_upstream_refusal_is_relayed_without_the_upstream_key(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(error(400, f"Bad key {UPSTREAM_SECRET} for this model", param="model"))
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input="x")
    assert UPSTREAM_SECRET not in caught.value.message
    assert "[redacted]" in caught.value.message
    openai_server.fail(3, 503)
    response = post(server, {"model": MODEL, "input": "x", "stream": True}, key=ALICE)
    assert openai_error(response, 502)["type"] == "upstream_error"


def test_orphan_outputs_are_dropped_and_reported(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("ok"))
    response = post(
        server,
        {"model": MODEL, "input": [{"role": "user", "content": "x"}, call_output("call_x", "?")]},
        key=ALICE,
    )
    assert response.status_code == 200, response.text
    assert response.headers["toolwire-dropped-tool-results"] == "call_x"
    assert [m["role"] for m in _upstream_messages(openai_server)] == ["user"]


def test_orphan_outputs_are_refused_in_strict_mode(openai_server: FakeOpenAIServer) -> None:
    config = config_with(
        upstream=openai_upstream(openai_server.base_url, {MODEL: "gpt-4o"}),
        strict_tool_results=True,
        store="memory",
    )
    with LiveServer(create_app(config, environ=ENVIRON)) as live:
        body = {"model": MODEL, "input": [{"role": "user", "content": "x"}, call_output("c", "?")]}
        error = openai_error(post(live, body), 400)
    assert (error["param"], error["code"]) == ("input[1].call_id", "orphan_tool_result")
    assert openai_server.requests == []


# --- stored responses -------------------------------------------------------------------------


def test_get_and_delete_a_stored_response(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Stored."))
    response = client.responses.create(model=MODEL, input="x", metadata={"topic": "tests"})
    got = client.responses.retrieve(response.id)
    assert got.model_dump() == response.model_dump()
    assert got.metadata == {"topic": "tests"}

    deleted = delete(server, response.id, ALICE)
    assert deleted.json() == {"id": response.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    assert openai_error(delete(server, response.id, ALICE), 404)["code"] == "response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL, input="more", previous_response_id=response.id)


def test_another_keys_responses_are_not_found(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Alice's."))
    response = client.responses.create(model=MODEL, input="x")
    with sdk(server, BOB) as bob:
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(response.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.create(model=MODEL, input="x", previous_response_id=response.id)
    assert openai_error(delete(server, response.id, BOB), 404)["code"] == "response_not_found"
    assert client.responses.retrieve(response.id).output_text == "Alice's."


def test_store_false_is_not_retrievable(
    client: openai.OpenAI, server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Not kept."))
    response = client.responses.create(model=MODEL, input="x", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


# --- the client going away --------------------------------------------------------------------


def test_a_client_leaving_mid_stream_closes_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse([delta(f"piece {i} ") for i in range(50)], interval=0.1))
    body = {"model": MODEL, "input": "Talk slowly.", "stream": True}
    with (
        httpx.Client(base_url=server.url, timeout=10) as http,
        http.stream(
            "POST", "/v1/responses", json=body, headers={"Authorization": f"Bearer {ALICE}"}
        ) as response,
    ):
        assert response.status_code == 200
        first = next(line for line in response.iter_lines() if line.startswith("data: "))
        assert json.loads(first[6:])["type"] == "response.created"
        # Leaving the block closes the connection mid-stream.
    assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
    assert openai_server.completed == 0


def test_a_client_leaving_before_a_whole_answer_closes_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse([delta("late"), delta(finish_reason="stop")], delay=20))
    with httpx.Client(base_url=server.url) as http, pytest.raises(httpx.ReadTimeout):
        http.post(
            "/v1/responses",
            json={"model": MODEL, "input": "x"},
            headers={"Authorization": f"Bearer {ALICE}"},
            timeout=httpx.Timeout(10, read=0.3),
        )
    assert openai_server.wait_until(lambda: openai_server.cancelled == 1)
