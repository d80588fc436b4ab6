"""`POST /v1/chat/completions`: the door, and its direct path.

Two paths, chosen by the session by whether the gateway has server tools:

- **Direct** (here): one model turn. Its events are forwarded one for one as they
  arrive, so a client tool call streams its arguments as the upstream writes them.
- **Agent** (`toolwire.server.session`): the loop runs server tools inside the gateway
  (their calls and results go out as `toolwire` extension chunks, or the `toolwire`
  field of a whole response) until the model answers or calls a client tool, which is
  handed back as an ordinary `tool_calls` answer (`wire.ChatRunWriter`).

Nothing here decides anything about tools: the request module validates, the agent and
the runner execute, the wire module writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

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
from toolwire.server.http.responses import DROPPED_HEADER, json_response
from toolwire.server.http.streaming import stream_response, unless_disconnected
from toolwire.server.protocols.chat_completions.request import ChatRequest, read_chat_request
from toolwire.server.protocols.chat_completions.wire import (
    DONE,
    ChatRunWriter,
    ChunkWriter,
    completion_body,
    new_completion_id,
)
from toolwire.server.session import Door, Reply, serve

__all__ = ["DOOR", "DROPPED_HEADER", "routes"]

logger = logging.getLogger("toolwire.server")


def _shutdown_event(message: str) -> bytes:
    """The error event that ends a stream a shutdown interrupted."""
    return ChunkWriter.error(error_body(message, type="server_error", code="shutting_down"))


async def _direct(
    request: Request, gateway: Gateway, model: Model, chat: ChatRequest, headers: dict[str, str]
) -> Response:
    if chat.stream:
        writer = ChunkWriter(id=new_completion_id(), model=chat.model)
        body = _direct_stream(model, chat, writer, gateway.redact)
        return await stream_response(body, headers, request, on_shutdown=_shutdown_event)
    payload = await unless_disconnected(request, _direct_complete(model, chat, gateway.redact))
    return json_response(payload, headers=headers)


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
        error = upstream_error(exc, redact)
        yield writer.error(
            error_body(error.message, type=error.type, param=error.param, code=error.code)
        )
        yield DONE
        return
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    # A model that ends without its response broke the protocol; say so, never truncate.
    yield writer.error(error_body("The upstream ended its answer early.", type="upstream_error"))
    yield DONE


DOOR: Door[ChatRequest] = Door(
    name="chat_completions",
    read=read_chat_request,
    reply=lambda chat: Reply(
        model=chat.model, stream=chat.stream, include_usage=chat.include_usage
    ),
    writer=ChatRunWriter,
    direct=_direct,
    shutdown_event=_shutdown_event,
)


async def _endpoint(request: Request) -> Response:
    return await serve(request, DOOR)


routes = [Route("/v1/chat/completions", _endpoint, methods=["POST"])]
