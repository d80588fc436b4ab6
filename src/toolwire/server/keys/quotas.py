"""Per-key limits: requests, tokens and tool calls per minute, requests at once, and a
daily token budget, counted in the store so that replicas on one store share them.

Three places, none inside a door: `KeyLimits` (asked by the app's layer,
`server.dispatch`) admits a request before any door runs and holds its concurrency slot,
and the layer answers a refusal in the door's own shape;
`CountedModel` wraps each public model and adds the upstream's usage after every turn;
`KeyLimiter.tool_gate` is the runner's gate, asked before each server-tool call runs, so
a runaway agent loop stops before its tool does.

Windows are fixed (the current minute, the current UTC day), one store counter each:
one round trip per limit per request, no clock shared between replicas beyond the
store's. When the store cannot be reached the request is served (limits fail open, as
LiteLLM's do) and the failure logged: a store outage must not take model traffic down.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from toolwire.models.base import Model, ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.messages import Message as ChatMessage
from toolwire.models.messages import Usage
from toolwire.server.configuration.config import KeyConfig, KeyLimitsConfig
from toolwire.server.http.errors import GatewayError
from toolwire.server.keys.keyring import Keyring, credentials, presented_key
from toolwire.store import Store, StoreError
from toolwire.tools import Tool, ToolContext

if TYPE_CHECKING:  # the gateway builds the limiter without the server extra
    from starlette.types import Scope

__all__ = ["Admitted", "CountedModel", "KeyLimiter", "KeyLimits", "LimitHook"]

logger = logging.getLogger("toolwire.server")

_MINUTE: Final = 60
_DAY: Final = 86400
_HOLD_TTL: Final = 900.0
"""Seconds a concurrency count outlives its last change: what a crashed replica held is
released by then (longer than any request the gateway serves)."""
_SEP: Final = "\x1f"

LimitHook = Callable[[str, str], None]
"""Told `(key name, limit name)` each time a limit refuses (the metrics)."""


@dataclass(slots=True)
class _Caller:
    name: str
    limits: KeyLimitsConfig


_caller: ContextVar[_Caller | None] = ContextVar("toolwire_key_limits", default=None)


def _window(now: float, size: int) -> tuple[int, float]:
    """The window holding `now` and the seconds until it ends."""
    return int(now // size), size - now % size


class KeyLimiter:
    """The limits of every key and the store they are counted in.

    Args:
        keys: The configured keys.
        defaults: `limits.per_key`.
        store: Opens the store (the gateway's `ready`).
        on_limit: Told each refusal.
    """

    def __init__(
        self,
        keys: Sequence[KeyConfig],
        defaults: KeyLimitsConfig,
        store: Callable[[], Awaitable[Store]],
        on_limit: LimitHook | None = None,
    ) -> None:
        self.limits: dict[str, KeyLimitsConfig] = {k.name: k.limits.over(defaults) for k in keys}
        self._store = store
        self.on_limit = on_limit

    @property
    def active(self) -> bool:
        return any(limits.any for limits in self.limits.values())

    @property
    def counts_tokens(self) -> bool:
        return any(
            lim.tokens_per_minute is not None or lim.budget is not None
            for lim in self.limits.values()
        )

    async def store(self) -> Store:
        return await self._store()

    def _refused(
        self, name: str, limit: str, message: str, headers: dict[str, str]
    ) -> GatewayError:
        if self.on_limit is not None:
            self.on_limit(name, limit)
        return GatewayError(
            429,
            message,
            type="rate_limit_error",
            code="rate_limit_exceeded",
            headers=headers,
        )

    async def admit(
        self, caller: _Caller, now: float, headers: dict[str, str]
    ) -> tuple[GatewayError | None, bool]:
        """Count one request of `caller`: a refusal (or `None`), and whether a concurrency
        slot was taken (to give back when the request ends). Fills `headers`."""
        store = await self.store()
        name, limits = caller.name, caller.limits
        minute, reset = _window(now, _MINUTE)
        retry = str(max(1, math.ceil(reset)))
        per_minute = (
            # The limit, its name, its counter, its noun, what this request adds now: one
            # request, and no tokens yet (`charge` adds them once the model has answered).
            (limits.requests_per_minute, "requests_per_minute", "rpm", "requests", 1),
            (limits.tokens_per_minute, "tokens_per_minute", "tpm", "tokens", 0),
        )
        for most, limit, counter, noun, cost in per_minute:
            if most is None:
                continue
            key = _SEP.join((counter, name, str(minute)))
            used = await store.add_count(key, cost, 2 * _MINUTE)
            headers[f"x-ratelimit-limit-{noun}"] = str(most)
            headers[f"x-ratelimit-remaining-{noun}"] = str(max(0, most - used))
            headers[f"x-ratelimit-reset-{noun}"] = f"{reset:.0f}s"
            if used - cost >= most:  # what came before this request reached the limit
                return self._refused(
                    name,
                    limit,
                    f"Rate limit reached: {most} {noun} per minute for this key. "
                    f"Try again in {retry} s.",
                    {**headers, "Retry-After": retry},
                ), False
        if (budget := limits.budget) is not None:
            day, until = _window(now, _DAY)
            used = await store.add_count(_SEP.join(("day", name, str(day))), 0, 2 * _DAY)
            if used >= budget:
                wait = str(max(1, math.ceil(until)))
                return self._refused(
                    name,
                    "budget",
                    f"This key's budget of {budget} tokens for today (UTC) is spent.",
                    {**headers, "Retry-After": wait},
                ), False
        if (most := limits.concurrent_requests) is not None:
            held = await store.add_count(_SEP.join(("conc", name)), 1, _HOLD_TTL)
            if held > most:
                await store.add_count(_SEP.join(("conc", name)), -1, _HOLD_TTL)
                return self._refused(
                    name,
                    "concurrent_requests",
                    f"Too many requests at once: this key may have {most} in flight.",
                    {**headers, "Retry-After": "1"},
                ), False
            return None, True
        return None, False

    async def release(self, caller: _Caller) -> None:
        store = await self.store()
        await store.add_count(_SEP.join(("conc", caller.name)), -1, _HOLD_TTL)

    async def charge(self, usage: Usage) -> None:
        """Add a model turn's tokens to the current caller's minute and day."""
        caller = _caller.get()
        if caller is None:
            return
        tokens = usage.input_tokens + usage.output_tokens
        limits = caller.limits
        if tokens <= 0 or (limits.tokens_per_minute is None and limits.budget is None):
            return
        now = time.time()
        try:
            store = await self.store()
            if limits.tokens_per_minute is not None:
                minute, _ = _window(now, _MINUTE)
                key = _SEP.join(("tpm", caller.name, str(minute)))
                await store.add_count(key, tokens, 2 * _MINUTE)
            if limits.budget is not None:
                day, _ = _window(now, _DAY)
                await store.add_count(_SEP.join(("day", caller.name, str(day))), tokens, 2 * _DAY)
        except StoreError as exc:
            logger.warning("tokens of key %r not counted: %s", caller.name, exc)

    async def tool_gate(self, tool_name: str, ctx: ToolContext) -> str | None:
        """The runner's gate: count the call against the caller's tool-call limits."""
        caller = _caller.get()
        if caller is None or ctx.principal != caller.name:
            return None
        limits = caller.limits
        per_tool = limits.tools.get(tool_name)
        if limits.tool_calls_per_minute is None and per_tool is None:
            return None
        minute, reset = _window(time.time(), _MINUTE)
        checks = [("tool_calls_per_minute", "tools", limits.tool_calls_per_minute)]
        checks.append(("tools", "tool:" + tool_name, per_tool))
        try:
            store = await self.store()
            for limit, scope, most in checks:
                if most is None:
                    continue
                key = _SEP.join(("tcpm", caller.name, scope, str(minute)))
                if await store.add_count(key, 1, 2 * _MINUTE) > most:
                    if self.on_limit is not None:
                        self.on_limit(caller.name, limit)
                    what = "tool calls" if scope == "tools" else f"calls of {tool_name!r}"
                    return (
                        f"Not run: this key may make {most} {what} per minute and has reached "
                        f"that; the limit resets in {math.ceil(reset)} s. Do not call tools "
                        "again now; answer with what you have."
                    )
        except StoreError as exc:
            logger.warning("tool calls of key %r not counted: %s", caller.name, exc)
        return None


@dataclass(slots=True)
class Admitted:
    """A request a key's limits let through: what the layer holds while it is served."""

    caller: _Caller
    holding: bool
    """Whether it holds a concurrency slot (given back by `KeyLimits.release`)."""
    headers: list[tuple[bytes, bytes]]
    """The `x-ratelimit-*` headers its answer carries."""


class KeyLimits:
    """A gateway key's request limits, before any door runs (the app's layer,
    `server.dispatch`, asks `admit` and, when the request ends, `release`)."""

    def __init__(self, *, limiter: KeyLimiter, keyring: Keyring) -> None:
        self.limiter = limiter
        self.keyring = keyring
        # Whether some key has limits: fixed with the keys, as the gateway's tool gate is.
        self.active = limiter.active

    def applies(self, scope: Scope) -> bool:
        """Whether the request is one the limits count: a `POST` under `/v1/`, while
        some key has limits."""
        return self.active and scope["method"] == "POST" and scope["path"].startswith("/v1/")

    async def admit(self, scope: Scope) -> Admitted | GatewayError | None:
        """Count the request against its key's limits: `None` when it has none (or no
        known key: the door refuses a bad key itself), else what it holds, or the
        refusal to answer it with."""
        limiter = self.limiter
        sent = credentials(scope["headers"])
        token = presented_key(sent.get(b"authorization"), sent.get(b"x-api-key"))
        key = self.keyring.key_of(scope, token)
        limits = limiter.limits.get(key.name) if key is not None else None
        if key is None or limits is None or not limits.any:
            return None
        caller = _Caller(key.name, limits)
        headers: dict[str, str] = {}
        try:
            refusal, holding = await limiter.admit(caller, time.time(), headers)
        except StoreError as exc:
            logger.warning("limits of key %r not applied (the store failed): %s", key.name, exc)
            refusal, holding = None, False
        if refusal is not None:
            return refusal
        extra = [(k.encode(), v.encode()) for k, v in headers.items()]
        return Admitted(caller, holding, extra)

    @staticmethod
    def enter(admitted: Admitted) -> Token[_Caller | None]:
        """Make `admitted`'s caller the one the runner's gate and the token counts see."""
        return _caller.set(admitted.caller)

    async def release(self, admitted: Admitted, entered: Token[_Caller | None]) -> None:
        """The request ended: give its concurrency slot back."""
        _caller.reset(entered)
        if admitted.holding:
            try:
                await self.limiter.release(admitted.caller)
            except StoreError as exc:
                logger.warning(
                    "concurrency slot of key %r not released: %s", admitted.caller.name, exc
                )


class CountedModel:
    """`inner`, with each turn's upstream usage added to the caller's token counts."""

    def __init__(self, inner: Model, limiter: KeyLimiter) -> None:
        self._inner = inner
        self._limiter = limiter

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def inner(self) -> Model:
        return self._inner

    def __repr__(self) -> str:
        return f"CountedModel({self._inner!r})"

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        response = await self._inner.complete(messages, tools, settings)
        await self._limiter.charge(response.usage)
        return response

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        events = self._inner.stream(messages, tools, settings)
        try:
            async for event in events:
                if isinstance(event, ModelResponse):
                    await self._limiter.charge(event.usage)
                yield event
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()


def counted(models: Mapping[str, Model], limiter: KeyLimiter) -> dict[str, Model]:
    """Each model wrapped in a `CountedModel` when some key has a token limit."""
    if not limiter.counts_tokens:
        return dict(models)
    return {public: CountedModel(model, limiter) for public, model in models.items()}
