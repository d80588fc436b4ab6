"""HTTP plumbing every front door shares: SSE responses that keep a real status for
failures before the first byte, and cancelling work when the client goes away."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

__all__ = ["ClientGone", "stream_response", "unless_disconnected"]

T = TypeVar("T")


async def stream_response(
    body: AsyncIterator[bytes], headers: dict[str, str], request: Request | None = None
) -> Response:
    """An SSE response. It waits for the first chunk before answering, so a failure that
    happens before anything was streamed still gets a real HTTP status.

    Args:
        request: When given, a client that goes away during that wait cancels it (and so
            the upstream request) at once, instead of holding it for the upstream's
            timeout.

    Raises:
        ClientGone: The client went away before the first chunk.
    """
    if request is None:
        first = await _first(body)
    else:
        try:
            first = await unless_disconnected(request, _first(body))
        except ClientGone:
            aclose = getattr(body, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            raise
    return StreamingResponse(
        _chain(first, body),
        media_type="text/event-stream",
        headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
    )


_END = object()


async def _first(stream: AsyncIterator[bytes]) -> bytes | object:
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return _END


async def _chain(first: bytes | object, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    # The stream is closed explicitly when the client goes away (Starlette cancels this
    # generator), so the upstream request and running tools are cancelled at once.
    try:
        if first is _END:
            return
        assert isinstance(first, bytes)
        yield first
        async for chunk in rest:
            yield chunk
    finally:
        aclose = getattr(rest, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Run `work`, cancelling it if the client disconnects first (Starlette does not
    cancel a handler whose client went away).

    Raises:
        ClientGone: The client disconnected; `work` was cancelled.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise ClientGone
    return task.result()


class ClientGone(Exception):
    """The client disconnected before the answer was ready."""


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
