"""The OpenAI Agents SDK's default model (`OpenAIResponsesModel`) against the gateway,
unchanged: `Runner.run` and `Runner.run_streamed` with a function tool the SDK runs
itself, beside server tools the gateway runs.

The SDK sends the whole conversation back on each turn (or chains turns with
`previous_response_id`); the gateway is on a real socket in front of the fake OpenAI
Chat Completions server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import agents
import pytest
from chat_support import native_upstream
from live import LiveServer
from responses_support import MODEL, async_sdk
from server_support import TOOLS_MODULE, config_with

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse, tool_call
from toolwire.server import create_app

CITIES: list[str] = []


@agents.function_tool
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    CITIES.append(city)
    return f"sunny in {city}"


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    agents.set_tracing_disabled(True)
    CITIES.clear()
    yield
    CITIES.clear()


@pytest.fixture(scope="module")
def plain(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    """A gateway without server tools (the direct path)."""
    config = config_with(upstream=native_upstream(_openai_server_session.base_url), store="memory")
    with LiveServer(create_app(config, environ={})) as live:
        yield live


@pytest.fixture(scope="module")
def tooled(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    """A gateway with server tools (the agent path)."""
    config = config_with(
        upstream=native_upstream(_openai_server_session.base_url),
        server_tools={"modules": [TOOLS_MODULE]},
        store="memory",
    )
    with LiveServer(create_app(config, environ={})) as live:
        yield live


@pytest.fixture
async def model(request: pytest.FixtureRequest) -> AsyncIterator[agents.OpenAIResponsesModel]:
    server: LiveServer = request.getfixturevalue(request.param)
    async with async_sdk(server) as client:
        yield agents.OpenAIResponsesModel(model=MODEL, openai_client=client)


def _agent(model: agents.OpenAIResponsesModel) -> agents.Agent[Any]:
    return agents.Agent(
        name="weather", instructions="Answer briefly.", model=model, tools=[get_weather]
    )


async def _run(agent: agents.Agent[Any], text: str, *, stream: bool, **options: Any) -> Any:
    if not stream:
        return await agents.Runner.run(agent, text, **options)
    result = agents.Runner.run_streamed(agent, text, **options)
    async for _ in result.stream_events():
        pass
    return result


def _roles(openai_server: FakeOpenAIServer, n: int) -> list[str]:
    return [m["role"] for m in openai_server.requests[n].json["messages"]]


@pytest.mark.parametrize("model", ["plain"], indirect=True)
@pytest.mark.parametrize("stream", [False, True])
async def test_runner_with_a_function_tool(
    model: agents.OpenAIResponsesModel, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    if stream:
        openai_server.reply(
            sse(
                [
                    delta(
                        tool_calls=[
                            {
                                "index": 0,
                                "id": "call_w",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":'},
                            }
                        ]
                    ),
                    delta(tool_calls=[{"index": 0, "function": {"arguments": ' "Oslo"}'}}]),
                    delta(finish_reason="tool_calls"),
                ]
            ),
            sse([delta("Sunny in "), delta("Oslo."), delta(finish_reason="stop")]),
        )
    else:
        openai_server.reply(
            completion(tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="call_w")]),
            completion("Sunny in Oslo."),
        )
    result = await _run(_agent(model), "Weather in Oslo?", stream=stream)
    assert result.final_output == "Sunny in Oslo."
    assert CITIES == ["Oslo"]
    first, second = openai_server.requests
    assert [t["function"]["name"] for t in first.json["tools"]] == ["get_weather"]
    assert _roles(openai_server, 1) == ["system", "user", "assistant", "tool"]
    sent = second.json["messages"]
    assert sent[2]["tool_calls"][0]["id"] == "call_w"
    assert (sent[3]["tool_call_id"], sent[3]["content"]) == ("call_w", "sunny in Oslo")


@pytest.mark.parametrize("model", ["plain"], indirect=True)
async def test_runner_chaining_turns_with_previous_response_id(
    model: agents.OpenAIResponsesModel, plain: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("get_weather", {"city": "Rome"}, id="call_r")]),
        completion("Sunny in Rome."),
    )
    result = await _run(
        _agent(model), "Weather in Rome?", stream=False, auto_previous_response_id=True
    )
    assert result.final_output == "Sunny in Rome."
    # The second turn sent only the tool output; the gateway had the rest.
    assert _roles(openai_server, 1) == ["system", "user", "assistant", "tool"]
    async with async_sdk(plain) as client:
        last = await client.responses.retrieve(result.last_response_id)
    assert last.previous_response_id is not None
    assert last.output_text == "Sunny in Rome."


@pytest.mark.parametrize("model", ["tooled"], indirect=True)
@pytest.mark.parametrize("stream", [False, True])
async def test_runner_beside_server_tools(
    model: agents.OpenAIResponsesModel, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(
        completion(
            "Checking.",
            tool_calls=[
                tool_call("add", {"a": 2, "b": 3}, id="call_add"),
                tool_call("get_weather", {"city": "Oslo"}, id="call_w"),
            ],
        ),
        completion("2 + 3 = 5, and it is sunny in Oslo."),
    )
    result = await _run(_agent(model), "2 + 3, and the weather in Oslo?", stream=stream)
    assert result.final_output == "2 + 3 = 5, and it is sunny in Oslo."
    assert CITIES == ["Oslo"]
    kinds = [item.type for item in result.new_items]
    assert kinds == [
        "message_output_item",
        "tool_call_item",  # the gateway's `add`, an mcp_call
        "tool_call_item",  # the SDK's own get_weather
        "tool_call_output_item",
        "message_output_item",
    ]
    # The follow-up showed the model both calls and both results.
    sent = openai_server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[3:]] == [
        ("call_add", "5"),
        ("call_w", "sunny in Oslo"),
    ]
