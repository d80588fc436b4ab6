"""`POST /v1/chat/completions`: one request through the route's model, or the agent loop.

Two paths, chosen by whether the gateway has server tools:

- **Direct**: one model turn. Its events are forwarded one for one as they arrive, so a
  client tool call streams its arguments as the upstream writes them.
- **Agent**: the loop runs server tools inside the gateway (their calls and results go
  out as `toolwire` extension chunks, or the `toolwire` field of a whole response) until
  the model answers or calls a client tool, which is handed back as an ordinary
  `tool_calls` answer.

Nothing here decides anything about tools: the request module validates, the agent and
the runner execute, the wire module writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from toolwire.agent import (
    AgentEvent,
    ApprovalRequired,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.agent.result import RunResult
from toolwire.models import AssistantMessage, FinishReason, Model, ModelError, ModelResponse
from toolwire.parsing.events import ContentDelta, ToolCallArgsDelta
from toolwire.parsing.events import ReasoningDelta as ModelReasoningDelta
from toolwire.parsing.events import ToolCallStart as ModelToolCallStart
from toolwire.server.chat_request import ChatRequest, parse_chat_request
from toolwire.server.chat_wire import (
    DONE,
    ChunkWriter,
    completion_body,
    new_completion_id,
    result_json,
    tool_calls_json,
)
from toolwire.server.errors import GatewayError, error_body
from toolwire.server.gateway import Gateway
from toolwire.server.requests import read_json
from toolwire.server.responses import json_response
from toolwire.tools import ToolContext

__all__ = ["DROPPED_HEADER", "ClientGone", "chat_completions", "upstream_error"]

logger = logging.getLogger("toolwire.server")

DROPPED_HEADER = "toolwire-dropped-tool-results"
"""Names the orphan tool results the gateway dropped (comma-separated call ids)."""

T = TypeVar("T")

TURN_SEPARATOR = "\n\n"
"""Between the text of two model turns of one run (streamed and whole alike)."""


async def chat_completions(request: Request, gateway: Gateway, ctx: ToolContext) -> Response:
    """Serve one Chat Completions request (authentication already done)."""
    data = await read_json(request, limit=gateway.config.limits.max_body_bytes)
    chat = parse_chat_request(
        data,
        limits=gateway.config.limits,
        strict_tool_results=gateway.config.strict_tool_results,
        dialect=gateway.config.dialect,
        server_tools=gateway.server_tool_names,
    )
    model = gateway.models.get(chat.model)
    if model is None:
        raise gateway.unknown_model(chat.model)
    headers = {DROPPED_HEADER: ",".join(chat.dropped_results)} if chat.dropped_results else {}
    use_agent = bool(gateway.server_tool_names)
    if chat.stream:
        writer = ChunkWriter(id=new_completion_id(), model=chat.model)
        if use_agent:
            body = _agent_stream(gateway, chat, ctx, writer)
        else:
            body = _direct_stream(model, chat, writer, gateway.redact)
        # Wait for the upstream's first event before answering, so a failure that happens
        # before anything was streamed still gets a real HTTP status.
        first = await _first(body)
        return StreamingResponse(
            _chain(first, body),
            media_type="text/event-stream",
            headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
        )
    if use_agent:
        payload = await _unless_disconnected(request, _agent_complete(gateway, chat, ctx))
    else:
        payload = await _unless_disconnected(request, _direct_complete(model, chat, gateway.redact))
    return json_response(payload, headers=headers)


# --- direct: one model turn ----------------------------------------------------------------


async def _direct_complete(
    model: Model, chat: ChatRequest, redact: Callable[[str], str]
) -> dict[str, Any]:
    try:
        response = await model.complete(chat.messages, chat.tools, chat.settings)
    except ModelError as exc:
        raise upstream_error(exc, redact) from None
    return completion_body(
        id=new_completion_id(),
        model=chat.model,
        message=response.message,
        finish_reason=response.finish_reason,
        usage=response.usage,
    )


async def _direct_stream(
    model: Model, chat: ChatRequest, writer: ChunkWriter, redact: Callable[[str], str]
) -> AsyncIterator[bytes]:
    events = model.stream(chat.messages, chat.tools, chat.settings)
    opened = False
    try:
        async for event in events:
            if not opened:
                opened = True
                yield writer.role()
            if isinstance(event, ContentDelta):
                if event.text:
                    yield writer.content(event.text)
            elif isinstance(event, ModelReasoningDelta):
                if event.text:
                    yield writer.reasoning(event.text)
            elif isinstance(event, ModelToolCallStart):
                yield writer.tool_call_start(event.index, event.id, event.name)
            elif isinstance(event, ToolCallArgsDelta):
                if event.text:
                    yield writer.tool_call_arguments(event.index, event.text)
            elif isinstance(event, ModelResponse):
                yield writer.finish(event.finish_reason)
                if chat.include_usage:
                    yield writer.usage(event.usage)
                yield DONE
                return
    except ModelError as exc:
        if not opened:
            raise upstream_error(exc, redact) from None
        logger.warning("upstream failed mid-stream: %s", redact(str(exc)))
        yield writer.error(_error_payload(exc, redact))
        yield DONE
        return
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    # A model that ends without its response broke the protocol; say so, never truncate.
    yield writer.error(error_body("The upstream ended its answer early.", type="upstream_error"))
    yield DONE


# --- agent: server tools run inside the gateway ---------------------------------------------


async def _agent_complete(gateway: Gateway, chat: ChatRequest, ctx: ToolContext) -> dict[str, Any]:
    agent = gateway.agents[chat.model]
    try:
        result = await agent.run(
            chat.messages, ctx, settings=chat.settings, client_tools=chat.tools
        )
    except ModelError as exc:
        raise upstream_error(exc, gateway.redact) from None
    message, finish = _final_message(result)
    return completion_body(
        id=new_completion_id(),
        model=chat.model,
        message=message,
        finish_reason=finish,
        usage=result.usage,
        extension=_run_extension(result),
    )


async def _agent_stream(
    gateway: Gateway, chat: ChatRequest, ctx: ToolContext, writer: ChunkWriter
) -> AsyncIterator[bytes]:
    agent = gateway.agents[chat.model]
    events = agent.run_stream(chat.messages, ctx, settings=chat.settings, client_tools=chat.tools)
    opened = wrote_text = separate = False
    async with contextlib.aclosing(events):
        async for event in events:
            if isinstance(event, Done):
                if event.exception is not None:
                    exc = event.exception
                    if not opened and isinstance(exc, ModelError):
                        raise upstream_error(exc, gateway.redact)
                    logger.warning("run failed mid-stream: %s", gateway.redact(event.error or ""))
                    yield writer.error(_failure_payload(exc, gateway.redact))
                    yield DONE
                    return
                if not opened:
                    yield writer.role()
                for final in _agent_finish(event.result, chat, writer):
                    yield final
                return
            if not opened:
                opened = True
                yield writer.role()
            if isinstance(event, TextDelta) and event.text:
                # Text of a turn after a tool turn starts a new paragraph, exactly as the
                # turns are joined in a whole response.
                if separate:
                    yield writer.content(TURN_SEPARATOR)
                    separate = False
                wrote_text = True
            elif isinstance(event, ToolCallResult):
                separate = wrote_text
            chunk = _agent_event_chunk(event, writer)
            if chunk is not None:
                yield chunk


def _agent_event_chunk(event: AgentEvent, writer: ChunkWriter) -> bytes | None:
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
        return writer.extension(
            {
                "type": "approval_required",
                "id": event.call.id,
                "name": event.call.name,
                "arguments": event.call.arguments,
            }
        )
    return None


def _agent_finish(result: RunResult, chat: ChatRequest, writer: ChunkWriter) -> list[bytes]:
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
    if chat.include_usage:
        out.append(writer.usage(result.usage))
    out.append(DONE)
    return out


def _final_message(result: RunResult) -> tuple[AssistantMessage, FinishReason]:
    """The assistant message the client gets, and its finish reason.

    Its content is the text of every turn of the run, as it was streamed: what the model
    said before calling server tools belongs to its answer too.
    """
    last = result.steps[-1].response if result.steps else None
    text = TURN_SEPARATOR.join(
        s.response.message.content for s in result.steps if s.response.message.content
    )
    if result.status == "client_tool_calls":
        return AssistantMessage(content=text or None, tool_calls=tuple(result.client_calls)), (
            "tool_calls"
        )
    if result.status == "completed" and last is not None:
        return AssistantMessage(
            content=text or last.message.content, reasoning=last.message.reasoning
        ), last.finish_reason
    # max_iterations / awaiting_approval: the output explains why the run stopped.
    return AssistantMessage(content=result.output), "stop"


def _status(result: RunResult) -> dict[str, Any]:
    out: dict[str, Any] = {"status": result.status, "output": result.output}
    if result.pending_approvals:
        out["pending_approvals"] = tool_calls_json(result.pending_approvals)
    return out


def _run_extension(result: RunResult) -> dict[str, Any]:
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


def upstream_error(exc: ModelError, redact: Callable[[str], str] = str) -> GatewayError:
    """A `ModelError` as the gateway's answer: an upstream 4xx relayed with its status and
    body, anything else (unreachable, 5xx after retries) a 502. `redact` masks the upstream
    key in the message (an upstream may echo it)."""
    status = exc.status
    body = exc.body or {}
    if status is not None and 400 <= status < 500:
        return GatewayError(
            status,
            redact(str(body.get("message") or exc)),
            type=str(body.get("type") or "invalid_request_error"),
            param=_opt_str(body.get("param")),
            code=_opt_str(body.get("code")),
        )
    return GatewayError(502, redact(str(exc)), type="upstream_error", code="upstream_unavailable")


def _error_payload(exc: ModelError, redact: Callable[[str], str]) -> dict[str, Any]:
    error = upstream_error(exc, redact)
    return error_body(error.message, type=error.type, param=error.param, code=error.code)


def _failure_payload(exc: BaseException, redact: Callable[[str], str]) -> dict[str, Any]:
    if isinstance(exc, ModelError):
        return _error_payload(exc, redact)
    return error_body(
        "The gateway failed while running the request; see its log.", type="server_error"
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


# --- plumbing -------------------------------------------------------------------------------


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


async def _unless_disconnected(request: Request, work: Awaitable[T]) -> T:
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
