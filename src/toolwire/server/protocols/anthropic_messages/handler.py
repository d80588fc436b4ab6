"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: the Anthropic Messages API.

Two paths, chosen as on the chat endpoint by whether the gateway has server tools:

- **Direct**: one model turn. Text streams as the upstream writes it; each tool call is
  written whole once the turn is complete (see `wire.MessageWriter`).
- **Agent** (`toolwire.server.session`): the loop runs server tools inside the gateway
  until the model answers or calls a client tool (see `wire.MessagesRunWriter`).

Every failure on these routes answers in Anthropic's error shape with Anthropic's
statuses, so the `anthropic` SDK raises its own exception classes. The gateway key is
accepted as `x-api-key` (what the SDK sends) or `Authorization: Bearer`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.models import Model, ModelContentDelta, ModelError, ModelReasoningDelta, ModelResponse
from toolwire.server.gateway import Gateway
from toolwire.server.http.errors import GatewayError, upstream_error
from toolwire.server.http.requests import read_json
from toolwire.server.http.responses import (
    IGNORED_HEADER,
    ignored_header,
    json_response,
)
from toolwire.server.http.streaming import (
    ClientGone,
    stream_response,
    unless_disconnected,
)
from toolwire.server.keys.caller import authenticate, gateway_of
from toolwire.server.protocols.anthropic_messages.request import (
    MessagesRequest,
    parse_messages_request,
    read_messages_request,
)
from toolwire.server.protocols.anthropic_messages.tokens import estimate_tokens
from toolwire.server.protocols.anthropic_messages.wire import (
    MessagesRunWriter,
    MessageWriter,
    error_body,
    new_message_id,
    stop_reason,
)
from toolwire.server.session import Door, Reply, serve
from toolwire.tools import ToolContext

__all__ = ["DOOR", "IGNORED_HEADER", "count_tokens", "routes"]

logger = logging.getLogger("toolwire.server")


def _headers(req: MessagesRequest, ctx: ToolContext) -> dict[str, str]:
    """Anthropic's `request-id`, and the fields the gateway did not interpret."""
    return {"request-id": str(ctx.metadata["request_id"]), **ignored_header(req.ignored_fields)}


async def _direct(
    request: Request, gateway: Gateway, model: Model, req: MessagesRequest, headers: dict[str, str]
) -> Response:
    writer = MessageWriter(
        id=new_message_id(), model=req.model, stream=req.stream, thinking=req.thinking
    )
    if req.stream:
        stream = _direct_stream(model, req, writer, gateway.redact)
        return await stream_response(stream, headers, request, on_shutdown=_shutdown_event)
    body = await unless_disconnected(request, _direct_complete(model, req, writer, gateway.redact))
    return json_response(body, headers=headers)


def _shutdown_event(message: str) -> bytes:
    # Anthropic ends a failed stream with `event: error`; `overloaded_error` is its word
    # for "temporarily unable, retry".
    return MessageWriter.error(error_body(GatewayError(503, message, type="overloaded_error")))


async def count_tokens(request: Request, gateway: Gateway) -> Response:
    """`{"input_tokens": n}`: an estimate (see `tokens`); the upstream is not called."""
    data = await read_json(request, limit=gateway.config.limits.max_body_bytes)
    req = parse_messages_request(
        data,
        limits=gateway.config.limits,
        strict_tool_results=gateway.config.strict_tool_results,
        server_tools=gateway.server_tool_names,
        count_only=True,
    )
    if req.model not in gateway.models:
        raise gateway.unknown_model(req.model)
    # The model is shown the gateway's server tools too, when it has any.
    tools = [*req.tools, *gateway.server_tool_list]
    return json_response({"input_tokens": estimate_tokens(req.messages, tools)})


# --- direct: one model turn ----------------------------------------------------------------


async def _direct_complete(
    model: Model, req: MessagesRequest, writer: MessageWriter, redact: Callable[[str], str]
) -> dict[str, Any]:
    try:
        response = await model.complete(req.messages, req.tools, req.settings)
    except ModelError as exc:
        raise upstream_error(exc, redact) from None
    writer.reasoning(response.message.reasoning or "")
    writer.text(response.message.content or "")
    _end(writer, response)
    return writer.message()


async def _direct_stream(
    model: Model, req: MessagesRequest, writer: MessageWriter, redact: Callable[[str], str]
) -> AsyncIterator[bytes]:
    events = model.stream(req.messages, req.tools, req.settings)
    opened = False
    try:
        async for event in events:
            if not opened:
                opened = True
                yield writer.start()
            chunk = b""
            if isinstance(event, ModelContentDelta):
                chunk = writer.text(event.text)
            elif isinstance(event, ModelReasoningDelta):
                chunk = writer.reasoning(event.text)
            elif isinstance(event, ModelResponse):
                yield _end(writer, event)
                return
            # Tool-call deltas are not forwarded: the calls are written whole from the
            # final response, whose arguments are the authoritative (assembled, parsed,
            # repaired) ones.
            if chunk:
                yield chunk
    except ModelError as exc:
        error = upstream_error(exc, redact)
        if not opened:
            raise error from None
        logger.warning("upstream failed mid-stream: %s", error.message)
        yield writer.error(error_body(error))
        return
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    # A model that ends without its response broke the protocol; say so, never truncate.
    early = GatewayError(502, "The upstream ended its answer early.", type="api_error")
    if not opened:
        raise early
    yield writer.error(error_body(early))


def _end(writer: MessageWriter, response: ModelResponse) -> bytes:
    out = b""
    for call in response.message.tool_calls:
        out += writer.tool_use(call)
    return out + writer.finish(stop_reason(response.finish_reason), response.usage)


DOOR: Door[MessagesRequest] = Door(
    name="messages",
    read=read_messages_request,
    reply=lambda req: Reply(model=req.model, stream=req.stream, thinking=req.thinking),
    headers=_headers,
    writer=MessagesRunWriter,
    direct=_direct,
    shutdown_event=_shutdown_event,
)


# --- the routes ----------------------------------------------------------------------------


async def _messages_endpoint(request: Request) -> Response:
    return await _anthropic_errors(request, _serve_messages)


async def _count_tokens_endpoint(request: Request) -> Response:
    return await _anthropic_errors(request, _serve_count_tokens)


async def _serve_messages(request: Request) -> Response:
    return await serve(request, DOOR)


async def _serve_count_tokens(request: Request) -> Response:
    authenticate(request)
    return await count_tokens(request, gateway_of(request))


async def _anthropic_errors(
    request: Request, serve: Callable[[Request], Awaitable[Response]]
) -> Response:
    """Run `serve`, answering every failure in Anthropic's error shape."""
    try:
        if request.method != "POST":
            raise GatewayError(
                405,
                f"Method {request.method} is not allowed on {request.url.path}; use POST.",
                headers={"Allow": "POST"},
            )
        return await serve(request)
    except GatewayError as exc:
        return json_response(error_body(exc), exc.status, exc.headers)
    except ClientGone:
        raise
    except Exception:
        logger.exception("unexpected failure on %s", request.url.path)
        failure = GatewayError(
            500, "The gateway failed while serving the request; see its log.", type="api_error"
        )
        return json_response(error_body(failure), failure.status)


_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]
"""The methods that reach the endpoint, which answers a wrong one in Anthropic's shape
with `Allow: POST` (the app answers any other method in that shape too)."""

routes = [
    Route("/v1/messages", _messages_endpoint, methods=_METHODS),
    Route("/v1/messages/count_tokens", _count_tokens_endpoint, methods=_METHODS),
]
