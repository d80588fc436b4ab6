"""ParsingModel: tool calls parsed out of an inner model's text, streamed and not."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.openai_server import FakeOpenAIServer, delta, sse
from toolwire.models import (
    AssistantMessage,
    ModelContentDelta,
    ModelReasoningDelta,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    OpenAIChatModel,
    ParsingModel,
    ScriptedModel,
    ToolMessage,
    UserMessage,
)
from toolwire.models.base import Model
from toolwire.parsing import UnknownFormatError
from toolwire.tools import Tool, ToolCall

WEATHER = Tool(
    name="get_weather",
    description="Weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
ADD = Tool(
    name="add",
    description="Add two numbers",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    },
)
TOOLS = [WEATHER, ADD]
HI = [UserMessage(content="hi")]

HERMES_TWO = (
    "Let me check.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
)


async def collect(model: Model, **kw: Any) -> list[ModelStreamEvent]:
    messages = kw.pop("messages", HI)
    tools = kw.pop("tools", TOOLS)
    return [ev async for ev in model.stream(messages, tools, **kw)]


def final(events: list[ModelStreamEvent]) -> ModelResponse:
    assert isinstance(events[-1], ModelResponse)
    assert not any(isinstance(e, ModelResponse) for e in events[:-1])
    return events[-1]


def summary(response: ModelResponse) -> tuple[Any, ...]:
    msg = response.message
    calls = [(c.name, c.arguments) for c in msg.tool_calls]
    return msg.content, msg.reasoning, calls, response.finish_reason


def calls_from_events(events: list[ModelStreamEvent]) -> list[tuple[int, str, str, str]]:
    """(index, id, name, arguments) per call, assembled from the stream's events."""
    starts = {e.index: e for e in events if isinstance(e, ModelToolCallStart)}
    args: dict[int, str] = {}
    for e in events:
        if isinstance(e, ModelToolCallArgsDelta):
            args[e.index] = args.get(e.index, "") + e.text
    return [(i, starts[i].id, starts[i].name, args.get(i, "")) for i in sorted(starts)]


async def test_hermes_text_becomes_tool_calls() -> None:
    model = ParsingModel(ScriptedModel([HERMES_TWO]), "hermes")
    events = await collect(model)
    response = final(events)

    assert summary(response) == (
        "Let me check.",
        None,
        [("get_weather", '{"city":"Paris"}'), ("add", '{"a":1,"b":2}')],
        "tool_calls",
    )
    streamed = calls_from_events(events)
    assert [i for i, *_ in streamed] == [0, 1]
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
        (call_id, name, args) for _, call_id, name, args in streamed
    ]
    assert "".join(e.text for e in events if isinstance(e, ModelContentDelta)) == "Let me check."


@pytest.mark.parametrize("chunk_size", [1, 3, 1000])
async def test_any_split_of_the_stream_and_complete_agree(chunk_size: int) -> None:
    text = "<think>\nweather first\n</think>\n\n" + HERMES_TWO
    streamed = await collect(ParsingModel(ScriptedModel([text], chunk_size=chunk_size), "hermes"))
    whole = await ParsingModel(ScriptedModel([text]), "hermes").complete(HI, TOOLS)
    assert summary(final(streamed)) == summary(whole)
    assert whole.message.reasoning == "weather first"
    assert len(whole.message.tool_calls) == 2


async def test_inner_model_gets_the_request_unchanged() -> None:
    history = [
        UserMessage(content="weather?"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="get_weather", arguments="{}"),)),
        ToolMessage(call_id="c1", name="get_weather", content="sunny"),
    ]
    settings = ModelSettings(tool_choice="auto", temperature=0.2)
    inner = ScriptedModel(["It is sunny."])
    response = await ParsingModel(inner, "hermes").complete(history, TOOLS, settings)

    assert response.message == AssistantMessage(content="It is sunny.")
    assert response.finish_reason == "stop"
    request = inner.requests[0]
    assert request.messages == tuple(history)
    assert request.tools == tuple(TOOLS)
    assert request.settings is settings


async def test_native_calls_pass_through_numbered_after_parsed_ones() -> None:
    native = ToolCall(id="native_1", name="add", arguments='{"a": 5, "b": 6}')
    reply = AssistantMessage(content=HERMES_TWO, tool_calls=(native,))

    events = await collect(ParsingModel(ScriptedModel([reply], chunk_size=5), "hermes"))
    streamed = calls_from_events(events)
    assert [(i, name) for i, _, name, _ in streamed] == [(0, "get_weather"), (1, "add"), (2, "add")]
    assert streamed[2][1:] == ("native_1", "add", '{"a": 5, "b": 6}')
    response = final(events)
    assert [c.id for c in response.message.tool_calls][2] == "native_1"

    whole = await ParsingModel(ScriptedModel([reply]), "hermes").complete(HI, TOOLS)
    assert summary(whole) == summary(response)


async def test_native_call_before_a_call_the_end_of_output_completes() -> None:
    # qwen3_xml: a call whose </function> never comes is complete only at the end of the
    # output, after the native call has streamed: it is numbered after it, in both paths.
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
    native = ToolCall(id="n1", name="add", arguments='{"a": 1}')
    reply = AssistantMessage(content=text, tool_calls=(native,))

    events = await collect(ParsingModel(ScriptedModel([reply]), "qwen3_xml"))
    assert [(i, name) for i, _, name, _ in calls_from_events(events)] == [
        (0, "add"),
        (1, "get_weather"),
    ]
    whole = await ParsingModel(ScriptedModel([reply]), "qwen3_xml").complete(HI, TOOLS)
    assert summary(whole) == summary(final(events))
    assert [c.name for c in whole.message.tool_calls] == ["add", "get_weather"]


async def test_inner_reasoning_passes_through() -> None:
    reply = AssistantMessage(reasoning="thinking hard", content=HERMES_TWO)
    events = await collect(ParsingModel(ScriptedModel([reply]), "hermes"))
    assert "".join(e.text for e in events if isinstance(e, ModelReasoningDelta)) == "thinking hard"
    assert final(events).message.reasoning == "thinking hard"


async def test_prefilled_think_with_prompt_suffix() -> None:
    text = "plan it</think>\n\nDone."
    model = ParsingModel(ScriptedModel([text, text]), "hermes", prompt_suffix="<think>\n")
    streamed = final(await collect(model))
    whole = await model.complete(HI, TOOLS)
    assert summary(streamed) == summary(whole) == ("Done.", "plan it", [], "stop")


async def test_cut_off_output_keeps_length_and_drops_the_unfinished_call() -> None:
    text = 'Sure.\n<tool_call>\n{"name": "get_weather", "argum'
    cut = ModelResponse(message=AssistantMessage(content=text), finish_reason="length")
    events = await collect(ParsingModel(ScriptedModel([cut], chunk_size=2), "hermes"))
    assert summary(final(events)) == ("Sure.", None, [], "length")
    assert not calls_from_events(events)
    whole = await ParsingModel(ScriptedModel([cut]), "hermes").complete(HI, TOOLS)
    assert summary(whole) == ("Sure.", None, [], "length")


async def test_cut_off_after_a_complete_call_keeps_it_and_length() -> None:
    text = HERMES_TWO.split('\n<tool_call>\n{"name": "add"')[0] + '\n<tool_call>\n{"na'
    cut = ModelResponse(message=AssistantMessage(content=text), finish_reason="length")
    response = await ParsingModel(ScriptedModel([cut]), "hermes").complete(HI, TOOLS)
    assert summary(response) == (
        "Let me check.",
        None,
        [("get_weather", '{"city":"Paris"}')],
        "length",
    )


@pytest.mark.parametrize(
    ("name", "fmt", "text"),
    [
        (
            "Qwen/Qwen3-8B",
            "hermes",
            '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>',
        ),
        (
            "meta-llama/Llama-3.3-70B-Instruct",
            "llama3_json",
            '{"name": "add", "parameters": {"a": 1}}',
        ),
        (
            "mistralai/Mistral-7B-Instruct-v0.3",
            "mistral_v3",
            '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}]',
        ),
    ],
)
async def test_auto_format_follows_the_model_name(name: str, fmt: str, text: str) -> None:
    model = ParsingModel(ScriptedModel([text], name=name), "auto")
    assert model.format == fmt
    assert model.name == name
    response = await model.complete(HI, TOOLS)
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [("add", '{"a":1}')]


async def test_tool_choice_none_and_parallel_false_limit_the_calls() -> None:
    model = ParsingModel(ScriptedModel([HERMES_TWO, HERMES_TWO]), "hermes")
    none = await model.complete(HI, TOOLS, ModelSettings(tool_choice="none"))
    assert summary(none) == ("Let me check.", None, [], "stop")

    events = await collect(model, settings=ModelSettings(parallel_tool_calls=False))
    assert [name for _, _, name, _ in calls_from_events(events)] == ["get_weather"]
    assert [c.name for c in final(events).message.tool_calls] == ["get_weather"]


def test_unknown_format_is_refused_at_construction() -> None:
    with pytest.raises(UnknownFormatError, match="Known formats"):
        ParsingModel(ScriptedModel([]), "nope")


async def test_around_openai_chat_model_streaming(openai_server: FakeOpenAIServer) -> None:
    text = HERMES_TWO
    pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
    openai_server.reply(
        sse(
            [delta(reasoning_content="hmm")]
            + [delta(p) for p in pieces]
            + [delta(finish_reason="stop")]
        )
    )
    inner = OpenAIChatModel(openai_server.base_url, "sk-test", "Qwen/Qwen3-8B")
    async with inner:
        events = await collect(ParsingModel(inner, "auto"), messages=HI)
    response = final(events)
    assert summary(response) == (
        "Let me check.",
        "hmm",
        [("get_weather", '{"city":"Paris"}'), ("add", '{"a":1,"b":2}')],
        "tool_calls",
    )
    assert [i for i, *_ in calls_from_events(events)] == [0, 1]
    body = openai_server.last.json
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "add"]
    assert body["stream"] is True
