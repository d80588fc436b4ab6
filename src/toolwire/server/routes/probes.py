"""`GET /healthz`: the process is alive (never needs a key)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.responses import json_response

__all__ = ["routes"]


async def _healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


routes = [Route("/healthz", _healthz, methods=["GET"])]
