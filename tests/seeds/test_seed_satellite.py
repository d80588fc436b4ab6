"""Seed 000 (`000_223e1d09ec1073f3.txt`): the satellite protocol.

The model's whole answer is `{"tool_request": {"name", "arguments"}}`; the server parses
it and hands it to the satellite, never runs it and never calls the model again on it —
also when the gateway has server tools of its own. Tool results are honoured only while
a request is pending; orphans are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chat_support import sdk
from e2e_chat_support import live_gateway, openai_upstream, post_chat
from live import LiveServer
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, text_sse
from toolwire.server import ServerToolsConfig

TOOL_REQUEST = {"tool_request": {"name": "lookup_weather", "arguments": {"city": "Lisbon"}}}
USER = [{"role": "user", "content": "What's the weather in Lisbon?"}]


@pytest.fixture(scope="module", params=["no server tools", "with server tools"])
def satellite_gateway(
    request: pytest.FixtureRequest, _openai_server_session: FakeOpenAIServer
) -> Iterator[LiveServer]:
    modules = ["seed_tools"] if request.param == "with server tools" else []
    config = config_with(
        upstream=openai_upstream(_openai_server_session.base_url, {"gpt": "gpt-4o"}),
        dialect="tool_request",
        server_tools=ServerToolsConfig(modules=modules).model_dump(),
        store="memory",
    )
    with live_gateway(config) as live:
        yield live


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_request_goes_back_to_the_satellite_and_the_model_is_not_called_again(
    satellite_gateway: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    text = json.dumps(TOOL_REQUEST, indent=2)  # step 2: the entire assistant message
    openai_server.reply(text_sse(text, chunk=7) if stream else completion(text))
    with sdk(satellite_gateway) as client:
        if stream:
            with client.chat.completions.stream(model="gpt", messages=USER) as events:
                answer = events.get_final_completion()
        else:
            answer = client.chat.completions.create(model="gpt", messages=USER)

    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert call.type == "function"
    assert call.function.name == "lookup_weather"
    assert json.loads(call.function.arguments) == {"city": "Lisbon"}
    assert not choice.message.content
    # No server-side execution and no automatic re-invocation of the model.
    assert len(openai_server.requests) == 1


def test_the_tool_result_of_the_follow_up_reaches_the_model(
    satellite_gateway: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("It is 18°C and clear in Lisbon."))
    messages: list[Any] = [
        *USER,
        {"role": "assistant", "content": json.dumps(TOOL_REQUEST)},
        # Step 4's follow-up message, exactly as the document writes it.
        {"role": "tool_result", "name": "lookup_weather", "content": "Lisbon is 18°C and clear."},
    ]
    response = post_chat(satellite_gateway, {"model": "gpt", "messages": messages})

    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "It is 18°C and clear in Lisbon."
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["content"] == "Lisbon is 18°C and clear."
    assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
    assert len(openai_server.requests) == 1


def test_an_orphan_tool_result_is_ignored(
    satellite_gateway: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Hello."))
    messages: list[Any] = [
        *USER,
        {"role": "assistant", "content": "I can't look that up."},
        {"role": "tool_result", "name": "lookup_weather", "content": "Lisbon is 18°C and clear."},
        {"role": "user", "content": "Thanks anyway."},
    ]
    response = post_chat(satellite_gateway, {"model": "gpt", "messages": messages})

    assert response.status_code == 200, response.text
    assert response.headers["toolwire-dropped-tool-results"] == "lookup_weather"
    assert "18°C" not in json.dumps(openai_server.last.json["messages"])


@pytest.mark.parametrize(
    "text",
    [
        'Sure: {"tool_request": {"name": "lookup_weather", "arguments": {"city": "Lisbon"}}}',
        '{"tool_request": {"name": "lookup_weather", "arguments": {"city": "Lis',
    ],
    ids=["embedded text", "partial JSON"],
)
def test_embedded_or_partial_json_is_not_a_tool_request(
    satellite_gateway: LiveServer, openai_server: FakeOpenAIServer, text: str
) -> None:
    openai_server.reply(completion(text))
    with sdk(satellite_gateway) as client:
        answer = client.chat.completions.create(model="gpt", messages=USER)
    assert answer.choices[0].message.content == text
    assert not answer.choices[0].message.tool_calls
    assert answer.choices[0].finish_reason == "stop"


def test_the_gateways_own_tools_still_run_beside_the_satellites(
    satellite_gateway: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    from seed_tools import SEARCHES

    SEARCHES.clear()
    request = {"tool_request": {"name": "web_search", "arguments": {"query": "AI news"}}}
    openai_server.reply(completion(json.dumps(request)), completion("Found it."))
    response = post_chat(satellite_gateway, {"model": "gpt", "messages": USER})

    body = response.json()
    offered = [t["function"]["name"] for t in openai_server.requests[0].json.get("tools", [])]
    if offered == ["web_search"]:
        # The gateway owns web_search: it runs it and asks the model again.
        assert SEARCHES == ["AI news"]
        assert body["choices"][0]["message"]["content"] == "Found it."
        assert len(openai_server.requests) == 2
    else:
        # Without server tools, web_search is the satellite's like any other tool.
        assert offered == []
        assert SEARCHES == []
        assert body["choices"][0]["finish_reason"] == "tool_calls"
        assert len(openai_server.requests) == 1
