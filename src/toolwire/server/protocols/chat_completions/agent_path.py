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

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from toolwire.agent import (
    AgentEvent,
    ApprovalRequired,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.agent.result import PendingApproval, RunResult
from toolwire.models import AssistantMessage, FinishReason, ModelError
from toolwire.server.errors import error_body, store_error, upstream_error
from toolwire.server.gateway import Gateway
from toolwire.server.protocols.chat_completions.wire import (
    DONE,
    ChunkWriter,
    completion_body,
    new_completion_id,
    result_json,
    tool_calls_json,
)
from toolwire.store.base import StoreError

__all__ = [
    "TURN_SEPARATOR",
    "agent_complete",
    "agent_stream",
    "approval_json",
    "run_extension",
]

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
        extension=run_extension(result),
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
                chunk = _event_chunk(event, writer)
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
            and await _decided(gateway, final, gateway.config.approvals.wait_seconds)
        ):
            # Decided while the client waited: go on in the same stream.
            events = resume(final.run_id)
            continue
        if on_done is not None:
            await on_done(final)
        for chunk in _finish(final, writer, include_usage):
            yield chunk
        return


async def _decided(gateway: Gateway, result: RunResult, wait: float) -> bool:
    """Wait up to `wait` seconds until every pending approval of the run is decided."""
    deadline = time.monotonic() + wait
    ids = [a.id for a in result.approvals]
    while True:
        now = time.time()
        records = [await gateway.store.get_approval(i) for i in ids]
        if all(r is not None and r.effective_status(now) != "pending" for r in records):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.2)


def _event_chunk(event: AgentEvent, writer: ChunkWriter) -> bytes | None:
    if isinstance(event, TextDelta):
        return writer.content(event.text) if event.text else None
    if isinstance(event, ReasoningDelta):
        return writer.reasoning(event.text) if event.text else None
    if isinstance(event, ToolCallStart):
        return writer.extension(
            {
                "type": "tool_call",
                "id": event.call_id,
                "name": event.name,
                "arguments": event.arguments,
            }
        )
    if isinstance(event, ToolCallResult):
        return writer.extension({"type": "tool_result", **result_json(event.result)})
    if isinstance(event, ApprovalRequired):
        payload: dict[str, Any] = {
            "type": "approval_required",
            "call_id": event.call.id,
            "name": event.call.name,
            "arguments": event.call.arguments,
        }
        if event.approval is not None:
            payload.update(approval_json(event.approval))
        return writer.extension(payload)
    return None


def approval_json(approval: PendingApproval) -> dict[str, Any]:
    """A pending approval in the shape of the Responses API's `mcp_approval_request`
    (`id`, `name`, `arguments`), plus toolwire's binding fields."""
    return {
        "type": "approval_required",
        "id": approval.id,
        "call_id": approval.call_id,
        "name": approval.tool,
        "arguments": approval.arguments,
        "arguments_hash": approval.arguments_hash,
        "effects": approval.effects,
        "reason": approval.reason,
    }


def _finish(result: RunResult, writer: ChunkWriter, include_usage: bool) -> list[bytes]:
    out: list[bytes] = []
    if result.status != "completed" and result.status != "client_tool_calls":
        out.append(writer.extension({"type": "run_status", **_status(result)}))
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


def _status(result: RunResult) -> dict[str, Any]:
    out: dict[str, Any] = {"status": result.status, "output": result.output}
    if result.run_id:
        out["run_id"] = result.run_id
    if result.approvals:
        out["pending_approvals"] = [approval_json(a) for a in result.approvals]
    elif result.pending_approvals:
        out["pending_approvals"] = tool_calls_json(result.pending_approvals)
    return out


def run_extension(result: RunResult) -> dict[str, Any]:
    """The `toolwire` field of a whole response: the server tools that ran, in order."""
    calls: list[dict[str, Any]] = []
    for step in result.steps:
        by_id = {r.call_id: r for r in step.tool_results}
        for call in step.response.message.tool_calls:
            done = by_id.get(call.id)
            if done is None:
                continue
            calls.append(
                {
                    "id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "result": result_json(done),
                }
            )
    return {**_status(result), "tool_calls": calls}


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
