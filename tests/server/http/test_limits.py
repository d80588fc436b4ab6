"""Requests in flight and the bytes they hold are bounded: past the limits the gateway says
503 with Retry-After at once, in the route's protocol shape, and its probes still answer
(issue 12)."""

from __future__ import annotations

import json
import threading

import httpx
from e2e_chat_support import live_gateway, openai_upstream, user
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, delta, sse


def test_past_the_in_flight_limits_requests_get_503_with_retry_after(
    openai_server: FakeOpenAIServer,
) -> None:
    config = config_with(
        upstream=openai_upstream(openai_server.base_url, {"gpt": "gpt-4o"}),
        limits={"max_in_flight": 1, "max_in_flight_bytes": 4096},
    )
    openai_server.reply(sse([delta("slow"), delta(finish_reason="stop")], interval=30))
    with live_gateway(config) as live, httpx.Client(base_url=live.url, timeout=10) as http:
        streaming, done = threading.Event(), threading.Event()

        def hold_one_stream() -> None:
            body = {"model": "gpt", "messages": user(), "stream": True}
            with (
                httpx.Client(base_url=live.url, timeout=10) as other,
                other.stream("POST", "/v1/chat/completions", json=body) as response,
            ):
                for _ in response.iter_lines():
                    streaming.set()
                    done.wait(10)
                    return

        holder = threading.Thread(target=hold_one_stream, daemon=True)
        holder.start()
        assert streaming.wait(10)

        refused = http.post("/v1/chat/completions", json={"model": "gpt", "messages": user()})
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "overloaded"
        messages = http.post("/v1/messages", json={"model": "gpt", "max_tokens": 5})
        assert messages.status_code == 503
        assert messages.json()["error"]["type"] == "overloaded_error"
        assert http.get("/healthz").status_code == 200
        done.set()
        holder.join(timeout=10)

        # One body larger than the bytes allowed in flight is refused before it is read.
        big = json.dumps({"model": "gpt", "messages": user("x" * 5000)})
        too_big = http.post(
            "/v1/chat/completions", content=big, headers={"content-type": "application/json"}
        )
        assert too_big.status_code == 503


def test_a_body_sent_too_slowly_gets_408(openai_server: FakeOpenAIServer) -> None:
    import socket

    config = config_with(
        upstream=openai_upstream(openai_server.base_url, {"gpt": "gpt-4o"}),
        limits={"body_timeout": 0.5},
    )
    with live_gateway(config) as live, socket.create_connection(("127.0.0.1", live.port)) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model"'
        )
        sock.settimeout(10)
        answer = sock.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 408")
    assert "request_timeout" in answer
