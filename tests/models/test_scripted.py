from __future__ import annotations

import pytest

from toolwire.models import (
    AssistantMessage,
    ModelContentDelta,
    ModelError,
    ModelReasoningDelta,
    ModelResponse,
    ModelSettings,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    ScriptedModel,
    ScriptedRequest,
    ScriptExhaustedError,
    UserMessage,
)
from toolwire.models.messages import Usage
from toolwire.tools import Tool, ToolCall

TOOL = Tool(name="add", description="Add numbers")


def call(args: str = '{"a": 1, "b": 22}', id: str = "c1", name: str = "add") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=args)


async def test_replays_in_order_and_records_requests() -> None:
    model = ScriptedModel(["first", AssistantMessage(tool_calls=(call(),))])
    settings = ModelSettings(temperature=0.0)

    r1 = await model.complete([UserMessage(content="hi")], [TOOL], settings)
    r2 = await model.complete([UserMessage(content="again")], [])

    assert r1.message == AssistantMessage(content="first")
    assert r1.finish_reason == "stop"
    assert r1.usage.requests == 1
    assert r2.message.tool_calls == (call(),)
    assert r2.finish_reason == "tool_calls"
    assert [r.messages[0] for r in model.requests] == [
        UserMessage(content="hi"),
        UserMessage(content="again"),
    ]
    assert model.requests[0].tools == (TOOL,)
    assert model.requests[0].tool_names == ["add"]
    assert model.requests[0].settings is settings
    assert model.requests[1].settings is None
    assert not model.requests[0].stream
    model.assert_complete()


async def test_model_response_is_passed_through_unchanged() -> None:
    given = ModelResponse(
        message=AssistantMessage(content="x"), finish_reason="length", usage=Usage(output_tokens=3)
    )
    model = ScriptedModel([given])
    assert await model.complete([], []) is given


async def test_callables_sync_and_async_receive_the_request() -> None:
    def echo(req: ScriptedRequest) -> str:
        last = req.messages[-1]
        assert isinstance(last, UserMessage)
        return f"you said {last.content}"

    async def tools_seen(req: ScriptedRequest) -> AssistantMessage:
        return AssistantMessage(content=",".join(req.tool_names))

    model = ScriptedModel([echo, tools_seen])
    assert (await model.complete([UserMessage(content="ping")], [])).message.content == (
        "you said ping"
    )
    assert (await model.complete([], [TOOL])).message.content == "add"


async def test_enqueue_and_assert_complete() -> None:
    model = ScriptedModel()
    model.enqueue("a", "b")
    assert model.remaining == 2
    await model.complete([], [])
    with pytest.raises(AssertionError, match="1 of 2 scripted responses were never requested"):
        model.assert_complete()
    await model.complete([], [])
    model.assert_complete()


async def test_running_out_raises_a_clear_model_error() -> None:
    model = ScriptedModel(["only"])
    await model.complete([], [])
    with pytest.raises(ScriptExhaustedError) as info:
        await model.complete([], [])
    assert isinstance(info.value, ModelError)
    assert "no response left for request #2 (1 scripted)" in str(info.value)
    assert "enqueue" in str(info.value)
    assert len(model.requests) == 2


async def test_stream_yields_small_pieces_then_the_response() -> None:
    message = AssistantMessage(
        content="The answer is twenty-three.",
        reasoning="think think",
        tool_calls=(call(), call('{"a": 5}', id="c2")),
    )
    model = ScriptedModel([message], chunk_size=4)
    events = [ev async for ev in model.stream([UserMessage(content="q")], [TOOL])]

    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message == message
    assert sum(isinstance(e, ModelResponse) for e in events) == 1
    assert model.requests[0].stream

    texts = [e.text for e in events if isinstance(e, ModelContentDelta)]
    assert len(texts) > 1
    assert all(len(t) <= 4 for t in texts)
    assert "".join(texts) == message.content
    assert "".join(e.text for e in events if isinstance(e, ModelReasoningDelta)) == "think think"

    starts = [e for e in events if isinstance(e, ModelToolCallStart)]
    assert starts == [ModelToolCallStart(0, "c1", "add"), ModelToolCallStart(1, "c2", "add")]
    for index, tc in enumerate(message.tool_calls):
        parts = [
            e.text for e in events if isinstance(e, ModelToolCallArgsDelta) and e.index == index
        ]
        assert len(parts) > 1
        assert "".join(parts) == tc.arguments


async def test_stream_raises_when_exhausted() -> None:
    model = ScriptedModel()
    with pytest.raises(ScriptExhaustedError):
        async for _ in model.stream([], []):
            pass


async def test_bad_response_type_is_explained() -> None:
    model = ScriptedModel([42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="cannot use int as a response"):
        await model.complete([], [])
