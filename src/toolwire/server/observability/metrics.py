"""What an operator sees: Prometheus metrics at `/metrics` and one log line per request.

- `Observe` (called by the app's one ASGI layer, `server.dispatch`) counts every request
  by route template, method, status and model, records its duration and the time to
  the first byte of a stream, keeps the number of requests and streams in flight, and
  writes one line to the `toolwire.access` logger: time, request id, key name, method,
  route, status, duration, model, tool calls. Never a key, a token or an argument
  value.
- `Metrics` is also the `ModelObserver` of the upstream clients (`ObservedModel`): upstream
  latency (to the answer, to a stream's first event) and failures by kind; and the hook
  of the parsers: tool calls the upstream wrote but that could not be parsed, by format.
- `MeteredAudit` sits between the runner and its audit log: every tool call's record
  passes through it, so tool calls by tool and outcome and their durations are counted
  without the runner knowing about metrics.
- `/metrics` renders the gateway's own registry, and asks the store for the approvals
  by status at scrape time (the store is shared by replicas, so that figure is the
  cluster's). With gateway keys configured it needs an admin key unless
  `metrics.public` is set.

Each app has its own `CollectorRegistry`: several gateways in one process (the tests)
do not share counters. With `serve --workers N` each worker has its own figures; scrape
each worker, or run one worker per container.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Scope

from toolwire import tracing
from toolwire.parsing.events import ParseFailure
from toolwire.server.http.client_text import log_text
from toolwire.server.http.errors import GatewayError
from toolwire.server.keys.caller import authenticate, gateway_of
from toolwire.server.observability.logs import LineHandler, access_handler
from toolwire.server.upstreams.routing import ANSWERED_BY, Deployment
from toolwire.store.base import AuditRecord

if TYPE_CHECKING:
    from toolwire.runner.audit import AuditLog

__all__ = ["OTHER", "MeteredAudit", "Metrics", "Observe", "metrics_routes"]

access_log = logging.getLogger("toolwire.access")
parse_log = logging.getLogger("toolwire.parsing")

_TOOL_CALLS: ContextVar[list[int] | None] = ContextVar("toolwire_tool_calls", default=None)
"""The tool calls of the request being served: a one-item list shared with the tasks the
request starts (they copy the context, not the list)."""

OTHER: Final = "other"
"""The label value of a model or tool the configuration does not name. Label values come
only from the configuration: each distinct value is a series kept for the life of the
process, and a client choosing them could grow the gateway's memory without bound."""

_LATENCY: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_APPROVAL_STATUSES: Final = ("pending", "approved", "denied", "used", "expired")


class Metrics:
    """The gateway's Prometheus metrics, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "toolwire_requests",
            "HTTP requests by route template, method, status and model.",
            ["route", "method", "status", "model"],
            registry=r,
        )
        self.duration = Histogram(
            "toolwire_request_duration_seconds",
            "Time from the request to the end of the response.",
            ["route"],
            buckets=_LATENCY,
            registry=r,
        )
        self.first_byte = Histogram(
            "toolwire_stream_first_byte_seconds",
            "Time from the request to the first byte of a streamed (SSE) answer: the time "
            "to the first token, or to the first event of a run.",
            ["route"],
            buckets=_LATENCY,
            registry=r,
        )
        self.in_flight = Gauge("toolwire_requests_in_flight", "Requests being served.", registry=r)
        self.streams = Gauge("toolwire_streams_active", "SSE answers being streamed.", registry=r)
        self.tool_calls = Counter(
            "toolwire_tool_calls",
            "Server-tool calls by tool and outcome (ok, or the error code).",
            ["tool", "outcome"],
            registry=r,
        )
        self.tool_duration = Histogram(
            "toolwire_tool_duration_seconds",
            "Time a server tool took (approval waits excluded).",
            ["tool"],
            buckets=_LATENCY,
            registry=r,
        )
        self.upstream_duration = Histogram(
            "toolwire_upstream_duration_seconds",
            "Time the upstream model took to answer (a stream: to its last event).",
            ["model", "stream"],
            buckets=_LATENCY,
            registry=r,
        )
        self.upstream_first_event = Histogram(
            "toolwire_upstream_first_event_seconds",
            "Time to the first event of an upstream stream (its time to first token).",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.upstream_errors = Counter(
            "toolwire_upstream_errors",
            "Failed upstream calls by kind: unreachable, timeout, status (an error status "
            "after retries), malformed, too_large, ended (a stream cut short).",
            ["model", "kind"],
            registry=r,
        )
        self.parse_failures = Counter(
            "toolwire_parse_failures",
            "Tool calls the upstream opened in its format's markup but did not write "
            "validly, by format and reason (unfinished, invalid); their text is content.",
            ["format", "reason"],
            registry=r,
        )
        self.deployment_requests = Counter(
            "toolwire_deployment_requests",
            "Attempts on each deployment (failovers included), by public model, upstream "
            "and deployment (`upstream/model`).",
            ["model", "upstream", "deployment"],
            registry=r,
        )
        self.deployment_failures = Counter(
            "toolwire_deployment_failures",
            "Failed attempts on each deployment by kind (unreachable, timeout, status, ...).",
            ["upstream", "deployment", "kind"],
            registry=r,
        )
        self.deployment_cooldowns = Counter(
            "toolwire_deployment_cooldowns",
            "Times a deployment was left out after failing `routing.cooldown.failures` "
            "times in a row.",
            ["upstream", "deployment"],
            registry=r,
        )
        self.deployment_in_flight = Gauge(
            "toolwire_deployment_in_flight",
            "Requests in flight on each deployment (read at scrape time).",
            ["upstream", "deployment"],
            registry=r,
        )
        self.limit_refusals = Counter(
            "toolwire_limit_refusals",
            "Requests and tool calls refused by a per-key limit, by key name and limit.",
            ["key", "limit"],
            registry=r,
        )
        self.approvals = Gauge(
            "toolwire_approvals",
            "Approvals in the store by status (read at scrape time; at most 1000 each).",
            ["status"],
            registry=r,
        )
        self._children: dict[tuple[object, ...], Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, looked up once: `labels()` takes a lock and builds its
        key on every call, and these are called on every request. The cache holds one
        entry per series the metric holds already."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # --- ModelObserver: told by every upstream client (see `ObservedModel`) -----------------

    def answered(self, model: str, seconds: float, *, stream: bool) -> None:
        self.child(self.upstream_duration, model, "true" if stream else "false").observe(seconds)

    def first_event(self, model: str, seconds: float) -> None:
        self.child(self.upstream_first_event, model).observe(seconds)

    def failed(self, model: str, kind: str) -> None:
        self.upstream_errors.labels(model, kind).inc()

    # --- RoutingObserver (see `server.routing`) and the per-key limits -----------------------

    def routed(self, public: str, deployment: Deployment) -> None:
        self.child(self.deployment_requests, public, deployment.upstream, deployment.label).inc()

    def deployment_failed(self, deployment: Deployment, kind: str) -> None:
        self.deployment_failures.labels(deployment.upstream, deployment.label, kind).inc()

    def cooled(self, deployment: Deployment) -> None:
        self.deployment_cooldowns.labels(deployment.upstream, deployment.label).inc()

    def watch(self, deployments: Iterable[Deployment]) -> None:
        """Report these deployments' in-flight counts at each scrape."""
        for d in deployments:
            gauge = self.deployment_in_flight.labels(d.upstream, d.label)
            gauge.set_function(lambda d=d: float(d.in_flight))  # type: ignore[misc]

    def limit_hit(self, key: str, limit: str) -> None:
        """The per-key limits' `LimitHook`."""
        self.limit_refusals.labels(key, limit).inc()

    def parse_failed(self, format: str, failure: ParseFailure) -> None:
        """The parsers' `FailureHook`."""
        self.parse_failures.labels(format, failure.reason).inc()
        if parse_log.isEnabledFor(logging.DEBUG):
            # The text holds argument values: only at debug level.
            parse_log.debug("unparsed %s tool call (%s): %r", format, failure.reason, failure.text)


class MeteredAudit:
    """An audit log that counts the tool calls whose records pass through it.

    Args:
        tools: The gateway's server tools now (MCP servers' come and go): a call of any
            other name (a model may call anything) is counted as `other`.
    """

    def __init__(
        self, inner: AuditLog, metrics: Metrics, tools: Callable[[], Collection[str]]
    ) -> None:
        self._inner = inner
        self._metrics = metrics
        self._tools = tools

    async def append_audit(self, record: AuditRecord) -> int:
        if record.event == "finished":
            counted = _TOOL_CALLS.get()
            if counted is not None:
                counted[0] += 1
        if record.event in ("finished", "finished_late"):
            outcome = record.outcome or "ok"
            tool = record.tool if record.tool in self._tools() else OTHER
            metrics = self._metrics
            metrics.child(metrics.tool_calls, tool, outcome).inc()
            if record.duration_ms is not None:
                metrics.child(metrics.tool_duration, tool).observe(record.duration_ms / 1000)
        return await self._inner.append_audit(record)


class Observe:
    """What the app's layer (`server.dispatch`) observes of every HTTP request: its
    metrics, its trace span and its access log line.

    The layer times the request, reads the status and whether it streams from the answer
    as it passes, and hands them to `done` when the request ends.

    Args:
        models: The model ids the configuration routes: the only `model` label values
            besides `other` (any id a client sends, answered 404) and `""` (no model).
    """

    def __init__(
        self,
        *,
        metrics: Metrics | None,
        log: bool = True,
        models: Collection[str] = (),
    ) -> None:
        self.metrics = metrics
        self.log = log
        self.models = frozenset(models)
        # Requests and SSE answers in flight, counted by the layer in the event loop's
        # thread; their gauges read them at scrape time (a gauge's `inc` and `dec` take
        # a lock, twice per request).
        self.in_flight = 0
        self.streams = 0
        if metrics is not None:
            metrics.in_flight.set_function(lambda: float(self.in_flight))
            metrics.streams.set_function(lambda: float(self.streams))
        # The labelled children, looked up once per label values: `labels()` takes a lock
        # and builds the key each time. Holds what the metrics hold already (one entry per
        # series), nothing more.
        self._requests: dict[tuple[str, str, int, str], Any] = {}
        self._durations: dict[str, Any] = {}
        self._first_bytes: dict[str, Any] = {}

    @staticmethod
    def begin() -> tuple[list[int], list[str]]:
        """Start counting the request's tool calls and the deployments that answer it
        (in the request's context, which the tasks it starts copy)."""
        tool_calls = [0]
        _TOOL_CALLS.set(tool_calls)
        answered_by: list[str] = []
        ANSWERED_BY.set(answered_by)
        return tool_calls, answered_by

    @staticmethod
    def span(scope: Scope) -> Any:
        """The request's trace span (a context manager), when tracing is on."""
        return tracing.span(
            f"{scope['method']} {scope['path']}", {"http.request.method": scope["method"]}
        )

    @staticmethod
    def end_span(current: Any, scope: Scope, status: int) -> None:
        """Name the span after the route and give it the answer's attributes."""
        if current is None:
            return
        traced = scope.get("state") or {}
        current.update_name(f"{scope['method']} {_route(scope)}")
        tracing.set_attributes(
            current,
            {
                "http.route": _route(scope),
                "http.response.status_code": status,
                "toolwire.request_id": traced.get("request_id"),
                "gen_ai.request.model": log_text(traced.get("model") or "") or None,
            },
        )

    def done(
        self,
        scope: Scope,
        started: float,
        status: int,
        streaming: bool,
        first_byte: float | None,
        tool_calls: list[int],
        answered_by: list[str],
    ) -> None:
        ended = time.perf_counter()
        route = _route(scope)
        state = scope.get("state") or {}
        model = state.get("model") or ""
        metrics = self.metrics
        self.in_flight -= 1
        if streaming:
            self.streams -= 1
        if metrics is not None:
            if streaming and first_byte is not None:
                first = self._first_bytes.get(route)
                if first is None:
                    first = self._first_bytes[route] = metrics.first_byte.labels(route)
                first.observe(first_byte - started)
            label = model if not model or model in self.models else OTHER
            method = scope["method"]
            if method not in _METHODS:
                method = OTHER  # h11 takes any token as a method: one series for the rest
            key = (route, method, status, label)
            counter = self._requests.get(key)
            if counter is None:
                counter = metrics.requests.labels(route, method, str(status), label)
                self._requests[key] = counter
            counter.inc()
            duration = self._durations.get(route)
            if duration is None:
                duration = self._durations[route] = metrics.duration.labels(route)
            duration.observe(ended - started)
        if self.log:
            handler = access_handler()
            if handler is not None or access_log.isEnabledFor(logging.INFO):
                ms = (ended - started) * 1000
                _log_line(
                    scope, state, route, status, ms, model, tool_calls[0], answered_by, handler
                )


_METHODS: Final = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
)


def _route(scope: Scope) -> str:
    # The route's template (`/v1/approvals/{id}`), never the raw path: one label value
    # per route, whatever ids clients send.
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


def _log_line(
    scope: Scope,
    state: dict[str, Any],
    route: str,
    status: int,
    ms: float,
    model: str,
    tool_calls: int,
    answered_by: list[str] = [],  # noqa: B006 - read only
    handler: LineHandler | None = None,
) -> None:
    # The fields in their order, those without a value left out (as a formatter leaves
    # them out), and the message they make; built piece by piece, not joined from a
    # comprehension: this runs once per request.
    request_id = state.get("request_id")
    key = state.get("key_name")
    method = scope["method"]
    duration = round(ms, 2)
    fields: dict[str, Any] = {}
    if request_id is not None:
        fields["request_id"] = request_id
    if key is not None:
        fields["key"] = key
    fields["method"] = method
    fields["route"] = route
    fields["status"] = status
    fields["duration_ms"] = duration
    shown = f"method={method} route={route} status={status} duration_ms={duration}"
    if key is not None:
        shown = f"key={key} {shown}"
    if request_id is not None:
        shown = f"request_id={request_id} {shown}"
    if model:
        # The client chose it: escaped (a newline would forge a line) and shortened.
        fields["model"] = text = log_text(model)
        shown = f"{shown} model={text}"
    if tool_calls:
        fields["tool_calls"] = tool_calls
        shown = f"{shown} tool_calls={tool_calls}"
    if answered_by:
        # From the config (`upstream/model`), never a URL; the last turn's, for a run.
        fields["deployment"] = deployment = answered_by[-1]
        shown = f"{shown} deployment={deployment}"
    if handler is not None:
        # The handler `configure_logging` set up, and nothing else would see the record:
        # the same line, without making a `LogRecord`.
        handler.access(shown, fields, time.time())
    else:
        access_log.info(shown, extra={"toolwire": fields})


# --- /metrics ------------------------------------------------------------------------------


async def _metrics(request: Request) -> Response:
    gateway = gateway_of(request)
    metrics: Metrics | None = getattr(request.app.state, "metrics", None)
    if metrics is None:
        raise GatewayError(
            404, "Metrics are turned off (metrics.enabled: false).", code="not_found"
        )
    if gateway.keyring.enabled and not gateway.config.metrics.public:
        caller = authenticate(request)
        if not caller.admin:
            raise GatewayError(
                403,
                "/metrics needs an admin key (or metrics.public: true in the config).",
                code="forbidden",
            )
    if gateway.server_tool_names:
        await _count_approvals(gateway, metrics)
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def _count_approvals(gateway: Any, metrics: Metrics) -> None:
    try:
        store = await gateway.ready()
        now = time.time()
        for status in _APPROVAL_STATUSES:
            found = await store.list_approvals(status=status, now=now, limit=1000)
            metrics.approvals.labels(status).set(len(found))
    except Exception:  # a store that is down must not break the scrape
        logging.getLogger("toolwire.server").warning("metrics: cannot count approvals")


metrics_routes = [Route("/metrics", _metrics, methods=["GET"])]
