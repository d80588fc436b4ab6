"""Deltas that arrive in one read are passed on as one; their text is never changed."""

from __future__ import annotations

from typing import Any

from fakes.openai_server import FakeOpenAIServer, delta, sse
from toolwire.models import (
    ModelContentDelta,
    ModelResponse,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    OpenAIChatModel,
    UserMessage,
)

HI = [UserMessage(content="hi")]


def call_delta(
    index: int, *, id: str | None = None, name: str | None = None, args: str = ""
) -> dict[str, Any]:
    fn: dict[str, str] = {"arguments": args}
    if name is not None:
        fn["name"] = name
    call: dict[str, Any] = {"index": index, "function": fn}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}


async def test_one_read_of_many_deltas_becomes_few(openai_server: FakeOpenAIServer) -> None:
    text = "abcdefghij" * 20
    events = [delta(c) for c in text]
    events += [call_delta(0, id="c1", name="f")]
    events += [call_delta(0, args=c) for c in '{"x": 1}']
    events += [call_delta(1, id="c2", name="g", args="{}")]
    events += [delta(finish_reason="tool_calls")]
    openai_server.reply(sse(events, split=1 << 20))  # everything in one piece
    model = OpenAIChatModel(openai_server.base_url, None, "m")
    out = [e async for e in model.stream(HI, [])]
    assert out[:1] == [ModelContentDelta(text)]
    assert out[1:5] == [
        ModelToolCallStart(0, "c1", "f"),
        ModelToolCallArgsDelta(0, '{"x": 1}'),
        ModelToolCallStart(1, "c2", "g"),
        ModelToolCallArgsDelta(1, "{}"),
    ]
    final = out[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.content == text
    assert [c.arguments for c in final.message.tool_calls] == ['{"x": 1}', "{}"]


async def test_deltas_in_separate_reads_stay_separate(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse([delta("a"), delta("b"), delta(finish_reason="stop")], interval=0.05))
    model = OpenAIChatModel(openai_server.base_url, None, "m")
    out = [e async for e in model.stream(HI, [])]
    assert [e for e in out if isinstance(e, ModelContentDelta)] == [
        ModelContentDelta("a"),
        ModelContentDelta("b"),
    ]
