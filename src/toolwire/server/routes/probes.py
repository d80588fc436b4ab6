"""The probes, which never need a key.

- `GET /healthz`: the process is alive.
- `GET /readyz`: it can serve: the upstream answers (any HTTP answer counts: the point is
  reachability, not the key), the store is open when the gateway has server tools, and
  each MCP server is connected (`mcp:<name>`), and the request budgets have room for
  model traffic (named `full` when they have not: `requests` for `limits.max_in_flight`,
  `request_bytes` for `limits.max_in_flight_bytes`; a full `mcp_streams` is named too
  but does not make the gateway unready: model traffic is still served).
  503 names what is down or `full`; the detail (addresses, errors) goes to the log only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.configuration.config import UpstreamConfig
from toolwire.server.gateway import Gateway
from toolwire.server.http.limits import Budget
from toolwire.server.http.responses import json_response
from toolwire.server.keys.caller import gateway_of

__all__ = ["routes"]

logger = logging.getLogger("toolwire.server")

PROBE_TIMEOUT: Final = 3.0


async def _healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


async def _readyz(request: Request) -> Response:
    gateway = gateway_of(request)
    upstream, store, named = await asyncio.gather(
        _upstream(gateway), _store(gateway), _named_upstreams(gateway)
    )
    if named:
        # Failover covers a dead model server: one that answers is enough to serve.
        upstream = "ok" if "ok" in named.values() else "unreachable"
    checks = {"upstream": upstream, "store": store}
    checks.update({f"upstream:{name}": state for name, state in named.items()})
    for server in gateway.tools.mcp:
        checks[f"mcp:{server.name}"] = "ok" if server.status == "up" else server.status
    budget = getattr(request.app.state, "budget", None)
    if isinstance(budget, Budget):
        # Named only when full: an idle probe's answer stays what it was.
        checks.update({name: "full" for name, full in budget.full().items() if full})
    # Full `GET /mcp` streams refuse only more of them: model traffic is still served.
    ready = all(
        v in ("ok", "not used")
        for k, v in checks.items()
        if k != "mcp_streams" and not k.startswith("upstream:")
    )
    return json_response(
        {"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503
    )


async def _upstream(gateway: Gateway) -> str:
    return await _reach(gateway, gateway.config.upstream, "the upstream")


async def _reach(gateway: Gateway, upstream: UpstreamConfig, what: str) -> str:
    """`ok` when `upstream` answers over HTTP (or has no server to ask), else `unreachable`
    (logged, as `what`)."""
    base_url = upstream.effective_base_url
    if upstream.kind == "offline" or base_url is None:
        return "ok"
    try:
        await gateway.http_client.get(base_url, timeout=PROBE_TIMEOUT)
    except httpx.HTTPError as exc:
        logger.warning("readyz: %s is unreachable: %s", what, gateway.redact(str(exc)))
        return "unreachable"
    return "ok"


async def _named_upstreams(gateway: Gateway) -> dict[str, str]:
    """Each upstream of the `upstreams:` form: `ok`, `unreachable`, or `cooling down` when
    every deployment on it is left out after failures."""
    named = gateway.config.upstreams
    cooling = {d.upstream for d in gateway.deployments() if d.cooled_until > time.monotonic()}
    warm = {d.upstream for d in gateway.deployments() if d.cooled_until <= time.monotonic()}

    async def probe(name: str) -> str:
        state = await _reach(gateway, named[name], f"upstream {name!r}")
        if state == "ok" and name in cooling and name not in warm:
            return "cooling down"
        return state

    states = await asyncio.gather(*(probe(name) for name in named))
    return dict(zip(named, states, strict=True))


async def _store(gateway: Gateway) -> str:
    if not gateway.server_tool_names and not gateway.tools.mcp:
        return "not used"
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            store = await gateway.ready()
            await store.ping()
    except Exception as exc:
        logger.warning("readyz: the store is unavailable: %s", exc)
        return "unavailable"
    return "ok"


routes = [
    Route("/healthz", _healthz, methods=["GET"]),
    Route("/readyz", _readyz, methods=["GET"]),
]
