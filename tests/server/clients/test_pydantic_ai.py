"""Pydantic AI's own agent loop against the gateway, its client code unchanged: an `Agent`
with a client tool (`@agent.tool_plain`) that Pydantic AI runs itself, on Chat Completions
(`OpenAIChatModel`), Responses (`OpenAIResponsesModel`) and Anthropic Messages
(`AnthropicModel`), each with and without server tools beside it.

The gateway runs on a real socket in front of the fake OpenAI Chat Completions server;
every upstream turn is scripted, and the assertions look at what Pydantic AI ended with
and at what the gateway sent upstream on each turn.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx2
import pytest
from chat_support import MODEL
from live import LiveServer
from pydantic_ai import Agent, AgentRunResultEvent
from pydantic_ai.messages import ModelMessage, ModelResponse, NativeToolCallPart, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

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

Mode = Literal["run", "run_stream", "run_stream_events"]
STREAMED: tuple[Mode, ...] = ("run_stream", "run_stream_events")


def chat_model(
    server: LiveServer, http_client: httpx2.AsyncClient | None = None
) -> OpenAIChatModel:
    provider = OpenAIProvider(base_url=f"{server.url}/v1", api_key=KEY, http_client=http_client)
    return OpenAIChatModel(MODEL, provider=provider)


class _Copying(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, into: bytearray) -> None:
        self._stream = stream
        self._into = into

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._stream:
            self._into.extend(piece)
            yield piece

    async def aclose(self) -> None:
        await self._stream.aclose()


class Tap(httpx2.AsyncBaseTransport):
    """An httpx transport keeping a copy of every response body the client reads: what
    the gateway sent Pydantic AI, byte for byte."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.bodies: list[bytearray] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        body = bytearray()
        self.bodies.append(body)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Copying(response.stream, body),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def toolwire_extensions(body: bytes) -> list[dict[str, Any]]:
    """The `toolwire` objects of a Chat Completions body: the extension chunks of a
    stream, or the top-level field's `tool_calls` and their results of a whole answer."""
    if not body.startswith(b"data:"):
        run = json.loads(body)["toolwire"]
        out: list[dict[str, Any]] = []
        for call in run["tool_calls"]:
            out += [{"type": "tool_call", **call}, {"type": "tool_result", **call["result"]}]
        return out
    chunks = [
        json.loads(line.removeprefix(b"data: "))
        for line in body.splitlines()
        if line.startswith(b"data: {")
    ]
    return [c["toolwire"] for c in chunks if "toolwire" in c]


class WeatherAgent:
    """A Pydantic AI agent with one client tool, `get_weather`, and the cities it got."""

    def __init__(self, model: Model) -> None:
        self.cities: list[str] = []
        self.agent: Agent[None, str] = Agent(model, instructions="Answer briefly.", retries=0)

        @self.agent.tool_plain
        def get_weather(city: str) -> str:
            """The current weather in a city.

            Args:
                city: The city's name.
            """
            self.cities.append(city)
            return f"sunny in {city}"

    async def run(self, prompt: str, mode: Mode) -> tuple[str, list[ModelMessage]]:
        """The final output and the whole conversation as Pydantic AI holds it. The agent
        is entered so the provider's HTTP client is closed at the end."""
        async with self.agent:
            return await self._run(prompt, mode)

    async def _run(self, prompt: str, mode: Mode) -> tuple[str, list[ModelMessage]]:
        if mode == "run":
            result = await self.agent.run(prompt)
            return result.output, result.all_messages()
        if mode == "run_stream":
            async with self.agent.run_stream(prompt) as streamed:
                output = await streamed.get_output()
            return output, streamed.all_messages()
        async with self.agent.run_stream_events(prompt) as events:
            ends = [e async for e in events if isinstance(e, AgentRunResultEvent)]
        [end] = ends
        return end.result.output, end.result.all_messages()


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


def called_tools(messages: list[ModelMessage]) -> list[tuple[str, str, dict[str, Any]]]:
    """`(id, name, arguments)` of every tool call in the model's responses Pydantic AI got."""
    return [
        (part.tool_call_id, part.tool_name, part.args_as_dict())
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]


def upstream_tool_names(openai_server: FakeOpenAIServer, n: int) -> list[str]:
    return [t["function"]["name"] for t in openai_server.requests[n].json["tools"]]


def roles(openai_server: FakeOpenAIServer, n: int) -> list[str]:
    return [m["role"] for m in openai_server.requests[n].json["messages"]]


# --- Chat Completions, the direct path -------------------------------------------------------


@pytest.mark.parametrize("mode", ["run", "run_stream", "run_stream_events"])
async def test_chat_client_tool_round_trip(
    plain: LiveServer, openai_server: FakeOpenAIServer, mode: Mode
) -> None:
    stream = mode in STREAMED
    openai_server.reply(
        calls_turn([("call_w", "get_weather", {"city": "Oslo"})], stream=stream),
        text_turn("Sunny in ", "Oslo.", stream=stream),
    )
    weather = WeatherAgent(chat_model(plain))
    output, messages = await weather.run("Weather in Oslo?", mode)

    assert output == "Sunny in Oslo."
    assert weather.cities == ["Oslo"]
    assert called_tools(messages) == [("call_w", "get_weather", {"city": "Oslo"})]
    first, second = openai_server.requests
    assert first.json["model"] == "gpt-4o"
    assert first.json.get("stream", False) is stream
    assert upstream_tool_names(openai_server, 0) == ["get_weather"]
    # The second turn carried the call and the result Pydantic AI's tool returned.
    assert roles(openai_server, 1) == ["system", "user", "assistant", "tool"]
    sent = second.json["messages"]
    [call] = sent[2]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_w", "get_weather")
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert (sent[3]["tool_call_id"], sent[3]["content"]) == ("call_w", "sunny in Oslo")


# --- Chat Completions, server tools beside the client's ----------------------------------------


@pytest.mark.parametrize("mode", ["run", "run_stream", "run_stream_events"])
async def test_chat_client_tool_beside_server_tools(
    tooled: LiveServer, openai_server: FakeOpenAIServer, mode: Mode
) -> None:
    stream = mode in STREAMED
    openai_server.reply(
        calls_turn([("call_add", "add", {"a": 2, "b": 3})], stream=stream),
        calls_turn([("call_w", "get_weather", {"city": "Oslo"})], stream=stream),
        text_turn("2 + 3 = 5, ", "and it is sunny in Oslo.", stream=stream),
    )
    tap = Tap()
    async with httpx2.AsyncClient(transport=tap) as http:
        weather = WeatherAgent(chat_model(tooled, http))
        output, messages = await weather.run("2 + 3, and the weather in Oslo?", mode)

    assert output == "2 + 3 = 5, and it is sunny in Oslo."
    assert weather.cities == ["Oslo"]
    # Pydantic AI saw (and ran) only its own tool; the gateway ran `add`.
    assert called_tools(messages) == [("call_w", "get_weather", {"city": "Oslo"})]
    # ... though the gateway's answer did show it the server call, in its extension.
    first_answer = toolwire_extensions(bytes(tap.bodies[0]))
    assert [(e["type"], e.get("id") or e.get("call_id")) for e in first_answer] == [
        ("tool_call", "call_add"),
        ("tool_result", "call_add"),
    ]
    assert first_answer[1]["content"] == "5"
    assert len(tap.bodies) == 2
    assert len(openai_server.requests) == 3
    assert upstream_tool_names(openai_server, 0) == [*SERVER_TOOLS, "get_weather"]
    # The gateway's own turn: the server call and its result.
    assert roles(openai_server, 1) == ["system", "user", "assistant", "tool"]
    add_turn = openai_server.requests[1].json["messages"]
    assert add_turn[2]["tool_calls"][0]["id"] == "call_add"
    assert (add_turn[3]["tool_call_id"], add_turn[3]["content"]) == ("call_add", "5")
    # Pydantic AI's follow-up, with the gateway's remembered steps put back before it.
    assert roles(openai_server, 2) == ["system", "user", "assistant", "tool", "assistant", "tool"]
    follow_up = openai_server.requests[2].json["messages"]
    assert [c["id"] for c in follow_up[2]["tool_calls"]] == ["call_add"]
    assert (follow_up[3]["tool_call_id"], follow_up[3]["content"]) == ("call_add", "5")
    assert [c["id"] for c in follow_up[4]["tool_calls"]] == ["call_w"]
    assert (follow_up[5]["tool_call_id"], follow_up[5]["content"]) == ("call_w", "sunny in Oslo")


# --- Responses and Anthropic Messages, the direct path ------------------------------------------


def responses_model(server: LiveServer) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(
        MODEL, provider=OpenAIProvider(base_url=f"{server.url}/v1", api_key=KEY)
    )


def anthropic_model(server: LiveServer) -> AnthropicModel:
    return AnthropicModel(MODEL, provider=AnthropicProvider(base_url=server.url, api_key=KEY))


@pytest.mark.parametrize("protocol", ["responses", "anthropic"])
@pytest.mark.parametrize("mode", ["run", "run_stream_events"])
async def test_client_tool_round_trip_on_the_other_doors(
    plain: LiveServer,
    openai_server: FakeOpenAIServer,
    protocol: Literal["responses", "anthropic"],
    mode: Mode,
) -> None:
    stream = mode in STREAMED
    openai_server.reply(
        calls_turn([("call_w", "get_weather", {"city": "Oslo"})], stream=stream),
        text_turn("Sunny in ", "Oslo.", stream=stream),
    )
    model = responses_model(plain) if protocol == "responses" else anthropic_model(plain)
    weather = WeatherAgent(model)
    output, messages = await weather.run("Weather in Oslo?", mode)

    assert output == "Sunny in Oslo."
    assert weather.cities == ["Oslo"]
    assert called_tools(messages) == [("call_w", "get_weather", {"city": "Oslo"})]
    assert len(openai_server.requests) == 2
    assert upstream_tool_names(openai_server, 0) == ["get_weather"]
    assert roles(openai_server, 1) == ["system", "user", "assistant", "tool"]
    sent = openai_server.requests[1].json["messages"]
    [call] = sent[2]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_w", "get_weather")
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert (sent[3]["tool_call_id"], sent[3]["content"]) == ("call_w", "sunny in Oslo")


# --- Responses and Anthropic Messages, server tools beside the client's ------------------------


def native_calls(messages: list[ModelMessage]) -> list[tuple[str, dict[str, Any]]]:
    """`(name, arguments)` of the calls Pydantic AI was shown as a provider's own tools
    (the gateway's server tools, as an MCP server's calls on Responses)."""
    return [
        (part.tool_name, part.args_as_dict())
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, NativeToolCallPart)
    ]


@pytest.mark.parametrize("protocol", ["responses", "anthropic"])
@pytest.mark.parametrize("mode", ["run", "run_stream_events"])
async def test_client_tool_beside_server_tools_on_the_other_doors(
    tooled: LiveServer,
    openai_server: FakeOpenAIServer,
    protocol: Literal["responses", "anthropic"],
    mode: Mode,
) -> None:
    stream = mode in STREAMED
    openai_server.reply(
        calls_turn([("call_add", "add", {"a": 2, "b": 3})], stream=stream),
        calls_turn([("call_w", "get_weather", {"city": "Oslo"})], stream=stream),
        text_turn("2 + 3 = 5, ", "and it is sunny in Oslo.", stream=stream),
    )
    model = responses_model(tooled) if protocol == "responses" else anthropic_model(tooled)
    weather = WeatherAgent(model)
    output, messages = await weather.run("2 + 3, and the weather in Oslo?", mode)

    assert output == "2 + 3 = 5, and it is sunny in Oslo."
    assert weather.cities == ["Oslo"]
    # Pydantic AI ran only its own tool. Responses shows it the gateway's call as an MCP
    # server's (`mcp_call`), which it records and never runs; Messages shows it nothing.
    assert called_tools(messages) == [("call_w", "get_weather", {"city": "Oslo"})]
    shown = [
        (
            "mcp_server:toolwire",
            {"action": "call_tool", "tool_name": "add", "tool_args": {"a": 2, "b": 3}},
        )
    ]
    assert native_calls(messages) == (shown if protocol == "responses" else [])
    assert len(openai_server.requests) == 3
    assert upstream_tool_names(openai_server, 0) == [*SERVER_TOOLS, "get_weather"]
    # The follow-up, with the gateway's remembered steps put back before the client's call.
    assert roles(openai_server, 2) == ["system", "user", "assistant", "tool", "assistant", "tool"]
    follow_up = openai_server.requests[2].json["messages"]
    assert (follow_up[3]["tool_call_id"], follow_up[3]["content"]) == ("call_add", "5")
    assert (follow_up[5]["tool_call_id"], follow_up[5]["content"]) == ("call_w", "sunny in Oslo")
