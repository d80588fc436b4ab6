"""Transcripts that stay valid across providers, over a real socket: Mistral's nine-character
call ids, distinct indexes for parallel calls whatever the upstream numbered them, and the
strict `tool_request` dialect."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from e2e_chat_support import (
    TIME_TOOL,
    WEATHER_TOOL,
    function_calls,
    live_gateway,
    openai_error,
    openai_upstream,
    post_chat,
    sdk,
    sse_chunks,
    user,
)
from live import LiveServer
from openai.types.chat import ChatCompletion
from server_support import config_with

from fakes.openai_server import (
    FakeOpenAIServer,
    ReceivedRequest,
    Reply,
    calls_sse,
    completion,
    text_sse,
    tool_call,
)

_MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    models = {"gpt": "gpt-4o", "mistral": "mistral-large-latest"}
    upstream = openai_upstream(_openai_server_session.base_url, models, tool_call_ids="auto")
    with live_gateway(config_with(upstream=upstream)) as live:
        yield live


@pytest.fixture(scope="module")
def dialect_server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    upstream = openai_upstream(_openai_server_session.base_url, {"gpt": "gpt-4o"})
    with live_gateway(config_with(upstream=upstream, dialect="tool_request")) as live:
        yield live


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _streamed_starts(chunks: Sequence[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [
        (call["index"], call["id"], call["function"]["name"])
        for c in chunks
        if c.get("choices")
        for call in c["choices"][0]["delta"].get("tool_calls", [])
        if "id" in call
    ]


def _streamed_arguments(chunks: Sequence[dict[str, Any]]) -> dict[int, str]:
    out: dict[int, str] = {}
    for c in chunks:
        for call in c["choices"][0]["delta"].get("tool_calls", []) if c.get("choices") else []:
            out[call["index"]] = out.get(call["index"], "") + call["function"].get("arguments", "")
    return out


# --- Mistral ids ----------------------------------------------------------------------------

CLIENT_IDS = ("call_abc123def456ghi789", "call_2", "toolu_01XyZ-with.dots")


def _mistral_history() -> list[Any]:
    return [
        *user("Weather in Paris and Rome, time in Tokyo?"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _call(CLIENT_IDS[0], "get_weather", {"city": "Paris"}),
                _call(CLIENT_IDS[1], "get_weather", {"city": "Rome"}),
                _call(CLIENT_IDS[2], "get_time", {"city": "Tokyo"}),
            ],
        },
        # Results in another order than the calls: pairing is by id.
        {"role": "tool", "tool_call_id": CLIENT_IDS[2], "content": "21:00"},
        {"role": "tool", "tool_call_id": CLIENT_IDS[0], "content": "18C"},
        {"role": "tool", "tool_call_id": CLIENT_IDS[1], "content": "24C"},
    ]


def _reuse_an_upstream_id(request: ReceivedRequest) -> Reply:
    """Answer with a new call plus one reusing the id the upstream got for Paris."""
    paris = request.json["messages"][1]["tool_calls"][0]["id"]
    return completion(
        tool_calls=[
            tool_call("get_weather", {"city": "Paris"}, id=paris),
            tool_call("get_weather", {"city": "Oslo"}, id="Zx9Yw8Vu7"),
        ]
    )


def test_mistral_ids_are_nine_alphanumerics_and_consistent(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(_reuse_an_upstream_id)
    with sdk(server) as client:
        answer = client.chat.completions.create(
            model="mistral",
            messages=_mistral_history(),
            tools=[WEATHER_TOOL, TIME_TOOL],
        )
    sent = openai_server.last.json
    assert sent["model"] == "mistral-large-latest"
    calls = sent["messages"][1]["tool_calls"]
    upstream_ids = [c["id"] for c in calls]
    assert all(_MISTRAL_ID.fullmatch(i) for i in upstream_ids), upstream_ids
    assert len(set(upstream_ids)) == 3
    by_name = {json.loads(c["function"]["arguments"])["city"]: c["id"] for c in calls}
    results = [(m["tool_call_id"], m["content"]) for m in sent["messages"][2:]]
    assert results == [
        (by_name["Tokyo"], "21:00"),
        (by_name["Paris"], "18C"),
        (by_name["Rome"], "24C"),
    ]
    assert not any(i in json.dumps(sent) for i in CLIENT_IDS)
    # Back downstream: the id the client knows, and the upstream's new id as it is.
    returned = [c.id for c in answer.choices[0].message.tool_calls or []]
    assert returned == [CLIENT_IDS[0], "Zx9Yw8Vu7"]


def test_mistral_ids_are_stable_across_requests(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("ok"), completion("ok"))
    body = {"model": "mistral", "messages": _mistral_history(), "tools": [WEATHER_TOOL, TIME_TOOL]}
    post_chat(server, body)
    post_chat(server, body)
    first, second = (r.json["messages"] for r in openai_server.requests)
    assert first == second


def test_other_models_keep_the_clients_ids(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("ok"))
    body = {"model": "gpt", "messages": _mistral_history(), "tools": [WEATHER_TOOL, TIME_TOOL]}
    assert post_chat(server, body).status_code == 200
    sent = openai_server.last.json["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == list(CLIENT_IDS)


# --- parallel calls and their indexes -------------------------------------------------------

PARALLEL = [
    ("call_p", "get_weather", '{"city": "Paris"}'),
    ("call_r", "get_weather", '{"city": "Rome"}'),
    ("call_t", "get_time", '{"city": "Tokyo"}'),
]


@pytest.mark.parametrize("indexes", ["zero", [1, 2, 3], [0, 5, 9]], ids=str)
def test_parallel_calls_get_distinct_indexes(
    server: LiveServer, openai_server: FakeOpenAIServer, indexes: Any
) -> None:
    openai_server.reply(calls_sse(PARALLEL, indexes=indexes, chunk=4))
    body = {
        "model": "gpt",
        "messages": user("Weather in Paris and Rome, time in Tokyo?"),
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "stream": True,
    }
    chunks = sse_chunks(post_chat(server, body))
    assert _streamed_starts(chunks) == [
        (0, "call_p", "get_weather"),
        (1, "call_r", "get_weather"),
        (2, "call_t", "get_time"),
    ]
    arguments = _streamed_arguments(chunks)
    assert {i: json.loads(a) for i, a in arguments.items()} == {
        0: {"city": "Paris"},
        1: {"city": "Rome"},
        2: {"city": "Tokyo"},
    }
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
    assert finishes[-1] == "tool_calls"


def test_parallel_calls_at_index_zero_through_the_sdk(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(calls_sse(PARALLEL, indexes="zero", ids="every", chunk=3))
    with (
        sdk(server) as client,
        client.chat.completions.stream(
            model="gpt",
            messages=user("Weather in Paris and Rome, time in Tokyo?"),
            tools=[WEATHER_TOOL, TIME_TOOL],
        ) as stream,
    ):
        answer = stream.get_final_completion()
    calls = answer.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_p", "get_weather", {"city": "Paris"}),
        ("call_r", "get_weather", {"city": "Rome"}),
        ("call_t", "get_time", {"city": "Tokyo"}),
    ]


def test_parallel_calls_on_a_mistral_route_stream_back_with_their_ids(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    mistral_calls = [("aaaaaaaa1", *PARALLEL[0][1:]), ("bbbbbbbb2", *PARALLEL[1][1:])]
    openai_server.reply(calls_sse(mistral_calls, indexes="zero", chunk=5))
    body = {"model": "mistral", "messages": user(), "tools": [WEATHER_TOOL], "stream": True}
    chunks = sse_chunks(post_chat(server, body))
    assert _streamed_starts(chunks) == [
        (0, "aaaaaaaa1", "get_weather"),
        (1, "bbbbbbbb2", "get_weather"),
    ]


# --- the tool_request dialect ---------------------------------------------------------------

TOOL_REQUEST = {"tool_request": {"name": "get_weather", "arguments": {"city": "Paris"}}}


def test_tool_request_history_goes_upstream_as_a_call(
    dialect_server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("It is 18C in Paris."))
    messages = [
        *user(),
        {"role": "assistant", "content": json.dumps(TOOL_REQUEST)},
        {"role": "tool_result", "name": "get_weather", "content": "18C"},
    ]
    body = {"model": "gpt", "messages": messages, "tools": [WEATHER_TOOL]}
    response = post_chat(dialect_server, body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "It is 18C in Paris."
    assert "toolwire-dropped-tool-results" not in response.headers
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    (call,) = sent[1]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert not sent[1].get("content")
    assert sent[2]["tool_call_id"] == call["id"]
    assert sent[2]["content"] == "18C"


def test_tool_request_orphan_result_is_dropped(
    dialect_server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Hello."))
    messages = [
        *user("Hi"),
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "tool_result", "name": "get_weather", "content": "stale"},
        *user("Never mind."),
    ]
    response = post_chat(dialect_server, {"model": "gpt", "messages": messages})
    assert response.status_code == 200, response.text
    assert response.headers["toolwire-dropped-tool-results"] == "get_weather"
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "stale" not in json.dumps(sent)


def test_tool_request_left_pending_is_400(
    dialect_server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    messages = [*user(), {"role": "assistant", "content": json.dumps(TOOL_REQUEST)}, *user("?")]
    err = openai_error(post_chat(dialect_server, {"model": "gpt", "messages": messages}), 400)
    assert err["param"] == "messages[1].content"
    assert "tool_result" in err["message"]
    assert openai_server.requests == []


def test_tool_result_outside_the_dialect_is_refused(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    messages = [*user(), {"role": "tool_result", "name": "get_weather", "content": "18C"}]
    err = openai_error(post_chat(server, {"model": "gpt", "messages": messages}), 400)
    assert err["param"] == "messages[1].role"
    assert "dialect" in err["message"]
    assert openai_server.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_tool_request_answer_comes_back_as_a_tool_call(
    dialect_server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    answer_text = json.dumps(
        {"tool_request": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
    )
    openai_server.reply(text_sse(answer_text, chunk=6) if stream else completion(answer_text))
    answer: ChatCompletion
    with sdk(dialect_server) as client:
        if stream:
            with client.chat.completions.stream(
                model="gpt",
                messages=user("Weather in Oslo?"),
                tools=[WEATHER_TOOL],
            ) as events:
                answer = events.get_final_completion()
        else:
            answer = client.chat.completions.create(
                model="gpt",
                messages=user("Weather in Oslo?"),
                tools=[WEATHER_TOOL],
            )
    choice = answer.choices[0]
    assert not choice.message.content
    ((call_id, name, arguments),) = function_calls(answer)
    assert (name, arguments) == ("get_weather", {"city": "Oslo"})
    assert call_id
    assert choice.finish_reason == "tool_calls"


def test_prose_mentioning_tool_request_stays_text(
    dialect_server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    prose = 'To call a tool, write {"tool_request": {...}} on its own.'
    openai_server.reply(completion(prose))
    with sdk(dialect_server) as client:
        answer = client.chat.completions.create(
            model="gpt",
            messages=user("How do I call a tool?"),
            tools=[WEATHER_TOOL],
        )
    assert answer.choices[0].message.content == prose
    assert not answer.choices[0].message.tool_calls
    assert answer.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("call_id", "in_header"),
    [("a\r\nb", "a%0D%0Ab"), ("a\x00b", "a%00b"), ("日本", "%E6%97%A5%E6%9C%AC"), ("x,y", "x%2Cy")],
)
def test_an_orphan_id_that_is_no_header_value_is_encoded_in_the_header(
    server: LiveServer, openai_server: FakeOpenAIServer, call_id: str, in_header: str
) -> None:
    openai_server.reply(completion("Hello."))
    messages = [*user(), {"role": "tool", "tool_call_id": call_id, "content": "x"}, *user("?")]
    response = post_chat(server, {"model": "gpt", "messages": messages})
    assert response.status_code == 200, response.text
    assert response.headers["toolwire-dropped-tool-results"] == in_header
