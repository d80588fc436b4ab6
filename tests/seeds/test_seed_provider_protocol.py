"""Seed 002 (`002_48acf1caa212655b.txt`): the tool provider protocol.

Each example of the document, written against toolwire with only the imports changed,
does what the document says: `Tool` / `ToolParameter` / `ToolResult` built as it builds
them, `ToolProviderProtocol` with `isinstance`, the `WeatherToolProvider` (two-argument
`execute_tool`, results without call ids) plugged into `Agent`, `ToolRunner` and the
gateway, the error classes raised with a message, and `MockToolProvider`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from e2e_chat_support import live_gateway, openai_upstream, sdk
from live import LiveServer
from pydantic import BaseModel
from seed_weather import CONFIGS, WeatherToolProvider
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from toolwire import (
    Agent,
    AssistantMessage,
    MockToolProvider,
    OfflineModel,
    ScriptedModel,
    Tool,
    Toolbox,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    ToolError,
    ToolErrorInfo,
    ToolExecutionError,
    ToolMessage,
    ToolNotFoundError,
    ToolParameter,
    ToolParameterError,
    ToolProvider,
    ToolProviderProtocol,
    ToolResult,
    ToolRunner,
    tool,
)
from toolwire.server import create_app
from toolwire.server.configuration.loader import ConfigError, parse_config

PARIS = {"city": "Paris", "units": "celsius"}


def call(name: str, arguments: dict[str, Any] | str, id: str = "call_1") -> ToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=id, name=name, arguments=raw)


# --- ToolProviderProtocol -------------------------------------------------------------------


def test_the_protocol_is_toolwires_provider_and_checks_with_isinstance() -> None:
    assert ToolProviderProtocol is ToolProvider
    assert isinstance(WeatherToolProvider({}), ToolProviderProtocol)
    assert not isinstance(object(), ToolProviderProtocol)


async def test_list_tools_example_prints_names_and_parameters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tool_provider = WeatherToolProvider({})
    tools = await tool_provider.list_tools()
    for t in tools:
        print(f"{t.name}: {t.description}")
        for param_name, param in t.parameters.items():
            print(f"  {param_name} ({param.type}): {param.description}")
    assert capsys.readouterr().out.splitlines() == [
        "get_current_weather: Get current weather conditions for a city",
        "  city (string): City name",
        "  units (string): Temperature units",
        "get_weather_forecast: Get weather forecast for multiple days",
        "  city (string): City name",
        "  days (integer): Number of days to forecast",
    ]


class Address(BaseModel):
    street: str
    city: str


@tool
def ship(
    address: Address,
    speed: Literal["standard", "express"] = "standard",
    insured: bool | None = None,
    count: int = 1,
) -> str:
    """Ship a parcel.

    Args:
        address: Where to.
        speed: How fast.
    """
    return "shipped"


def test_tool_functions_list_their_parameters_as_tool_parameters_too() -> None:
    params = ship.parameters
    assert {name: p.type for name, p in params.items()} == {
        "address": "object",
        "speed": "string",
        "insured": "boolean",
        "count": "integer",
    }
    assert params["address"].required
    assert not params["speed"].required
    assert params["speed"].enum == ["standard", "express"]
    assert params["speed"].default == "standard"
    assert params["address"].description == "Where to."
    # Nothing of the nested schema is lost: models still see it whole.
    address = ship.input_schema["properties"]["address"]
    assert params["address"].json_schema == address
    assert address["properties"]["street"] == {"type": "string"}
    assert ship.to_openai()["function"]["parameters"] is ship.input_schema


async def test_execute_tool_example_success_and_error(capsys: pytest.CaptureFixture[str]) -> None:
    tool_provider = WeatherToolProvider({})
    for name in ("get_current_weather", "get_weather"):
        result = await tool_provider.execute_tool(name, {"city": "Paris", "units": "metric"})
        if result.success:
            print(f"Weather data: {result.result}")
        else:
            print(f"Error: {result.error}")
    data, error = capsys.readouterr().out.splitlines()
    assert data.startswith("Weather data: {'city': 'Paris', 'temperature': 72.5")
    assert error == "Error: Unknown tool: get_weather"


# --- Data models --------------------------------------------------------------------------


def test_tool_example_derives_the_schema_models_see() -> None:
    weather = Tool(
        name="get_weather",
        description="Get current weather information for a city",
        parameters={
            "city": ToolParameter(type="string", description="Name of the city", required=True),
            "units": ToolParameter(
                type="string",
                description="Temperature units",
                required=False,
                default="celsius",
                enum=["celsius", "fahrenheit", "kelvin"],
            ),
        },
    )
    assert list(weather.parameters) == ["city", "units"]
    assert weather.parameters["units"].default == "celsius"
    assert weather.parameters["city"].name == "city"  # filled in from the key
    assert weather.input_schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Name of the city"},
            "units": {
                "type": "string",
                "description": "Temperature units",
                "enum": ["celsius", "fahrenheit", "kelvin"],
                "default": "celsius",
            },
        },
        "required": ["city"],
    }
    assert weather.to_openai()["function"]["parameters"] == weather.input_schema
    assert weather.to_anthropic()["input_schema"] == weather.input_schema


def test_parameters_default_to_none_and_may_be_empty() -> None:
    for t in (Tool(name="ping", description="Ping."), Tool(name="ping", parameters={})):
        assert t.parameters == {}
        assert t.input_schema == {"type": "object", "properties": {}}


def test_tool_parameter_examples() -> None:
    param = ToolParameter(
        type="string", description="The city name to get weather for", required=True
    )
    enum_param = ToolParameter(
        type="string",
        description="Temperature units",
        required=False,
        default="celsius",
        enum=["celsius", "fahrenheit", "kelvin"],
    )
    number_param = ToolParameter(
        type="number", description="Maximum temperature threshold", required=False, default=30.0
    )
    assert param.required
    assert ToolParameter(type="string").required is False  # the documented default
    assert enum_param.to_schema()["enum"] == ["celsius", "fahrenheit", "kelvin"]
    assert number_param.to_schema() == {
        "type": "number",
        "description": "Maximum temperature threshold",
        "default": 30.0,
    }
    for kind in ("string", "number", "integer", "boolean", "object", "array"):
        assert ToolParameter(type=kind).type == kind
    with pytest.raises(ToolDefinitionError, match="type 'str'; use one of string"):
        ToolParameter(type="str")


def test_tool_result_examples(capsys: pytest.CaptureFixture[str]) -> None:
    ok = ToolResult(
        success=True,
        result={"temperature": 22.5, "humidity": 65, "conditions": "partly cloudy"},
    )
    failed = ToolResult(success=False, error="City 'InvalidCity' not found")
    assert ok.success
    assert ok.error is None
    assert ok.result["humidity"] == 65
    assert (ok.call_id, ok.name) == ("", "")  # the runner fills them in
    print(f"Error: {failed.error}")
    assert capsys.readouterr().out == "Error: City 'InvalidCity' not found\n"
    assert failed.error == "City 'InvalidCity' not found"
    assert isinstance(failed.error, str)
    assert failed.error.code == "execution_error"
    assert failed.error.message == "City 'InvalidCity' not found"
    coded = ToolErrorInfo(code="timeout", message="Too slow.")
    assert (coded, coded.code) == ("Too slow.", "timeout")


def test_passing_a_json_schema_as_parameters_still_works_but_is_deprecated() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    with pytest.warns(DeprecationWarning, match="use input_schema="):
        old = Tool(name="search", parameters=schema)
    new = Tool(name="search", input_schema=schema)
    assert old == new
    assert old.to_openai() == new.to_openai()
    assert old.parameters["q"].required
    assert old.parameters["q"].type == "string"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Tool(name="search", input_schema=schema)  # the new spelling does not warn


def test_tool_definition_mistakes_say_what_to_change() -> None:
    with pytest.raises(ToolDefinitionError, match="must map names to ToolParameter"):
        Tool(name="t", parameters={"city": "string"})  # type: ignore[dict-item]
    with pytest.raises(ToolDefinitionError, match="describe different arguments"):
        Tool(
            name="t",
            parameters={"a": ToolParameter(type="string")},
            input_schema={"type": "object", "properties": {"b": {"type": "string"}}},
        )
    with pytest.raises(ToolDefinitionError, match="needs a name="):
        Tool.from_parameters("t", "", [ToolParameter(type="string")])


# --- The implementation example, end to end --------------------------------------------------


async def test_weather_provider_runs_through_the_runner_without_context() -> None:
    runner = ToolRunner(WeatherToolProvider({}))
    ok = await runner.exec(call("get_current_weather", {"city": "Paris"}, id="c1"))
    assert ok.success, ok.error
    assert (ok.call_id, ok.name) == ("c1", "get_current_weather")
    assert ok.result["temperature"] == 22.5  # the declared default unit was applied
    assert ok.result["units"] == "celsius"
    forecast = await runner.exec(call("get_weather_forecast", {"city": "Oslo", "days": 2}))
    assert [d["date"] for d in forecast.result["forecast"]] == ["2024-01-01", "2024-01-02"]
    # The declared parameters are enforced before the provider runs.
    bad = await runner.exec(call("get_current_weather", {"city": "Paris", "units": "rankine"}))
    assert bad.error is not None
    assert bad.error.code == "invalid_arguments"


async def test_weather_provider_in_an_agent_answers_through_a_scripted_model() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=(call("get_current_weather", {"city": "Paris"}, id="call_w"),)
            ),
            "It is 22.5°C and partly cloudy in Paris.",
        ]
    )
    result = await Agent(model, WeatherToolProvider({})).run("Weather in Paris?")
    model.assert_complete()
    assert result.status == "completed"
    assert result.output == "It is 22.5°C and partly cloudy in Paris."
    first, second = model.requests
    shown = {t.name: t.input_schema for t in first.tools}
    assert shown["get_current_weather"]["required"] == ["city"]
    assert shown["get_weather_forecast"]["properties"]["days"]["type"] == "integer"
    answer = second.messages[-1]
    assert isinstance(answer, ToolMessage)
    assert (answer.call_id, answer.is_error) == ("call_w", False)
    assert json.loads(answer.content)["conditions"] == "partly cloudy"


async def test_weather_provider_in_an_agent_with_the_offline_model() -> None:
    result = await Agent(OfflineModel(), WeatherToolProvider({})).run(
        "What are the weather conditions in Paris?"
    )
    assert result.status == "completed"
    [step, _] = result.steps
    [weather] = step.tool_results
    assert (weather.name, weather.result["city"]) == ("get_current_weather", "Paris")
    assert "partly cloudy" in result.output


class FailingProvider:
    """Returns the seed's error result: no call id, a plain-text error."""

    async def list_tools(self) -> list[Tool]:
        return [Tool(name="lookup", parameters={"city": ToolParameter(type="string")})]

    async def execute_tool(self, tool_name: str, parameters: dict[str, Any]) -> ToolResult:
        return ToolResult(success=False, error=f"City '{parameters['city']}' not found")


class LateError(FailingProvider):
    """Sets a plain string as the error of a result it already built."""

    async def execute_tool(self, tool_name: str, parameters: dict[str, Any]) -> ToolResult:
        result = ToolResult(success=False)
        result.error = "Lookup is down"  # type: ignore[assignment]
        return result


async def test_a_plain_string_error_set_late_still_reaches_the_model() -> None:
    result = await ToolRunner(LateError()).exec(call("lookup", {"city": "Rome"}))
    assert result.error is not None
    assert (result.error.code, result.error.message) == ("execution_error", "Lookup is down")


async def test_a_providers_failed_result_reaches_the_model_with_its_message() -> None:
    # Regression: the runner read `.code` of a plain-string error and reported
    # "internal error in the tool runner" instead of the provider's message.
    result = await ToolRunner(FailingProvider()).exec(call("lookup", {"city": "Atlantis"}))
    assert not result.success
    assert result.error == "City 'Atlantis' not found"
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert result.call_id == "call_1"

    model = ScriptedModel(
        [AssistantMessage(tool_calls=(call("lookup", {"city": "Atlantis"}),)), "No such city."]
    )
    await Agent(model, FailingProvider()).run("Where is Atlantis?")
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage)
    assert sent.is_error
    assert json.loads(sent.content)["error"] == {
        "code": "execution_error",
        "message": "City 'Atlantis' not found",
    }


# --- Providers with and without the context argument -----------------------------------------


class ContextAware:
    def __init__(self) -> None:
        self.seen: list[ToolContext] = []

    async def list_tools(self) -> list[Tool]:
        return [Tool(name="whoami")]

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        self.seen.append(ctx)
        return ToolResult(success=True, result=ctx.principal)


async def test_the_context_goes_only_to_providers_that_take_it() -> None:
    aware = ContextAware()
    box = Toolbox([aware, WeatherToolProvider({})])
    runner = ToolRunner(box)
    ctx = ToolContext(principal="ana")
    who = await runner.exec(call("whoami", {}), ctx)
    weather = await runner.exec(call("get_current_weather", {"city": "Rome"}), ctx)
    assert (who.result, weather.result["city"]) == ("ana", "Rome")
    assert aware.seen == [ctx]


class NoExecute:
    async def list_tools(self) -> list[Tool]:
        return []


class SyncProvider:
    def list_tools(self) -> list[Tool]:
        return []

    def execute_tool(self, tool_name: str, parameters: dict[str, Any]) -> ToolResult:
        return ToolResult(success=True)


class OneArgument:
    async def list_tools(self) -> list[Tool]:
        return []

    async def execute_tool(self, tool_name: str) -> ToolResult:
        return ToolResult(success=True)


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        (NoExecute(), "is not a tool provider: it has no execute_tool()"),
        (SyncProvider(), r"SyncProvider.list_tools must be a coroutine function: write `async def"),
        (OneArgument(), r"takes 1 argument; it must take \(tool_name, parameters\)"),
        (WeatherToolProvider, "is a class; pass an instance of it"),
    ],
)
def test_a_provider_that_does_not_fit_is_refused_when_registered(
    provider: Any, message: str
) -> None:
    for register in (Toolbox, ToolRunner, lambda p: Agent(OfflineModel(), p)):
        with pytest.raises(ToolDefinitionError, match=message):
            register(provider)


# --- Error handling ---------------------------------------------------------------------------


def test_errors_keep_the_message_they_are_raised_with() -> None:
    for cls in (ToolNotFoundError, ToolExecutionError, ToolParameterError):
        error = cls("Tool 'x' not found")
        assert isinstance(error, ToolError)
        assert str(error) == "Tool 'x' not found"
    built = ToolNotFoundError.unknown("x", ["a", "b"])
    assert str(built) == "Unknown tool 'x'. Available tools: 'a', 'b'."
    assert (built.name, built.available) == ("x", ["a", "b"])


class Raising:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def list_tools(self) -> list[Tool]:
        return [Tool(name="get_weather")]

    async def execute_tool(self, tool_name: str, parameters: dict[str, Any]) -> ToolResult:
        raise self.error


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ToolNotFoundError("Tool 'get_weather' not found"), "unknown_tool"),
        (ToolParameterError("City parameter is required"), "invalid_arguments"),
        (ToolExecutionError("Weather service is down"), "execution_error"),
    ],
)
async def test_raised_errors_become_error_results_with_their_message(
    error: Exception, code: str
) -> None:
    result = await ToolRunner(Raising(error)).exec(call("get_weather", {}))
    assert result.error is not None
    assert (result.error.code, result.error.message) == (code, str(error))


class ValidatingProvider:
    """The document's error-handling `execute_tool`: check the tool and the parameters,
    return error results rather than raising."""

    async def list_tools(self) -> list[Tool]:
        return [Tool(name="echo", parameters={"text": ToolParameter(type="string", required=True)})]

    async def execute_tool(self, tool_name: str, parameters: dict[str, Any]) -> ToolResult:
        try:
            tools = await self.list_tools()
            tool_names = [t.name for t in tools]
            if tool_name not in tool_names:
                return ToolResult(
                    success=False,
                    error=f"Tool '{tool_name}' not found. Available tools: {tool_names}",
                )
            definition = next(t for t in tools if t.name == tool_name)
            missing = [
                n for n, p in definition.parameters.items() if p.required and n not in parameters
            ]
            if missing:
                return ToolResult(success=False, error=f"Missing parameters: {missing}")
            return ToolResult(success=True, result=parameters["text"])
        except Exception as e:
            return ToolResult(success=False, error=f"Unexpected error: {e!s}")


async def test_error_handling_example() -> None:
    provider = ValidatingProvider()
    unknown = await provider.execute_tool("shout", {})
    assert unknown.error == "Tool 'shout' not found. Available tools: ['echo']"
    missing = await provider.execute_tool("echo", {})
    assert missing.error == "Missing parameters: ['text']"
    assert (await provider.execute_tool("echo", {"text": "hi"})).result == "hi"


# --- Testing: MockToolProvider ----------------------------------------------------------------


async def test_mock_tool_provider_example() -> None:
    mock_tools = [Tool(name="test_tool", description="A test tool", parameters={})]
    mock_results = {"test_tool": {"message": "success"}}
    mock_provider = MockToolProvider(mock_tools, mock_results)
    assert isinstance(mock_provider, ToolProviderProtocol)

    result = await mock_provider.execute_tool("test_tool", {})
    assert result.success
    assert result.result == {"message": "success"}
    assert mock_provider.call_history == [("test_tool", {})]


async def test_mock_provider_exceptions_arguments_and_the_runner() -> None:
    weather = Tool(
        name="get_weather",
        parameters={"city": ToolParameter(type="string", required=True)},
    )
    broken = Tool(name="broken", parameters={})
    unmocked = Tool(name="unmocked")
    mock = MockToolProvider(
        [weather, broken, unmocked],
        {"get_weather": {"temp": 21}, "broken": ConnectionError("Weather service is down")},
    )
    failed = await mock.execute_tool("broken", {})
    assert (failed.success, failed.error) == (False, "Weather service is down")
    assert (await mock.execute_tool("get_weather", {"city": "Paris"})).result == {"temp": 21}
    with pytest.raises(ToolParameterError, match='"city" is a required property'):
        await mock.execute_tool("get_weather", {})
    with pytest.raises(ToolParameterError, match="Additional properties"):
        await mock.execute_tool("get_weather", {"city": "Paris", "x": 1})
    with pytest.raises(ToolExecutionError, match="'unmocked' is not mocked"):
        await mock.execute_tool("unmocked", {})
    assert [name for name, _ in mock.call_history] == [
        "broken",
        "get_weather",
        "get_weather",
        "get_weather",
        "unmocked",
    ]
    mock.assert_called("get_weather", times=3)  # the existing MockTools API still applies

    runner = ToolRunner(mock)
    via_runner = await runner.exec(call("broken", {}))
    assert via_runner.error is not None
    assert (via_runner.error.code, via_runner.error.message) == (
        "execution_error",
        "Weather service is down",
    )
    with pytest.raises(ToolDefinitionError, match="results for 'typo'"):
        MockToolProvider([weather], {"typo": 1})


async def test_a_canned_exception_fails_the_call_with_its_message() -> None:
    # As the seed's mock does, whichever way the results are given.
    mock = MockToolProvider({"flaky": ValueError("backend down"), "gone": KeyError})
    direct = await mock.execute_tool("flaky", {})
    assert (direct.success, direct.error, direct.result) == (False, "backend down", None)
    assert direct.error is not None
    assert direct.error.code == "execution_error"

    runner = ToolRunner(mock)
    for name, message in (("flaky", "backend down"), ("gone", "Tool 'gone' failed (KeyError).")):
        result = await runner.exec(call(name, {"city": "Paris"}))
        assert result.error is not None
        assert (result.success, result.error.code, result.error.message) == (
            False,
            "execution_error",
            message,
        )
    assert mock.call_history == [
        ("flaky", {}),
        ("flaky", {"city": "Paris"}),
        ("gone", {"city": "Paris"}),
    ]


async def test_a_canned_tool_without_parameters_takes_any_and_records_them() -> None:
    seed_style = MockToolProvider(
        [Tool(name="test_tool", description="A test tool", parameters={})],
        {"test_tool": {"message": "success"}},
    )
    mapping = MockToolProvider({"test_tool": {"message": "success"}})
    for mock in (seed_style, mapping):
        direct = await mock.execute_tool("test_tool", {"city": "Paris"})
        assert (direct.success, direct.result) == (True, {"message": "success"})
        via_runner = await ToolRunner(mock).exec(call("test_tool", {"city": "Lyon", "n": 2}))
        assert (via_runner.success, via_runner.result) == (True, {"message": "success"})
        assert mock.call_history == [
            ("test_tool", {"city": "Paris"}),
            ("test_tool", {"city": "Lyon", "n": 2}),
        ]


async def test_a_canned_tool_with_a_schema_stays_strict() -> None:
    weather = Tool(name="get_weather", parameters={"city": ToolParameter(required=True)})
    closed = Tool(name="ping", input_schema={"type": "object", "additionalProperties": False})
    mock = MockToolProvider([weather, closed], {"get_weather": {"temp": 21}, "ping": "pong"})
    runner = ToolRunner(mock)
    for name, arguments in (("get_weather", {"town": "Paris"}), ("ping", {"x": 1})):
        result = await runner.exec(call(name, arguments))
        assert result.error is not None
        assert result.error.code == "invalid_arguments"
    assert mock.call_history == []  # refused before the provider was called
    with pytest.raises(ToolParameterError):
        await mock.execute_tool("ping", {"x": 1})


# --- The gateway: a provider as server tools --------------------------------------------------


@pytest.fixture(scope="module")
def weather_gateway(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    config = config_with(
        upstream=openai_upstream(_openai_server_session.base_url, {"gpt": "gpt-upstream"}),
        server_tools={
            "providers": [
                {"factory": "seed_weather:WeatherToolProvider", "config": {"api_key": "k"}}
            ]
        },
        store="memory",
    )
    with live_gateway(config) as live:
        yield live


def test_gateway_serves_a_provider_configured_by_factory(
    weather_gateway: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("get_current_weather", {"city": "Paris"}, id="call_w")]),
        completion("It is 22.5°C and partly cloudy in Paris."),
    )
    with sdk(weather_gateway) as client:
        answer = client.chat.completions.create(
            model="gpt", messages=[{"role": "user", "content": "Weather in Paris?"}]
        )
    assert answer.choices[0].message.content == "It is 22.5°C and partly cloudy in Paris."
    first, second = (r.json for r in openai_server.requests)
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert set(offered) == {"get_current_weather", "get_weather_forecast"}
    assert offered["get_current_weather"]["properties"]["units"]["enum"] == [
        "celsius",
        "fahrenheit",
        "kelvin",
    ]
    result = second["messages"][-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_w")
    assert json.loads(result["content"])["conditions"] == "partly cloudy"


def test_gateway_with_the_offline_model_and_a_no_argument_factory() -> None:
    config = config_with(
        server_tools={"providers": [{"factory": "seed_weather:make_provider"}]}, store="memory"
    )
    with live_gateway(config) as live, sdk(live) as client:
        answer = client.chat.completions.create(
            model="toolwire-offline",
            messages=[{"role": "user", "content": "What are the weather conditions in Rome?"}],
        )
    content = answer.choices[0].message.content or ""
    assert "Rome" in content
    assert "partly cloudy" in content


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"factory": "seed_weather:Nope"}, "module 'seed_weather' has no 'Nope'"),
        ({"factory": "no_such_module_xyz:P"}, "Could not import tool provider module"),
        ({"factory": "seed_weather:make_provider", "config": {"a": 1}}, "takes no arguments"),
        ({"factory": "json:loads"}, "failed: TypeError"),
        ({"factory": "json:dumps"}, "str is not a tool provider: it has no list_tools()"),
    ],
)
def test_bad_factories_are_located_config_errors(entry: dict[str, Any], message: str) -> None:
    config = config_with(server_tools={"providers": [entry]}, store="memory")
    with pytest.raises(ConfigError) as info:
        create_app(config, environ={})
    [problem] = info.value.problems
    assert problem.path == "server_tools.providers[0].factory"
    assert message in problem.message


def test_a_factory_without_a_name_is_refused_with_its_line() -> None:
    doc = parse_config(
        "server_tools:\n  providers:\n    - factory: seed_weather\n", source="tw.yaml"
    )
    [problem] = doc.errors
    assert str(problem).startswith("tw.yaml:3: server_tools.providers[0].factory:")
    assert "'module:name'" in problem.message


async def test_a_factory_function_gets_its_config() -> None:
    box = Toolbox.from_factory("seed_weather:recording_factory", {"api_key": "secret"})
    assert CONFIGS[-1] == {"api_key": "secret"}
    assert [t.name for t in box.tools] == ["get_current_weather", "get_weather_forecast"]
    result = await ToolRunner(box).exec(call("get_current_weather", {"city": "Lima"}))
    assert result.result["city"] == "Lima"
