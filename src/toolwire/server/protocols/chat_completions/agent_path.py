"""The agent path of the chat endpoint: server tools run inside the gateway.

A run's events become Chat Completions chunks (server-tool activity as `toolwire`
extension chunks the `openai` SDK skips) or one whole response with a `toolwire` field.
The same writers serve a new request and a resumed run (`POST /v1/runs/{id}/resume`).

A run that pauses for approval ends its response with the run id and the pending
approvals (an `approval_required` extension chunk per call, then a `run_status` chunk);
with `approvals.wait_seconds` set, a streamed run instead waits in the open stream for
the decisions and goes on in it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from toolwire.agent import (
    AgentEvent,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
)
from toolwire.agent.result import RunResult
from toolwire.models import AssistantMessage, FinishReason, ModelError
from toolwire.server.errors import error_body, store_error, upstream_error
from toolwire.server.gateway import Gateway
from toolwire.server.protocols.chat_completions.wire import (
    DONE,
    ChunkWriter,
    completion_body,
    new_completion_id,
)
from toolwire.server.run_view import (
    Shown,
    event_payload,
    run_extension,
    run_status,
    wait_for_decisions,
)
from toolwire.store.base import StoreError

__all__ = ["TURN_SEPARATOR", "agent_complete", "agent_stream"]

logger = logging.getLogger("toolwire.server")

TURN_SEPARATOR = "\n\n"
"""Between the text of two model turns of one run (streamed and whole alike)."""


async def agent_complete(
    gateway: Gateway,
    events: AsyncGenerator[AgentEvent, None],
    model_id: str,
    on_done: Callable[[RunResult], Any] | None = None,
) -> dict[str, Any]:
    """A whole `chat.completion` from a run's events."""
    done: Done | None = None
    async with contextlib.aclosing(events):
        async for event in events:
            if isinstance(event, Done):
                done = event
    assert done is not None
    if done.exception is not None:
        raise _failure(gateway, done.exception)
    result = done.result
    if on_done is not None:
        await on_done(result)
    message, finish = _final_message(result)
    return completion_body(
        id=new_completion_id(),
        model=model_id,
        message=message,
        finish_reason=finish,
        usage=result.usage,
        extension=run_extension(result, gateway.shown_arguments),
    )


async def agent_stream(
    gateway: Gateway,
    events: AsyncGenerator[AgentEvent, None],
    writer: ChunkWriter,
    *,
    include_usage: bool,
    on_done: Callable[[RunResult], Any] | None = None,
    resume: Callable[[str], AsyncGenerator[AgentEvent, None]] | None = None,
) -> AsyncIterator[bytes]:
    """SSE chunks from a run's events.

    Args:
        resume: Continues a paused run by id; given when the stream may wait for
            approvals (`approvals.wait_seconds`).
    """
    opened = wrote_text = separate = False
    while True:
        final: RunResult | None = None
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, Done):
                    if event.exception is not None:
                        exc = event.exception
                        if not opened:
                            raise _failure(gateway, exc)
                        logger.warning(
                            "run failed mid-stream: %s", gateway.redact(event.error or "")
                        )
                        yield writer.error(_failure_payload(exc, gateway.redact))
                        yield DONE
                        return
                    final = event.result
                    break
                if not opened:
                    opened = True
                    yield writer.role()
                if isinstance(event, TextDelta) and event.text:
                    # Text of a turn after a tool turn starts a new paragraph, exactly as
                    # the turns are joined in a whole response.
                    if separate:
                        yield writer.content(TURN_SEPARATOR)
                        separate = False
                    wrote_text = True
                elif isinstance(event, ToolCallResult):
                    separate = wrote_text
                chunk = _event_chunk(event, writer, gateway.shown_arguments)
                if chunk is not None:
                    yield chunk
        assert final is not None
        if not opened:
            opened = True
            yield writer.role()
        if (
            final.status == "awaiting_approval"
            and resume is not None
            and gateway.config.approvals.wait_seconds > 0
            and await wait_for_decisions(gateway, final, gateway.config.approvals.wait_seconds)
        ):
            # Decided while the client waited: go on in the same stream.
            events = resume(final.run_id)
            continue
        if on_done is not None:
            await on_done(final)
        for chunk in _finish(final, writer, include_usage, gateway.shown_arguments):
            yield chunk
        return


def _event_chunk(event: AgentEvent, writer: ChunkWriter, shown: Shown) -> bytes | None:
    if isinstance(event, TextDelta):
        return writer.content(event.text) if event.text else None
    if isinstance(event, ReasoningDelta):
        return writer.reasoning(event.text) if event.text else None
    payload = event_payload(event, shown)
    return writer.extension(payload) if payload is not None else None


def _finish(
    result: RunResult, writer: ChunkWriter, include_usage: bool, shown: Shown
) -> list[bytes]:
    out: list[bytes] = []
    if result.status != "completed" and result.status != "client_tool_calls":
        out.append(writer.extension({"type": "run_status", **run_status(result, shown)}))
        # As in a whole response (`_final_message`), the output says why the run stopped;
        # a client that ignores the extension must not get an empty answer.
        if result.output:
            out.append(writer.content(result.output))
    for index, call in enumerate(result.client_calls):
        out.append(writer.tool_call_start(index, call.id, call.name, call.arguments))
    _, finish = _final_message(result)
    out.append(writer.finish(finish))
    if include_usage:
        out.append(writer.usage(result.usage))
    out.append(DONE)
    return out


def _final_message(result: RunResult) -> tuple[AssistantMessage, FinishReason]:
    """The assistant message the client gets, and its finish reason.

    Its content is the text of every turn of the run, as it was streamed: what the model
    said before calling server tools belongs to its answer too.
    """
    steps = result.steps[result.first_step :]
    last = steps[-1].response if steps else None
    text = TURN_SEPARATOR.join(
        s.response.message.content for s in steps if s.response.message.content
    )
    if result.status == "client_tool_calls":
        return AssistantMessage(content=text or None, tool_calls=tuple(result.client_calls)), (
            "tool_calls"
        )
    if result.status == "completed" and last is not None:
        return AssistantMessage(
            content=text or last.message.content, reasoning=last.message.reasoning
        ), last.finish_reason
    # max_iterations / awaiting_approval: what the model said, then why the run stopped
    # (as a stream sends them).
    return AssistantMessage(
        content=TURN_SEPARATOR.join(t for t in (text, result.output) if t)
    ), "stop"


# --- errors -------------------------------------------------------------------------------


def _failure(gateway: Gateway, exc: BaseException) -> Exception:
    if isinstance(exc, ModelError):
        return upstream_error(exc, gateway.redact)
    if isinstance(exc, StoreError):
        return store_error(exc)
    assert isinstance(exc, Exception)
    return exc


def _failure_payload(exc: BaseException, redact: Callable[[str], str]) -> dict[str, Any]:
    if isinstance(exc, ModelError):
        error = upstream_error(exc, redact)
        return error_body(error.message, type=error.type, param=error.param, code=error.code)
    if isinstance(exc, StoreError):
        error = store_error(exc)
        return error_body(error.message, type=error.type, code=error.code)
    return error_body(
        "The gateway failed while running the request; see its log.", type="server_error"
    )
