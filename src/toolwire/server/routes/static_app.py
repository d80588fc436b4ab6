"""The routes of a small static web app shipped in the package (the playground, the
console): its page and its assets, under a strict Content-Security-Policy that lets
nothing the page loads or calls leave the gateway's origin.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.http.errors import GatewayError

__all__ = ["static_app_routes"]

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


def static_app_routes(folder: str, page_path: str) -> list[Route]:
    """`GET page_path`: `server/<folder>/index.html`; `GET /<folder>/{name}`: its
    `app.js` and `style.css` (any other name is a 404)."""

    def read(name: str) -> bytes:
        return files("toolwire.server").joinpath(folder, name).read_bytes()

    async def _page(request: Request) -> Response:
        return Response(read("index.html"), media_type="text/html; charset=utf-8", headers=_HEADERS)

    async def _asset(request: Request) -> Response:
        name: str = request.path_params["name"]
        media = _ASSETS.get(name)
        if media is None:
            # JSON like every other unknown path: clients read one error shape.
            raise GatewayError(404, f"Unknown path {request.url.path}.", code="not_found")
        return Response(read(name), media_type=media, headers=_HEADERS)

    return [
        Route(page_path, _page, methods=["GET"]),
        Route(f"/{folder}/{{name}}", _asset, methods=["GET"]),
    ]
