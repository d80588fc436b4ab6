"""An upstream that misbehaves, through the direct and the agent path, streamed and not:
the gateway never hangs, never answers 500, and tells the client in the protocol's own
way — an OpenAI-shaped 4xx/502 before the stream starts, an error event after (issue 12).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from e2e_chat_support import live_gateway, openai_upstream, user
from live import LiveServer
from server_support import TOOLS_MODULE, config_with

from fakes.openai_server import FakeOpenAIServer, Reply, delta, dropped, error, raw, sse

FAULTS: dict[str, Callable[[], Reply]] = {
    "5xx": lambda: error(503, "overloaded", type="server_error"),
    "429 with Retry-After": lambda: error(
        429, "slow down", type="rate_limit_error", headers={"Retry-After": "0"}
    ),
    "invalid JSON": lambda: raw(b"{this is not json"),
    "invalid SSE": lambda: raw(b"data: {oops\n\n", content_type="text/event-stream"),
    "cut stream": lambda: dropped([delta("partial ")]),
    "stream without [DONE] or finish": lambda: sse([delta("partial ")], done=False),
    "drip": lambda: sse(
        [delta(c) for c in "slowly"] + [delta(finish_reason="stop")], interval=0.05
    ),
    "huge line": lambda: sse([delta("x" * 200_000), delta(finish_reason="stop")]),
    "huge body": lambda: raw(json.dumps({"choices": [], "pad": "y" * 200_000})),
    "empty 200": lambda: raw(b""),
}
LIMIT = 64 * 1024


@pytest.fixture(scope="module", params=["direct", "agent"])
def gateway(
    request: pytest.FixtureRequest, _openai_server_session: FakeOpenAIServer
) -> Iterator[LiveServer]:
    upstream = openai_upstream(
        _openai_server_session.base_url,
        {"gpt": "gpt-4o"},
        retries=1,
        timeout=5,
        max_response_bytes=LIMIT,
    )
    modules = [TOOLS_MODULE] if request.param == "agent" else []
    config = config_with(upstream=upstream, server_tools={"modules": modules}, store="memory")
    with live_gateway(config) as live:
        yield live


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_misbehaving_upstream_gets_a_clean_answer(
    gateway: LiveServer, openai_server: FakeOpenAIServer, fault: str, stream: bool
) -> None:
    openai_server.reply(FAULTS[fault](), FAULTS[fault]())  # a retry sees the same fault
    body: dict[str, Any] = {"model": "gpt", "messages": user(), "stream": stream}
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        response = http.post("/v1/chat/completions", json=body)

    assert response.status_code != 500, response.text
    if response.status_code >= 400:
        error_body = response.json()["error"]
        assert error_body["message"]
        assert "Traceback" not in response.text
        return
    if not stream:
        answer = response.json()
        assert answer["object"] == "chat.completion"
        return
    events = [
        line.removeprefix("data: ")
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    failed = [c for c in chunks if "error" in c]
    finished = [
        c for c in chunks if c.get("choices") and c["choices"][0].get("finish_reason") is not None
    ]
    # Either the answer finished properly, or the stream says it failed: never silently cut.
    assert failed or finished, chunks
