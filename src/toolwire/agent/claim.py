"""Taking a paused run for a resume: every pending call decided first, then the run and
its approvals in one atomic write (`Store.transition_run`), or nothing at all.

With a store, the stored run, call ids, tools and argument hashes are the truth; without
one, a state is resumed once per process (nothing outside it could know).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace

from toolwire.agent.journal import LEASE_SECONDS, new_holder
from toolwire.agent.result import PendingApproval, RunResult
from toolwire.agent.state import ApprovalDecision, Decision, RunState, decision_of
from toolwire.store.base import ApprovalRecord, ApprovalStatus, RunRecord, Store
from toolwire.tools.call import ToolCall

__all__ = ["Claim", "Resolved", "RunConflict", "claim"]


class RunConflict(Exception):
    """The run cannot be resumed: it is not waiting (already resumed, finished, unknown),
    or a decision is missing. The message says which and what to do."""


Resolved = tuple[ToolCall, PendingApproval, ApprovalDecision]

_CLAIM_ATTEMPTS = 3
"""Reads of a stored run before a resume that keeps losing races gives up (409)."""


@dataclass(slots=True, kw_only=True)
class Claim:
    """A run taken for a resume: its state, each pending call's decision, and the claim's
    holder (`None` without a store)."""

    state: RunState
    record: RunRecord | None
    resolved: list[Resolved]
    holder: str | None = None


def _settle(
    record: ApprovalRecord, given: ApprovalDecision | None, now: float
) -> tuple[ApprovalDecision | None, tuple[ApprovalRecord, tuple[ApprovalStatus, ...]] | None]:
    """A stored approval's decision, and the write that goes with running it: an
    approval is used exactly once, in the same write that takes the run."""
    status = record.effective_status(now)
    if status == "pending" and given is not None:
        decided = replace(
            record,
            status="used" if given.approve else "denied",
            decided_by=given.decided_by,
            decided_at=given.decided_at or now,
            decision_reason=given.reason,
            used_at=now if given.approve else None,
        )
        return given, (decided, ("pending",))
    if status == "approved":
        used = replace(record, status="used", used_at=now)
        decision = ApprovalDecision(
            approve=True, decided_by=record.decided_by, decided_at=record.decided_at
        )
        return decision, (used, ("approved",))
    if status == "denied":
        decision = ApprovalDecision(
            approve=False,
            reason=record.decision_reason,
            decided_by=record.decided_by,
            decided_at=record.decided_at,
        )
        return decision, None
    if status == "expired":
        return ApprovalDecision(
            approve=False, reason="the approval expired before a decision"
        ), None
    if status == "used":
        return ApprovalDecision(approve=False, reason="the approval was already used"), None
    return None, None


def _bindings(state: RunState) -> list[tuple[str, ...]]:
    """What a run's approvals are bound to: each pending call as the model made it, and
    each approval's call, tool and arguments hash."""
    calls = [(c.id, c.name, c.arguments) for c in state.pending_calls]
    return [*calls, *((a.id, a.call_id, a.tool, a.arguments_hash) for a in state.approvals)]


_RESUMED_IN_PROCESS: OrderedDict[str, None] = OrderedDict()
_RESUMED_KEPT = 100_000
"""Without a store, the states resumed in this process (by run id and approval ids), so
that one state is not resumed twice here: the bound on how many are remembered."""


def _resume_in_process(given: RunState, decisions: Mapping[str, Decision]) -> Claim:
    """Resume a state without a store: decisions come only from the caller, and each
    state's approvals are used once in this process (another process cannot know)."""
    state = RunState.from_json(given.to_json())
    by_call = {a.call_id: a for a in state.approvals}
    resolved: list[Resolved] = []
    undecided: list[str] = []
    for call in state.pending_calls:
        approval = by_call.get(call.id)
        if approval is None:
            raise RunConflict(f"Run {state.run_id!r} has no approval for call {call.id!r}.")
        # The arguments are checked when the call runs: only a call whose validated
        # arguments hash to the approved hash runs (`_exact`).
        given_decision = decisions.get(approval.id, decisions.get(call.id))
        if given_decision is None:
            undecided.append(approval.id)
            continue
        resolved.append((call, approval, decision_of(given_decision)))
    if undecided:
        raise RunConflict(
            f"Run {state.run_id!r} still waits for a decision on approval(s) "
            f"{', '.join(undecided)}; approve or deny them first."
        )
    key = ":".join([state.run_id, *sorted(a.id for a in state.approvals)])
    if key in _RESUMED_IN_PROCESS:
        raise RunConflict(
            f"Run {state.run_id!r} was resumed from this state already; its approvals are "
            "used. A run is resumed once (with a store, by its id)."
        )
    _RESUMED_IN_PROCESS[key] = None
    while len(_RESUMED_IN_PROCESS) > _RESUMED_KEPT:
        _RESUMED_IN_PROCESS.popitem(last=False)
    return Claim(state=state, record=None, resolved=resolved)


async def claim(
    store: Store | None, run: str | RunState | RunResult, decisions: Mapping[str, Decision]
) -> Claim:
    """Take the run to resume, with a decision for each of its pending calls.

    With a store, the stored run and approvals are the truth: taking the run, using
    its approved approvals and writing the decisions passed in are one atomic write,
    made only once every call is decided. A resume refused for any reason (a decision
    missing, another resume first) has written nothing.
    """
    if isinstance(run, RunResult):
        if run.state is None:
            raise RunConflict(
                f"Run {run.run_id!r} ended with status {run.status!r}; only a run "
                "waiting for approvals can be resumed."
            )
        run = run.state
    given: RunState | None = None
    if isinstance(run, RunState):
        if run.status != "awaiting_approval":
            raise RunConflict(
                f"Run {run.run_id!r} has status {run.status!r}; only a run waiting "
                "for approvals can be resumed."
            )
        given, run_id = run, run.run_id
    else:
        run_id = run
    if store is None:
        if given is None:
            raise RunConflict(
                "Resuming by run id needs a store: create the Agent with store=..., or "
                "pass the RunResult (or its state) instead."
            )
        return _resume_in_process(given, decisions)
    for _ in range(_CLAIM_ATTEMPTS):
        record = await store.get_run(run_id)
        if record is None:
            if given is not None:
                # A state this agent's store never held (another agent's, or one
                # made without a store): resumed as given, once per process.
                return _resume_in_process(given, decisions)
            raise RunConflict(f"Run {run_id!r} does not exist (or has expired).")
        if record.status != "awaiting_approval":
            raise RunConflict(
                f"Run {run_id!r} has status {record.status!r}; only a run waiting for "
                "approvals can be resumed (was it resumed already?)."
            )
        state = RunState.from_json(record.state)
        if given is not None and _bindings(given) != _bindings(state):
            raise RunConflict(
                f"The state given for run {run_id!r} does not match the stored run (its "
                "pending calls, arguments or approvals differ); resume by run id, or "
                "with the state the run ended with."
            )
        resolved, updates = await _decide_all(store, state, decisions)
        holder = new_holder()
        now = time.time()
        taken = replace(
            record,
            status="running",
            updated_at=now,
            lease_until=now + LEASE_SECONDS,
            holder=holder,
        )
        if await store.transition_run(
            run_id,
            expect=("awaiting_approval",),
            version=record.version,
            run=taken,
            approvals=updates,
        ):
            return Claim(state=state, record=record, resolved=resolved, holder=holder)
        # Lost a race: another resume took the run, or an approval changed meanwhile
        # (decided, expired, used). Read again and decide on what is stored now.
    raise RunConflict(f"Run {run_id!r} is being resumed by another request.")


async def _decide_all(
    store: Store, state: RunState, decisions: Mapping[str, Decision]
) -> tuple[list[Resolved], list[tuple[ApprovalRecord, tuple[ApprovalStatus, ...]]]]:
    """Each pending call with its approval and decision, and the approval writes that
    go with taking the run; raises `RunConflict` when a call has no decision."""
    by_call = {a.call_id: a for a in state.approvals}
    resolved: list[Resolved] = []
    updates: list[tuple[ApprovalRecord, tuple[ApprovalStatus, ...]]] = []
    undecided: list[str] = []
    now = time.time()
    for call in state.pending_calls:
        approval = by_call.get(call.id)
        if approval is None:
            raise RunConflict(f"Run {state.run_id!r} has no approval for call {call.id!r}.")
        record = await store.get_approval(approval.id)
        if record is None:
            raise RunConflict(
                f"Approval {approval.id!r} of run {state.run_id!r} is not in the store "
                "(it expired and was deleted?); the run cannot be resumed."
            )
        if (record.run_id, record.call_id, record.tool, record.arguments_hash) != (
            state.run_id,
            call.id,
            approval.tool,
            approval.arguments_hash,
        ):
            raise RunConflict(
                f"Approval {record.id!r} is not bound to call {call.id!r} of run "
                f"{state.run_id!r} as stored; the run cannot be resumed."
            )
        given = decisions.get(approval.id, decisions.get(call.id))
        decision, update = _settle(record, decision_of(given) if given is not None else None, now)
        if decision is None:
            undecided.append(approval.id)
            continue
        if update is not None:
            updates.append(update)
        resolved.append((call, approval, decision))
    if undecided:
        raise RunConflict(
            f"Run {state.run_id!r} still waits for a decision on approval(s) "
            f"{', '.join(undecided)}; approve or deny them first."
        )
    return resolved, updates
