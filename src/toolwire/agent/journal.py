"""`RunJournal`: writes the points of a run that a restart must not lose to a store.

A run is written when it starts executing a write or destructive tool (status `running`,
with a lease its process renews while the tools run), when it pauses (its state and its
pending approvals, committed before the caller hears about them), and when it ends if it
was written before. A run whose holder died reads as `interrupted`: its calls are never
re-run by themselves, and the audit log shows them started and not finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from typing import Final

from toolwire.agent.state import RunState
from toolwire.store.base import ApprovalRecord, RunRecord, Store

__all__ = ["HOLDER", "LEASE_SECONDS", "RunJournal", "holder_is_dead", "read_status"]

LEASE_SECONDS: Final = 30.0
"""How long a `running` run stays claimed without a renewal from its process."""

HOLDER: Final = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
"""This process, as written in the runs it executes."""

_HOST: Final = socket.gethostname()


def holder_is_dead(holder: str | None) -> bool:
    """Whether `holder` is a process on this host that no longer exists (or is this
    process's predecessor under a reused pid: the nonce differs)."""
    if not holder:
        return False
    host, _, rest = holder.partition(":")
    pid_text, _, _nonce = rest.partition(":")
    if host != _HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return holder != HOLDER
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def read_status(record: RunRecord, now: float) -> str:
    """The status a reader should see: `running` whose holder is gone is `interrupted`."""
    if record.status == "running" and (
        (record.lease_until is not None and record.lease_until < now)
        or holder_is_dead(record.holder)
    ):
        return "interrupted"
    return record.status


class RunJournal:
    """One run's durable points in `store`.

    Args:
        store: Where runs and approvals live.
        owner: The key name that started the run.
        model: The public model id, for listings.
        approval_ttl: Seconds before a pending approval expires.
    """

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        model: str | None = None,
        approval_ttl: float = 3600.0,
    ) -> None:
        self.store = store
        self.owner = owner
        self.model = model
        self.approval_ttl = approval_ttl
        self.written = False
        self.created_at = time.time()
        self._renewal: asyncio.Task[None] | None = None

    def _record(self, state: RunState, status: str, *, lease: bool) -> RunRecord:
        now = time.time()
        return RunRecord(
            id=state.run_id,
            status=status,  # type: ignore[arg-type]
            state=state.to_json(),
            owner=self.owner,
            model=self.model,
            created_at=self.created_at,
            updated_at=now,
            lease_until=now + LEASE_SECONDS if lease else None,
            holder=HOLDER if lease else None,
        )

    async def executing(self, state: RunState) -> None:
        """Write the run as `running` before a write or destructive tool executes, and
        hold it (renew its lease) until it pauses or ends."""
        await self.store.put_run(self._record(state, "running", lease=True))
        self.written = True
        self.hold(state)

    def hold(self, state: RunState) -> None:
        """Keep renewing the lease of a run written as `running` by this process."""
        if self._renewal is None or self._renewal.done():
            self._renewal = asyncio.ensure_future(self._renew(state))

    def release(self) -> None:
        """Stop renewing the lease. A run left `running` reads as `interrupted` once the
        lease runs out (the consumer went away mid-run, for example)."""
        if self._renewal is not None:
            self._renewal.cancel()
            self._renewal = None

    async def _renew(self, state: RunState) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            record = self._record(state, "running", lease=True)
            with contextlib.suppress(Exception):  # a missed renewal is retried next time
                await self.store.transition_run(state.run_id, expect=("running",), run=record)

    async def paused(self, state: RunState) -> None:
        """Commit a run waiting for approvals (and the approvals) before anyone is told."""
        self.release()
        now = time.time()
        approvals = [
            ApprovalRecord(
                id=a.id,
                run_id=state.run_id,
                call_id=a.call_id,
                tool=a.tool,
                arguments=a.arguments,
                arguments_hash=a.arguments_hash,
                reason=a.reason,
                effects=a.effects,
                requested_by=self.owner,
                approver=a.approver,
                created_at=now,
                expires_at=now + self.approval_ttl,
            )
            for a in state.approvals
        ]
        await self.store.add_approvals(approvals)
        await self.store.put_run(self._record(state, state.status, lease=False))
        self.written = True

    async def paused_again(self, state: RunState) -> None:
        """Give back a run taken for a resume that could not proceed (a decision was
        missing): it waits for its approvals again."""
        record = self._record(state, "awaiting_approval", lease=False)
        await self.store.transition_run(state.run_id, expect=("running",), run=record)

    async def finished(self, state: RunState) -> None:
        """Record how a run that was written before ended."""
        self.release()
        if self.written:
            await self.store.put_run(self._record(state, state.status, lease=False))
