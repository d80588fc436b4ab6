"""`RunJournal`: writes the points of a run that a restart must not lose to a store.

A run is written when it starts executing a write or destructive tool (status `running`,
with a lease its process renews while the tools run), when it pauses (its state and its
pending approvals, committed together before the caller hears about them), and when it
ends if it was written before. A run whose holder died reads as `interrupted`: its calls
are never re-run by themselves, and the audit log shows them started and not finished.

Every write of a run this process holds is fenced by its holder (one claim of the run):
once another claim holds the run, this journal writes nothing more to it, and its lease
renewal stops by itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Final

from toolwire.agent.state import RunState
from toolwire.runner.audit import redact_arguments_json
from toolwire.store.base import ApprovalRecord, RunRecord, Store, StoreConflict

__all__ = [
    "LEASE_SECONDS",
    "PROCESS",
    "RunJournal",
    "RunLost",
    "holder_is_dead",
    "new_holder",
    "read_status",
]

logger = logging.getLogger("toolwire.runs")

LEASE_SECONDS: Final = 30.0
"""How long a `running` run stays claimed without a renewal from its process."""

_LATE_FOR: Final = 3600.0
"""Seconds a late final record is retried before it is given up (and logged)."""

_late: set[asyncio.Task[None]] = set()
"""Late final records being written (kept referenced until done)."""


def _machine() -> str:
    """This boot of this machine and this pid namespace: a pid means the same process only
    where all three agree (containers may share a host name, and pids repeat across pid
    namespaces and reboots)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text()
    except OSError:
        boot = ""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return "/".join(
        "".join(c for c in text if c.isalnum())[-12:] or "-" for text in (boot, namespace)
    )


_HOST: Final = f"{socket.gethostname()}/{_machine()}"

PROCESS: Final = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
"""This process, as the first part of the holders it writes."""


def new_holder() -> str:
    """A holder for one claim of a run by this process: `PROCESS:claim`."""
    return f"{PROCESS}:{uuid.uuid4().hex[:8]}"


def holder_is_dead(holder: str | None) -> bool:
    """Whether `holder` is a process of this machine's boot and pid namespace that no
    longer exists (or this process's predecessor under a reused pid: the nonce differs).

    A holder written elsewhere, or in the older `host:pid:nonce` form, is never judged
    here: its lease tells.
    """
    if not holder:
        return False
    parts = holder.split(":")
    if len(parts) != 4 or parts[0] != _HOST or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return f"{parts[0]}:{parts[1]}:{parts[2]}" != PROCESS
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


class RunLost(StoreConflict):
    """This process no longer holds the run: another claim took it (after this one's lease
    ran out). Nothing was written."""


class RunJournal:
    """One run's durable points in `store`.

    Args:
        store: Where runs and approvals live.
        owner: The key name that started the run.
        model: The public model id, for listings.
        approval_ttl: Seconds before a pending approval expires.
        holder: The claim this journal writes under (a resume passes the one it claimed
            the run with); a new one by default.
    """

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        model: str | None = None,
        approval_ttl: float = 3600.0,
        holder: str | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.model = model
        self.approval_ttl = approval_ttl
        self.holder = holder or new_holder()
        self.written = False
        """Whether the run is in the store, held by this journal's claim."""
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
            holder=self.holder if lease else None,
        )

    async def _write(
        self, state: RunState, record: RunRecord, approvals: list[ApprovalRecord] | None = None
    ) -> None:
        """Insert the run (first write) or replace it while this claim holds it."""
        new = approvals or []
        if not self.written:
            await self.store.put_run(record, approvals=new)
            self.written = True
            return
        held = await self.store.transition_run(
            state.run_id, expect=("running",), holder=self.holder, run=record, new_approvals=new
        )
        if not held:
            self.release()
            raise RunLost(
                f"Run {state.run_id!r} is no longer held by this process (its lease ran out "
                "and another request took it); nothing more is written to it here."
            )

    async def executing(self, state: RunState) -> None:
        """Write the run as `running` before a write or destructive tool executes, and
        hold it (renew its lease) until it pauses or ends."""
        await self._write(state, self._record(state, "running", lease=True))
        self.hold(state)

    def hold(self, state: RunState) -> None:
        """Keep renewing the lease of a run this journal's claim holds as `running`."""
        if self._renewal is None or self._renewal.done():
            self._renewal = asyncio.ensure_future(self._renew(state.run_id))

    def release(self) -> None:
        """Stop renewing the lease. A run left `running` reads as `interrupted` once the
        lease runs out (the consumer went away mid-run, for example)."""
        if self._renewal is not None:
            self._renewal.cancel()
            self._renewal = None

    async def _renew(self, run_id: str) -> None:
        # Extends the lease only while this claim holds the run; never writes the state
        # back (it may be older than what the holder wrote since).
        held_until = time.time() + LEASE_SECONDS
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            until = time.time() + LEASE_SECONDS
            try:
                held = await self.store.renew_lease(run_id, holder=self.holder, lease_until=until)
            except Exception as exc:
                if time.time() >= held_until:
                    logger.warning(
                        "Run %s: its lease ran out while the store failed (%s); this process "
                        "no longer holds it",
                        run_id,
                        exc,
                    )
                    return
                logger.warning("Run %s: renewing its lease failed (%s); retrying", run_id, exc)
                continue
            if not held:
                logger.info("Run %s is no longer held by this claim; lease renewal stops", run_id)
                return
            held_until = until

    async def paused(self, state: RunState) -> None:
        """Commit a run waiting for approvals, and the approvals, in one write before
        anyone is told."""
        self.release()
        now = time.time()
        approvals = [
            ApprovalRecord(
                id=a.id,
                run_id=state.run_id,
                call_id=a.call_id,
                tool=a.tool,
                # People see the approval; the run's state keeps what runs (bound by hash).
                arguments=(
                    a.shown_arguments
                    if a.shown_arguments is not None
                    else redact_arguments_json(None, a.arguments)
                ),
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
        await self._write(state, self._record(state, state.status, lease=False), approvals)

    def finish_late(self, state: RunState, error: BaseException) -> None:
        """Record how the run ended once the store answers again (its final write failed
        with `error` after tools with effects ran, so the caller is not told to retry)."""
        self.release()
        if not self.written:
            return
        logger.warning("Run %s: its final record is late (%s); retrying", state.run_id, error)
        record = self._record(state, state.status, lease=False)
        task = asyncio.ensure_future(self._write_late(record))
        _late.add(task)
        task.add_done_callback(_late.discard)

    async def _write_late(self, record: RunRecord) -> None:
        delay = 0.5
        deadline = time.time() + _LATE_FOR
        while True:
            try:
                held = await self.store.transition_run(
                    record.id, expect=("running",), holder=self.holder, run=record
                )
            except Exception as exc:
                if time.time() >= deadline:
                    logger.error(
                        "Run %s: its final record could not be written (%s)", record.id, exc
                    )
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            if held:
                logger.info("Run %s: its late final record is written", record.id)
            else:
                logger.warning(
                    "Run %s was taken by another claim; its late record is dropped", record.id
                )
            return

    async def finished(self, state: RunState) -> None:
        """Record how a run that was written before ended."""
        self.release()
        if self.written:
            await self._write(state, self._record(state, state.status, lease=False))
