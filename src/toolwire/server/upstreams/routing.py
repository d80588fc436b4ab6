"""Routing: one public model id over several deployments, with failover and fallbacks.

A `RoutedModel` is an ordinary `Model` (what `Gateway.models` and the agents hold), so
every door, the agent loop, server tools and approvals work over it unchanged. Each
call walks a chain: the model's own `Pool` of deployments, then its fallbacks' pools in
order. Within a pool the strategy orders the deployments; a deployment cooling down
after repeated failures is left out (Envoy's outlier ejection, LiteLLM's cooldown).

Failover happens only before the client could have seen anything: for `complete`, on
the whole call; for `stream`, until the first event arrives. After that an error is the
client's, as with one upstream. Tool calling survives a switch between kinds because
each deployment's `Model` maps call ids to and from its own upstream (`call_ids`): the
client's ids, the tools and the server-tool steps never change.
"""

from __future__ import annotations

import itertools
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, Protocol

from toolwire.models.base import (
    Model,
    ModelError,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
)
from toolwire.models.messages import Message
from toolwire.tools.tool import Tool

if TYPE_CHECKING:
    import httpx

    from toolwire.models.observed import ModelObserver
    from toolwire.models.parsed import FailureHook
    from toolwire.server.configuration.config import GatewayConfig, UpstreamConfig

__all__ = [
    "ANSWERED_BY",
    "Deployment",
    "Pool",
    "RoutedModel",
    "RoutingObserver",
    "Strategy",
    "build_routed_models",
    "failure_kind",
]

logger = logging.getLogger(__name__)

Strategy = Literal["least_busy", "weighted_round_robin", "latency"]
Failure = Literal["failover", "context_window", "final"]

_CONTEXT_CODES: Final = frozenset({"context_length_exceeded", "string_above_max_length"})
# OpenAI, vLLM, llama.cpp, Anthropic and others word it differently; the code, when
# there is one, is checked first.
_CONTEXT_WORDS: Final = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|too many tokens"
    r"|exceeds? the (model'?s? )?(maximum|max) (context|input)",
    re.IGNORECASE,
)
ANSWERED_BY: ContextVar[list[str] | None] = ContextVar("toolwire_answered_by", default=None)
"""Set to a list per request by the app's layer (`server.dispatch`, for the access log);
the deployment that answered (`upstream/model`) is put in it, last turn last."""
_LATENCY_WEIGHT: Final = 0.3
"""How much one answer moves a deployment's latency average (an EWMA)."""


def failure_kind(exc: ModelError) -> Failure:
    """What an upstream failure means for routing.

    `failover`: the deployment is at fault or busy (unreachable, timed out, 5xx, 408,
    429, an answer cut off before its first byte): another deployment may answer.
    `context_window`: the request is too long for this model: only a larger-window
    fallback may answer. `final`: the request itself is wrong (any other 4xx, an
    unreadable answer): every deployment would say the same, so it goes to the client.
    """
    status = exc.status
    if exc.kind in ("unreachable", "timeout", "ended"):
        return "failover"
    if status is not None and (status >= 500 or status in (408, 429)):
        return "failover"
    if status is not None and 400 <= status < 500:
        body = exc.body or {}
        if str(body.get("code") or "") in _CONTEXT_CODES:
            return "context_window"
        text = f"{body.get('message') or ''} {exc}"
        if status in (400, 413) and _CONTEXT_WORDS.search(text):
            return "context_window"
    return "final"


class RoutingObserver(Protocol):
    """Told about routing decisions (the metrics)."""

    def routed(self, public: str, deployment: Deployment) -> None:
        """A call went to `deployment` (each attempt, failovers included)."""

    def deployment_failed(self, deployment: Deployment, kind: str) -> None:
        """An attempt on `deployment` failed; `kind` is the `ModelError.kind`."""

    def cooled(self, deployment: Deployment) -> None:
        """`deployment` starts a cooldown."""


@dataclass(slots=True, eq=False)
class Deployment:
    """One deployment of a public model and its live state (this process's view)."""

    upstream: str
    """The upstream's name in the config (never its URL: this goes in metrics and logs)."""
    model_name: str
    model: Model
    weight: int = 1
    in_flight: int = 0
    failures: int = 0
    """Failures in a row; reset by any answer."""
    cooled_until: float = 0.0
    probing: bool = False
    """After a cooldown, one request is on its way to find out whether it is back."""
    latency: float = 0.0
    """Seconds to an answer (a stream: to its first event), as a moving average; 0 until
    the first answer, so a new deployment is tried early."""
    current: float = 0.0
    """Smooth weighted round robin's running score."""

    @property
    def label(self) -> str:
        return f"{self.upstream}/{self.model_name}"


@dataclass(slots=True, eq=False)
class Pool:
    """The deployments of one public model, and how they take turns."""

    public: str
    deployments: list[Deployment]
    strategy: Strategy = "least_busy"
    cooldown_failures: int = 3
    cooldown_seconds: float = 30.0
    context_window: int | None = None
    clock: Callable[[], float] = time.monotonic
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    def order(self, now: float) -> list[Deployment]:
        """The deployments to try, best first, leaving out those cooling down (and one
        whose single trial request after a cooldown is still out)."""
        ready = [d for d in self.deployments if not d.probing and d.cooled_until <= now]
        if len(ready) <= 1:
            return ready
        if self.strategy == "weighted_round_robin":
            return self._weighted_turn(ready)
        # Rotating the start breaks ties: equal deployments share an idle gateway's
        # requests instead of the first one taking them all.
        start = next(self._turn) % len(ready)
        rotated = ready[start:] + ready[:start]
        if self.strategy == "latency":
            return sorted(rotated, key=lambda d: (d.latency, d.in_flight))
        return sorted(rotated, key=lambda d: d.in_flight / d.weight)

    def _weighted_turn(self, ready: list[Deployment]) -> list[Deployment]:
        # nginx's smooth weighted round robin: spreads a 3:1 split as a a b a, not a a a b.
        total = 0
        best = ready[0]
        for d in ready:
            d.current += d.weight
            total += d.weight
            if d.current > best.current:
                best = d
        best.current -= total
        return [best, *(d for d in ready if d is not best)]

    def cooling(self, now: float) -> list[Deployment]:
        """The deployments left out now, soonest back first."""
        return sorted(
            (d for d in self.deployments if d.probing or d.cooled_until > now),
            key=lambda d: d.cooled_until,
        )

    def started(self, deployment: Deployment, now: float) -> None:
        deployment.in_flight += 1
        if deployment.cooled_until and deployment.cooled_until <= now:
            deployment.probing = True

    def answered(self, deployment: Deployment, seconds: float) -> None:
        deployment.failures = 0
        deployment.cooled_until = 0.0
        deployment.probing = False
        if deployment.latency == 0.0:
            deployment.latency = seconds
        else:
            deployment.latency += _LATENCY_WEIGHT * (seconds - deployment.latency)

    def failed(self, deployment: Deployment, now: float) -> bool:
        """Count a failure; whether the deployment now starts a cooldown."""
        deployment.failures += 1
        if deployment.probing or deployment.failures >= self.cooldown_failures:
            deployment.probing = False
            deployment.cooled_until = now + self.cooldown_seconds
            deployment.failures = 0
            return True
        return False


def _answered(deployment: Deployment) -> None:
    seen = ANSWERED_BY.get()
    if seen is not None:
        seen.append(deployment.label)


class RoutedModel:
    """A public model: its pool, then its fallbacks' pools, tried in order.

    Args:
        public: The public model id (the name clients send).
        chain: Its own pool first, then one per fallback, in order.
        observer: Told each attempt, failure and cooldown.
    """

    def __init__(
        self,
        public: str,
        chain: Sequence[Pool],
        observer: RoutingObserver | None = None,
    ) -> None:
        self._public = public
        self.chain = list(chain)
        self._observer = observer

    @property
    def name(self) -> str:
        return self._public

    def __repr__(self) -> str:
        return f"RoutedModel({self._public!r}, {[p.public for p in self.chain]!r})"

    def _candidates(self) -> list[tuple[Pool, list[Deployment]]]:
        own = self.chain[0]
        now = own.clock()
        out = [(pool, pool.order(now)) for pool in self.chain]
        if not any(ready for _, ready in out):
            # Everything is cooling down: rather than refuse outright, try the ones that
            # come back soonest (Envoy's panic mode: ejection never empties the cluster).
            out = [(pool, pool.cooling(now)) for pool in self.chain]
        return out

    def _attempts(self) -> list[tuple[Pool, Deployment]]:
        attempts: list[tuple[Pool, Deployment]] = []
        for pool, ready in self._candidates():
            attempts.extend((pool, d) for d in ready)
        return attempts

    def _failed(
        self, pool: Pool, deployment: Deployment, exc: ModelError, last_window: list[int | None]
    ) -> Failure:
        kind = failure_kind(exc)
        if self._observer is not None:
            self._observer.deployment_failed(deployment, exc.kind or "other")
        if kind == "failover":
            logger.warning(
                "model %r: deployment %s failed (%s), trying the next",
                self._public,
                deployment.label,
                exc.kind or exc.status,
            )
            if pool.failed(deployment, pool.clock()) and self._observer is not None:
                self._observer.cooled(deployment)
        elif kind == "context_window":
            # An unknown window is taken as the largest: no fallback is known to be larger.
            window = pool.context_window
            last_window[0] = window if window is not None else sys.maxsize
        else:
            # The request's fault, not the deployment's: no cooldown, and a trial request
            # after one still showed the deployment answers.
            pool.answered(deployment, deployment.latency)
        return kind

    @staticmethod
    def _skip(pool: Pool, window: int | None) -> bool:
        # After a context-window error only a larger window can help; an unknown window
        # is not known to be larger.
        return window is not None and (pool.context_window or 0) <= window

    def _tries(self, window: list[int | None]) -> Iterator[tuple[Pool, Deployment, float]]:
        """Each deployment to try in turn, started (in flight, its routing observed) and
        with the time it started; the caller ends it. Read lazily: a context-window
        failure (in `window`) passes over the pools that cannot be larger."""
        for pool, deployment in self._attempts():
            if self._skip(pool, window[0]):
                continue
            now = pool.clock()
            pool.started(deployment, now)
            if self._observer is not None:
                self._observer.routed(self._public, deployment)
            yield pool, deployment, now

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        last: ModelError | None = None
        window: list[int | None] = [None]
        for pool, deployment, now in self._tries(window):
            try:
                response = await deployment.model.complete(messages, tools, settings)
            except ModelError as exc:
                last = exc
                if self._failed(pool, deployment, exc, window) == "final":
                    raise
                continue
            finally:
                deployment.in_flight -= 1
                # Answered or failed already said; cancelled lets the next request probe.
                deployment.probing = False
            pool.answered(deployment, pool.clock() - now)
            _answered(deployment)
            return response
        raise self._exhausted(last)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        last: ModelError | None = None
        window: list[int | None] = [None]
        for pool, deployment, now in self._tries(window):
            events = deployment.model.stream(messages, tools, settings)
            try:
                try:
                    first = await anext(events)
                except StopAsyncIteration:
                    first = None
                    last = ModelError("the stream ended before its first event", kind="ended")
                    self._failed(pool, deployment, last, window)
                except ModelError as exc:
                    last = exc
                    if self._failed(pool, deployment, exc, window) == "final":
                        raise
                    first = None
                if first is None:
                    continue
                pool.answered(deployment, pool.clock() - now)
                _answered(deployment)
                # Committed: the client may have seen this event, so from here on an error
                # is the client's, as with a single upstream.
                yield first
                async for event in events:
                    yield event
                return
            finally:
                deployment.in_flight -= 1
                deployment.probing = False
                close = getattr(events, "aclose", None)
                if close is not None:
                    await close()
        raise self._exhausted(last)

    def _exhausted(self, last: ModelError | None) -> ModelError:
        if last is None:
            return ModelError(
                f"model {self._public!r}: no deployment could take the request",
                status=503,
                kind="status",
            )
        # The last failure as it was: the door turns it into its own protocol's error,
        # which names no upstream address (`server.errors.upstream_error`).
        return last


def build_routed_models(
    config: GatewayConfig,
    keys: Mapping[str, str | None],
    *,
    http_client: httpx.AsyncClient,
    observer: ModelObserver | None = None,
    on_parse_failure: FailureHook | None = None,
    routing_observer: RoutingObserver | None = None,
) -> dict[str, RoutedModel]:
    """A `RoutedModel` for every public id of the `models:` form.

    Pools are shared: a model used as another's fallback is one set of deployments with
    one in-flight count and one cooldown, whichever public id the request named.

    Args:
        config: A validated configuration (`loader.routing_findings` found nothing).
        keys: The key of each named upstream, read from the environment.
        http_client: The pooled client every deployment shares.
        observer: Told each upstream call's duration and failures.
        on_parse_failure: Told each tool call an upstream wrote but could not be parsed.
        routing_observer: Told each routing decision.
    """
    from toolwire.server.configuration.config import ModelRoute
    from toolwire.server.upstreams.clients import build_model

    routing = config.routing
    pools: dict[str, Pool] = {}
    for public, entry in config.models.items():
        # With another deployment or a fallback to go to, the router is the retry loop (as
        # LiteLLM's is): retries with backoff on a dead server would only delay the
        # failover. An upstream's `retries` written in the config is kept as written.
        alone = len(entry.deployments) == 1 and not entry.fallbacks
        deployments = [
            Deployment(
                upstream=d.upstream,
                model_name=d.model,
                weight=d.weight,
                model=build_model(
                    _retrying(config.upstreams[d.upstream], alone),
                    ModelRoute(model=d.model, tool_calls=entry.tool_calls),
                    api_key=keys.get(d.upstream),
                    http_client=http_client,
                    dialect=config.dialect,
                    observer=observer,
                    on_parse_failure=on_parse_failure,
                ),
            )
            for d in entry.deployments
        ]
        pools[public] = Pool(
            public,
            deployments,
            strategy=routing.strategy,
            cooldown_failures=routing.cooldown.failures,
            cooldown_seconds=routing.cooldown.seconds,
            context_window=entry.context_window,
        )
    return {
        public: RoutedModel(
            public,
            [pools[public], *(pools[f] for f in entry.fallbacks)],
            routing_observer,
        )
        for public, entry in config.models.items()
    }


def _retrying(upstream: UpstreamConfig, alone: bool) -> UpstreamConfig:
    if alone or "retries" in upstream.model_fields_set:
        return upstream
    return upstream.model_copy(update={"retries": 0})
