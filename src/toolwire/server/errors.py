"""OpenAI-shaped errors: `{"error": {"message", "type", "param", "code"}}` with an HTTP status.

Handlers raise `GatewayError`; the app turns it (and Starlette's own 404/405, and any
unexpected exception) into that JSON shape, which the `openai` SDK maps onto its exception
classes (`BadRequestError`, `AuthenticationError`, `NotFoundError`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["GatewayError", "error_body"]


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
