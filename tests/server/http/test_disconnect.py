"""`on_disconnect`: the connection's own signal where the server gives one (no task per
request), a task waiting on `receive` where it does not; either way the callback comes
from the event loop, once, and stopping the watch stops it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolwire.server.http.disconnect import EXTENSION, Disconnect, on_disconnect


def _scope(signal: Disconnect | None) -> dict[str, Any]:
    scope: dict[str, Any] = {"type": "http", "headers": []}
    if signal is not None:
        scope["extensions"] = {EXTENSION: {"signal": signal}}
    return scope


async def _never() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def test_the_signal_calls_back_when_the_connection_is_lost_without_a_task() -> None:
    signal, calls = Disconnect(), []
    tasks = len(asyncio.all_tasks())
    on_disconnect(_scope(signal), _never, lambda: calls.append("gone"))
    assert len(asyncio.all_tasks()) == tasks
    assert calls == []
    signal.connection_lost()
    assert calls == ["gone"]
    signal.connection_lost()  # each callback runs once
    assert calls == ["gone"]


async def test_stopping_the_watch_drops_the_callback() -> None:
    signal, calls = Disconnect(), []
    stop = on_disconnect(_scope(signal), _never, lambda: calls.append("gone"))
    stop()
    signal.connection_lost()
    assert calls == []
    stop()  # stopping twice, or after the loss, is harmless


async def test_a_connection_lost_already_calls_back_on_the_next_pass_of_the_loop() -> None:
    signal, calls = Disconnect(), []
    signal.connection_lost()
    on_disconnect(_scope(signal), _never, lambda: calls.append("gone"))
    assert calls == []  # not inside the caller's step
    await asyncio.sleep(0)
    assert calls == ["gone"]


async def test_stopping_before_that_pass_drops_it() -> None:
    signal, calls = Disconnect(), []
    signal.connection_lost()
    stop = on_disconnect(_scope(signal), _never, lambda: calls.append("gone"))
    stop()
    await asyncio.sleep(0)
    assert calls == []


async def test_each_request_on_a_connection_has_its_own_callback() -> None:
    signal, calls = Disconnect(), []
    stop_first = on_disconnect(_scope(signal), _never, lambda: calls.append("first"))
    on_disconnect(_scope(signal), _never, lambda: calls.append("second"))
    stop_first()  # the first request ended before the connection was lost
    signal.connection_lost()
    assert calls == ["second"]


@pytest.mark.parametrize("extensions", [None, {}, {EXTENSION: None}, {EXTENSION: "x"}])
async def test_without_a_signal_a_task_waits_for_the_disconnect_message(
    extensions: dict[str, Any] | None,
) -> None:
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    calls: list[str] = []
    scope = {"type": "http", "extensions": extensions}
    on_disconnect(scope, messages.get, lambda: calls.append("gone"))
    messages.put_nowait({"type": "http.request", "body": b"late", "more_body": False})
    await asyncio.sleep(0.01)
    assert calls == []  # anything but a disconnect is dropped
    messages.put_nowait({"type": "http.disconnect"})
    await asyncio.sleep(0.01)
    assert calls == ["gone"]


async def test_without_a_signal_stopping_cancels_the_waiting_task() -> None:
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    calls: list[str] = []
    tasks = len(asyncio.all_tasks())
    stop = on_disconnect({"type": "http"}, messages.get, lambda: calls.append("gone"))
    assert len(asyncio.all_tasks()) == tasks + 1
    stop()
    await asyncio.sleep(0.01)
    assert len(asyncio.all_tasks()) == tasks
    messages.put_nowait({"type": "http.disconnect"})
    await asyncio.sleep(0.01)
    assert calls == []
