"""`create_app(config)`: the gateway's ASGI app (Starlette).

Handlers translate HTTP to the gateway's objects and back; tool logic stays in the runner.
What every request passes before its route (its id, metrics and access log, the limits,
errors in the door's shape) is one ASGI layer, `dispatch.Layer`.

- `protocols/`: the front doors (`chat_completions/`, `models.py`);
- `routes/`: toolwire's own REST (`tools.py`, `runs.py`: approvals, runs, audit) and the
  probes (`probes.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Match, Route

from toolwire import tracing
from toolwire.server.configuration.config import GatewayConfig
from toolwire.server.configuration.loader import ConfigError, ConfigProblem
from toolwire.server.dispatch import GatewayApp
from toolwire.server.gateway import Gateway
from toolwire.server.http.door_errors import door_body
from toolwire.server.http.draining import Drain
from toolwire.server.http.errors import GatewayError
from toolwire.server.http.limits import Budget, InFlightLimit
from toolwire.server.http.responses import json_response
from toolwire.server.http.streaming import ClientGone
from toolwire.server.keys.quotas import KeyLimits
from toolwire.server.observability.metrics import MeteredAudit, Metrics, Observe, metrics_routes
from toolwire.server.protocols.anthropic_messages import routes as messages_routes
from toolwire.server.protocols.chat_completions import routes as chat_routes
from toolwire.server.protocols.mcp import McpFrontDoor, mcp_available
from toolwire.server.protocols.models import routes as model_routes
from toolwire.server.protocols.responses import routes as responses_routes
from toolwire.server.retention import keep_pruning
from toolwire.server.routes.console import api_routes as console_api_routes
from toolwire.server.routes.console import page_routes as console_page_routes
from toolwire.server.routes.openapi import routes as openapi_routes
from toolwire.server.routes.playground import routes as playground_routes
from toolwire.server.routes.probes import routes as probe_routes
from toolwire.server.routes.runs import routes as run_routes
from toolwire.server.routes.tools import routes as tool_routes

__all__ = ["create_app"]

logger = logging.getLogger("toolwire.server")

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
_DIRECT = (
    # The model traffic: dispatched by exact path, without the router's walk.
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/responses"),
)


def create_app(
    config: GatewayConfig | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    access_log: bool = True,
) -> Starlette:
    """Build the gateway app.

    Args:
        config: The configuration; `None` is `GatewayConfig()` (offline, no tools, no keys).
        environ: Where the upstream key and `env` gateway keys are read (default
            `os.environ`).
        access_log: Write one `toolwire.access` log line per request.

    Raises:
        ConfigError: Tool modules fail to load or a named environment variable is unset.
    """
    config = config if config is not None else GatewayConfig()
    metrics = Metrics() if config.metrics.enabled else None
    gateway = Gateway(
        config,
        environ=environ,
        observer=metrics,
        on_parse_failure=metrics.parse_failed if metrics is not None else None,
        routing_observer=metrics,
    )
    if metrics is not None:
        gateway.limiter.on_limit = metrics.limit_hit
        metrics.watch(gateway.deployments())
    budget = Budget(config.limits, config.mcp)
    mcp = _mcp_front_door(gateway, budget)
    _start_tracing(gateway)
    if metrics is not None and gateway.runner.audit is not None:
        gateway.runner.audit = MeteredAudit(
            gateway.runner.audit, metrics, lambda: gateway.server_tool_names
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # MCP servers, and the store (opened and migrated at startup, not on the first
        # request) when there are server tools.
        await gateway.start()
        retention = gateway.config.retention
        pruning = None
        if (retention.runs, retention.approvals, retention.audit) != (None, None, None):
            pruning = asyncio.create_task(
                keep_pruning(lambda: gateway.opened_store, retention), name="retention"
            )
        try:
            async with mcp.running() if mcp is not None else contextlib.nullcontext():
                yield
        finally:
            if pruning is not None:
                pruning.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pruning
            await gateway.aclose()

    app = GatewayApp(
        # What every request passes before its route, in this order (see `dispatch`):
        # its id and observation, the in-flight budget, its key's limits.
        observe=Observe(metrics=metrics, log=access_log, models=gateway.routes),
        in_flight=InFlightLimit(budget=budget, keyring=gateway.keyring),
        key_limits=KeyLimits(limiter=gateway.limiter, keyring=gateway.keyring),
        direct=_DIRECT,
        routes=[
            *probe_routes,
            *chat_routes,
            *messages_routes,
            *responses_routes,
            *model_routes,
            *tool_routes,
            *run_routes,
            *(mcp.routes if mcp is not None else []),
            *metrics_routes,
            *openapi_routes,
            *(playground_routes if gateway.config.playground else []),
            *console_api_routes,
            *(console_page_routes if gateway.config.playground else []),
        ],
        exception_handlers={
            GatewayError: _gateway_error,
            HTTPException: _http_error,
            ClientGone: _client_gone,
            # The client went away while sending its body (or sent a malformed one, which
            # the server answered itself): nobody reads an answer.
            ClientDisconnect: _client_gone,
        },
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    app.state.drain = Drain()
    app.state.budget = budget
    app.state.metrics = metrics
    return app


# --- plumbing ------------------------------------------------------------------------------


def _start_tracing(gateway: Gateway) -> None:
    settings = gateway.config.tracing
    if not settings.enabled:
        return
    try:
        tracing.enable_otlp(settings.endpoint, service_name=settings.service_name)
    except ImportError as exc:
        raise ConfigError([ConfigProblem(path="tracing.enabled", message=str(exc))]) from None


def _mcp_front_door(gateway: Gateway, budget: Budget) -> McpFrontDoor | None:
    enabled = gateway.config.mcp.enabled
    if enabled is False or (enabled is None and not mcp_available()):
        return None
    if not mcp_available():
        raise ConfigError(
            [
                ConfigProblem(
                    path="mcp.enabled",
                    message="/mcp needs the MCP SDK: pip install 'toolwire[mcp]'",
                )
            ]
        )
    return McpFrontDoor(gateway, budget.streams)


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
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        # Starlette names the methods of the first route for the path only; a path served
        # by several routes (GET and POST /v1/approvals/{id}) allows all of theirs.
        headers["Allow"] = ", ".join(_allowed(request))
    error = GatewayError(exc.status_code, message, code=_HTTP_CODES.get(exc.status_code))
    # In the shape of the door the path is under: /v1/messages/batches is Anthropic's.
    return json_response(door_body(request.url.path, error), exc.status_code, headers)


def _allowed(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods or set()
    return sorted(methods)
