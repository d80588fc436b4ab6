"""Seed 001 (`001_55c1300f0399acf0.txt`): native (server) tools beside custom (client)
tools, and custom tools for a model without native tool calling.

- Native tools run server-side; the stream carries each `tool_call` and `tool_result`
  (toolwire's extension chunks) before the message that uses them.
- Custom tools come back to the client as OpenAI `tool_calls`.
- Both in one model turn: the server tool's result reaches the model — in the client's
  follow-up the gateway puts back the steps the client's transcript does not hold.
- A model without native tool calling writes `<pre>{json}</pre>` calls, which the
  gateway parses into `tool_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chat_support import extensions, raw_stream, sdk
from e2e_chat_support import live_gateway, openai_upstream, post_chat
from live import LiveServer
from seed_tools import SEARCHES
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse, tool_call

# The custom tool of the document's "Request Format (OpenAI)".
GET_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ASK = [{"role": "user", "content": "Search the news, and what's the weather in Paris?"}]
BOTH = [
    tool_call("web_search", {"query": "latest AI news"}, id="call_search"),
    tool_call("get_weather", {"city": "Paris"}, id="call_weather"),
]


@pytest.fixture(scope="module")
def proxy(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    config = config_with(
        upstream=openai_upstream(_openai_server_session.base_url, {"lumo": "lumo-upstream"}),
        server_tools={"modules": ["seed_tools"]},
        store="memory",
    )
    with live_gateway(config) as live:
        yield live


@pytest.fixture(autouse=True)
def _clean() -> None:
    SEARCHES.clear()


def test_native_tool_events_stream_before_the_message(
    proxy: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    call = {
        "index": 0,
        "id": "call_search",
        "type": "function",
        "function": {"name": "web_search", "arguments": '{"query": "latest AI news"}'},
    }
    openai_server.reply(
        sse(
            [
                delta("Let me search for that."),
                delta(tool_calls=[call]),
                delta(finish_reason="tool_calls"),
            ]
        ),
        sse([delta("Based on the search results..."), delta(finish_reason="stop")]),
    )
    _, chunks = raw_stream(proxy, {"model": "lumo", "messages": ASK})

    order: list[str] = []
    for chunk in chunks:
        if "toolwire" in chunk:
            order.append(chunk["toolwire"]["type"])
        elif chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
            order.append("message")
    # message → tool_call → tool_result → message, as the document's SSE example.
    collapsed = [kind for i, kind in enumerate(order) if i == 0 or order[i - 1] != kind]
    assert collapsed == ["message", "tool_call", "tool_result", "message"]
    tool_call_event, tool_result_event = extensions(chunks)[:2]
    assert tool_call_event["name"] == "web_search"
    assert json.loads(tool_call_event["arguments"]) == {"query": "latest AI news"}
    assert tool_result_event["result"]["results"][0]["url"] == "https://example.org/1"
    assert SEARCHES == ["latest AI news"]


@pytest.mark.parametrize("stream", [False, True])
def test_native_and_custom_in_one_turn_the_model_sees_both_results(
    proxy: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(completion("I'll look both up.", tool_calls=BOTH))
    with sdk(proxy) as client:
        if stream:
            with client.chat.completions.stream(
                model="lumo",
                messages=ASK,
                tools=[GET_WEATHER],  # type: ignore[list-item]
            ) as events:
                answer = events.get_final_completion()
        else:
            answer = client.chat.completions.create(
                model="lumo",
                messages=ASK,
                tools=[GET_WEATHER],  # type: ignore[list-item]
            )

    # The custom call goes back to the client, the native one already ran.
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    [custom] = choice.message.tool_calls or []
    assert custom.function.name == "get_weather"  # type: ignore[union-attr]
    assert SEARCHES == ["latest AI news"]
    assert len(openai_server.requests) == 1

    # The client answers its own call with the transcript it has.
    openai_server.reply(completion("AI is everywhere, and Paris is 18°C."))
    follow_up: list[Any] = [
        *ASK,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": custom.id, "content": "18°C and clear"},
    ]
    with sdk(proxy) as client:
        final = client.chat.completions.create(
            model="lumo",
            messages=follow_up,
            tools=[GET_WEATHER],  # type: ignore[list-item]
        )
    assert final.choices[0].message.content == "AI is everywhere, and Paris is 18°C."

    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_search", "call_weather"]
    results = {m["tool_call_id"]: m["content"] for m in sent[2:]}
    assert json.loads(results["call_search"])["results"][0]["title"] == "News about latest AI news"
    assert results["call_weather"] == "18°C and clear"
    # The native tool is not run again for the follow-up.
    assert SEARCHES == ["latest AI news"]


def test_steps_are_only_restored_for_the_caller_who_made_them(
    proxy: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion(None, tool_calls=BOTH))
    first = post_chat(proxy, {"model": "lumo", "messages": ASK, "tools": [GET_WEATHER]})
    message = first.json()["choices"][0]["message"]
    assert [c["id"] for c in message["tool_calls"]] == ["call_weather"]

    # A transcript that did not come from this gateway's answer is left as it is.
    openai_server.reply(completion("ok"))
    other = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [*message["tool_calls"], BOTH[0]]},
        {"role": "tool", "tool_call_id": "call_weather", "content": "18°C"},
        {"role": "tool", "tool_call_id": "call_search", "content": "mine"},
    ]
    response = post_chat(proxy, {"model": "lumo", "messages": other, "tools": [GET_WEATHER]})
    assert response.status_code == 200, response.text
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert {m["content"] for m in sent[2:]} == {"18°C", "mine"}


def test_custom_tools_for_a_model_without_native_tool_calls(
    openai_server: FakeOpenAIServer,
) -> None:
    for_tools = (
        "Use the tools below to accomplish tasks.\n"
        "To use them you MUST output the JSON to me, unlike the proton_info or web search tools."
    )
    upstream = openai_upstream(
        openai_server.base_url,
        {"lumo": "lumo-upstream"},
        tool_calls="prompted:pre_json",
        prompted_instructions=for_tools,
    )
    openai_server.reply(
        completion(
            "I'll check the weather for you.\n"
            '<pre>{"name": "get_weather", "arguments": {"city": "Paris"}}</pre>'
        )
    )
    with live_gateway(config_with(upstream=upstream)) as live, sdk(live) as client:
        answer = client.chat.completions.create(
            model="lumo",
            messages=[{"role": "user", "content": "What's the weather in Paris?"}],
            tools=[GET_WEATHER],  # type: ignore[list-item]
        )

    message = answer.choices[0].message
    assert message.content == "I'll check the weather for you."
    [call] = message.tool_calls or []
    assert call.id
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    assert answer.choices[0].finish_reason == "tool_calls"
    # The instructions were augmented with forTools and the tool definitions as JSON.
    sent = openai_server.last.json
    system = sent["messages"][0]["content"]
    assert for_tools in system
    assert "get_weather" in system
    assert "tools" not in sent
