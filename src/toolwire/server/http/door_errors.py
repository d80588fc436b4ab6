"""Errors the app answers for any route, in the shape of the door the path belongs to.

Starlette's router answers an unknown path or a wrong method before a door's handler
runs, and an unexpected exception escapes every handler: both are answered here, as
Anthropic's `{"type": "error", ...}` under `/v1/messages` (where the `anthropic` SDK
reads them) and as OpenAI's `{"error": {...}}` everywhere else.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolwire.server.http.errors import GatewayError
from toolwire.server.http.responses import json_response
from toolwire.server.protocols.anthropic_messages.wire import error_body as anthropic_body

__all__ = ["CatchAll", "door_body"]

logger = logging.getLogger("toolwire.server")

_ANTHROPIC: Final = "/v1/messages"


def door_body(path: str, error: GatewayError) -> dict[str, Any]:
    """`error` as the JSON body the door of `path` answers errors with."""
    if path == _ANTHROPIC or path.startswith(_ANTHROPIC + "/"):
        return anthropic_body(error)
    return error.body()


class CatchAll:
    """ASGI middleware: an exception no handler caught becomes a JSON 500 in the door's
    shape, and the connection stays usable.

    Without it Starlette answers `Internal Server Error` in plain text and re-raises,
    and uvicorn then closes the connection: a keep-alive client's next request on it
    got no answer. A failure after the response started cannot be answered; it is
    re-raised as before.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception:
            if started:
                raise
            logger.exception("unexpected failure on %s %s", scope["method"], scope["path"])
            error = GatewayError(
                500,
                "The gateway failed while serving the request; see its log.",
                type="server_error",
            )
            body = door_body(scope["path"], error)
            await json_response(body, 500)(scope, receive, send)
