"""OpenAI-shaped errors: `{"error": {"message", "type", "param", "code"}}` with an HTTP status.

Handlers raise `GatewayError`; the app turns it (and Starlette's own 404/405, and any
unexpected exception) into that JSON shape, which the `openai` SDK maps onto its exception
classes (`BadRequestError`, `AuthenticationError`, `NotFoundError`, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from toolwire.models.base import ModelError
from toolwire.store.base import StoreError, StoreUnavailable

__all__ = ["GatewayError", "error_body", "store_error", "upstream_error"]

logger = logging.getLogger("toolwire.server")


class GatewayError(Exception):
    """A request the gateway refuses or cannot serve.

    Args:
        status: The HTTP status.
        message: For the client's developer: what was wrong and what to send instead.
        type: The OpenAI error type (`invalid_request_error`, `server_error`, ...).
        param: The request field at fault, e.g. `messages[2].content`.
        code: A machine-readable code (`model_not_found`, `invalid_api_key`, ...).
        headers: Extra response headers.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The JSON body of the error response."""
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


def error_body(
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """The OpenAI error JSON shape."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


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
    # The detail names the upstream's address and the client library's words: it goes to
    # the log; the client gets what happened, in the gateway's words.
    logger.warning("upstream failed: %s", redact(str(exc)))
    return GatewayError(
        502,
        _UPSTREAM_FAILURES.get(exc.kind or "", _UPSTREAM_FAILURES[""])
        + " The gateway's log has the details.",
        type="upstream_error",
        code="upstream_unavailable",
    )


_UPSTREAM_FAILURES: Final = {
    "unreachable": "The upstream model could not be reached.",
    "timeout": "The upstream model did not answer in time.",
    "status": "The upstream model failed to answer (it returned a server error).",
    "malformed": "The upstream model's answer could not be read.",
    "too_large": "The upstream model's answer was larger than the gateway accepts "
    "(upstream.max_response_bytes).",
    "ended": "The upstream model ended its answer early.",
    "": "The upstream model failed.",
}


def store_error(exc: StoreError) -> GatewayError:
    """The state store failed: 503 when it is unreachable (retry later), else 500."""
    if isinstance(exc, StoreUnavailable):
        return GatewayError(
            503,
            f"The gateway's state store is unavailable, and this request needs it: {exc}",
            type="server_error",
            code="store_unavailable",
            headers={"Retry-After": "5"},
        )
    return GatewayError(500, f"The gateway's state store failed: {exc}", type="server_error")


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
