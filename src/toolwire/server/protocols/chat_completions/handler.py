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

import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire import tracing
from toolwire.models import (
    Model,
    ModelContentDelta,
    ModelError,
    ModelReasoningDelta,
    ModelResponse,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.server.gateway import Gateway
from toolwire.server.http.errors import error_body, upstream_error
from toolwire.server.http.requests import read_json
from toolwire.server.http.responses import DROPPED_HEADER, dropped_header, json_response
from toolwire.server.http.streaming import stream_response, unless_disconnected
from toolwire.server.keys.caller import authenticate, gateway_of
from toolwire.server.protocols.chat_completions.request import ChatRequest, parse_chat_request
from toolwire.server.protocols.chat_completions.run_writer import ChatRunWriter
from toolwire.server.protocols.chat_completions.wire import (
    DONE,
    ChunkWriter,
    completion_body,
    new_completion_id,
)
from toolwire.server.session import Run, Session, run_request, start
from toolwire.tools import ToolContext

__all__ = ["DOOR", "DROPPED_HEADER", "chat_completions", "respond", "routes", "shutdown_event"]

DOOR = "chat_completions"
"""This door's name in a run's state."""

logger = logging.getLogger("toolwire.server")


T = TypeVar("T")


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
    request.state.model = chat.model  # for the access log and metrics
    model = gateway.models.get(chat.model)
    if model is None:
        raise gateway.unknown_model(chat.model)
    headers = dropped_header(chat.dropped_results)
    use_agent = bool(gateway.server_tool_names)
    if use_agent:
        return await _agent_response(request, gateway, chat, ctx, headers)
    if chat.stream:
        writer = ChunkWriter(id=new_completion_id(), model=chat.model)
        body = _direct_stream(model, chat, writer, gateway.redact)
        return await stream_response(body, headers, request, on_shutdown=shutdown_event)
    payload = await unless_disconnected(request, _direct_complete(model, chat, gateway.redact))
    return json_response(payload, headers=headers)


def shutdown_event(message: str) -> bytes:
    """The error event that ends a stream a shutdown interrupted."""
    return ChunkWriter.error(error_body(message, type="server_error", code="shutting_down"))


async def _direct_complete(
    model: Model, chat: ChatRequest, redact: Callable[[str], str]
) -> dict[str, Any]:
    started = time.time_ns()
    try:
        response = await model.complete(chat.messages, chat.tools, chat.settings)
    except ModelError as exc:
        raise upstream_error(exc, redact) from None
    usage = response.usage
    tracing.model_turn(
        model.name, started, response.finish_reason, usage.input_tokens, usage.output_tokens
    )
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
            if isinstance(event, ModelContentDelta):
                if event.text:
                    yield writer.content(event.text)
            elif isinstance(event, ModelReasoningDelta):
                if event.text:
                    yield writer.reasoning(event.text)
            elif isinstance(event, ModelToolCallStart):
                yield writer.tool_call_start(event.index, event.id, event.name)
            elif isinstance(event, ModelToolCallArgsDelta):
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


async def _agent_response(
    request: Request, gateway: Gateway, chat: ChatRequest, ctx: ToolContext, headers: dict[str, str]
) -> Response:
    """Run the agent loop for the request: a stream of chunks, or a whole response."""
    run = await start(gateway, ctx, run_request(DOOR, chat))
    return await respond(request, gateway, run, chat.model, chat.include_usage, headers)


async def respond(
    request: Request,
    gateway: Gateway,
    run: Run,
    model: str,
    include_usage: bool,
    headers: dict[str, str],
) -> Response:
    """A run's answer as chunks or one whole `chat.completion` (new and resumed runs)."""
    writer = ChatRunWriter(
        gateway.shown_arguments, model=model, stream=run.stream, include_usage=include_usage
    )
    return await Session(gateway, run, writer).respond(request, headers, shutdown_event)


# --- errors -------------------------------------------------------------------------------


def _error_payload(exc: ModelError, redact: Callable[[str], str]) -> dict[str, Any]:
    error = upstream_error(exc, redact)
    return error_body(error.message, type=error.type, param=error.param, code=error.code)


async def _endpoint(request: Request) -> Response:
    caller = authenticate(request)
    return await chat_completions(request, gateway_of(request), caller.ctx)


routes = [Route("/v1/chat/completions", _endpoint, methods=["POST"])]
