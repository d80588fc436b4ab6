"""`/v1/chat/completions` on the agent path: the gateway has server tools and runs them.

The gateway runs on a real socket (uvicorn) in front of the fake OpenAI server, with the
test tools of `gateway_tools.py` and the gateway keys of `server_support.keyed_config`.
Every upstream turn is scripted; the assertions look at what the client gets and at what
the gateway sent upstream on each turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import openai
import pytest
from chat_support import (
    MODEL,
    WEATHER,
    async_sdk,
    extensions,
    finish_reasons,
    function_calls,
    native_upstream,
    raw_stream,
    sdk,
    streamed_content,
    streamed_tool_calls,
)
from live import LiveServer
from openai.types.chat import ChatCompletionMessageParam
from server_support import ALICE_KEY, BOB_KEY, keyed_config

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse, tool_call
from toolwire.server import create_app

ADD: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is 2 + 3?"}]
SERVER_TOOLS = ["whoami", "add", "quarterly_report"]


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    config = keyed_config(upstream=native_upstream(_openai_server_session.base_url))
    with LiveServer(create_app(config, environ={"BOB_KEY_ENV": BOB_KEY})) as live:
        yield live


def _call_sse(calls: list[tuple[str, str, str]], content: str = "") -> list[dict[str, Any]]:
    """A streamed turn calling tools: `(id, name, arguments)` per call, arguments in halves."""
    events = [delta(content)] if content else []
    for index, (call_id, name, arguments) in enumerate(calls):
        half = len(arguments) // 2
        start = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments[:half]},
        }
        rest = {"index": index, "function": {"arguments": arguments[half:]}}
        events += [delta(tool_calls=[start]), delta(tool_calls=[rest])]
    return [*events, delta(finish_reason="tool_calls")]


def _text_sse(*pieces: str) -> list[dict[str, Any]]:
    return [*(delta(p) for p in pieces), delta(finish_reason="stop")]


ADD_CALL = ("call_add", "add", '{"a": 2, "b": 3}')


def _assert_add_result_went_upstream(openai_server: FakeOpenAIServer) -> None:
    """Two upstream turns: the first offered the server tools, the second carried the
    server call and its result, paired."""
    first, second = openai_server.requests
    assert [t["function"]["name"] for t in first.json["tools"]] == SERVER_TOOLS
    sent = second.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    [call] = sent[1]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_add", "add")
    assert json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("call_add", "5")


# --- a server tool, then the answer ---------------------------------------------------------


def test_server_tool_runs_and_the_answer_comes_back(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(
            tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="call_add")],
            usage={"prompt_tokens": 10, "completion_tokens": 2},
        ),
        completion("2 + 3 = 5.", usage={"prompt_tokens": 15, "completion_tokens": 4}),
    )
    with sdk(server, ALICE_KEY) as client:
        response = client.chat.completions.create(model=MODEL, messages=ADD)
    choice = response.choices[0]
    assert choice.message.content == "2 + 3 = 5."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert response.usage is not None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (25, 6)
    _assert_add_result_went_upstream(openai_server)

    run = (response.model_extra or {})["toolwire"]
    assert run["status"] == "completed"
    [ran] = run["tool_calls"]
    assert (ran["id"], ran["name"]) == ("call_add", "add")
    assert json.loads(ran["arguments"]) == {"a": 2, "b": 3}
    result = ran["result"]
    assert (result["call_id"], result["success"], result["result"]) == ("call_add", True, 5)
    assert result["content"] == "5"
    assert result["error"] is None


def test_streamed_run_through_the_sdk(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse(_call_sse([ADD_CALL])), sse(_text_sse("2 + 3 ", "= 5.")))
    with sdk(server, ALICE_KEY) as client:
        chunks = list(client.chat.completions.create(model=MODEL, messages=ADD, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "2 + 3 = 5."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    # The server call never shows up as a tool call the client should run.
    assert all(not c.choices or c.choices[0].delta.tool_calls is None for c in chunks)
    # The SDK passed the extension chunks through as choice-less chunks.
    kinds = [(c.model_extra or {})["toolwire"]["type"] for c in chunks if not c.choices]
    assert kinds == ["tool_call", "tool_result"]
    _assert_add_result_went_upstream(openai_server)


def test_streamed_run_on_the_wire(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse(_call_sse([ADD_CALL])), sse(_text_sse("2 + 3 ", "= 5.")))
    _, chunks = raw_stream(server, {"model": MODEL, "messages": ADD}, key=ALICE_KEY)
    call, result = extensions(chunks)
    assert call == {
        "type": "tool_call",
        "id": "call_add",
        "name": "add",
        "arguments": '{"a": 2, "b": 3}',
    }
    assert result["type"] == "tool_result"
    assert (result["call_id"], result["name"], result["success"]) == ("call_add", "add", True)
    assert (result["result"], result["content"]) == (5, "5")
    # Call, result, then the answer: the extension chunks come before any content.
    positions = [i for i, c in enumerate(chunks) if "toolwire" in c]
    first_text = next(i for i, c in enumerate(chunks) if streamed_content([c]))
    assert max(positions) < first_text
    assert streamed_content(chunks) == "2 + 3 = 5."
    assert finish_reasons(chunks) == ["stop"]
    assert streamed_tool_calls(chunks) == []
    assert len({c["id"] for c in chunks}) == 1


def test_stream_helper_on_the_agent_path(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(sse(_call_sse([ADD_CALL])), sse(_text_sse("It is ", "5.")))
    with (
        sdk(server, ALICE_KEY) as client,
        client.chat.completions.stream(model=MODEL, messages=ADD, tools=[WEATHER]) as stream,
    ):
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.message.content == "It is 5."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    # The client tool was offered upstream next to the server tools.
    names = [t["function"]["name"] for t in openai_server.requests[0].json["tools"]]
    assert names == [*SERVER_TOOLS, "get_weather"]


async def test_async_streamed_run(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse(_call_sse([ADD_CALL])), sse(_text_sse("Five.")))
    async with async_sdk(server, ALICE_KEY) as client:
        stream = await client.chat.completions.create(model=MODEL, messages=ADD, stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Five."
    _assert_add_result_went_upstream(openai_server)


def test_a_named_server_tool_choice_applies_to_the_first_turn(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="call_add")]),
        completion("5"),
    )
    with sdk(server, ALICE_KEY) as client:
        response = client.chat.completions.create(
            model=MODEL,
            messages=ADD,
            tool_choice={"type": "function", "function": {"name": "add"}},
            parallel_tool_calls=False,
        )
    assert response.choices[0].message.content == "5"
    first, second = openai_server.requests
    assert first.json["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert first.json["parallel_tool_calls"] is False
    # Forcing the call again would loop forever: the next turn is free to answer.
    assert second.json["tool_choice"] == "auto"


def test_streamed_usage_adds_up_every_turn(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        sse([*_call_sse([ADD_CALL]), delta(usage={"prompt_tokens": 4, "completion_tokens": 1})]),
        sse([*_text_sse("5."), delta(usage={"prompt_tokens": 6, "completion_tokens": 2})]),
    )
    body = {"model": MODEL, "messages": ADD, "stream_options": {"include_usage": True}}
    _, chunks = raw_stream(server, body, key=ALICE_KEY)
    last = chunks[-1]
    assert last["choices"] == []
    assert last["usage"] == {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    assert sum("usage" in c for c in chunks) == 1


@pytest.mark.parametrize("choice", ["none", "auto", "required"])
def test_tool_choice_reaches_the_upstream_with_the_server_tools(
    server: LiveServer, openai_server: FakeOpenAIServer, choice: Literal["none", "auto", "required"]
) -> None:
    openai_server.reply(completion("No tools needed."))
    with sdk(server, ALICE_KEY) as client:
        response = client.chat.completions.create(
            model=MODEL, messages=ADD, tools=[WEATHER], tool_choice=choice
        )
    assert response.choices[0].message.content == "No tools needed."
    sent = openai_server.last.json
    assert sent["tool_choice"] == choice
    assert [t["function"]["name"] for t in sent["tools"]] == [*SERVER_TOOLS, "get_weather"]


def test_client_tool_results_continue_the_conversation(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Sunny in Lisbon, and 2 + 3 = 5."))
    history: list[ChatCompletionMessageParam] = [
        *WEATHER_AND_ADD,
        {
            "role": "assistant",
            "content": "On it.",
            "tool_calls": [
                {
                    "id": "call_weather",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_weather", "content": "Sunny"},
    ]
    with sdk(server, ALICE_KEY) as client:
        response = client.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER])
    assert response.choices[0].message.content == "Sunny in Lisbon, and 2 + 3 = 5."
    assert response.choices[0].finish_reason == "stop"
    assert (response.model_extra or {})["toolwire"]["tool_calls"] == []
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == "call_weather"
    assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("call_weather", "Sunny")


# --- server and client tools in one turn ----------------------------------------------------


BOTH_CALLS = [
    tool_call("add", {"a": 2, "b": 3}, id="call_add"),
    tool_call("get_weather", {"city": "Lisbon"}, id="call_weather"),
]
WEATHER_AND_ADD: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Add 2 and 3, and tell me the weather in Lisbon."}
]


def test_server_and_client_calls_in_one_turn(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("On it.", tool_calls=BOTH_CALLS))
    with sdk(server, ALICE_KEY) as client:
        response = client.chat.completions.create(
            model=MODEL, messages=WEATHER_AND_ADD, tools=[WEATHER]
        )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "On it."
    calls = function_calls(choice.message)
    # Only the client's call is handed back; the server's ran inside the gateway.
    assert [(c.id, c.function.name) for c in calls] == [("call_weather", "get_weather")]
    assert json.loads(calls[0].function.arguments) == {"city": "Lisbon"}
    run = (response.model_extra or {})["toolwire"]
    assert run["status"] == "client_tool_calls"
    assert [(c["id"], c["result"]["result"]) for c in run["tool_calls"]] == [("call_add", 5)]
    # One upstream turn: the run stops at the client's call.
    assert len(openai_server.requests) == 1


def test_server_and_client_calls_in_one_streamed_turn(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    calls = [ADD_CALL, ("call_weather", "get_weather", '{"city": "Lisbon"}')]
    openai_server.reply(sse(_call_sse(calls, content="On it.")))
    with (
        sdk(server, ALICE_KEY) as client,
        client.chat.completions.stream(
            model=MODEL, messages=WEATHER_AND_ADD, tools=[WEATHER]
        ) as stream,
    ):
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "On it."
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert (call.id, call.function.name) == ("call_weather", "get_weather")
    assert call.function.parsed_arguments == {"city": "Lisbon"}
    assert len(openai_server.requests) == 1


def test_server_and_client_calls_in_one_streamed_turn_on_the_wire(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    calls = [ADD_CALL, ("call_weather", "get_weather", '{"city": "Lisbon"}')]
    openai_server.reply(sse(_call_sse(calls)))
    body = {"model": MODEL, "messages": WEATHER_AND_ADD, "tools": [WEATHER]}
    _, chunks = raw_stream(server, body, key=ALICE_KEY)
    assert [(e["type"], e.get("id") or e.get("call_id")) for e in extensions(chunks)] == [
        ("tool_call", "call_add"),
        ("tool_result", "call_add"),
    ]
    [client_call] = streamed_tool_calls(chunks)
    assert (client_call["index"], client_call["id"]) == (0, "call_weather")
    assert client_call["function"]["name"] == "get_weather"
    assert json.loads(client_call["function"]["arguments"]) == {"city": "Lisbon"}
    assert finish_reasons(chunks) == ["tool_calls"]


# --- ToolContext: the gateway key reaches the tool --------------------------------------------


def test_the_gateway_keys_name_and_scopes_reach_the_tool(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("whoami", {}, id="call_who")]),
        completion("You are alice."),
    )
    with sdk(server, ALICE_KEY) as client:
        response = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Who am I?"}]
        )
    [ran] = (response.model_extra or {})["toolwire"]["tool_calls"]
    assert ran["result"]["result"] == {
        "principal": "alice",
        "scopes": ["reports"],
        # The gateway key is not the caller's token for HTTP tools.
        "has_token": False,
    }
    tool_message = openai_server.requests[1].json["messages"][-1]
    assert tool_message["role"] == "tool"
    assert json.loads(tool_message["content"])["principal"] == "alice"


@pytest.mark.parametrize(("key", "allowed"), [(ALICE_KEY, True), (BOB_KEY, False)])
def test_a_scoped_tool_needs_the_keys_scope(
    server: LiveServer, openai_server: FakeOpenAIServer, key: str, allowed: bool
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("quarterly_report", {"quarter": "Q3"}, id="call_q")]),
        completion("Here it is."),
    )
    with sdk(server, key) as client:
        response = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "The Q3 report, please."}]
        )
    [ran] = (response.model_extra or {})["toolwire"]["tool_calls"]
    result = ran["result"]
    sent = openai_server.requests[1].json["messages"][-1]
    assert sent["tool_call_id"] == "call_q"
    if allowed:
        assert result["success"] is True
        assert result["result"] == "Report for Q3: all good."
        assert sent["content"] == "Report for Q3: all good."
    else:
        assert result["success"] is False
        assert result["result"] is None
        assert "reports" in result["error"]["message"]
        # The model is told why, in the tool message, and the run goes on.
        assert "reports" in sent["content"]
        assert "Report for Q3" not in sent["content"]
    assert response.choices[0].message.content == "Here it is."


def test_the_gateway_key_is_required_on_the_agent_path(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    with sdk(server, "tw-not-a-key") as client, pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model=MODEL, messages=ADD)
    assert openai_server.requests == []


# --- a run that stops early -------------------------------------------------------------------


def test_a_run_stopped_by_max_iterations_explains_itself_streamed_or_not(
    openai_server: FakeOpenAIServer,
) -> None:
    config = keyed_config(
        upstream=native_upstream(openai_server.base_url), limits={"max_iterations": 2}
    )
    adds = [tool_call("add", {"a": 2, "b": 3}, id=f"call_{i}") for i in range(2)]
    openai_server.reply(*(completion(tool_calls=[call]) for call in adds))
    openai_server.reply(*(sse(_call_sse([(f"call_{i}", "add", "{}")])) for i in range(2)))
    app = create_app(config, environ={"BOB_KEY_ENV": BOB_KEY})
    with LiveServer(app) as live, sdk(live, ALICE_KEY) as client:
        whole = client.chat.completions.create(model=MODEL, messages=ADD)
        chunks = list(client.chat.completions.create(model=MODEL, messages=ADD, stream=True))
    assert len(openai_server.requests) == 4
    assert (whole.model_extra or {})["toolwire"]["status"] == "max_iterations"
    explained = whole.choices[0].message.content
    assert explained is not None
    assert "max_iterations=2" in explained
    assert whole.choices[0].finish_reason == "stop"
    # A streaming client that ignores the extension still gets the explanation.
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == explained
    statuses = [
        (c.model_extra or {})["toolwire"]
        for c in chunks
        if (c.model_extra or {}).get("toolwire", {}).get("type") == "run_status"
    ]
    assert [s["status"] for s in statuses] == ["max_iterations"]


def test_text_of_every_turn_is_the_answer_streamed_and_whole(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    def script() -> None:
        openai_server.reply(
            completion("Let me add.", tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="c1")]),
            completion("It is 5."),
        )

    script()
    with sdk(server, ALICE_KEY) as client:
        whole = client.chat.completions.create(model=MODEL, messages=ADD)
        script()
        with client.chat.completions.stream(model=MODEL, messages=ADD) as stream:
            streamed = stream.get_final_completion()
    assert whole.choices[0].message.content == "Let me add.\n\nIt is 5."
    assert streamed.choices[0].message.content == whole.choices[0].message.content
