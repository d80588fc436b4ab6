"""`FaultyStore`: any store, with a failure injected at chosen operations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolwire.store import Store, StoreUnavailable

Rule = Callable[[str, tuple[Any, ...], dict[str, Any]], bool]


class FaultyStore:
    """Forwards every call to `inner`; an operation for which `fail(name, args, kwargs)`
    is true raises `StoreUnavailable` instead, without reaching the store (as a connection
    lost before the write would). `calls` lists every operation asked for."""

    def __init__(self, inner: Store, fail: Rule | None = None) -> None:
        self.inner = inner
        self.fail: Rule = fail or (lambda name, args, kwargs: False)
        self.calls: list[str] = []
        self.url = inner.url
        self.durable = inner.durable

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not callable(target):
            return target

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if self.fail(name, args, kwargs):
                raise StoreUnavailable(f"injected failure of {name}")
            return await target(*args, **kwargs)

        return call
