"""JSON responses serialised with orjson, and the headers that list what a request held."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson
from starlette.responses import Response

from toolwire.server.http.client_text import header_list, log_text

__all__ = [
    "DROPPED_HEADER",
    "IGNORED_HEADER",
    "dropped_header",
    "ignored_header",
    "json_response",
]

logger = logging.getLogger("toolwire.server")

DROPPED_HEADER: Final = "toolwire-dropped-tool-results"
"""Names the orphan tool results the gateway dropped (comma-separated call ids, the first
few; `…-count` has how many)."""
IGNORED_HEADER: Final = "toolwire-ignored-fields"
"""Names the request fields the gateway did not interpret (comma-separated, the first
few; `…-count` has how many)."""
_LOGGED: Final = 100


def dropped_header(ids: Sequence[str]) -> dict[str, str]:
    """The `toolwire-dropped-tool-results` headers for `ids` (none when empty)."""
    return _listing(DROPPED_HEADER, "dropped orphan tool results", ids)


def ignored_header(fields: Sequence[str]) -> dict[str, str]:
    """The `toolwire-ignored-fields` headers for `fields` (none when empty)."""
    return _listing(IGNORED_HEADER, "ignored request fields", fields)


def _listing(name: str, what: str, values: Sequence[str]) -> dict[str, str]:
    # The values come from the client and may hold anything, at any length: the header
    # has a bounded, encoded summary (see `client_text`), the log the rest.
    if not values:
        return {}
    listed, whole = header_list(values)
    if not whole:
        shown = ", ".join(repr(log_text(v)) for v in values[:_LOGGED])
        more = f" and {len(values) - _LOGGED} more" if len(values) > _LOGGED else ""
        logger.info("%s (%d, not all in the header): %s%s", what, len(values), shown, more)
    return {name: listed, f"{name}-count": str(len(values))}


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON response serialised with orjson."""
    return Response(
        orjson.dumps(data), status_code=status, headers=headers, media_type="application/json"
    )
