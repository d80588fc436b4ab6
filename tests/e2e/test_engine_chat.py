"""Plain chat through `toolwire serve` on each real engine, on all three chat doors, streamed
and not: the gateway gives the engine's own answer and passes its token counts through."""

from __future__ import annotations

import anthropic
import pytest
from engine_support import GREETING, MAX_TOKENS, Target

ZERO = {"temperature": 0}
"""Greedy sampling: the same answer as the engine's own (the anthropic SDK has no
`temperature` argument)."""


def _engine_answer(target: Target, stream: bool) -> tuple[str, tuple[int, int], str]:
    """The engine's own text, `(prompt, completion)` token counts and finish reason."""
    direct = target.direct("plain", GREETING, max_tokens=MAX_TOKENS)
    choice = direct["choices"][0]
    usage = (direct["usage"]["prompt_tokens"], direct["usage"]["completion_tokens"])
    if stream and target.name == "llama-cpp-python":
        # Its streams carry no usage at all (it ignores stream_options): there is nothing
        # to pass through, and the doors say 0 (docs/engines.md).
        usage = (0, 0)
    return choice["message"]["content"], usage, choice["finish_reason"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_chat_completions(target: Target, stream: bool) -> None:
    text, usage, finish = _engine_answer(target, stream)
    with target.openai() as sdk:
        if stream:
            chunks = list(
                sdk.chat.completions.create(
                    model="plain",
                    messages=GREETING,
                    max_tokens=MAX_TOKENS,
                    temperature=0,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
            content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
            got_usage, got_finish = chunks[-1].usage, reasons[-1]
        else:
            answer = sdk.chat.completions.create(
                model="plain", messages=GREETING, max_tokens=MAX_TOKENS, temperature=0
            )
            content = answer.choices[0].message.content or ""
            got_usage, got_finish = answer.usage, answer.choices[0].finish_reason
    assert content == text
    assert got_finish == finish
    assert got_usage is not None
    assert (got_usage.prompt_tokens, got_usage.completion_tokens) == usage


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_responses(target: Target, stream: bool) -> None:
    text, usage, finish = _engine_answer(target, stream)
    with target.openai() as sdk:
        if stream:
            events = list(
                sdk.responses.create(
                    model="plain",
                    input=GREETING,
                    max_output_tokens=MAX_TOKENS,
                    temperature=0,
                    stream=True,
                )
            )
            deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
            last = events[-1]
            assert last.type in ("response.completed", "response.incomplete")
            response = last.response
            assert deltas == text
        else:
            response = sdk.responses.create(
                model="plain", input=GREETING, max_output_tokens=MAX_TOKENS, temperature=0
            )
    assert response.output_text == text
    # A reply cut at the token limit is an incomplete response.
    assert response.status == ("incomplete" if finish == "length" else "completed")
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == usage


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_messages(target: Target, stream: bool) -> None:
    text, usage, finish = _engine_answer(target, stream)
    with target.anthropic() as sdk:
        if stream:
            with sdk.messages.stream(
                model="plain", messages=GREETING, max_tokens=MAX_TOKENS, extra_body=ZERO
            ) as events:
                streamed = "".join(events.text_stream)
                message: anthropic.types.Message = events.get_final_message()
            assert streamed == text
        else:
            message = sdk.messages.create(
                model="plain", messages=GREETING, max_tokens=MAX_TOKENS, extra_body=ZERO
            )
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == text  # type: ignore[union-attr]
    assert message.stop_reason == ("max_tokens" if finish == "length" else "end_turn")
    assert (message.usage.input_tokens, message.usage.output_tokens) == usage
