"""PromptedModel: tools taught in the system prompt, history rewritten, output parsed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse
from toolwire.models import (
    AssistantMessage,
    Message,
    ModelContentDelta,
    ModelError,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ModelToolCallStart,
    OpenAIChatModel,
    PromptedModel,
    ScriptedModel,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.models.prompted import rewrite_history
from toolwire.parsing import render_tool_prompt
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
    input_schema={"type": "object", "properties": {"a": {"type": "integer"}}},
)
TOOLS = [WEATHER, ADD]
HI = [UserMessage(content="Weather in Paris?")]

CALL_WEATHER = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
CALL_ADD = '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'


async def collect(model: PromptedModel, **kw: Any) -> list[ModelStreamEvent]:
    messages = kw.pop("messages", HI)
    tools = kw.pop("tools", TOOLS)
    return [ev async for ev in model.stream(messages, tools, **kw)]


def final(events: list[ModelStreamEvent]) -> ModelResponse:
    assert isinstance(events[-1], ModelResponse)
    return events[-1]


def calls(response: ModelResponse) -> list[tuple[str, str]]:
    return [(c.name, c.arguments) for c in response.message.tool_calls]


def system_text(messages: tuple[Message, ...]) -> str:
    assert isinstance(messages[0], SystemMessage)
    return messages[0].content


# ----------------------------------------------------------------------------- the request


async def test_tools_go_into_the_system_prompt_not_the_request() -> None:
    inner = ScriptedModel(["Sure.\n" + CALL_WEATHER])
    settings = ModelSettings(
        tool_choice="auto", parallel_tool_calls=True, temperature=0.1, extra={"seed": 7}
    )
    response = await PromptedModel(inner).complete(HI, TOOLS, settings)

    assert calls(response) == [("get_weather", '{"city":"Paris"}')]
    assert response.message.content == "Sure."
    assert response.finish_reason == "tool_calls"
    request = inner.requests[0]
    assert request.tools == ()
    assert request.settings == ModelSettings(temperature=0.1, extra={"seed": 7})
    expected = render_tool_prompt("hermes", [t.to_openai() for t in TOOLS])
    assert request.messages == (SystemMessage(content=expected), *HI)


async def test_history_is_rewritten_for_a_tool_less_upstream() -> None:
    history: list[Message] = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather in Paris and Rome?"),
        AssistantMessage(
            content="Checking.",
            tool_calls=(
                ToolCall(id="a", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="b", name="get_weather", arguments='{"city": "Rome"}'),
            ),
        ),
        ToolMessage(call_id="a", name="get_weather", content='{"temp": 21}'),
        ToolMessage(call_id="b", name="get_weather", content='{"temp": 18}'),
        AssistantMessage(tool_calls=(ToolCall(id="c", name="add", arguments="{not json"),)),
        ToolMessage(call_id="c", name="add", content="invalid JSON", is_error=True),
        UserMessage(content="Thanks"),
    ]
    inner = ScriptedModel(["Paris 21, Rome 18."])
    await PromptedModel(inner, instructions="Use tools.").complete(history, TOOLS)

    sent = inner.requests[0].messages
    assert system_text(sent).startswith("Be brief.\n\nUse tools.\n\n")
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1
    assert sent[1:] == (
        UserMessage(content="Weather in Paris and Rome?"),
        AssistantMessage(
            content=(
                "Checking.\n"
                "<tool_call>\n"
                '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                "</tool_call>\n"
                "<tool_call>\n"
                '{"name": "get_weather", "arguments": {"city": "Rome"}}\n'
                "</tool_call>"
            )
        ),
        UserMessage(
            content=(
                '<tool_response>\n{"temp": 21}\n</tool_response>\n'
                '<tool_response>\n{"temp": 18}\n</tool_response>'
            )
        ),
        AssistantMessage(content='<tool_call>\n{"name": "add", "arguments": {}}\n</tool_call>'),
        UserMessage(content="<tool_response>\ninvalid JSON\n</tool_response>"),
        UserMessage(content="Thanks"),
    )


def test_history_in_other_formats() -> None:
    history: list[Message] = [
        AssistantMessage(
            content="One moment.",
            tool_calls=(ToolCall(id="a", name="add", arguments='{"a": 2}'),),
        ),
        ToolMessage(call_id="a", name="add", content="2"),
    ]
    assert rewrite_history("pre_json", history) == [
        AssistantMessage(content='One moment.\n<pre>{"name": "add", "arguments": {"a": 2}}</pre>'),
        UserMessage(content='<pre>{"name": "add", "result": "2"}</pre>'),
    ]
    assert rewrite_history("tool_request", history) == [
        AssistantMessage(content='{"tool_request": {"name": "add", "arguments": {"a": 2}}}'),
        UserMessage(content='{"tool_result": {"name": "add", "content": "2"}}'),
    ]


async def test_tool_choice_none_offers_no_tools_and_returns_no_calls() -> None:
    inner = ScriptedModel([CALL_WEATHER + "\nNo tools then."])
    settings = ModelSettings(tool_choice="none")
    response = await PromptedModel(inner).complete(HI, TOOLS, settings)
    assert inner.requests[0].messages == tuple(HI)
    assert calls(response) == []
    assert response.message.content == "No tools then."
    assert response.finish_reason == "stop"


async def test_no_tools_means_no_prompt() -> None:
    inner = ScriptedModel(["Hello."])
    response = await PromptedModel(inner).complete(HI, [])
    assert inner.requests[0].messages == tuple(HI)
    assert response.message.content == "Hello."


async def test_parallel_false_asks_for_one_call_and_keeps_the_first() -> None:
    inner = ScriptedModel([CALL_WEATHER + "\n" + CALL_ADD] * 2)
    model = PromptedModel(inner)
    settings = ModelSettings(parallel_tool_calls=False)

    response = await model.complete(HI, TOOLS, settings)
    assert calls(response) == [("get_weather", '{"city":"Paris"}')]
    assert "Call at most one tool per reply." in system_text(inner.requests[0].messages)

    events = await collect(model, settings=settings)
    assert [e.name for e in events if isinstance(e, ModelToolCallStart)] == ["get_weather"]
    assert calls(final(events)) == [("get_weather", '{"city":"Paris"}')]


@pytest.mark.parametrize("chunk_size", [1, 5])
async def test_streaming_any_split_matches_complete(chunk_size: int) -> None:
    text = "<think>\nneed weather\n</think>\n\nChecking.\n" + CALL_WEATHER
    streamed = final(await collect(PromptedModel(ScriptedModel([text], chunk_size=chunk_size))))
    whole = await PromptedModel(ScriptedModel([text])).complete(HI, TOOLS)
    assert streamed.message.content == whole.message.content == "Checking."
    assert streamed.message.reasoning == whole.message.reasoning == "need weather"
    assert calls(streamed) == calls(whole) == [("get_weather", '{"city":"Paris"}')]


def test_unsupported_format_is_refused() -> None:
    with pytest.raises(ValueError, match="Formats that can be written: hermes"):
        PromptedModel(ScriptedModel([]), "harmony")


async def test_tool_choice_naming_an_unknown_tool_is_a_400() -> None:
    inner = ScriptedModel([])
    with pytest.raises(ModelError, match="'nope', which is not among the tools") as err:
        await PromptedModel(inner).complete(HI, TOOLS, ModelSettings(tool_choice="nope"))
    assert err.value.status == 400
    assert err.value.body is not None
    assert err.value.body["param"] == "tool_choice"
    assert inner.requests == []


# ----------------------------------------------------------------------------- forced choice


async def test_required_obeyed_means_one_request() -> None:
    inner = ScriptedModel([CALL_ADD])
    settings = ModelSettings(tool_choice="required")
    response = await PromptedModel(inner).complete(HI, TOOLS, settings)
    assert calls(response) == [("add", '{"a":1}')]
    assert len(inner.requests) == 1
    assert "You must call at least one tool" in system_text(inner.requests[0].messages)


async def test_required_ignored_gets_one_corrective_retry() -> None:
    inner = ScriptedModel(["It is probably sunny.", CALL_WEATHER])
    settings = ModelSettings(tool_choice="required")
    response = await PromptedModel(inner).complete(HI, TOOLS, settings)

    assert calls(response) == [("get_weather", '{"city":"Paris"}')]
    assert response.usage.requests == 2
    first, retry = inner.requests
    assert retry.messages[: len(first.messages)] == first.messages
    assert retry.messages[len(first.messages) :] == (
        AssistantMessage(content="It is probably sunny."),
        UserMessage(
            content=(
                "Your reply did not call any tool. This reply must call one of the tools. "
                "Write the call now, in the format of the instructions, for example:\n"
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "..."}}\n'
                "</tool_call>"
            )
        ),
    )


async def test_named_choice_with_the_wrong_tool_is_retried_and_the_retry_returned() -> None:
    inner = ScriptedModel([CALL_WEATHER, "Still no."])
    settings = ModelSettings(tool_choice="add")
    response = await PromptedModel(inner).complete(HI, TOOLS, settings)

    # The retry's answer is returned whatever it is: no third request.
    assert response.message.content == "Still no."
    assert calls(response) == []
    assert len(inner.requests) == 2
    system = system_text(inner.requests[0].messages)
    assert "You must call the tool 'add' in your reply, and no other tool." in system
    correction = inner.requests[1].messages[-1]
    assert isinstance(correction, UserMessage)
    assert correction.content.startswith(
        "Your reply called 'get_weather' instead. This reply must call the tool 'add'."
    )
    assert inner.requests[1].messages[-2] == AssistantMessage(content=CALL_WEATHER)


async def test_cut_off_answer_is_not_retried() -> None:
    cut = ModelResponse(message=AssistantMessage(content="Let me"), finish_reason="length")
    inner = ScriptedModel([cut])
    settings = ModelSettings(tool_choice="required")
    response = await PromptedModel(inner).complete(HI, TOOLS, settings)
    assert response.finish_reason == "length"
    assert len(inner.requests) == 1


async def test_streaming_forced_choice_buffers_then_yields_the_obeying_answer() -> None:
    inner = ScriptedModel(["Here.\n" + CALL_ADD], chunk_size=3)
    events = await collect(PromptedModel(inner), settings=ModelSettings(tool_choice="add"))
    assert len(inner.requests) == 1
    assert "".join(e.text for e in events if isinstance(e, ModelContentDelta)) == "Here."
    assert [e.name for e in events if isinstance(e, ModelToolCallStart)] == ["add"]
    assert calls(final(events)) == [("add", '{"a":1}')]


async def test_streaming_ignored_choice_yields_only_the_retry() -> None:
    inner = ScriptedModel(["I would rather chat.", "OK.\n" + CALL_WEATHER], chunk_size=4)
    events = await collect(PromptedModel(inner), settings=ModelSettings(tool_choice="required"))

    assert len(inner.requests) == 2
    assert all(r.stream for r in inner.requests)
    assert "".join(e.text for e in events if isinstance(e, ModelContentDelta)) == "OK."
    response = final(events)
    assert calls(response) == [("get_weather", '{"city":"Paris"}')]
    assert response.usage.requests == 2
    assert inner.requests[1].messages[-2] == AssistantMessage(content="I would rather chat.")


class GatedModel:
    """Streams "first ", then waits for `release` before the rest of its answer."""

    name = "gated"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[Tool], settings: Any = None
    ) -> ModelResponse:
        raise NotImplementedError

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[Tool], settings: Any = None
    ) -> AsyncIterator[ModelStreamEvent]:
        yield ModelContentDelta("first ")
        await self.release.wait()
        yield ModelContentDelta(CALL_ADD)
        yield ModelResponse(message=AssistantMessage(content="first " + CALL_ADD))


async def test_streaming_auto_yields_before_the_upstream_is_done() -> None:
    inner = GatedModel()
    stream = PromptedModel(inner).stream(HI, TOOLS, ModelSettings(tool_choice="auto"))
    # wait_for only guards against a hang; buffering would never return here.
    assert await asyncio.wait_for(anext(stream), 10) == ModelContentDelta("first")
    inner.release.set()
    rest = [ev async for ev in stream]
    assert calls(final(rest)) == [("add", '{"a":1}')]


async def test_streaming_forced_choice_holds_events_until_the_answer_is_checked() -> None:
    inner = GatedModel()
    stream = PromptedModel(inner).stream(HI, TOOLS, ModelSettings(tool_choice="required"))
    pending = asyncio.ensure_future(anext(stream))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not pending.done()
    inner.release.set()
    assert await pending == ModelContentDelta("first")
    rest = [ev async for ev in stream]
    assert calls(final(rest)) == [("add", '{"a":1}')]


# ----------------------------------------------------------------------------- over HTTP


async def test_around_openai_chat_model(openai_server: FakeOpenAIServer) -> None:
    text = "Checking.\n" + CALL_WEATHER
    openai_server.reply(
        completion("I think it is sunny."),
        sse(
            [delta(text[i : i + 5]) for i in range(0, len(text), 5)] + [delta(finish_reason="stop")]
        ),
    )
    inner = OpenAIChatModel(openai_server.base_url, "sk-test", "some-base-model")
    history: list[Message] = [
        *HI,
        AssistantMessage(tool_calls=(ToolCall(id="x1", name="add", arguments='{"a": 1}'),)),
        ToolMessage(call_id="x1", name="add", content="1"),
    ]
    settings = ModelSettings(tool_choice="required", parallel_tool_calls=False)
    async with inner:
        model = PromptedModel(inner, "hermes")
        events = [ev async for ev in model.stream(history, TOOLS, settings)]

    response = final(events)
    assert calls(response) == [("get_weather", '{"city":"Paris"}')]
    assert response.message.content == "Checking."
    assert response.finish_reason == "tool_calls"
    first, retry = (r.json for r in openai_server.requests)
    for body in (first, retry):
        assert "tools" not in body
        assert "tool_choice" not in body
        assert "parallel_tool_calls" not in body
        assert all(m["role"] in ("system", "user", "assistant") for m in body["messages"])
    assert first["messages"][0]["role"] == "system"
    assert "<tools>" in first["messages"][0]["content"]
    assert first["messages"][2] == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>',
    }
    assert first["messages"][3] == {
        "role": "user",
        "content": "<tool_response>\n1\n</tool_response>",
    }
    assert retry["messages"][-2] == {"role": "assistant", "content": "I think it is sunny."}
    assert retry["messages"][-1]["content"].startswith("Your reply did not call any tool.")
