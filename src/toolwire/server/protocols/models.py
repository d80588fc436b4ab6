"""`GET /v1/models` and `GET /v1/models/{id}`: the configured public model ids, in the
shape the OpenAI SDKs list them."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.gateway import Gateway
from toolwire.server.http.responses import json_response
from toolwire.server.keys.caller import authenticate, gateway_of

__all__ = ["routes"]


def _model_object(gateway: Gateway, model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": gateway.started, "owned_by": "toolwire"}


async def _list_models(request: Request) -> Response:
    authenticate(request)
    gateway = gateway_of(request)
    data = [_model_object(gateway, public) for public in gateway.routes]
    return json_response({"object": "list", "data": data})


async def _get_model(request: Request) -> Response:
    authenticate(request)
    gateway = gateway_of(request)
    model_id: str = request.path_params["model"]
    if model_id not in gateway.routes:
        raise gateway.unknown_model(model_id)
    return json_response(_model_object(gateway, model_id))


routes = [
    Route("/v1/models", _list_models, methods=["GET"]),
    Route("/v1/models/{model:path}", _get_model, methods=["GET"]),
]
