"""An upstream answer larger than `max_response_bytes` fails the request clearly instead of
filling the memory (issue 12): a whole body, a streamed event, a line without an end."""

from __future__ import annotations

import pytest

from fakes.openai_server import FakeOpenAIServer, completion, delta, sse
from toolwire.models import ModelError, OpenAIChatModel, UserMessage
from toolwire.models.sse import SSEDecoder, SSETooLarge

LIMIT = 64 * 1024
BIG = "x" * (2 * LIMIT)


def model(server: FakeOpenAIServer) -> OpenAIChatModel:
    return OpenAIChatModel(server.base_url, "key", "gpt-test", retries=0, max_response_bytes=LIMIT)


async def test_a_whole_answer_over_the_limit_is_refused(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion(BIG))
    with pytest.raises(ModelError, match="larger than") as info:
        await model(openai_server).complete([UserMessage(content="hi")], [])
    assert "max_response_bytes" in str(info.value)


async def test_a_streamed_event_over_the_limit_is_refused(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(sse([delta("ok"), delta(BIG), delta(finish_reason="stop")]))
    events = model(openai_server).stream([UserMessage(content="hi")], [])
    with pytest.raises(ModelError, match="larger than"):
        async for _ in events:
            pass


async def test_answers_under_the_limit_are_untouched(openai_server: FakeOpenAIServer) -> None:
    text = "y" * (LIMIT // 2)
    openai_server.reply(completion(text), sse([delta(text), delta(finish_reason="stop")]))
    whole = await model(openai_server).complete([UserMessage(content="hi")], [])
    assert whole.message.content == text
    streamed = ""
    async for event in model(openai_server).stream([UserMessage(content="hi")], []):
        streamed += getattr(event, "text", "") or ""
    assert streamed == text


def test_the_decoder_refuses_a_line_that_never_ends() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    for _ in range(9):
        assert decoder.feed(b"z" * 100) == []
    with pytest.raises(SSETooLarge):
        decoder.feed(b"z" * 101)


def test_the_decoder_joins_a_long_line_once() -> None:
    decoder = SSEDecoder()
    pieces = [b"data: " + b"a" * 10] + [b"b" * 10] * 1000 + [b"\n\n"]
    events = [e for p in pieces for e in decoder.feed(p)]
    assert events == [b"a" * 10 + b"b" * 10_000]
