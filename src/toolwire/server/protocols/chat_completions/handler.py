"""`POST /v1/chat/completions`: the door as the session sees it.

Two paths, chosen by the session by whether the gateway has server tools:

- **Direct**: one model turn. Its events are forwarded one for one as they arrive, so a
  client tool call streams its arguments as the upstream writes them
  (`wire.ChatTurnWriter`).
- **Agent**: the loop runs server tools inside the gateway (their calls and results go
  out as `toolwire` extension chunks, or the `toolwire` field of a whole response) until
  the model answers or calls a client tool, which is handed back as an ordinary
  `tool_calls` answer (`wire.ChatRunWriter`).

Nothing here decides anything about tools: the request module validates, the session
runs the turn or the agent, the wire module writes.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.http.responses import DROPPED_HEADER
from toolwire.server.protocols.chat_completions.request import ChatRequest, read_chat_request
from toolwire.server.protocols.chat_completions.wire import (
    ChatRunWriter,
    ChatTurnWriter,
    shutdown_event,
)
from toolwire.server.session import Door, Reply, serve

__all__ = ["DOOR", "DROPPED_HEADER", "routes"]


DOOR: Door[ChatRequest] = Door(
    name="chat_completions",
    read=read_chat_request,
    reply=lambda chat: Reply(
        model=chat.model, stream=chat.stream, include_usage=chat.include_usage
    ),
    writer=ChatRunWriter,
    turn=ChatTurnWriter,
    shutdown_event=shutdown_event,
)


async def _endpoint(request: Request) -> Response:
    return await serve(request, DOOR)


routes = [Route("/v1/chat/completions", _endpoint, methods=["POST"])]
