"""Reading request bodies: a size cap enforced while reading, JSON, then a schema."""

from __future__ import annotations

import asyncio
from typing import Any, Final, TypeVar

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from toolwire.models._values import json_type
from toolwire.server.configuration.loader import format_path
from toolwire.server.http.errors import GatewayError
from toolwire.server.http.json_depth import MAX_JSON_DEPTH, too_deep

__all__ = ["METERED", "read_body", "read_json", "validate_body"]

M = TypeVar("M", bound=BaseModel)

_MAX_LISTED = 3


BODY_TIMEOUT: Final = 30.0
"""Seconds a client may take to send its whole body by default (`limits.body_timeout`)."""

METERED: Final = "toolwire.metered"
"""Set in the scope of a request whose `receive` the app's layer meters (`Ticket.metered`),
which refuses a body that arrives too late: `read_body` need not time it again."""


async def read_body(request: Request, *, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed `limit` bytes,
    and with 408 when it takes longer than the gateway's `limits.body_timeout` to arrive (a
    slow-loris client holding a request open byte by byte).

    A `Content-Length` over the limit is refused before a byte of the body is read; a body
    sent without one (chunked) is refused once the bytes read pass the limit.
    """
    if request.scope.get(METERED):
        return await _read_body(request, limit)  # the app's layer keeps the deadline
    gateway = getattr(request.app.state, "gateway", None) if "app" in request.scope else None
    seconds = gateway.config.limits.body_timeout if gateway is not None else BODY_TIMEOUT
    try:
        async with asyncio.timeout(seconds):
            return await _read_body(request, limit)
    except TimeoutError:
        raise GatewayError(
            408,
            f"The request body did not arrive within {seconds:g} seconds; send it at once.",
            code="request_timeout",
        ) from None


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise GatewayError(400, "Invalid Content-Length header.") from None
        if size > limit:
            raise _too_large(limit)
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, *, limit: int, allow_empty: bool = False) -> Any:
    """The request body parsed as JSON (400 when it is malformed, or empty unless
    `allow_empty`, which gives `None` for an empty body)."""
    body = await read_body(request, limit=limit)
    if not body.strip():
        if allow_empty:
            return None
        raise GatewayError(400, "The request body is empty; send a JSON object.")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise GatewayError(
            400,
            f"The request body is not valid JSON ({exc}). Send a JSON object.",
            code="invalid_json",
        ) from None
    where = too_deep(data, body)
    if where is not None:
        where = where[:64]  # a key chosen by the client: echoed, but not at any length
        raise GatewayError(
            400,
            f"The request body nests arrays and objects more than {MAX_JSON_DEPTH} levels "
            "deep" + (f" (under '{where}')" if where else "") + "; send flatter JSON.",
            param=where or None,
            code="json_too_deep",
        )
    return data


def validate_body(model: type[M], data: Any) -> M:
    """`data` as `model`, or a 400 naming the first field at fault (and a few more)."""
    if not isinstance(data, dict):
        raise GatewayError(400, f"The request body must be a JSON object, not {json_type(data)}.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        described = []
        for error in errors[:_MAX_LISTED]:
            path = format_path(tuple(error["loc"])) or "(body)"
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown field"
            described.append(f"'{path}': {message}")
        more = f" (and {len(errors) - _MAX_LISTED} more)" if len(errors) > _MAX_LISTED else ""
        first = format_path(tuple(errors[0]["loc"])) or None
        raise GatewayError(
            400, "Invalid request: " + "; ".join(described) + more + ".", param=first
        ) from None


def _too_large(limit: int) -> GatewayError:
    return GatewayError(
        413,
        f"The request body is larger than the gateway's limit of {limit} bytes "
        "(limits.max_body_bytes).",
        code="request_too_large",
    )
