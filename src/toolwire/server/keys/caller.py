"""Who is calling: the gateway key of a request and the `ToolContext` built from it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from starlette.requests import Request

from toolwire.server.gateway import Gateway
from toolwire.server.http.errors import GatewayError
from toolwire.server.http.request_id import request_id_of
from toolwire.server.keys.keyring import GatewayKey, bearer_token, credentials, presented_key
from toolwire.tools import ToolContext

__all__ = ["Caller", "authenticate", "gateway_of"]


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request: its key (`None` on an open gateway) and tool context."""

    key: GatewayKey | None
    ctx: ToolContext

    @property
    def name(self) -> str | None:
        return self.key.name if self.key is not None else None

    @property
    def admin(self) -> bool:
        """Admin keys see and decide everything; on an open gateway everyone is admin."""
        return self.key is None or self.key.admin


def authenticate(request: Request) -> Caller:
    """Check the request's key (when keys are configured) and build its context.

    The key is read from `Authorization: Bearer <key>`, or else from `x-api-key: <key>`,
    which is how Anthropic's clients send theirs.

    Raises:
        GatewayError: 401 for a missing or unknown key.
    """
    gateway = gateway_of(request)
    sent = credentials(request.scope["headers"])
    key = None
    if gateway.keyring.enabled:
        token = presented_key(sent.get(b"authorization"), sent.get(b"x-api-key"))
        key = gateway.keyring.key_of(request.scope, token)
        if key is None:
            message = (
                "Invalid gateway key."
                if token is not None
                else "Missing gateway key: send it as 'Authorization: Bearer <key>' "
                "(or 'x-api-key: <key>')."
            )
            raise GatewayError(
                401,
                message,
                code="invalid_api_key",
                headers={"WWW-Authenticate": 'Bearer realm="toolwire"'},
            )
    # The token HTTP tools may forward: the caller's own, sent apart from the gateway key
    # when there is one; the gateway key itself is never passed on.
    # An `x-api-key` is an API key, not a token of the caller's to pass on: never forwarded.
    forwarded = bearer_token(sent.get(b"x-forwarded-authorization"))
    if forwarded is None and not gateway.keyring.enabled:
        forwarded = bearer_token(sent.get(b"authorization"))
    ctx = gateway.context(key, forwarded)
    # Kept in audit records so an operator can find a request's tool calls.
    ctx.metadata["request_id"] = request_id_of(request.scope) or "req_" + os.urandom(16).hex()
    if key is not None:
        request.scope.setdefault("state", {})["key_name"] = key.name  # for the access log
    return Caller(key, ctx)
