"""`POST /v1/messages` on the agent path: the gateway has server tools and runs them.

The gateway runs on a real socket in front of the fake OpenAI server with the tools of
`messages_tools.py`; the client is the `anthropic` SDK. Server-tool activity must reach
the client as `toolwire` events or field the SDK passes over, never as content blocks;
client calls come back as `tool_use` blocks, and the gateway remembers its own steps so
the follow-up shows the model both results.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from e2e_chat_support import live_gateway, openai_upstream
from live import LiveServer
from messages_support import (
    MODEL,
    WEATHER,
    check_grammar,
    raw_events,
    sdk,
    text_of,
    tool_uses,
    user,
)
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, dropped, sse, tool_call
from toolwire.cli.serve_cmd import default_config
from toolwire.server import create_app

ADD = user("What is 2 + 3?")
SERVER_TOOLS = ["add", "stock_level"]


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    config = config_with(
        upstream=openai_upstream(_openai_server_session.base_url, {MODEL: "gpt-4o"}),
        server_tools={"modules": ["messages_tools"]},
        store="memory",
    )
    with live_gateway(config) as live:
        yield live


def _call(call_id: str, name: str, arguments: str, index: int = 0) -> dict[str, Any]:
    return delta(
        tool_calls=[
            {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ]
    )


def _add_then_answer(openai_server: FakeOpenAIServer, *, stream: bool) -> None:
    """Turn 1 says a word and calls `add`; turn 2 answers."""
    if stream:
        openai_server.reply(
            sse(
                [
                    delta("Let me add."),
                    _call("call_add", "add", '{"a": 2, "b": 3}'),
                    delta(finish_reason="tool_calls"),
                ]
            ),
            sse([delta("It is "), delta("5."), delta(finish_reason="stop")]),
        )
    else:
        openai_server.reply(
            completion(
                "Let me add.",
                tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="call_add")],
                usage={"prompt_tokens": 10, "completion_tokens": 2},
            ),
            completion("It is 5.", usage={"prompt_tokens": 15, "completion_tokens": 4}),
        )


def _assert_add_result_went_upstream(openai_server: FakeOpenAIServer) -> None:
    first, second = openai_server.requests
    assert [t["function"]["name"] for t in first.json["tools"]] == SERVER_TOOLS
    sent = second.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == "call_add"
    assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("call_add", "5")


# --- a server tool, then the answer -----------------------------------------------------------


def test_server_tool_runs_and_the_answer_comes_back(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _add_then_answer(openai_server, stream=False)
    with sdk(server) as client:
        message = client.messages.create(model=MODEL, max_tokens=100, messages=ADD)
    # Every turn's text in one block, turns apart: content[0].text is the whole answer.
    assert [b.type for b in message.content] == ["text"]
    assert text_of(message) == "Let me add.\n\nIt is 5."
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (25, 6)
    _assert_add_result_went_upstream(openai_server)

    run = (message.model_extra or {})["toolwire"]
    assert run["status"] == "completed"
    [ran] = run["tool_calls"]
    assert (ran["id"], ran["name"], json.loads(ran["arguments"])) == (
        "call_add",
        "add",
        {"a": 2, "b": 3},
    )
    assert (ran["result"]["success"], ran["result"]["result"]) == (True, 5)


def test_streamed_run_through_the_sdk(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    _add_then_answer(openai_server, stream=True)
    with (
        sdk(server) as client,
        client.messages.stream(model=MODEL, max_tokens=100, messages=ADD) as stream,
    ):
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert text_of(final) == "Let me add.\n\nIt is 5."
    assert [b.type for b in final.content] == ["text"]
    assert final.stop_reason == "end_turn"
    # The SDK passed the extension events through untouched and kept them out of content.
    assert kinds.count("toolwire") == 2
    _assert_add_result_went_upstream(openai_server)


def test_streamed_run_on_the_wire(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    _add_then_answer(openai_server, stream=True)
    _, events = raw_events(server, {"model": MODEL, "max_tokens": 100, "messages": ADD})
    assert check_grammar(events) == [{"type": "text", "text": "Let me add.\n\nIt is 5."}]
    extensions = [data["toolwire"] for name, data in events if name == "toolwire"]
    call, result = extensions
    assert call == {
        "type": "tool_call",
        "id": "call_add",
        "name": "add",
        "arguments": '{"a": 2, "b": 3}',
    }
    assert result["type"] == "tool_result"
    assert (result["call_id"], result["success"], result["result"]) == ("call_add", True, 5)
    # The call and its result come between the two turns' text.
    names = [name for name, _ in events]
    first_toolwire = names.index("toolwire")
    deltas = [i for i, name in enumerate(names) if name == "content_block_delta"]
    assert deltas[0] < first_toolwire < deltas[-1]


def test_a_failing_server_tool_reaches_the_model_as_an_error(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("stock_level", {"sku": "X-1"}, id="call_s")]),
        completion("Sorry, I could not find X-1."),
    )
    with sdk(server) as client:
        message = client.messages.create(
            model=MODEL, max_tokens=100, messages=user("Is X-1 in stock?")
        )
    assert text_of(message) == "Sorry, I could not find X-1."
    [ran] = (message.model_extra or {})["toolwire"]["tool_calls"]
    assert ran["result"]["success"] is False
    assert ran["result"]["error"]["code"] == "execution_error"
    tool_message = openai_server.last.json["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call_s"
    assert json.loads(tool_message["content"])["error"]["code"] == "execution_error"


def test_an_upstream_failure_after_a_server_tool_ends_the_stream_with_an_error(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        sse(
            [
                delta("Let me add."),
                _call("call_add", "add", '{"a": 2, "b": 3}'),
                delta(finish_reason="tool_calls"),
            ]
        ),
        dropped([delta("It is")]),
    )
    received: list[str] = []
    with (
        sdk(server) as client,
        pytest.raises(anthropic.APIStatusError) as info,
        client.messages.stream(model=MODEL, max_tokens=100, messages=ADD) as stream,
    ):
        received.extend(stream.text_stream)
    assert "".join(received) == "Let me add.\n\nIt is"
    assert isinstance(info.value.body, dict)
    assert info.value.body["error"]["type"] == "api_error"


# --- a server tool and a client tool in one turn ------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_server_and_client_calls_in_one_turn_then_the_follow_up_shows_both(
    server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    calls = [
        tool_call("add", {"a": 2, "b": 3}, id="call_add"),
        tool_call("get_weather", {"city": "Paris"}, id="call_w"),
    ]
    openai_server.reply(
        completion("Working on both.", tool_calls=calls), completion("5, and sunny in Paris.")
    )
    messages = user("What is 2 + 3, and the weather in Paris?")
    with sdk(server) as client:
        if stream:
            with client.messages.stream(
                model=MODEL, max_tokens=100, messages=messages, tools=[WEATHER]
            ) as events:
                first = events.get_final_message()
        else:
            first = client.messages.create(
                model=MODEL, max_tokens=100, messages=messages, tools=[WEATHER]
            )
        # Only the client's call comes back to be run; the server's already ran.
        assert tool_uses(first) == [("call_w", "get_weather", {"city": "Paris"})]
        assert first.stop_reason == "tool_use"
        assert text_of(first) == "Working on both."
        messages += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_w", "content": "Sunny"}],
            },
        ]
        second = client.messages.create(
            model=MODEL, max_tokens=100, messages=messages, tools=[WEATHER]
        )
    assert text_of(second) == "5, and sunny in Paris."
    # The model sees its whole turn: both calls, and both results.
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_add", "call_w"]
    assert {m["tool_call_id"]: m["content"] for m in sent[2:]} == {
        "call_add": "5",
        "call_w": "Sunny",
    }


def test_a_client_error_result_reaches_the_model(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("The weather service is down."))
    messages: Any = [
        *user(),
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_w",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_w",
                    "is_error": True,
                    "content": [{"type": "text", "text": "503 from weather.example"}],
                }
            ],
        },
    ]
    with sdk(server) as client:
        message = client.messages.create(
            model=MODEL, max_tokens=100, messages=messages, tools=[WEATHER]
        )
    assert text_of(message) == "The weather service is down."
    assert openai_server.last.json["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_w",
        "content": "503 from weather.example",
    }


def test_a_tool_choice_naming_a_server_tool(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    _add_then_answer(openai_server, stream=False)
    with sdk(server) as client:
        client.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=ADD,
            tool_choice={"type": "tool", "name": "add", "disable_parallel_tool_use": True},
        )
    first, second = openai_server.requests
    assert first.json["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert first.json["parallel_tool_calls"] is False
    # A forced choice applies to the first turn only, or the loop could never end.
    assert second.json["tool_choice"] == "auto"


# --- the offline model ------------------------------------------------------------------------


def test_the_offline_gateway_answers_through_the_sdk() -> None:
    question = user("What's the weather in Lisbon?")
    with LiveServer(create_app(default_config(), environ={})) as live, sdk(live) as client:
        message = client.messages.create(
            model="toolwire-offline", max_tokens=200, messages=question
        )
        with client.messages.stream(
            model="toolwire-offline", max_tokens=200, messages=question
        ) as stream:
            final = stream.get_final_message()
    for answer in (message, final):
        assert "Lisbon" in text_of(answer)
        assert "not real weather" in text_of(answer)
        assert answer.stop_reason == "end_turn"
    [ran] = (message.model_extra or {})["toolwire"]["tool_calls"]
    assert ran["name"] == "get_weather"
