"""LangChain's chat models against the gateway, their client code unchanged:
`langchain_openai.ChatOpenAI` on Chat Completions (a bound tool's calls parsed whole and
from stream chunks, a round trip with a `ToolMessage` sent back, server tools beside the
client's on the agent path) and `langchain_anthropic.ChatAnthropic` on Anthropic Messages.

The gateway runs on a real socket in front of the fake OpenAI Chat Completions server;
every upstream turn is scripted, and the assertions look at the messages LangChain built
and at what the gateway sent upstream on each turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from functools import reduce
from operator import add
from typing import Any

import pytest
from chat_support import MODEL
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from live import LiveServer

from fakes.openai_server import (
    FakeOpenAIServer,
    Reply,
    calls_sse,
    completion,
    delta,
    sse,
    tool_call,
)

KEY = "sk-anything"
SERVER_TOOLS = ["whoami", "add"]
"""The server tools offered upstream: no key here has the scope `quarterly_report` needs."""

CITIES: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    CITIES.append(city)
    return f"sunny in {city}"


@pytest.fixture(autouse=True)
def _cities() -> Iterator[None]:
    CITIES.clear()
    yield
    CITIES.clear()


def chat_openai(server: LiveServer) -> ChatOpenAI:
    return ChatOpenAI(base_url=f"{server.url}/v1", api_key=KEY, model=MODEL, max_retries=0)


def chat_anthropic(server: LiveServer) -> ChatAnthropic:
    return ChatAnthropic(base_url=server.url, api_key=KEY, model=MODEL, max_retries=0)


def calls_turn(calls: list[tuple[str, str, dict[str, Any]]], *, stream: bool) -> Reply:
    """An upstream turn calling these tools, `(id, name, arguments)` each; streamed, the
    arguments arrive in pieces of 5 characters."""
    if stream:
        return calls_sse([(i, name, json.dumps(args)) for i, name, args in calls], chunk=5)
    return completion(tool_calls=[tool_call(name, args, id=i) for i, name, args in calls])


def text_turn(*pieces: str, stream: bool) -> Reply:
    if stream:
        return sse([*(delta(p) for p in pieces), delta(finish_reason="stop")])
    return completion("".join(pieces))


def ask(model: BaseChatModel, messages: Sequence[BaseMessage], *, stream: bool) -> AIMessage:
    """One model turn with `get_weather` bound: `invoke`, or `stream` with the chunks added
    up as LangChain's own aggregation does."""
    bound = model.bind_tools([get_weather])
    if not stream:
        answer = bound.invoke(messages)
        assert isinstance(answer, AIMessage)
        return answer
    chunks = list(bound.stream(messages))
    assert chunks
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    whole = reduce(add, chunks)
    assert isinstance(whole, AIMessageChunk)
    # LangChain parses streamed arguments leniently (a cut-off object still parses):
    # the text it put together must be whole JSON by itself.
    pieced = [json.loads(c["args"] or "") for c in whole.tool_call_chunks]
    assert pieced == [c["args"] for c in whole.tool_calls]
    return whole


def calls_of(message: AIMessage) -> list[tuple[str | None, str, dict[str, Any]]]:
    return [(c["id"], c["name"], c["args"]) for c in message.tool_calls]


def run_tools(message: AIMessage) -> list[ToolMessage]:
    """Run the message's calls with the tool, as a LangChain loop does."""
    out = []
    for call in message.tool_calls:
        result = get_weather.invoke(call)
        assert isinstance(result, ToolMessage)
        out.append(result)
    return out


def roles(openai_server: FakeOpenAIServer, n: int) -> list[str]:
    return [m["role"] for m in openai_server.requests[n].json["messages"]]


def upstream_tool_names(openai_server: FakeOpenAIServer, n: int) -> list[str]:
    return [t["function"]["name"] for t in openai_server.requests[n].json["tools"]]


# --- ChatOpenAI, the direct path --------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_bound_tool_calls_are_parsed(
    plain: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(
        calls_turn(
            [
                ("call_w", "get_weather", {"city": "Oslo"}),
                ("call_r", "get_weather", {"city": "Rome"}),
            ],
            stream=stream,
        )
    )
    answer = ask(chat_openai(plain), [HumanMessage("Weather in Oslo and Rome?")], stream=stream)
    assert calls_of(answer) == [
        ("call_w", "get_weather", {"city": "Oslo"}),
        ("call_r", "get_weather", {"city": "Rome"}),
    ]
    assert answer.invalid_tool_calls == []
    assert answer.response_metadata["finish_reason"] == "tool_calls"
    sent = openai_server.last.json
    assert sent["model"] == "gpt-4o"
    assert sent.get("stream", False) is stream
    assert upstream_tool_names(openai_server, 0) == ["get_weather"]
    assert sent["tools"][0]["function"]["parameters"]["properties"]["city"]["type"] == "string"


@pytest.mark.parametrize("stream", [False, True])
def test_round_trip_with_a_tool_message(
    plain: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(
        calls_turn([("call_w", "get_weather", {"city": "Oslo"})], stream=stream),
        text_turn("Sunny in ", "Oslo.", stream=stream),
    )
    model = chat_openai(plain)
    messages: list[BaseMessage] = [HumanMessage("Weather in Oslo?")]
    answer = ask(model, messages, stream=stream)
    messages += [answer, *run_tools(answer)]
    final = ask(model, messages, stream=stream)

    assert final.content == "Sunny in Oslo."
    assert final.tool_calls == []
    assert CITIES == ["Oslo"]
    assert roles(openai_server, 1) == ["user", "assistant", "tool"]
    sent = openai_server.requests[1].json["messages"]
    [call] = sent[1]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_w", "get_weather")
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("call_w", "sunny in Oslo")


# --- ChatOpenAI, server tools beside the client's ----------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_round_trip_beside_server_tools(
    tooled: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(
        calls_turn([("call_add", "add", {"a": 2, "b": 3})], stream=stream),
        calls_turn([("call_w", "get_weather", {"city": "Oslo"})], stream=stream),
        text_turn("2 + 3 = 5, ", "and it is sunny in Oslo.", stream=stream),
    )
    model = chat_openai(tooled)
    messages: list[BaseMessage] = [HumanMessage("2 + 3, and the weather in Oslo?")]
    answer = ask(model, messages, stream=stream)
    # The gateway ran `add`; LangChain is handed only its own call.
    assert calls_of(answer) == [("call_w", "get_weather", {"city": "Oslo"})]
    assert answer.invalid_tool_calls == []
    assert len(openai_server.requests) == 2
    assert upstream_tool_names(openai_server, 0) == [*SERVER_TOOLS, "get_weather"]
    add_turn = openai_server.requests[1].json["messages"]
    assert (add_turn[2]["tool_call_id"], add_turn[2]["content"]) == ("call_add", "5")

    messages += [answer, *run_tools(answer)]
    final = ask(model, messages, stream=stream)
    assert final.content == "2 + 3 = 5, and it is sunny in Oslo."
    assert final.tool_calls == []
    assert CITIES == ["Oslo"]
    # The follow-up, with the gateway's remembered steps put back before LangChain's call.
    assert roles(openai_server, 2) == ["user", "assistant", "tool", "assistant", "tool"]
    follow_up = openai_server.requests[2].json["messages"]
    assert [c["id"] for c in follow_up[1]["tool_calls"]] == ["call_add"]
    assert [c["id"] for c in follow_up[3]["tool_calls"]] == ["call_w"]
    assert (follow_up[4]["tool_call_id"], follow_up[4]["content"]) == ("call_w", "sunny in Oslo")


# --- ChatAnthropic on /v1/messages ------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_round_trip(
    plain: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(
        calls_turn([("call_w", "get_weather", {"city": "Oslo"})], stream=stream),
        text_turn("Sunny in ", "Oslo.", stream=stream),
    )
    model = chat_anthropic(plain)
    messages: list[BaseMessage] = [HumanMessage("Weather in Oslo?")]
    answer = ask(model, messages, stream=stream)
    assert calls_of(answer) == [("call_w", "get_weather", {"city": "Oslo"})]
    messages += [answer, *run_tools(answer)]
    final = ask(model, messages, stream=stream)

    assert final.text == "Sunny in Oslo."
    assert final.tool_calls == []
    assert CITIES == ["Oslo"]
    assert upstream_tool_names(openai_server, 0) == ["get_weather"]
    assert roles(openai_server, 1) == ["user", "assistant", "tool"]
    sent = openai_server.requests[1].json["messages"]
    [call] = sent[1]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_w", "get_weather")
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("call_w", "sunny in Oslo")
