"""The agent path of `/v1/messages`: server tools run inside the gateway.

A run's events become one assistant message, streamed or whole, through the same
`MessageWriter`. Server-tool activity goes out as `event: toolwire` events (the same
payloads as the chat endpoint's extension chunks: `tool_call`, `tool_result`,
`approval_required`, `run_status`), and a whole message carries the chat endpoint's
`toolwire` field. The model's text of every turn goes into one text block, turns apart
by a blank line, so `content[0].text` is the whole answer as on the chat endpoint. Client
tool calls end the message as `tool_use` blocks (`stop_reason: "tool_use"`).

A run paused for approval ends the message with its explanation as text and the run id
and pending approvals in `toolwire` (streams: a `run_status` event); with
`approvals.wait_seconds` set, a stream waits for the decisions and goes on in it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from toolwire.agent import (
    AgentEvent,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
)
from toolwire.agent.result import RunResult
from toolwire.models import ModelError
from toolwire.server.errors import GatewayError, store_error, upstream_error
from toolwire.server.gateway import Gateway
from toolwire.server.protocols.anthropic_messages.wire import (
    MessageWriter,
    error_body,
    stop_reason,
)
from toolwire.server.protocols.chat_completions.agent_path import TURN_SEPARATOR
from toolwire.server.run_view import (
    Shown,
    event_payload,
    run_extension,
    run_status,
    wait_for_decisions,
)
from toolwire.store.base import StoreError

__all__ = ["agent_message", "agent_stream"]

logger = logging.getLogger("toolwire.server")

OnDone = Callable[[RunResult], Awaitable[None]]
Resume = Callable[[str], AsyncGenerator[AgentEvent, None]]


async def agent_message(
    gateway: Gateway,
    events: AsyncGenerator[AgentEvent, None],
    writer: MessageWriter,
    *,
    on_done: OnDone | None = None,
) -> dict[str, Any]:
    """The whole message of a run, with the `toolwire` field.

    Raises:
        GatewayError: The upstream or the store failed.
    """
    run = _Translation(gateway, writer)
    async for _ in run.events(events, on_done=on_done, resume=None):
        pass
    assert run.result is not None
    return writer.message(run_extension(run.result, gateway.shown_arguments))


def agent_stream(
    gateway: Gateway,
    events: AsyncGenerator[AgentEvent, None],
    writer: MessageWriter,
    *,
    on_done: OnDone | None = None,
    resume: Resume | None = None,
) -> AsyncIterator[bytes]:
    """The SSE events of a run.

    Args:
        resume: Continues a paused run by id; given when the stream may wait for
            approvals (`approvals.wait_seconds`).
    """
    return _Translation(gateway, writer).events(events, on_done=on_done, resume=resume)


class _Translation:
    """One run's events through one writer; keeps the run's result for the whole message."""

    def __init__(self, gateway: Gateway, writer: MessageWriter) -> None:
        self.gateway = gateway
        self.writer = writer
        self.result: RunResult | None = None

    async def events(
        self,
        events: AsyncGenerator[AgentEvent, None],
        *,
        on_done: OnDone | None,
        resume: Resume | None,
    ) -> AsyncIterator[bytes]:
        writer = self.writer
        opened = separate = False
        while True:
            final: RunResult | None = None
            async with contextlib.aclosing(events):
                async for event in events:
                    if isinstance(event, Done):
                        if event.exception is not None:
                            failure = self._failure(event.exception)
                            if not (opened and writer.stream):
                                raise failure
                            logger.warning(
                                "run failed mid-stream: %s", self.gateway.redact(event.error or "")
                            )
                            yield writer.error(_error_json(failure))
                            return
                        final = event.result
                        break
                    if not opened:
                        opened = True
                        yield writer.start()
                    if isinstance(event, TextDelta) and event.text:
                        # A turn after tool results starts a new paragraph of the same block.
                        if separate and writer.text_open:
                            yield writer.text(TURN_SEPARATOR)
                        separate = False
                    elif isinstance(event, ToolCallResult):
                        separate = True
                    chunk = _event_bytes(event, writer, self.gateway.shown_arguments)
                    if chunk:
                        yield chunk
            assert final is not None
            if not opened:
                opened = True
                yield writer.start()
            wait = self.gateway.config.approvals.wait_seconds
            if (
                final.status == "awaiting_approval"
                and resume is not None
                and wait > 0
                and await wait_for_decisions(self.gateway, final, wait)
            ):
                # Decided while the client waited: go on in the same stream.
                events = resume(final.run_id)
                continue
            if on_done is not None:
                try:
                    await on_done(final)
                except StoreError as exc:
                    if not writer.stream:
                        raise store_error(exc) from None
                    yield writer.error(_error_json(store_error(exc)))
                    return
            self.result = final
            yield self._finish(final)
            return

    def _finish(self, result: RunResult) -> bytes:
        writer = self.writer
        out = b""
        if result.status != "completed" and result.status != "client_tool_calls":
            shown = self.gateway.shown_arguments
            out += writer.extension({"type": "run_status", **run_status(result, shown)})
            # The output says why the run stopped: a client that ignores the extension
            # must not get an empty answer.
            if result.output:
                if writer.text_open:
                    out += writer.text(TURN_SEPARATOR)
                out += writer.text(result.output)
        for call in result.client_calls:
            out += writer.tool_use(call)
        return out + writer.finish(_stop(result), result.usage)

    def _failure(self, exc: BaseException) -> Exception:
        if isinstance(exc, ModelError):
            return upstream_error(exc, self.gateway.redact)
        if isinstance(exc, StoreError):
            return store_error(exc)
        assert isinstance(exc, Exception)
        return exc


def _stop(result: RunResult) -> str:
    if result.status == "client_tool_calls":
        return "tool_use"
    steps = result.steps[result.first_step :]
    if result.status == "completed" and steps:
        return stop_reason(steps[-1].response.finish_reason)
    return "end_turn"


def _event_bytes(event: AgentEvent, writer: MessageWriter, shown: Shown) -> bytes:
    if isinstance(event, TextDelta):
        return writer.text(event.text)
    if isinstance(event, ReasoningDelta):
        return writer.reasoning(event.text)
    payload = event_payload(event, shown)
    return writer.extension(payload) if payload is not None else b""


def _error_json(failure: Exception) -> dict[str, Any]:
    if isinstance(failure, GatewayError):
        return error_body(failure)
    return {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": "The gateway failed while running the request; see its log.",
        },
    }
