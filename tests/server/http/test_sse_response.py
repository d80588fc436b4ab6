"""`SSEResponse` on its own: the body is closed however the client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from toolwire.server.http.streaming import SSEResponse


class Body:
    """An SSE body that records whether it was closed early."""

    def __init__(self) -> None:
        self.closed = False

    async def events(self) -> AsyncIterator[bytes]:
        try:
            for n in range(1000):
                yield b"data: %d\n\n" % n
                await asyncio.sleep(0.001)
        finally:
            self.closed = True


async def test_a_disconnect_message_stops_and_closes_the_body() -> None:
    body, sent = Body(), []
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) == 3:
            gone.set()

    await SSEResponse(body.events(), {})({"type": "http"}, receive, send)  # returns normally
    assert body.closed
    assert 3 <= len(sent) < 10
    assert (b"content-type", b"text/event-stream; charset=utf-8") in sent[0]["headers"]


async def test_a_send_that_fails_like_asgi_2_4_servers_do_closes_the_body() -> None:
    body, sent = Body(), []

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # never a disconnect message
        return {}

    async def send(message: dict[str, Any]) -> None:
        if len(sent) == 2:
            raise OSError("client disconnected")
        sent.append(message)

    await SSEResponse(body.events(), {})({"type": "http"}, receive, send)
    assert body.closed
    assert len(sent) == 2


async def test_a_complete_stream_ends_with_the_last_body_message() -> None:
    async def events() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await SSEResponse(events(), {})({"type": "http"}, receive, send)
    assert [m["type"] for m in sent] == [
        "http.response.start",
        "http.response.body",
        "http.response.body",
    ]
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
