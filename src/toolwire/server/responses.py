"""JSON responses serialised with orjson."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

import orjson
from starlette.responses import Response

__all__ = ["DROPPED_HEADER", "dropped_header", "json_response"]

DROPPED_HEADER: Final = "toolwire-dropped-tool-results"
"""Names the orphan tool results the gateway dropped (comma-separated call ids)."""

_HEADER_SAFE: Final = "!#$&'()*+-./:;<=>?@[]^_`{|}~"
"""Printable ASCII kept as it is in a header value; a comma separates, so it is encoded."""


def dropped_header(ids: Sequence[str]) -> dict[str, str]:
    """The `toolwire-dropped-tool-results` header naming `ids` (none when empty).

    Ids come from the client and may hold anything; each is percent-encoded where it is
    not printable ASCII (or is a comma), so no id can break the header or the response.
    """
    if not ids:
        return {}
    return {DROPPED_HEADER: ",".join(quote(i, safe=_HEADER_SAFE) for i in ids)}


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON response serialised with orjson."""
    return Response(
        orjson.dumps(data), status_code=status, headers=headers, media_type="application/json"
    )
