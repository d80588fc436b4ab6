"""Errors the app answers for any route, in the shape of the door the path belongs to.

Starlette's router answers an unknown path or a wrong method before a door's handler
runs, and an unexpected exception escapes every handler: both are answered here, as
Anthropic's `{"type": "error", ...}` under `/v1/messages` (where the `anthropic` SDK
reads them) and as OpenAI's `{"error": {...}}` everywhere else.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from starlette.types import Receive, Scope, Send

from toolwire.server.http.errors import GatewayError
from toolwire.server.http.responses import json_response
from toolwire.server.protocols.anthropic_messages.wire import error_body as anthropic_body

__all__ = ["answer_failure", "door_body"]

logger = logging.getLogger("toolwire.server")

_ANTHROPIC: Final = "/v1/messages"


def door_body(path: str, error: GatewayError) -> dict[str, Any]:
    """`error` as the JSON body the door of `path` answers errors with."""
    if path == _ANTHROPIC or path.startswith(_ANTHROPIC + "/"):
        return anthropic_body(error)
    return error.body()


async def answer_failure(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer an exception no handler caught, before the response started, with a JSON
    500 in the door's shape (the app's layer, `server.dispatch`, calls it from its
    `except`), and log it.

    Without it Starlette answers `Internal Server Error` in plain text and re-raises,
    and uvicorn then closes the connection: a keep-alive client's next request on it
    got no answer. A failure after the response started cannot be answered; the layer
    re-raises it as before.
    """
    logger.exception("unexpected failure on %s %s", scope["method"], scope["path"])
    error = GatewayError(
        500,
        "The gateway failed while serving the request; see its log.",
        type="server_error",
    )
    body = door_body(scope["path"], error)
    await json_response(body, 500)(scope, receive, send)
