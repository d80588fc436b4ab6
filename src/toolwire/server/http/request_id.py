"""Every request gets an id, returned as `X-Request-Id` and kept in the audit log, so an
operator can find what one request did (the app's layer, `server.dispatch`,
assigns it first).

A client's own `X-Request-Id` is kept when it is a short printable token (a proxy's id
then follows the request through); otherwise the gateway makes one.
"""

from __future__ import annotations

import os
import re
from typing import Final

from starlette.types import Scope

__all__ = ["assign_request_id", "request_id_of"]

_USABLE: Final = re.compile(rb"[A-Za-z0-9._:\-]{1,128}")


def request_id_of(scope: Scope) -> str | None:
    """The id `assign_request_id` gave this request, if it ran."""
    state = scope.get("state")
    value = state.get("request_id") if isinstance(state, dict) else None
    return value if isinstance(value, str) else None


def assign_request_id(scope: Scope, given: bytes | None) -> tuple[bytes, bytes]:
    """Give the request its id (in `scope["state"]`); return its `X-Request-Id` header.

    Args:
        given: The value of the request's first `X-Request-Id` header, if it has one (the
            app's layer reads the headers once for everything it needs).
    """
    rid = given.decode() if given is not None and _USABLE.fullmatch(given) else None
    # 32 random hex digits, as `uuid4().hex` wrote them, without building a UUID.
    rid = rid or "req_" + os.urandom(16).hex()
    scope.setdefault("state", {})["request_id"] = rid
    return (b"x-request-id", rid.encode())
