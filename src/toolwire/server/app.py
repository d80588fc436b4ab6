"""`create_app(config)`: the gateway's ASGI app (Starlette).

Handlers translate HTTP to the gateway's objects and back; tool logic stays in the runner.

| Route | |
|---|---|
| `GET /healthz` | liveness, never needs a key |
| `POST /v1/chat/completions` | OpenAI Chat Completions, streaming or not (see `chat.py`) |
| `GET /v1/models`, `GET /v1/models/{id}` | the configured public model ids |
| `GET /v1/tools` | the server tools with their JSON Schemas |
| `POST /v1/tools/{name}/invoke` | run one server tool through the runner |
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.caller import authenticate, gateway_of
from toolwire.server.chat import ClientGone, chat_completions
from toolwire.server.chat_agent import store_error
from toolwire.server.chat_wire import result_json as _result_json
from toolwire.server.config import GatewayConfig
from toolwire.server.errors import GatewayError, error_body
from toolwire.server.gateway import Gateway
from toolwire.server.requests import read_json, validate_body
from toolwire.server.responses import json_response
from toolwire.server.routes import routes as run_routes
from toolwire.store.base import StoreError
from toolwire.tools import Tool, ToolCall, ToolContext, ToolResult, new_call_id

__all__ = ["create_app"]

logger = logging.getLogger("toolwire.server")

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def create_app(
    config: GatewayConfig | None = None, *, environ: Mapping[str, str] | None = None
) -> Starlette:
    """Build the gateway app.

    Args:
        config: The configuration; `None` is `GatewayConfig()` (offline, no tools, no keys).
        environ: Where the upstream key and `env` gateway keys are read (default
            `os.environ`).

    Raises:
        ConfigError: Tool modules fail to load or a named environment variable is unset.
    """
    gateway = Gateway(config if config is not None else GatewayConfig(), environ=environ)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if gateway.server_tool_names:
            # Open (and migrate) the store at startup, not on the first request.
            await gateway.ready()
        try:
            yield
        finally:
            await gateway.aclose()

    app = Starlette(
        routes=[
            Route("/healthz", _healthz, methods=["GET"]),
            Route("/v1/chat/completions", _chat_completions, methods=["POST"]),
            Route("/v1/models", _list_models, methods=["GET"]),
            Route("/v1/models/{model:path}", _get_model, methods=["GET"]),
            Route("/v1/tools", _list_tools, methods=["GET"]),
            Route("/v1/tools/{name}/invoke", _invoke_tool, methods=["POST"]),
            *run_routes,
        ],
        exception_handlers={
            GatewayError: _gateway_error,
            HTTPException: _http_error,
            ClientGone: _client_gone,
        },
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    return app


# --- plumbing ------------------------------------------------------------------------------


def _gateway(request: Request) -> Gateway:
    return gateway_of(request)


def _caller(request: Request) -> ToolContext:
    """Authenticate the request (when keys are configured) and build its `ToolContext`."""
    return authenticate(request).ctx


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    return json_response(exc.body(), exc.status, exc.headers)


async def _client_gone(request: Request, exc: Exception) -> Response:
    # Nobody reads this answer; 499 (nginx's "client closed request") marks it in the log.
    return Response(status_code=499)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Unknown path {request.url.path}."
    elif exc.status_code == 405:
        message = f"Method {request.method} is not allowed on {request.url.path}."
    else:
        message = str(exc.detail)
    body = error_body(message, code=_HTTP_CODES.get(exc.status_code))
    return json_response(body, exc.status_code, exc.headers)


# --- handlers ------------------------------------------------------------------------------


async def _healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


async def _chat_completions(request: Request) -> Response:
    ctx = _caller(request)
    return await chat_completions(request, _gateway(request), ctx)


def _model_object(gateway: Gateway, model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": gateway.started, "owned_by": "toolwire"}


async def _list_models(request: Request) -> Response:
    _caller(request)
    gateway = _gateway(request)
    data = [_model_object(gateway, public) for public in gateway.routes]
    return json_response({"object": "list", "data": data})


async def _get_model(request: Request) -> Response:
    _caller(request)
    gateway = _gateway(request)
    model_id: str = request.path_params["model"]
    if model_id not in gateway.routes:
        raise gateway.unknown_model(model_id)
    return json_response(_model_object(gateway, model_id))


def _tool_entry(tool: Tool) -> dict[str, Any]:
    entry = tool.to_openai()
    entry["effects"] = tool.effects
    entry["scopes"] = list(tool.scopes)
    return entry


async def _list_tools(request: Request) -> Response:
    _caller(request)
    tools = await _gateway(request).runner.list_tools()
    return json_response({"object": "list", "data": [_tool_entry(t) for t in tools]})


class InvokeRequest(BaseModel):
    """The body of `POST /v1/tools/{name}/invoke`."""

    model_config = ConfigDict(extra="forbid")

    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments, as a JSON object."""
    id: str | None = Field(default=None, min_length=1)
    """The tool-call id to report in the result; a fresh one by default."""


async def _invoke_tool(request: Request) -> Response:
    ctx = _caller(request)
    gateway = _gateway(request)
    name: str = request.path_params["name"]
    data = await read_json(request, limit=gateway.config.limits.max_body_bytes)
    body = validate_body(InvokeRequest, data)
    if await gateway.runner.get_tool(name) is None:
        listed = ", ".join(repr(t.name) for t in await gateway.runner.list_tools()) or "none"
        raise GatewayError(
            404,
            f"Unknown server tool {name!r}. Available tools: {listed}.",
            param="name",
            code="tool_not_found",
        )
    call = ToolCall(
        id=body.id or new_call_id(), name=name, arguments=orjson.dumps(body.arguments).decode()
    )
    try:
        await gateway.ready()
        result = await gateway.runner.exec(call, ctx)
    except StoreError as exc:
        raise store_error(exc) from None
    return json_response(result_json(result))


def result_json(result: ToolResult) -> dict[str, Any]:
    """A `ToolResult` as JSON; `content` is the text to send a model as the tool message."""
    return {"object": "tool.result", **_result_json(result)}
