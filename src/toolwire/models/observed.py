"""`ObservedModel`: a model whose calls are reported to an observer (metrics, for one).

It wraps the upstream client itself, below any parsing, so the figures are the
upstream's: how long it took to answer (for a stream: to its first event, and to its
end), and every failure by its kind (`unreachable`, `timeout`, `status`, `malformed`,
`too_large`, `ended`). The models layer knows nothing of Prometheus: the gateway passes
an observer that does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from toolwire.models.base import (
    Model,
    ModelError,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
)
from toolwire.models.messages import Message
from toolwire.tools.tool import Tool

__all__ = ["ModelObserver", "ObservedModel"]


class ModelObserver(Protocol):
    """Told about every upstream call of an `ObservedModel`."""

    def answered(self, model: str, seconds: float, *, stream: bool) -> None:
        """A call succeeded, `seconds` after it was sent (a stream: at its last event)."""

    def first_event(self, model: str, seconds: float) -> None:
        """A stream's first event arrived after `seconds`."""

    def failed(self, model: str, kind: str) -> None:
        """A call failed; `kind` is the `ModelError.kind` (`other` when it has none)."""


class ObservedModel:
    """`inner`, with each call's duration and failures reported to `observer`.

    A stream the consumer stops reading before its end (the client went away) is
    reported as neither an answer nor a failure.
    """

    def __init__(self, inner: Model, observer: ModelObserver) -> None:
        self._inner = inner
        self._observer = observer

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def inner(self) -> Model:
        return self._inner

    def __repr__(self) -> str:
        return f"ObservedModel({self._inner!r})"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        started = time.perf_counter()
        try:
            response = await self._inner.complete(messages, tools, settings)
        except ModelError as exc:
            self._observer.failed(self._inner.name, exc.kind or "other")
            raise
        self._observer.answered(self._inner.name, time.perf_counter() - started, stream=False)
        return response

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        name = self._inner.name
        observer = self._observer
        started = time.perf_counter()
        first = True
        events = self._inner.stream(messages, tools, settings)
        try:
            async for event in events:
                if first:
                    observer.first_event(name, time.perf_counter() - started)
                    first = False
                yield event
        except ModelError as exc:
            observer.failed(name, exc.kind or "other")
            raise
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        observer.answered(name, time.perf_counter() - started, stream=True)
