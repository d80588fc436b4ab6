"""Audit records written late: after a side effect, a store failure is never the caller's
problem to retry (a retry would run the tool twice). The record is kept here and written
once the store answers again.

Records live in this process only: if it dies first, the log keeps the call's `started`
without its `finished`, which is how the log already shows a call a crash cut short.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Final

from toolwire.runner.audit import AuditLog
from toolwire.store.base import AuditRecord

__all__ = ["LateRecords"]

logger = logging.getLogger("toolwire.runner")

_FIRST_DELAY: Final = 0.5
_MAX_DELAY: Final = 30.0


class LateRecords:
    """A bounded queue of audit records that failed to be written, retried in the
    background with exponential backoff, in the order they were made.

    Args:
        audit: Where the records go.
        limit: Records kept at most; past it the oldest is dropped (and logged), so a
            store that never comes back cannot grow the process without bound.
    """

    def __init__(self, audit: AuditLog, *, limit: int = 10_000) -> None:
        self.audit = audit
        self.limit = limit
        self._queue: deque[AuditRecord] = deque()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, record: AuditRecord, error: BaseException) -> None:
        """Keep `record` (its first write failed with `error`) and write it later."""
        logger.warning(
            "audit record of call %s (%s, %s) not written (%s); it is kept and written when "
            "the store answers again",
            record.call_id,
            record.tool,
            record.event,
            error,
        )
        self._queue.append(record)
        while len(self._queue) > self.limit:
            lost = self._queue.popleft()
            self.dropped += 1
            logger.error("late audit record of call %s dropped: over %d", lost.call_id, self.limit)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        delay = _FIRST_DELAY
        while self._queue:
            record = self._queue[0]
            try:
                await self.audit.append_audit(record)
            except Exception as exc:
                logger.debug("late audit write failed again (%s); retry in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY)
                continue
            self._queue.popleft()
            delay = _FIRST_DELAY
            logger.info("late audit record of call %s written", record.call_id)
