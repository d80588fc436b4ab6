"""Requests in flight and the bytes they hold are bounded: past the limits the gateway says
503 with Retry-After at once, in the route's protocol shape, and its probes still answer
(issue 12)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
from e2e_chat_support import live_gateway, openai_upstream, user
from server_support import config_with
from starlette.types import Message, Receive

from fakes.openai_server import FakeOpenAIServer, delta, sse
from toolwire.server.configuration.config import LimitsConfig, McpEndpointConfig
from toolwire.server.http.errors import GatewayError
from toolwire.server.http.limits import Budget, Ticket


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


# --- the body's deadline, on the ticket itself -------------------------------------------
# One timer per body, armed at its first read. These pin the interleavings a timer shared
# by several reads must get right (an `asyncio.timeout` around each read got them for free).


def _budget(**limits: Any) -> Budget:
    return Budget(LimitsConfig(**limits), McpEndpointConfig())


def _receiver(parts: list[Message], ready: asyncio.Event) -> Receive:
    async def receive() -> Message:
        if not parts:
            await ready.wait()  # a client that stalls until `ready`
            ready.clear()
        return parts.pop(0)

    return receive


async def test_a_body_that_stalls_past_its_deadline_is_refused_with_408() -> None:
    budget = _budget(body_timeout=0.05)
    ticket = Ticket(budget, None)
    parts: list[Message] = [{"type": "http.request", "body": b"{", "more_body": True}]
    receive = ticket.metered(_receiver(parts, asyncio.Event()))
    assert (await receive())["body"] == b"{"
    with pytest.raises(GatewayError) as refused:
        await receive()  # nothing more comes
    assert refused.value.status == 408
    assert ticket.refused is refused.value
    with pytest.raises(GatewayError):
        await receive()  # and stays refused
    ticket.release()
    assert budget.requests == 0
    assert budget.bytes == 0


async def test_a_body_that_arrives_in_time_is_read_whole_and_its_timer_disarmed() -> None:
    budget = _budget(body_timeout=0.2)
    ticket = Ticket(budget, None)
    ready = asyncio.Event()
    parts: list[Message] = [{"type": "http.request", "body": b"[1,", "more_body": True}]
    receive = ticket.metered(_receiver(parts, ready))
    assert (await receive())["body"] == b"[1,"

    async def send_the_rest() -> None:
        await asyncio.sleep(0.02)
        parts.append({"type": "http.request", "body": b"2]", "more_body": False})
        ready.set()

    sender = asyncio.create_task(send_the_rest())
    assert (await receive())["body"] == b"2]"
    await sender
    assert ticket.timer is None
    assert ticket not in budget._arriving
    await asyncio.sleep(0.3)  # past the deadline: nothing fires
    assert ticket.refused is None
    assert not ticket.expired
    ticket.release()


async def test_cancelling_a_read_that_waits_for_the_body_is_a_cancellation_not_a_408() -> None:
    ticket = Ticket(_budget(body_timeout=30), None)
    receive = ticket.metered(_receiver([], asyncio.Event()))
    reader = asyncio.create_task(receive())
    await asyncio.sleep(0.01)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert ticket.refused is None
    ticket.release()
    assert ticket.timer is None


async def test_a_deadline_and_an_outside_cancellation_at_once_stay_a_cancellation() -> None:
    ticket = Ticket(_budget(body_timeout=30), None)
    receive = ticket.metered(_receiver([], asyncio.Event()))
    reader = asyncio.create_task(receive())
    await asyncio.sleep(0.01)
    ticket._expire()  # the deadline passes ...
    reader.cancel()  # ... as the request is cancelled for another reason
    with pytest.raises(asyncio.CancelledError):
        await reader
    ticket.release()


async def test_a_deadline_passed_between_two_reads_refuses_the_next_one() -> None:
    budget = _budget(body_timeout=0.05)
    ticket = Ticket(budget, None)
    parts: list[Message] = [
        {"type": "http.request", "body": b"[", "more_body": True},
        {"type": "http.request", "body": b"]", "more_body": False},
    ]
    receive = ticket.metered(_receiver(parts, asyncio.Event()))
    await receive()
    await asyncio.sleep(0.1)  # the app is busy; the body is late all the same
    with pytest.raises(GatewayError) as refused:
        await receive()
    assert refused.value.status == 408
    ticket.release()


async def test_pressure_brings_the_deadline_of_a_waiting_body_forward() -> None:
    # 4 slots, a 30 s body timeout, 0.05 s when full: the first body waits on 30 s until
    # the other three fill the slots and charge their bytes.
    budget = _budget(max_in_flight=4, body_timeout=30, min_body_timeout=0.05)
    waiting = Ticket(budget, None)
    receive = waiting.metered(_receiver([], asyncio.Event()))
    reader = asyncio.create_task(receive())
    await asyncio.sleep(0.01)
    assert waiting.timer is not None
    assert waiting.timer.when() - waiting.start == pytest.approx(30, abs=0.1)
    others = [Ticket(budget, None) for _ in range(3)]
    others[0].charge(10)  # a charge re-reads the pressure: 4 of 4 slots
    with pytest.raises(GatewayError) as refused:
        await asyncio.wait_for(reader, 2)
    assert refused.value.status == 408
    for ticket in [waiting, *others]:
        ticket.release()
    assert budget.requests == 0
    assert budget.bytes == 0
