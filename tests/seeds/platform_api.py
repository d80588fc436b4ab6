"""A small stand-in for the platform API of seed 003 (innominatus): the HTTP service
its tools call with the user's token. Records every request it gets."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass
class PlatformApi:
    applications: dict[str, dict[str, object]] = field(
        default_factory=lambda: {
            "demo-app": {"name": "demo-app", "environment": "production", "resources": 5},
            "test-service": {"name": "test-service", "environment": "staging", "resources": 3},
            "api-gateway": {"name": "api-gateway", "environment": "production", "resources": 8},
        }
    )
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    """`(method, path, Authorization header)` of every request, in order."""

    def app(self) -> Starlette:
        async def applications(request: Request) -> Response:
            self._record(request)
            if request.headers.get("authorization") is None:
                return JSONResponse({"error": "authentication required"}, status_code=401)
            return JSONResponse({"applications": list(self.applications.values())})

        async def application(request: Request) -> Response:
            self._record(request)
            name = request.path_params["name"]
            if request.headers.get("authorization") is None:
                return JSONResponse({"error": "authentication required"}, status_code=401)
            if name not in self.applications:
                return JSONResponse({"error": "Application not found"}, status_code=404)
            if request.method == "DELETE":
                del self.applications[name]
                return JSONResponse({"deleted": name})
            return JSONResponse(self.applications[name])

        return Starlette(
            routes=[
                Route("/api/applications", applications, methods=["GET"]),
                Route("/api/applications/{name}", application, methods=["GET", "DELETE"]),
            ]
        )

    def _record(self, request: Request) -> None:
        self.requests.append(
            (request.method, request.url.path, request.headers.get("authorization"))
        )
