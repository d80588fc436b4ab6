"""Seed 002's "Integration with LLM Function Calling" loop, run as the seed writes it.

The loop reads a model's calls (`response.tool_calls`) and hands each one's arguments
straight to a provider that reads them as a dict (`parameters.get("city")`). toolwire has
no `LLMOptions`, `llm.generate` or `LLMMessage`: the three small stand-ins below map them
onto a toolwire model call, and `seed_loop` is the seed's block copied as it is. The calls
come from a real model response (the fake OpenAI server's wire answer, or `ScriptedModel`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from seed_weather import WeatherToolProvider

from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from toolwire import (
    AssistantMessage,
    Message,
    MockToolProvider,
    Model,
    ModelResponse,
    ModelSettings,
    OpenAIChatModel,
    ScriptedModel,
    Tool,
    Toolbox,
    ToolCall,
    ToolMessage,
    ToolRunner,
    UserMessage,
    tool,
)

# --- the seed's names, over toolwire -------------------------------------------------------


@dataclass
class LLMOptions:
    """The seed's options record, as far as its loop uses it."""

    temperature: float | None = None
    functions: list[Tool] = field(default_factory=list)


class SeedLLM:
    """The seed's `llm.generate(messages, options)`: one toolwire model turn."""

    def __init__(self, model: Model) -> None:
        self.model = model

    async def generate(self, messages: list[Message], options: LLMOptions) -> ModelResponse:
        settings = ModelSettings(temperature=options.temperature)
        return await self.model.complete(messages, options.functions, settings)


class LLMMessage:
    """The seed's message helpers: a function result is a tool message."""

    @staticmethod
    def function_result(call_id: str, name: str, content: str) -> ToolMessage:
        return ToolMessage(call_id=call_id, name=name, content=content)


async def seed_loop(llm: SeedLLM, tool_provider: Any, messages: list[Message]) -> None:
    """The seed's block, copied as it is written (only `ruff format` touched it)."""
    # Get tools from provider
    tools = await tool_provider.list_tools()

    # Use in LLM options
    options = LLMOptions(
        temperature=0.7,
        functions=tools,  # Tools available for function calling
    )

    # Generate response with tools
    response = await llm.generate(messages, options)

    # Execute any tool calls
    if response.tool_calls:
        for call in response.tool_calls:
            result = await tool_provider.execute_tool(call.name, call.arguments)
            # Add result to conversation history
            messages.append(LLMMessage.function_result(call.id, call.name, str(result.result)))


# --- the loop --------------------------------------------------------------------------------


def _wire_model(server: FakeOpenAIServer, *calls: dict[str, Any]) -> OpenAIChatModel:
    server.reply(completion(tool_calls=list(calls)))
    return OpenAIChatModel(server.base_url, "key", "gpt-test")


async def test_the_seed_loop_runs_the_weather_provider_on_a_models_calls(
    openai_server: FakeOpenAIServer,
) -> None:
    model = _wire_model(
        openai_server,
        tool_call("get_current_weather", {"city": "Paris", "units": "fahrenheit"}, id="call_p"),
        tool_call("get_weather_forecast", {"city": "Lyon", "days": 2}, id="call_l"),
    )
    messages: list[Message] = [UserMessage(content="Weather in Paris, and Lyon's forecast?")]

    await seed_loop(SeedLLM(model), WeatherToolProvider({}), messages)

    paris, lyon = messages[1:]
    assert isinstance(paris, ToolMessage)
    assert isinstance(lyon, ToolMessage)
    assert (paris.call_id, paris.name, lyon.call_id) == ("call_p", "get_current_weather", "call_l")
    assert paris.content.startswith("{'city': 'Paris', 'temperature': 72.5, 'units': 'fahrenheit'")
    assert "'date': '2024-01-02'" in lyon.content
    sent = openai_server.requests[0].json
    assert sent["temperature"] == 0.7
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "get_current_weather",
        "get_weather_forecast",
    ]


async def test_the_seed_loop_with_toolwires_own_providers() -> None:
    @tool
    def get_current_weather(city: str, units: str = "celsius") -> dict[str, Any]:
        """Current weather."""
        return {"city": city, "units": units}

    mock = MockToolProvider(
        [Tool(name="get_current_weather", description="Weather.")], {"get_current_weather": 21}
    )
    for provider, expected in (
        (Toolbox([get_current_weather]), "{'city': 'Paris', 'units': 'celsius'}"),
        (mock, "21"),
    ):
        model = ScriptedModel(
            [AssistantMessage(tool_calls=(_call("get_current_weather", '{"city": "Paris"}'),))]
        )
        messages: list[Message] = [UserMessage(content="Weather in Paris?")]
        await seed_loop(SeedLLM(model), provider, messages)
        assert messages[-1] == LLMMessage.function_result("c1", "get_current_weather", expected)
    # The mock records a plain dict, as the seed's mock keeps `parameters`.
    ((name, parameters),) = mock.call_history
    assert (name, parameters, type(parameters)) == ("get_current_weather", {"city": "Paris"}, dict)


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


async def test_invalid_json_reaches_the_provider_as_an_error_and_the_runner_as_invalid_json(
    openai_server: FakeOpenAIServer,
) -> None:
    model = _wire_model(openai_server, tool_call("get_current_weather", '{"city": "Par', id="c"))
    response = await SeedLLM(model).generate([UserMessage(content="Paris?")], LLMOptions())
    (call,) = response.tool_calls
    assert call.arguments == '{"city": "Par'  # the raw text, kept for self-correction

    # The seed's provider catches what the dict read raises: an error result, no guess.
    result = await WeatherToolProvider({}).execute_tool(call.name, call.arguments)
    assert result.success is False
    assert result.error is not None
    assert result.error.startswith(
        "Tool execution failed: The arguments for tool 'get_current_weather' are not valid JSON"
    )
    assert "Par" not in result.error  # never repeats the model's text

    # Through the runner, the same call is seed 004's invalid_json, with the same id.
    via_runner = await ToolRunner(WeatherToolProvider({})).exec(call)
    assert via_runner.error is not None
    assert (via_runner.call_id, via_runner.error.code) == ("c", "invalid_json")


async def test_the_models_calls_work_through_the_runner_and_back_upstream(
    openai_server: FakeOpenAIServer,
) -> None:
    model = _wire_model(openai_server, tool_call("get_current_weather", {"city": "Paris"}))
    response = await model.complete([UserMessage(content="Paris?")], [])
    (seed_call,) = response.tool_calls
    (plain_call,) = response.message.tool_calls
    assert seed_call == plain_call  # the same call; only its arguments answer dict reads
    assert type(plain_call.arguments) is str

    provider = WeatherToolProvider({})
    assert (await ToolRunner(provider).exec(seed_call)).result == (
        await ToolRunner(provider).exec(plain_call)
    ).result

    # A history built from the seed's calls goes back upstream with the arguments intact.
    openai_server.reply(completion(content="22.5°C"))
    history: list[Message] = [
        UserMessage(content="Paris?"),
        AssistantMessage(tool_calls=response.tool_calls),
        ToolMessage(call_id=seed_call.id, name=seed_call.name, content="22.5"),
    ]
    await model.complete(history, [])
    sent = openai_server.requests[-1].json["messages"][1]["tool_calls"][0]["function"]
    assert json.loads(sent["arguments"]) == {"city": "Paris"}


@pytest.mark.parametrize("text", ["", "  ", "{}"])
async def test_calls_without_arguments_read_as_an_empty_dict(text: str) -> None:
    model = ScriptedModel([AssistantMessage(tool_calls=(_call("ping", text),))])
    response = await model.complete([UserMessage(content="ping")], [])
    (call,) = response.tool_calls
    assert (dict(call.arguments), call.arguments.get("x", "default")) == ({}, "default")
