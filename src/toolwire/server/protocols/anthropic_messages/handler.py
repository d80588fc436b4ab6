"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: the Anthropic Messages API.

Two paths, chosen by the session as on the chat endpoint, by whether the gateway has
server tools:

- **Direct**: one model turn. Text streams as the upstream writes it; each tool call is
  written whole once the turn is complete (see `wire.MessagesTurnWriter`).
- **Agent** (`toolwire.server.session`): the loop runs server tools inside the gateway
  until the model answers or calls a client tool (see `wire.MessagesRunWriter`).

Every failure on these routes answers in Anthropic's error shape with Anthropic's
statuses, so the `anthropic` SDK raises its own exception classes. The gateway key is
accepted as `x-api-key` (what the SDK sends) or `Authorization: Bearer`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.gateway import Gateway
from toolwire.server.http.errors import GatewayError
from toolwire.server.http.requests import read_json
from toolwire.server.http.responses import IGNORED_HEADER, ignored_header, json_response
from toolwire.server.http.streaming import ClientGone
from toolwire.server.keys.caller import authenticate, gateway_of
from toolwire.server.protocols.anthropic_messages.request import (
    MessagesRequest,
    parse_messages_request,
    read_messages_request,
)
from toolwire.server.protocols.anthropic_messages.tokens import estimate_tokens
from toolwire.server.protocols.anthropic_messages.wire import (
    MessagesRunWriter,
    MessagesTurnWriter,
    error_body,
    shutdown_event,
)
from toolwire.server.session import Door, Reply, serve
from toolwire.tools import ToolContext

__all__ = ["DOOR", "IGNORED_HEADER", "count_tokens", "routes"]

logger = logging.getLogger("toolwire.server")


def _headers(req: MessagesRequest, ctx: ToolContext) -> dict[str, str]:
    """Anthropic's `request-id`, and the fields the gateway did not interpret."""
    return {"request-id": str(ctx.metadata["request_id"]), **ignored_header(req.ignored_fields)}


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


DOOR: Door[MessagesRequest] = Door(
    name="messages",
    read=read_messages_request,
    reply=lambda req: Reply(model=req.model, stream=req.stream, thinking=req.thinking),
    headers=_headers,
    writer=MessagesRunWriter,
    turn=MessagesTurnWriter,
    shutdown_event=shutdown_event,
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
