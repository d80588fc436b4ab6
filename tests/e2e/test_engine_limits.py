"""Where a real generation ends early: the client leaves mid-stream, the token limit."""

from __future__ import annotations

import time

import httpx
import pytest
from engine_support import GREETING, Target


def _slot(target: Target) -> dict[str, object]:
    slots = httpx.get(f"{target.engine.url}/slots", timeout=5).json()
    slot: dict[str, object] = slots[0]
    return slot


def _busy_within(target: Target, busy: bool, seconds: float = 5) -> bool:
    """Whether the one slot's `is_processing` becomes `busy` within `seconds`."""
    deadline = time.monotonic() + seconds
    while _slot(target)["is_processing"] is not busy:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_client_that_leaves_mid_stream_stops_the_generation(llama_cpp_target: Target) -> None:
    body = {
        "model": "plain",
        "messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
        "max_tokens": 4000,
        "temperature": 0,
        "stream": True,
        # llama-server's own field (passed through): 4000 tokens, a few minutes here.
        "ignore_eos": True,
    }
    with (
        httpx.Client(base_url=llama_cpp_target.gateway.url, timeout=30) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        # The iterator is kept: leaving a loop over it would close the connection already.
        lines = response.iter_lines()
        seen = 0
        while seen < 4:
            seen += next(lines).startswith("data: ")
        # The slot is busy while the answer streams (/slots may lag a moment behind).
        assert _busy_within(llama_cpp_target, True)
    # The response is closed: the gateway drops the upstream stream, llama-server ends
    # the generation and frees its one slot.
    assert _busy_within(llama_cpp_target, False)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_responses_end_incomplete_at_the_token_limit(target: Target, stream: bool) -> None:
    with target.openai() as sdk:
        if stream:
            events = list(
                sdk.responses.create(
                    model="plain", input=GREETING, max_output_tokens=3, temperature=0, stream=True
                )
            )
            assert events[-1].type == "response.incomplete"
            response = events[-1].response
        else:
            response = sdk.responses.create(
                model="plain", input=GREETING, max_output_tokens=3, temperature=0
            )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None
    # llama-cpp-python's streams carry no usage (docs/engines.md).
    silent = stream and target.name == "llama-cpp-python"
    assert response.usage.output_tokens == (0 if silent else 3)
    assert response.output_text
