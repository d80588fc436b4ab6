"""`GET /`: the playground page, a small static web app shipped in the package.

It talks only to this gateway (`/v1/models`, `/v1/chat/completions`, `/v1/approvals`,
`/v1/runs/{id}/resume`) and says so in a strict Content-Security-Policy: nothing the
page loads or calls can leave the gateway's origin. The page itself needs no key; the
API calls it makes do, when the gateway has keys.
"""

from __future__ import annotations

from toolwire.server.routes.static_app import static_app_routes

__all__ = ["routes"]

routes = static_app_routes("playground", "/")
