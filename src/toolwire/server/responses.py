"""JSON responses serialised with orjson."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response

__all__ = ["json_response"]


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON response serialised with orjson."""
    return Response(
        orjson.dumps(data), status_code=status, headers=headers, media_type="application/json"
    )
