"""`/v1/chat/completions` on the direct path (no server tools), driven by the `openai` SDK.

The gateway runs on a real socket (uvicorn) in front of the fake OpenAI server, with
`tool_calls: native`: the upstream's answers, client tool calls included, go back to the
client as they are, streamed deltas forwarded as they arrive and re-indexed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from chat_support import (
    BOOK_FLIGHT,
    MODEL,
    UPSTREAM_MODEL,
    WEATHER,
    async_sdk,
    finish_reasons,
    function_calls,
    function_tool,
    native_upstream,
    raw_stream,
    sdk,
    streamed_content,
    streamed_tool_calls,
)
from live import LiveServer
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolChoiceOptionParam
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse, tool_call
from toolwire.server import create_app

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Weather in Lisbon?"}]


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    upstream = native_upstream(_openai_server_session.base_url)
    # A Mistral-family route too: its upstream accepts only nine-character call ids.
    upstream["models"] = {MODEL: UPSTREAM_MODEL, "mistral": "mistral-large-latest"}
    app = create_app(config_with(upstream=upstream), environ={})
    with LiveServer(app) as live:
        yield live


def _start(
    index: int, call_id: str | None, name: str | None, arguments: str = ""
) -> dict[str, Any]:
    call: dict[str, Any] = {
        "index": index,
        "type": "function",
        "function": {"arguments": arguments},
    }
    if call_id is not None:
        call["id"] = call_id
    if name is not None:
        call["function"]["name"] = name
    return call


def _args(index: int, text: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": text}}


# --- plain answers -------------------------------------------------------------------------


def test_create_returns_the_upstream_answer(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion("Sunny, 24 °C.", usage={"prompt_tokens": 12, "completion_tokens": 5})
    )
    with sdk(server) as client:
        response = client.chat.completions.create(model=MODEL, messages=USER)
    choice = response.choices[0]
    assert choice.message.content == "Sunny, 24 °C."
    assert choice.message.role == "assistant"
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert response.model == MODEL
    assert response.object == "chat.completion"
    assert response.id.startswith("chatcmpl-")
    assert response.usage is not None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 5)
    assert response.usage.total_tokens == 17
    # No toolwire extension on the direct path.
    assert "toolwire" not in (response.model_extra or {})
    sent = openai_server.last.json
    assert sent["model"] == UPSTREAM_MODEL
    assert sent["messages"] == [{"role": "user", "content": "Weather in Lisbon?"}]
    assert "tools" not in sent
    assert not sent.get("stream")


def test_stream_forwards_content_and_usage(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        sse(
            [
                delta("Sun"),
                delta("ny, "),
                delta("24 °C."),
                delta(finish_reason="stop"),
                delta(usage={"prompt_tokens": 12, "completion_tokens": 5}),
            ]
        )
    )
    with sdk(server) as client:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Sunny, 24 °C."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert len({c.id for c in chunks}) == 1
    assert all(c.model == MODEL for c in chunks)
    # The usage chunk comes last, with no choices, as OpenAI sends it.
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (12, 5)
    assert openai_server.last.json["stream"] is True


def test_a_stream_passes_through_chunk_for_chunk(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    # All of it in one read of the gateway's: still one chunk out per chunk in, not
    # joined (a native route has no parser that must hold text back).
    text = [f"w{i} " for i in range(20)]
    calls = [_start(0, "call_a", "get_weather"), *(_args(0, c) for c in ['{"city"', ': "Oslo"}'])]
    events = [delta(t) for t in text] + [delta(tool_calls=[c]) for c in calls]
    openai_server.reply(sse([*events, delta(finish_reason="tool_calls")], split=1 << 20))
    _, chunks = raw_stream(server, {"model": MODEL, "messages": USER})
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert [d["content"] for d in deltas if d.get("content")] == text
    args = [d["tool_calls"][0]["function"]["arguments"] for d in deltas if d.get("tool_calls")]
    assert args == ["", '{"city"', ': "Oslo"}']


def test_stream_without_include_usage_has_no_usage_chunk(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse([delta("hi"), delta(finish_reason="stop")]))
    _, chunks = raw_stream(server, {"model": MODEL, "messages": USER})
    assert streamed_content(chunks) == "hi"
    assert finish_reasons(chunks) == ["stop"]
    assert all("usage" not in chunk for chunk in chunks)
    assert all(chunk["choices"] for chunk in chunks)


async def test_async_client_create_and_stream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion("one"),
        sse([delta("tw"), delta("o"), delta(finish_reason="stop")]),
    )
    async with async_sdk(server) as client:
        whole = await client.chat.completions.create(model=MODEL, messages=USER)
        stream = await client.chat.completions.create(model=MODEL, messages=USER, stream=True)
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert whole.choices[0].message.content == "one"
    assert "".join(parts) == "two"


# --- client tools --------------------------------------------------------------------------


def test_client_tool_call_is_returned_not_executed(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, id="call_w1")])
    )
    with sdk(server) as client:
        response = client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER])
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = function_calls(choice.message)
    assert call.id == "call_w1"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Lisbon"}
    # One upstream request: the gateway handed the call back instead of running anything.
    assert len(openai_server.requests) == 1
    sent = openai_server.last.json
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]
    assert sent["tools"][0]["function"]["parameters"] == WEATHER["function"].get("parameters")


def test_parallel_client_calls_keep_their_ids_and_order(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(
            content="Checking both.",
            tool_calls=[
                tool_call("get_weather", {"city": "Lisbon"}, id="call_a"),
                tool_call("book_flight", {"city": "Porto"}, id="call_b"),
            ],
        )
    )
    with sdk(server) as client:
        response = client.chat.completions.create(
            model=MODEL, messages=USER, tools=[WEATHER, BOOK_FLIGHT], parallel_tool_calls=True
        )
    message = response.choices[0].message
    assert response.choices[0].finish_reason == "tool_calls"
    assert message.content == "Checking both."
    calls = function_calls(message)
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_a", "get_weather", {"city": "Lisbon"}),
        ("call_b", "book_flight", {"city": "Porto"}),
    ]


@pytest.mark.parametrize(
    ("choice", "upstream"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (
            {"type": "function", "function": {"name": "book_flight"}},
            {"type": "function", "function": {"name": "book_flight"}},
        ),
    ],
)
@pytest.mark.parametrize("parallel", [True, False])
def test_tool_choice_and_parallel_tool_calls_reach_the_upstream(
    server: LiveServer,
    openai_server: FakeOpenAIServer,
    choice: ChatCompletionToolChoiceOptionParam,
    upstream: Any,
    parallel: bool,
) -> None:
    openai_server.reply(completion("ok"))
    with sdk(server) as client:
        client.chat.completions.create(
            model=MODEL,
            messages=USER,
            tools=[WEATHER, BOOK_FLIGHT],
            tool_choice=choice,
            parallel_tool_calls=parallel,
        )
    sent = openai_server.last.json
    assert sent["tool_choice"] == upstream
    assert sent["parallel_tool_calls"] is parallel


def test_tool_choice_naming_an_unknown_tool_never_reaches_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    with sdk(server) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=USER,
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "book_flight"}},
        )
    assert info.value.param == "tool_choice.function.name"
    assert "get_weather" in info.value.message
    assert openai_server.requests == []


def test_sampling_and_other_fields_pass_through(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion('{"ok": true}'))
    with sdk(server) as client:
        client.chat.completions.create(
            model=MODEL,
            messages=USER,
            temperature=0.25,
            top_p=0.5,
            seed=7,
            stop=["\n\n", "END"],
            response_format={"type": "json_object"},
            max_completion_tokens=64,
            presence_penalty=0.5,
            user="user-42",
            extra_body={"top_k": 20},
        )
    sent = openai_server.last.json
    assert sent["temperature"] == 0.25
    assert sent["top_p"] == 0.5
    assert sent["seed"] == 7
    assert sent["stop"] == ["\n\n", "END"]
    assert sent["response_format"] == {"type": "json_object"}
    assert sent["max_tokens"] == 64
    assert sent["presence_penalty"] == 0.5
    assert sent["user"] == "user-42"
    assert sent["top_k"] == 20
    assert sent["model"] == UPSTREAM_MODEL


# --- streamed tool calls, assembled by the SDK ---------------------------------------------


def _split_args_stream() -> list[dict[str, Any]]:
    """Two calls whose arguments arrive one character per delta."""
    lisbon = json.dumps({"city": "Lisbon"})
    porto = json.dumps({"city": "Porto"})
    events = [delta(tool_calls=[_start(0, "call_a", "get_weather")])]
    events += [delta(tool_calls=[_args(0, ch)]) for ch in lisbon]
    events.append(delta(tool_calls=[_start(1, "call_b", "book_flight")]))
    events += [delta(tool_calls=[_args(1, ch)]) for ch in porto]
    events += [delta(finish_reason="tool_calls"), delta(usage={"prompt_tokens": 3})]
    return events


def _all_index_zero_stream() -> list[dict[str, Any]]:
    """Two calls an upstream sends both with index 0 (as some servers do)."""
    return [
        delta(tool_calls=[_start(0, "call_a", "get_weather")]),
        delta(tool_calls=[_args(0, '{"city": ')]),
        delta(tool_calls=[_args(0, '"Lisbon"}')]),
        delta(tool_calls=[_start(0, "call_b", "book_flight")]),
        delta(tool_calls=[_args(0, '{"ci')]),
        delta(tool_calls=[_args(0, 'ty": "Porto"}')]),
        delta(finish_reason="tool_calls"),
    ]


EXPECTED_CALLS = [
    ("call_a", "get_weather", {"city": "Lisbon"}),
    ("call_b", "book_flight", {"city": "Porto"}),
]


@pytest.mark.parametrize("events", [_split_args_stream, _all_index_zero_stream])
def test_stream_helper_assembles_streamed_tool_calls(
    server: LiveServer, openai_server: FakeOpenAIServer, events: Any
) -> None:
    # split=7 cuts the upstream's SSE lines anywhere, so the gateway reassembles them too.
    openai_server.reply(sse(events(), split=7))
    with (
        sdk(server) as client,
        client.chat.completions.stream(
            model=MODEL, messages=USER, tools=[WEATHER, BOOK_FLIGHT]
        ) as stream,
    ):
        done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == (
        EXPECTED_CALLS
    )
    # The SDK parsed each (strict) tool's arguments itself, and saw each call end once.
    assert [c.function.parsed_arguments for c in calls] == [a for _, _, a in EXPECTED_CALLS]
    assert [(e.index, e.name) for e in done] == [(0, "get_weather"), (1, "book_flight")]


@pytest.mark.parametrize("events", [_split_args_stream, _all_index_zero_stream])
def test_streamed_tool_call_deltas_have_distinct_indexes_on_the_wire(
    server: LiveServer, openai_server: FakeOpenAIServer, events: Any
) -> None:
    openai_server.reply(sse(events()))
    _, chunks = raw_stream(
        server, {"model": MODEL, "messages": USER, "tools": [WEATHER, BOOK_FLIGHT]}
    )
    deltas = streamed_tool_calls(chunks)
    starts = [d for d in deltas if "id" in d]
    assert [(d["index"], d["id"], d["function"]["name"]) for d in starts] == [
        (0, "call_a", "get_weather"),
        (1, "call_b", "book_flight"),
    ]
    assert all(d["type"] == "function" for d in starts)
    arguments = {0: "", 1: ""}
    for d in deltas:
        arguments[d["index"]] += d["function"].get("arguments", "")
    assert {i: json.loads(text) for i, text in arguments.items()} == {
        0: {"city": "Lisbon"},
        1: {"city": "Porto"},
    }
    # Deltas are forwarded as they came: more argument pieces than calls.
    assert len(deltas) > len(starts) + 1
    assert finish_reasons(chunks) == ["tool_calls"]


async def test_async_stream_helper_assembles_tool_calls(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse(_all_index_zero_stream()))
    async with (
        async_sdk(server) as client,
        client.chat.completions.stream(
            model=MODEL, messages=USER, tools=[WEATHER, BOOK_FLIGHT]
        ) as stream,
    ):
        final = await stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert calls is not None
    assert [(c.id, c.function.name, c.function.parsed_arguments) for c in calls] == EXPECTED_CALLS


# --- multi-turn transcripts ----------------------------------------------------------------


HISTORY: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Lisbon, then book Porto."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "book_flight", "arguments": '{"city": "Porto"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "Sunny"},
    {"role": "tool", "tool_call_id": "call_b", "content": "Booked"},
]


def test_tool_results_are_sent_upstream_paired_with_their_calls(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Sunny in Lisbon; your Porto flight is booked."))
    with sdk(server) as client:
        response = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=HISTORY, tools=[WEATHER, BOOK_FLIGHT]
        )
    assert "toolwire-dropped-tool-results" not in response.headers
    answer = response.parse()
    assert answer.choices[0].message.content == "Sunny in Lisbon; your Porto flight is booked."
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    calls = sent[2]["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("call_a", "get_weather"),
        ("call_b", "book_flight"),
    ]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"city": "Lisbon"},
        {"city": "Porto"},
    ]
    assert [(m["tool_call_id"], m["content"]) for m in sent[3:]] == [
        ("call_a", "Sunny"),
        ("call_b", "Booked"),
    ]


def test_call_ids_are_rewritten_for_a_mistral_upstream_and_mapped_back(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("get_weather", {"city": "Faro"}, id="Faro12345")])
    )
    with sdk(server) as client:
        response = client.chat.completions.create(
            model="mistral", messages=HISTORY, tools=[WEATHER, BOOK_FLIGHT]
        )
    sent = openai_server.last.json
    assert sent["model"] == "mistral-large-latest"
    calls = sent["messages"][2]["tool_calls"]
    ids = [c["id"] for c in calls]
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids)
    assert len(set(ids)) == 2
    # Each result still answers its own call.
    assert [(m["tool_call_id"], m["content"]) for m in sent["messages"][3:]] == [
        (ids[0], "Sunny"),
        (ids[1], "Booked"),
    ]
    # The upstream's new call keeps its id; the client never sees the rewritten ones.
    assert [c.id for c in function_calls(response.choices[0].message)] == ["Faro12345"]


def test_an_orphan_tool_result_is_dropped_and_named_in_a_header(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Done."))
    messages: list[ChatCompletionMessageParam] = [
        *HISTORY,
        {"role": "tool", "tool_call_id": "call_ghost", "content": "from nowhere"},
        {"role": "user", "content": "Thanks"},
    ]
    with sdk(server) as client:
        response = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, tools=[WEATHER, BOOK_FLIGHT]
        )
    assert response.headers["toolwire-dropped-tool-results"] == "call_ghost"
    assert response.parse().choices[0].message.content == "Done."
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert all(m.get("tool_call_id") != "call_ghost" for m in sent)


def test_an_orphan_result_is_reported_on_a_stream_too(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse([delta("ok"), delta(finish_reason="stop")]))
    messages = [*USER, {"role": "tool", "tool_call_id": "call_x", "content": "stray"}]
    response, chunks = raw_stream(server, {"model": MODEL, "messages": messages})
    assert response.headers["toolwire-dropped-tool-results"] == "call_x"
    assert streamed_content(chunks) == "ok"
    assert [m["role"] for m in openai_server.last.json["messages"]] == ["user"]


def test_a_call_without_its_result_is_refused_before_the_upstream(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    with sdk(server) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL, messages=[*HISTORY[:4], {"role": "user", "content": "and?"}]
        )
    assert info.value.status_code == 400
    assert "call_b" in info.value.message
    assert openai_server.requests == []


def test_client_tools_reach_the_upstream_as_declared_strict_included(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    loose = function_tool("lookup", {"q": {"type": "string"}}, strict=False)
    openai_server.reply(completion("ok"))
    with sdk(server) as client:
        client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER, loose])
    sent = openai_server.last.json["tools"]
    assert sent == [WEATHER, loose]
