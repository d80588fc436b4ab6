"""A Chat Completions request body → `ChatRequest`, and the 400s for everything else."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolwire.models.base import ModelSettings
from toolwire.models.messages import AssistantMessage, ToolMessage, UserMessage
from toolwire.server.configuration.config import Dialect, LimitsConfig
from toolwire.server.http.errors import GatewayError
from toolwire.server.protocols import checks
from toolwire.server.protocols.chat_completions.request import ChatRequest, parse_chat_request
from toolwire.tools.call import ToolCall

SERVER_TOOLS = ("calculator",)
USER = {"role": "user", "content": "hi"}
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"enum": ["c", "f"]}},
    "required": ["city"],
}


def tool(name: str = "get_weather", **function: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, **function}}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "messages": [USER], **fields}


def parse(
    data: Any,
    *,
    limits: LimitsConfig | None = None,
    strict: bool = False,
    dialect: Dialect = "openai",
    server_tools: tuple[str, ...] = SERVER_TOOLS,
) -> ChatRequest:
    return parse_chat_request(
        data,
        limits=limits or LimitsConfig(),
        strict_tool_results=strict,
        dialect=dialect,
        server_tools=server_tools,
    )


def refused(data: Any, **kwargs: Any) -> GatewayError:
    with pytest.raises(GatewayError) as info:
        parse(data, **kwargs)
    err = info.value
    assert err.status == 400
    assert err.type == "invalid_request_error"
    assert err.body()["error"]["param"] == err.param
    return err


# --- what a valid request becomes ----------------------------------------------------------


def test_minimal_request() -> None:
    request = parse(body())
    assert request == ChatRequest(
        model="gpt-test",
        messages=(UserMessage(content="hi"),),
        tools=(),
        settings=ModelSettings(),
        stream=False,
        include_usage=False,
        dropped_results=(),
    )


def test_settings_and_pass_through_fields() -> None:
    request = parse(
        body(
            temperature=0,
            max_tokens=100,
            parallel_tool_calls=False,
            tools=[tool()],
            tool_choice="required",
            top_p=0.5,
            stop=["END"],
            seed=7,
            user="u-1",
            response_format={"type": "json_object"},
            logit_bias={"50256": -100},
            metadata={"k": "v"},
            reasoning_effort="low",
            chat_template_kwargs={"enable_thinking": False},
            presence_penalty=None,
            n=1,
            stream=False,
        )
    )
    assert request.settings == ModelSettings(
        temperature=0.0,
        max_tokens=100,
        tool_choice="required",
        parallel_tool_calls=False,
        extra={
            "top_p": 0.5,
            "stop": ["END"],
            "seed": 7,
            "user": "u-1",
            "response_format": {"type": "json_object"},
            "logit_bias": {"50256": -100},
            "metadata": {"k": "v"},
            "reasoning_effort": "low",
            "chat_template_kwargs": {"enable_thinking": False},
        },
    )


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    assert parse(body(max_completion_tokens=10)).settings.max_tokens == 10
    assert parse(body(max_tokens=20, max_completion_tokens=10)).settings.max_tokens == 10


def test_stream_and_include_usage() -> None:
    request = parse(body(stream=True, stream_options={"include_usage": True}))
    assert request.stream
    assert request.include_usage
    assert not parse(body(stream=True, stream_options={})).include_usage


def test_a_multi_turn_request_with_parallel_calls_and_a_dropped_orphan() -> None:
    request = parse(
        body(
            tools=[tool(parameters=WEATHER_SCHEMA)],
            messages=[
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"A"}'},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"B"}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "1"},
                {"role": "tool", "tool_call_id": "c2", "content": "2"},
                {"role": "tool", "tool_call_id": "old", "content": "?"},
                {"role": "assistant", "content": "Done."},
                USER,
            ],
        )
    )
    assert request.dropped_results == ("old",)
    assert [m.role for m in request.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert request.messages[3] == ToolMessage(call_id="c2", name="get_weather", content="2")
    (weather,) = request.tools
    assert weather.name == "get_weather"
    assert weather.input_schema == WEATHER_SCHEMA
    assert weather.invoker is None


# --- the scalar fields ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "param", "advice"),
    [
        ([], None, "must be a JSON object, not an array"),
        ({"messages": [USER]}, "model", "Field required"),
        (body(model=5), "model", "valid string"),
        (body(model=""), "model", "at least 1 character"),
        (body(temperature="0.5"), "temperature", "valid number"),
        (body(temperature=True), "temperature", "valid number"),
        (body(temperature=3), "temperature", "less than or equal to 2"),
        (body(top_p=2), "top_p", "less than or equal to 1"),
        (body(max_tokens=0), "max_tokens", "greater than or equal to 1"),
        (body(max_completion_tokens=1.5), "max_completion_tokens", "valid integer"),
        (body(stream=1), "stream", "valid boolean"),
        (
            body(stream_options={"include_usage": "yes"}),
            "stream_options.include_usage",
            "valid boolean",
        ),
        (body(parallel_tool_calls="yes"), "parallel_tool_calls", "valid boolean"),
        (body(stop=5), "stop", "a string or an array of strings, not a number"),
        (body(stop=["a", 1]), "stop", "a string or an array of strings"),
        (body(seed="1"), "seed", "valid integer"),
        (body(user=1), "user", "valid string"),
        (body(response_format="json"), "response_format", "valid dictionary"),
        (body(response_format={}), "response_format.type", "Field required"),
        (body(logit_bias={"1": "x"}), "logit_bias.1", "valid number"),
        (body(top_logprobs=50), "top_logprobs", "less than or equal to 20"),
        (body(metadata={"a": 1}), "metadata.a", "valid string"),
    ],
)
def test_bad_scalar_field_is_named(data: Any, param: str | None, advice: str) -> None:
    err = refused(data)
    assert err.param == param
    assert advice in err.message
    if param is not None:
        assert f"'{param}'" in err.message


def test_only_one_choice() -> None:
    err = refused(body(n=2))
    assert err.param == "n"
    assert err.code == "unsupported_parameter"
    assert "omit 'n' or send 1" in err.message


@pytest.mark.parametrize(
    ("field", "value", "advice"),
    [
        ("functions", [{"name": "f", "parameters": {}}], 'send \'tools\': [{"type": "function"'),
        ("function_call", "auto", "send 'tool_choice'"),
    ],
)
def test_legacy_function_calling_fields_point_to_tools(field: str, value: Any, advice: str) -> None:
    err = refused(body(**{field: value}))
    assert err.param == field
    assert err.code == "unsupported_parameter"
    assert advice in err.message


@pytest.mark.parametrize(
    ("messages", "got"),
    [(None, "null"), ([], "an empty array"), ({"role": "user"}, "an object")],
)
def test_messages_must_be_a_non_empty_array(messages: Any, got: str) -> None:
    data = body()
    data["messages"] = messages
    if messages is None:
        del data["messages"]
        assert refused(data).param == "messages"
        return
    err = refused(data)
    assert err.param == "messages"
    assert f"must be a non-empty array of messages, not {got}" in err.message


def test_a_bad_message_is_named_through_the_whole_request() -> None:
    err = refused(body(messages=[USER, {"role": "bot"}]))
    assert err.param == "messages[1].role"
    assert "use one of 'system', 'developer', 'user', 'assistant', 'tool'" in err.message


# --- limits --------------------------------------------------------------------------------


def test_too_many_messages() -> None:
    err = refused(body(messages=[USER] * 4), limits=LimitsConfig(max_messages=3))
    assert err.param == "messages"
    assert err.code == "too_many_messages"
    assert "4 messages is more than this gateway's limit of 3" in err.message
    assert "limits.max_messages" in err.message
    assert len(parse(body(messages=[USER] * 3), limits=LimitsConfig(max_messages=3)).messages) == 3


def test_too_many_tools() -> None:
    tools = [tool(f"t{n}") for n in range(3)]
    err = refused(body(tools=tools), limits=LimitsConfig(max_tools=2))
    assert err.param == "tools"
    assert err.code == "too_many_tools"
    assert "3 tools is more than this gateway's limit of 2" in err.message
    assert "limits.max_tools" in err.message


# --- tools ---------------------------------------------------------------------------------


def test_tool_definitions() -> None:
    request = parse(
        body(
            tools=[
                tool("get_weather", description="Weather.", parameters=WEATHER_SCHEMA, strict=True),
                tool("no_params"),
                tool("empty_params", parameters={}),
                tool("untyped", parameters={"properties": {"q": {"type": "string"}}}),
            ]
        )
    )
    weather, no_params, empty, untyped = request.tools
    assert (weather.name, weather.description, weather.input_schema) == (
        "get_weather",
        "Weather.",
        WEATHER_SCHEMA,
    )
    assert no_params.input_schema == {"type": "object", "properties": {}}
    assert no_params.description == ""
    assert empty.input_schema == {"type": "object", "properties": {}}
    assert untyped.input_schema == {"type": "object", "properties": {"q": {"type": "string"}}}


@pytest.mark.parametrize(
    ("entry", "param", "advice", "code"),
    [
        ("get_weather", "tools[0]", "must be a tool object, not a string", None),
        (
            {"type": "custom", "custom": {"name": "x"}},
            "tools[0].type",
            "only function tools are supported",
            None,
        ),
        ({"type": "function"}, "tools[0].function", "not null", None),
        (
            tool("has space"),
            "tools[0].function.name",
            "1 to 64 letters, digits, '_' or '-'; got 'has space'",
            "invalid_tool_name",
        ),
        (tool("a" * 65), "tools[0].function.name", "1 to 64 letters", "invalid_tool_name"),
        (tool("dotted.name"), "tools[0].function.name", "1 to 64 letters", "invalid_tool_name"),
        (
            {"type": "function", "function": {}},
            "tools[0].function.name",
            "got null",
            "invalid_tool_name",
        ),
        (
            tool(description=5),
            "tools[0].function.description",
            "must be a string, not a number",
            None,
        ),
        (tool(strict="yes"), "tools[0].function.strict", "must be a boolean", None),
        (
            tool(parameters=[]),
            "tools[0].function.parameters",
            "tool 'get_weather': must be a JSON Schema object, not an array",
            "invalid_tool_schema",
        ),
        (
            tool(parameters={"type": "objec"}),
            "tools[0].function.parameters",
            "tool 'get_weather': not a valid JSON Schema at type:",
            "invalid_tool_schema",
        ),
        (
            tool(
                parameters={
                    "type": "object",
                    "properties": {"n": {"type": "integer", "minimum": "0"}},
                }
            ),
            "tools[0].function.parameters",
            "not a valid JSON Schema at properties/n/minimum",
            "invalid_tool_schema",
        ),
        (
            tool(parameters={"type": "string"}),
            "tools[0].function.parameters.type",
            "the schema's type must be 'object', not 'string'; put the fields under 'properties'",
            "invalid_tool_schema",
        ),
        (
            tool(parameters={"$schema": "http://127.0.0.1:9/metaschema", "type": "object"}),
            "tools[0].function.parameters",
            "'$schema' is 'http://127.0.0.1:9/metaschema', not a JSON Schema draft",
            "invalid_tool_schema",
        ),
    ],
)
def test_bad_tool_is_named(entry: Any, param: str, advice: str, code: str | None) -> None:
    err = refused(body(tools=[entry]))
    assert err.param == param
    assert err.code == code
    assert advice in err.message


def test_known_metaschemas_are_accepted() -> None:
    drafts = [
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2020-12/schema",
    ]
    tools = [
        tool(f"t{n}", parameters={"$schema": d, "type": "object"}) for n, d in enumerate(drafts)
    ]
    assert len(parse(body(tools=tools)).tools) == 2


def test_tools_must_be_an_array() -> None:
    err = refused(body(tools={"get_weather": {}}))
    assert err.param == "tools"
    assert "must be an array of tools, not an object" in err.message


def test_duplicate_tool_names() -> None:
    err = refused(body(tools=[tool("a"), tool("b"), tool("a")]))
    assert err.param == "tools[2].function.name"
    assert err.code == "duplicate_tool_name"
    assert "tools[0] already has the name 'a'" in err.message


def test_a_client_tool_may_not_take_a_server_tools_name() -> None:
    err = refused(body(tools=[tool("calculator")]))
    assert err.param == "tools[0].function.name"
    assert err.code == "tool_name_clash"
    assert "clashes with a gateway tool" in err.message
    assert "rename your tool" in err.message


def test_schema_checks_are_cached_across_requests() -> None:
    schema = {"type": "object", "properties": {"cache_probe": {"type": "string"}}}
    before = checks._cached_check.cache_info()
    for _ in range(3):
        parse(body(tools=[tool(parameters=copy.deepcopy(schema))]))
    after = checks._cached_check.cache_info()
    assert after.misses == before.misses + 1
    assert after.hits == before.hits + 2


def test_a_cached_bad_schema_is_refused_every_time() -> None:
    for _ in range(2):
        err = refused(body(tools=[tool(parameters={"type": "object", "required": "x"})]))
        assert err.code == "invalid_tool_schema"


# --- tool_choice ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"type": "function", "function": {"name": "get_weather"}}, "get_weather"),
        ({"type": "function", "function": {"name": "calculator"}}, "calculator"),
    ],
)
def test_tool_choice(choice: Any, expected: str) -> None:
    assert parse(body(tools=[tool()], tool_choice=choice)).settings.tool_choice == expected


def test_required_with_only_server_tools_and_none_without_any() -> None:
    assert parse(body(tool_choice="required")).settings.tool_choice == "required"
    assert parse(body(tool_choice="none"), server_tools=()).settings.tool_choice == "none"
    assert parse(body(tool_choice="auto"), server_tools=()).settings.tool_choice == "auto"


@pytest.mark.parametrize(
    ("choice", "param", "advice"),
    [
        (
            "always",
            "tool_choice",
            "'always' is not a tool choice; use 'auto', 'none', 'required' or",
        ),
        ("get_weather", "tool_choice", '{"type": "function", "function": {"name": "<tool name>"}}'),
        (3, "tool_choice", "got a number"),
        ({"type": "allowed_tools"}, "tool_choice", "got type 'allowed_tools'"),
        (
            {"type": "function", "name": "get_weather"},
            "tool_choice.function.name",
            "the name is null",
        ),
        (
            {"type": "function", "function": {"name": "nope"}},
            "tool_choice.function.name",
            "'nope' is not one of the tools; use one of 'get_weather', 'calculator'",
        ),
    ],
)
def test_bad_tool_choice(choice: Any, param: str, advice: str) -> None:
    err = refused(body(tools=[tool()], tool_choice=choice))
    assert err.param == param
    assert err.code == "invalid_tool_choice"
    assert advice in err.message


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
def test_forcing_a_call_needs_tools(choice: Any) -> None:
    err = refused(body(tool_choice=choice), server_tools=())
    assert err.param == "tool_choice"
    assert err.code == "invalid_tool_choice"
    assert "needs tools, and this request has none" in err.message
    assert "send 'tools'" in err.message


# --- the dialect, end to end ---------------------------------------------------------------

TOOL_REQUEST_MESSAGES = [
    USER,
    {"role": "assistant", "content": '{"tool_request": {"name": "get_weather", "arguments": {}}}'},
    {"role": "tool_result", "name": "get_weather", "content": "sunny"},
]


def test_tool_request_dialect() -> None:
    request = parse(body(messages=TOOL_REQUEST_MESSAGES, tools=[tool()]), dialect="tool_request")
    assert request.messages[1:] == (
        AssistantMessage(
            tool_calls=(ToolCall(id="toolreq_1", name="get_weather", arguments="{}"),)
        ),
        ToolMessage(call_id="toolreq_1", name="get_weather", content="sunny"),
    )


def test_tool_request_dialect_off() -> None:
    err = refused(body(messages=TOOL_REQUEST_MESSAGES))
    assert err.param == "messages[2].role"
    assert "set `dialect: tool_request`" in err.message


def test_strict_tool_results_reach_the_pairing() -> None:
    messages = [USER, {"role": "tool", "tool_call_id": "x", "content": "?"}]
    assert parse(body(messages=messages)).dropped_results == ("x",)
    assert refused(body(messages=messages), strict=True).code == "orphan_tool_result"
