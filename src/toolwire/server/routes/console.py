"""`GET /console`: the operator console, and the little the REST API lacked for it.

The page (static files in `server/console/`, no build step) is served like the
playground, under the same strict Content-Security-Policy: it talks only to this
gateway. Everything it shows comes from the REST routes the CLI uses (`/v1/approvals`,
`/v1/runs`, `/v1/audit`) plus three read-only routes here:

- `GET /v1/console/session`: who the key is and which views its rights open (the rights
  themselves are `toolwire.server.keys.access`' rule; this only reports them).
- `GET /v1/runs`: the runs the caller may see (its own; everyone's for an admin key),
  newest first.
- `GET /v1/upstreams`: each upstream's deployments with their health, failures and
  cooldowns, read from the same figures as `/metrics` (admin keys, like `/metrics`).
  Today there is one upstream and no cooldowns; routing adds deployments and cooldowns
  to the same shape.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.http.errors import GatewayError, store_error
from toolwire.server.http.responses import json_response
from toolwire.server.keys.access import may_see_run
from toolwire.server.keys.caller import Caller, authenticate, gateway_of
from toolwire.server.observability.metrics import Metrics
from toolwire.server.routes.probes import _upstream as probe_upstream
from toolwire.server.routes.runs import run_summary
from toolwire.server.routes.static_app import static_app_routes
from toolwire.store.base import StoreError

__all__ = ["routes"]

_WINDOW: Final = 300.0
"""Seconds of "recent" failures: counted from the counters' readings kept this long."""


# --- session --------------------------------------------------------------------------------


async def _session(request: Request) -> Response:
    caller = authenticate(request)
    gateway = gateway_of(request)
    key = caller.key
    named = key is not None and any(t.approver == key.name for t in gateway.server_tool_list)
    return json_response(
        {
            "object": "console.session",
            "key": caller.name,
            "open": key is None,
            "admin": caller.admin,
            "approve": "any" if key is None else key.approve,
            "named_approver": named,
            # The audit log and upstreams need an admin key, as `/v1/audit` and `/metrics`.
            "views": ["inbox", "runs", *(["audit", "upstreams"] if caller.admin else [])],
        }
    )


# --- runs -----------------------------------------------------------------------------------


async def _list_runs(request: Request) -> Response:
    caller = authenticate(request)
    gateway = gateway_of(request)
    limit_text = request.query_params.get("limit", "50")
    try:
        limit = int(limit_text)
    except ValueError:
        limit = 0
    if not 1 <= limit <= 200:
        raise GatewayError(
            400, f"limit must be an integer from 1 to 200, not {limit_text[:50]!r}.", param="limit"
        )
    try:
        store = await gateway.ready()
        records = await store.list_runs(owner=None if caller.admin else caller.name, limit=limit)
    except StoreError as exc:
        raise store_error(exc) from None
    now = time.time()
    # The store filtered by owner already; the rule is applied again, not restated.
    data = [run_summary(r, now) for r in records if may_see_run(caller, r.owner)]
    return json_response({"object": "list", "data": data})


# --- upstreams ------------------------------------------------------------------------------


def _admin(request: Request) -> Caller:
    caller = authenticate(request)
    if not caller.admin:
        raise GatewayError(
            403, "This view needs an admin key (keys[].admin: true).", code="admin_only"
        )
    return caller


def _failures(metrics: Metrics | None) -> dict[str, dict[str, float]]:
    """Failed upstream calls so far by upstream model and kind (`toolwire_upstream_errors`)."""
    out: dict[str, dict[str, float]] = {}
    if metrics is None:
        return out
    for family in metrics.upstream_errors.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                model = sample.labels["model"]
                out.setdefault(model, {})[sample.labels["kind"]] = sample.value
    return out


def _latency(metrics: Metrics | None, model: str) -> dict[str, float | None]:
    count = total = 0.0
    if metrics is not None:
        for family in metrics.upstream_duration.collect():
            for sample in family.samples:
                if sample.labels.get("model") != model:
                    continue
                if sample.name.endswith("_count"):
                    count += sample.value
                elif sample.name.endswith("_sum"):
                    total += sample.value
    return {"calls": count, "mean_seconds": total / count if count else None}


def _recent(
    request: Request, totals: dict[str, float], now: float
) -> tuple[dict[str, float], float | None]:
    """Failures per model since a reading about `_WINDOW` seconds old, and that reading's
    time (`None`: since the process started). Prometheus counters only grow, so the
    console keeps the readings it took and subtracts the oldest still in the window (or
    the last one before it, when nobody looked for a while)."""
    state = request.app.state
    readings: deque[tuple[float, dict[str, float]]] = getattr(state, "console_readings", deque())
    state.console_readings = readings
    dropped: tuple[float, dict[str, float]] | None = getattr(state, "console_dropped", None)
    while readings and readings[0][0] < now - _WINDOW:
        dropped = readings.popleft()
    state.console_dropped = dropped
    base = readings[0] if readings else dropped
    readings.append((now, totals))
    if base is None:
        return totals, None  # the first look: everything since the start is recent
    return {m: v - base[1].get(m, 0.0) for m, v in totals.items()}, base[0]


async def _upstreams(request: Request) -> Response:
    _admin(request)
    gateway = gateway_of(request)
    metrics: Metrics | None = getattr(request.app.state, "metrics", None)
    now = time.time()
    failures = _failures(metrics)
    recent, since = _recent(request, {m: sum(k.values()) for m, k in failures.items()}, now)
    reachable = await probe_upstream(gateway)
    upstream = gateway.config.upstream
    deployments = []
    for public, route in gateway.routes.items():
        model = route.model
        failing = recent.get(model, 0.0) > 0
        deployments.append(
            {
                "object": "deployment",
                "model": public,
                "upstream_model": model,
                "health": "unreachable" if reachable != "ok" else "failing" if failing else "ok",
                "failures": failures.get(model, {}),
                "recent_failures": recent.get(model, 0.0),
                "latency": _latency(metrics, model),
                # Routing (issue 25) fills these per deployment; one upstream has none.
                "in_flight": None,
                "cooldown_until": None,
            }
        )
    return json_response(
        {
            "object": "list",
            "window_seconds": _WINDOW,
            "recent_since": since,
            # Gateway-wide until routing counts requests per deployment.
            "in_flight": _gauge(metrics.in_flight if metrics else None),
            "streams": _gauge(metrics.streams if metrics else None),
            "metrics": metrics is not None,
            "data": [
                {
                    "object": "upstream",
                    "name": "upstream",
                    "kind": upstream.kind,
                    # The host only: a base URL may carry credentials or a path's token.
                    "host": _host(upstream.effective_base_url),
                    "health": reachable,
                    "deployments": deployments,
                }
            ],
        }
    )


def _gauge(gauge: Any) -> float | None:
    if gauge is None:
        return None
    for family in gauge.collect():
        for sample in family.samples:
            return float(sample.value)
    return None


def _host(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else None


page_routes = static_app_routes("console", "/console")
api_routes = [
    Route("/v1/console/session", _session, methods=["GET"]),
    Route("/v1/runs", _list_runs, methods=["GET"]),
    Route("/v1/upstreams", _upstreams, methods=["GET"]),
]
routes = [*page_routes, *api_routes]
