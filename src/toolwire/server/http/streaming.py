"""HTTP plumbing every front door shares: SSE responses that keep a real status for
failures before the first byte, cancelling work when the client goes away, and ending
streams with an error event when a shutdown's drain deadline passes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from toolwire.server.http.disconnect import on_disconnect
from toolwire.server.http.draining import SHUTDOWN_MESSAGE, Drain, drain_of
from toolwire.server.http.errors import GatewayError

__all__ = [
    "ClientGone",
    "SSEResponse",
    "shutting_down",
    "stream_response",
    "unless_disconnected",
]

T = TypeVar("T")


async def stream_response(
    body: AsyncIterator[bytes],
    headers: dict[str, str],
    request: Request | None = None,
    *,
    on_shutdown: Callable[[str], bytes] | None = None,
) -> Response:
    """An SSE response. It waits for the first chunk before answering, so a failure that
    happens before anything was streamed still gets a real HTTP status.

    Args:
        request: When given, a client that goes away during that wait cancels it (and so
            the upstream request) at once, instead of holding it for the upstream's
            timeout; and the app's drain can end the stream at a shutdown's deadline.
        on_shutdown: The protocol's last event for a stream the shutdown ends, given the
            message to show; without it such a stream is cut.

    Raises:
        ClientGone: The client went away before the first chunk.
        GatewayError: 503 when the shutdown's deadline passed before the first chunk.
    """
    drain = drain_of(request)
    try:
        if request is None:
            first = await _first(body)
        else:
            first = await unless_disconnected(request, _first(body))
    except (ClientGone, GatewayError):
        await _close(body)
        raise
    return SSEResponse(
        _chain(first, body, drain, on_shutdown),
        headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
    )


class SSEResponse(Response):
    """A `text/event-stream` response whose body stops (and is closed, cancelling the
    upstream request and running tools) the moment the client disconnects.

    Starlette's `StreamingResponse` does the same with an anyio task group and cancel
    scopes; on the gateway's hot path that machinery was several percent of a stream's
    CPU. Here the disconnect (`on_disconnect`: the connection's own signal on the
    gateway's server, else a task waiting on `receive`) cancels the streaming task. It
    comes from the event loop, so only while that task is suspended inside the loop
    below: the cancellation always lands there, and is taken back before returning.
    """

    media_type = "text/event-stream"

    def __init__(self, body: AsyncIterator[bytes], headers: dict[str, str]) -> None:
        self.body_iterator = body
        self.status_code = 200
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        assert task is not None
        gone = False

        def left() -> None:
            nonlocal gone
            gone = True
            task.cancel()

        stop_watching = on_disconnect(scope, receive, left)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            task.uncancel()  # the client left: a normal end, not a cancellation
        except OSError:
            pass  # servers of ASGI spec 2.4 report a client that left this way
        finally:
            stop_watching()
            await _close(self.body_iterator)


def shutting_down() -> GatewayError:
    """The 503 for a request the shutdown ended before it had an answer."""
    return GatewayError(
        503,
        SHUTDOWN_MESSAGE,
        type="server_error",
        code="shutting_down",
        headers={"retry-after": "1"},
    )


async def _close(stream: AsyncIterator[bytes]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


_END = object()


async def _first(stream: AsyncIterator[bytes]) -> bytes | object:
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return _END


async def _chain(
    first: bytes | object,
    rest: AsyncIterator[bytes],
    drain: Drain,
    on_shutdown: Callable[[str], bytes] | None,
) -> AsyncIterator[bytes]:
    # The stream is closed explicitly when the client goes away (Starlette cancels this
    # generator), so the upstream request and running tools are cancelled at once.
    try:
        if first is _END:
            return
        assert isinstance(first, bytes)
        with drain.guard():
            yield first
            try:
                async for chunk in rest:
                    yield chunk
            except asyncio.CancelledError as exc:
                if on_shutdown is None or not drain.interrupted(exc):
                    raise
                await _close(rest)
                yield on_shutdown(SHUTDOWN_MESSAGE)
    finally:
        await _close(rest)


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Run `work`, cancelling it if the client disconnects first (Starlette does not
    cancel a handler whose client went away).

    `work` runs in the calling task, and the disconnect (`on_disconnect`) cancels it, as
    in `SSEResponse`: it comes from the event loop, so only while the caller is suspended
    inside `work`, and its cancellation always lands there. (A task for `work` and
    `asyncio.wait` on the two cost a tenth of a chat request's instructions in-process.)

    Raises:
        ClientGone: The client disconnected; `work` was cancelled.
        GatewayError: 503 when a shutdown's drain deadline passed first; `work` was
            cancelled.
    """
    drain = drain_of(request)
    task = asyncio.current_task()
    assert task is not None
    gone = False

    def left() -> None:
        nonlocal gone
        gone = True
        task.cancel()

    stop_watching = on_disconnect(request.scope, request.receive, left)
    try:
        with drain.guard():
            result = await work
    except BaseException as exc:
        if gone:
            # Ours: the client left (whatever `work` made of its cancellation).
            task.uncancel()
            raise ClientGone from None
        if isinstance(exc, asyncio.CancelledError) and drain.interrupted(exc):
            raise shutting_down() from None
        raise
    finally:
        stop_watching()
    if gone:
        task.uncancel()  # `work` took the cancellation back and finished all the same
        raise ClientGone
    return result


class ClientGone(Exception):
    """The client disconnected before the answer was ready."""
