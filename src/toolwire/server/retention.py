"""Retention in the background: the gateway prunes its store on a timer.

Each replica runs its own timer; that is harmless, because a prune deletes only what
retention no longer keeps and the stores check every rule again at the moment they
delete (see `Store.prune`). A failed prune is logged and tried again at the next tick:
retention must never take the gateway down.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

from toolwire.server.configuration.config import RetentionConfig
from toolwire.store import Store, StoreError
from toolwire.store.base import PruneCounts

__all__ = ["keep_pruning", "prune_store"]

logger = logging.getLogger("toolwire.retention")

_FIRST_DELAY = 5.0
"""At most this many seconds after startup before the first prune (spread over replicas
started together); later ones come every `interval`, give or take a tenth."""


async def prune_store(store: Store, retention: RetentionConfig, now: float) -> PruneCounts:
    """Delete from `store` what `retention` no longer keeps, as of `now`."""

    def before(keep: float | None) -> float | None:
        return None if keep is None else now - keep

    return await store.prune(
        runs_before=before(retention.runs),
        approvals_before=before(retention.approvals),
        audit_before=before(retention.audit),
        now=now,
    )


async def keep_pruning(opened: Callable[[], Store | None], retention: RetentionConfig) -> None:
    """Prune every `retention.interval` until cancelled.

    Args:
        opened: The store when it is open, else `None` (that tick is skipped: a gateway
            without server tools never opens its store, and must not create one).
        retention: The kinds and their durations.
    """
    delay = random.uniform(0, min(_FIRST_DELAY, retention.interval))
    while True:
        await asyncio.sleep(delay)
        delay = retention.interval * random.uniform(0.9, 1.1)
        store = opened()
        if store is None:
            continue
        started = time.monotonic()
        try:
            counts = await prune_store(store, retention, time.time())
        except StoreError as exc:
            logger.warning("retention: prune failed, next try in %.0f s: %s", delay, exc)
            continue
        except Exception:
            logger.exception("retention: prune failed, next try in %.0f s", delay)
            continue
        if counts != PruneCounts():
            logger.info(
                "retention: deleted %d runs, %d approvals, %d audit records from %s in %.2f s",
                counts.runs,
                counts.approvals,
                counts.audit,
                store.url,
                time.monotonic() - started,
            )
