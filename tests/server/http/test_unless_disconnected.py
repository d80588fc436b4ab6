"""`unless_disconnected` on its own: the work runs in the caller's task and a disconnect
cancels it there, whatever the work makes of the cancellation, and leaves the task
un-cancelled for whatever the caller does next."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request

from toolwire.server.http.streaming import ClientGone, unless_disconnected


def _request(gone: asyncio.Event) -> Request:
    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    app = Starlette()  # with no drain: only a disconnect ends the work early
    return Request({"type": "http", "method": "POST", "headers": [], "app": app}, receive)


async def test_the_answer_is_returned_while_the_client_stays() -> None:
    async def work() -> str:
        await asyncio.sleep(0.01)
        return "answer"

    assert await unless_disconnected(_request(asyncio.Event()), work()) == "answer"
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_a_disconnect_cancels_the_work_and_raises_client_gone() -> None:
    gone, ended = asyncio.Event(), asyncio.Event()

    async def work() -> str:
        try:
            gone.set()
            await asyncio.sleep(30)
            return "never"
        finally:
            ended.set()

    with pytest.raises(ClientGone):
        await unless_disconnected(_request(gone), work())
    assert ended.is_set()
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # the caller's task can still wait: no cancellation left over


@pytest.mark.parametrize("answer", ["returns", "raises"])
async def test_work_that_swallows_the_cancellation_still_ends_in_client_gone(
    answer: str,
) -> None:
    gone = asyncio.Event()

    async def work() -> str:
        try:
            gone.set()
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            if answer == "raises":
                raise RuntimeError("the upstream read failed") from None
        return "late"

    with pytest.raises(ClientGone):
        await unless_disconnected(_request(gone), work())
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_a_cancellation_from_outside_is_not_taken_for_a_disconnect() -> None:
    started = asyncio.Event()

    async def work() -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    caller = asyncio.create_task(unless_disconnected(_request(asyncio.Event()), work()))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
