"""`GET /`: the playground page, a small static web app shipped in the package.

It talks only to this gateway (`/v1/models`, `/v1/chat/completions`, `/v1/approvals`,
`/v1/runs/{id}/resume`) and says so in a strict Content-Security-Policy: nothing the
page loads or calls can leave the gateway's origin. The page itself needs no key; the
API calls it makes do, when the gateway has keys.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.http.errors import GatewayError

__all__ = ["routes"]

_ASSETS: Final = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
_HEADERS: Final = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def _read(name: str) -> bytes:
    return files("toolwire.server").joinpath("playground", name).read_bytes()


async def _page(request: Request) -> Response:
    return Response(_read("index.html"), media_type="text/html; charset=utf-8", headers=_HEADERS)


async def _asset(request: Request) -> Response:
    name: str = request.path_params["name"]
    media = _ASSETS.get(name)
    if media is None:
        # JSON like every other unknown path: clients read one error shape.
        raise GatewayError(404, f"Unknown path {request.url.path}.", code="not_found")
    return Response(_read(name), media_type=media, headers=_HEADERS)


routes = [
    Route("/", _page, methods=["GET"]),
    Route("/playground/{name}", _asset, methods=["GET"]),
]
