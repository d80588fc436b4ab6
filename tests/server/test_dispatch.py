"""The app's one ASGI layer (`toolwire.server.dispatch`): the model doors dispatched by
exact path, and everything else as the router would."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from server_support import config_with
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from toolwire.server import create_app
from toolwire.server.dispatch import GatewayApp, Layer, _direct_routes

DOORS = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages": {"max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"input": "hi", "store": False},
}


async def _post(app: Any, path: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, **kwargs)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        return await client.post(path, json={"model": "toolwire-offline", **body})


async def test_the_model_doors_are_dispatched_to_the_route_the_router_picks() -> None:
    app = create_app(config_with(), environ={})
    async with app.router.lifespan_context(app):
        for path, body in DOORS.items():
            response = await _post(app, path, body)
            assert response.status_code == 200, response.text
            assert response.headers["x-request-id"].startswith("req_")
    layer = app.middleware_stack
    assert isinstance(layer, Layer)
    for path in DOORS:
        chosen = [r for r in app.router.routes if isinstance(r, Route) and r.path == path]
        assert layer._direct[("POST", path)] is chosen[0]


async def _mine(request: Request) -> Response:
    return PlainTextResponse(f"mine {request.scope['route'].path}")


def _mine_sync(request: Request) -> Response:
    return PlainTextResponse("mine, in a thread")


@pytest.mark.parametrize("endpoint", [_mine, _mine_sync])
async def test_a_route_put_in_front_of_a_door_later_answers_in_its_place(endpoint: Any) -> None:
    app = create_app(config_with(), environ={})
    path, body = "/v1/chat/completions", DOORS["/v1/chat/completions"]
    async with app.router.lifespan_context(app):
        assert (await _post(app, path, body)).status_code == 200
        app.router.routes.insert(0, Route(path, endpoint, methods=["POST"]))
        response = await _post(app, path, body)
    assert response.status_code == 200
    assert response.text.startswith("mine")
    assert response.headers["x-request-id"]


async def _boom(request: Request) -> Response:
    raise RuntimeError("a bug")


@pytest.mark.parametrize(
    ("path", "shape"),
    [("/v1/chat/completions", "error"), ("/v1/messages", "type")],
)
async def test_an_unexpected_failure_of_a_direct_route_is_a_json_500(path: str, shape: str) -> None:
    app = create_app(config_with(), environ={})
    app.router.routes.insert(0, Route(path, _boom, methods=["POST"]))
    response = await _post(app, path, {})
    assert response.status_code == 500
    assert shape in response.json()
    assert response.headers["x-request-id"]
    layer = app.middleware_stack
    assert isinstance(layer, Layer)
    assert ("POST", path) in layer._direct  # it went the direct way


async def test_a_request_under_a_root_path_goes_through_the_router() -> None:
    app = create_app(config_with(), environ={})
    body = DOORS["/v1/chat/completions"]
    async with app.router.lifespan_context(app):
        response = await _post(app, "/gw/v1/chat/completions", body, root_path="/gw")
        assert response.status_code == 200, response.text
        unknown = await _post(app, "/gw/v1/nope", body, root_path="/gw")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"


async def _endpoint(request: Request) -> Response:
    return PlainTextResponse("ok")


class _Pass:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def test_only_plain_async_routes_without_parameters_are_dispatched_directly() -> None:
    router = Router(
        routes=[
            Route("/a", _endpoint, methods=["GET"]),  # not for POST: the next one is picked
            Route("/a", _endpoint, methods=["POST"]),
            Route("/sync", _mine_sync, methods=["POST"]),
            Route("/wrapped", _endpoint, methods=["POST"], middleware=[Middleware(_Pass)]),
            Route("/{name}", _endpoint, methods=["POST"]),
        ]
    )
    wanted = [("POST", p) for p in ("/a", "/sync", "/wrapped", "/b")]
    found = _direct_routes(router, wanted)
    assert list(found) == [("POST", "/a")]
    assert found[("POST", "/a")] is router.routes[1]


def test_a_server_error_handler_of_its_own_is_refused() -> None:
    app = GatewayApp(
        observe=None,  # type: ignore[arg-type]  # never reached
        in_flight=None,  # type: ignore[arg-type]
        key_limits=None,  # type: ignore[arg-type]
        exception_handlers={500: _endpoint},
    )
    with pytest.raises(ValueError, match="server errors"):
        app.build_middleware_stack()
