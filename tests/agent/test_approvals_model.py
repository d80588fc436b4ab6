"""A model-based test of approvals and resumes (issue 22), on every store backend.

Hypothesis drives two "processes" (agents over separate connections to one store) through
starting runs, deciding approvals, resuming (alone, with decisions passed in, or two at
once), crashing mid-resume and store failures injected at any one store operation, and
checks after every step:

- every call runs at most once, and only with an approval that was approved;
- a resume that is refused (not by a failure) changes nothing in the store;
- a resume that completes has run every call whose approval was approved before it.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from faulty_store import FaultyStore
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from store_backends import BACKENDS, SERVERS, StoreData
from toolwire.agent import Agent, RunConflict
from toolwire.models import AssistantMessage, ScriptedModel
from toolwire.models.scripted import ScriptedRequest
from toolwire.store import Store, StoreError
from toolwire.tools import ToolCall, tool


@dataclass
class _Run:
    approvals: dict[str, str]
    """approval id -> the target its call acts on."""
    decided: dict[str, bool] = field(default_factory=dict)
    """approval id -> approve? (decisions that were written)."""


class ApprovalsMachine(RuleBasedStateMachine):
    backend = "memory"
    server_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.executions: list[str] = []
        self.block: asyncio.Event | None = None
        self.runs: dict[str, _Run] = {}
        self.fail_in: int | None = None
        self.failed = False
        self.counter = 0
        self.tmp = tempfile.mkdtemp(prefix="toolwire-model-")
        self.data = StoreData(self.backend, Path(self.tmp), self.server_url)
        self.stores: list[Store] = []
        self.agents: list[Agent] = []

    # --- plumbing ----------------------------------------------------------------------

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def _fail(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if self.fail_in is None:
            return False
        if self.fail_in == 0:
            self.fail_in = None
            self.failed = True
            return True
        self.fail_in -= 1
        return False

    def _agents(self) -> None:
        """(Re)start both processes: new connections to the same data."""
        executions = self.executions

        @tool(effects="destructive")
        async def act(target: str) -> str:
            """Act on a target."""
            executions.append(target)
            if self.block is not None:
                await self.block.wait()
            return f"did {target}"

        def reply(request: ScriptedRequest) -> AssistantMessage | str:
            last = request.messages[-1]
            text = getattr(last, "content", "")
            if last.role == "user" and isinstance(text, str) and text.startswith("go "):
                _, run, k = text.split()
                return AssistantMessage(
                    content="",
                    tool_calls=tuple(
                        ToolCall(
                            id=f"c{run}-{i}", name="act", arguments=f'{{"target": "t{run}-{i}"}}'
                        )
                        for i in range(int(k))
                    ),
                )
            return "done"

        for store in self.stores:
            if store is not self.data.memory:
                self.run(store.aclose())
        self.stores, self.agents = [], []
        for _ in range(2):
            store = self.data.make()
            self.run(store.open())
            self.stores.append(store)
            faulty = FaultyStore(store, self._fail)
            model = ScriptedModel([reply] * 10_000)
            self.agents.append(Agent(model, [act], store=faulty))  # type: ignore[arg-type]

    async def _statuses(self) -> dict[str, str]:
        out = {}
        for run in self.runs.values():
            for approval_id in run.approvals:
                record = await self.stores[0].get_approval(approval_id)
                out[approval_id] = record.status if record is not None else "missing"
        return out

    async def _run_snapshot(self, run_id: str) -> tuple[Any, ...]:
        record = await self.stores[0].get_run(run_id)
        return (record.status, record.version, record.holder) if record is not None else ()

    def teardown(self) -> None:
        self.run(self.data.cleanup())
        self.loop.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- rules -------------------------------------------------------------------------

    @initialize()
    def start_processes(self) -> None:
        self._agents()

    @rule(k=st.integers(1, 3), p=st.integers(0, 1))
    def start_run(self, k: int, p: int) -> None:
        self.counter += 1
        try:
            result = self.run(self.agents[p].run(f"go {self.counter} {k}"))
        except StoreError:
            return
        if result.status != "awaiting_approval":
            return
        self.runs[result.run_id] = _Run(
            {a.id: f"t{self.counter}-{a.call_id.split('-')[1]}" for a in result.approvals}
        )

    @precondition(lambda self: bool(self.runs))
    @rule(data=st.data(), approve=st.booleans(), p=st.integers(0, 1))
    def decide(self, data: st.DataObject, approve: bool, p: int) -> None:
        run = self.runs[data.draw(st.sampled_from(list(self.runs)))]
        approval_id = data.draw(
            st.sampled_from(sorted(run.approvals, key=run.approvals.__getitem__))
        )
        store = self.agents[p].store
        assert store is not None

        async def go() -> bool:
            record = await store.get_approval(approval_id)
            if record is None or record.status != "pending":
                return False
            decided = replace(
                record,
                status="approved" if approve else "denied",
                decided_by="person",
                decided_at=record.created_at,
            )
            return await store.update_approval(decided, expect=("pending",))

        try:
            if self.run(go()):
                run.decided[approval_id] = approve
        except StoreError:
            pass

    def _resume(self, run_id: str, agents: list[Agent], decisions: dict[str, bool] | None) -> None:
        run = self.runs[run_id]
        statuses = self.run(self._statuses())
        before_run = self.run(self._run_snapshot(run_id))
        approved_before = {a for a, s in statuses.items() if s == "approved" and a in run.approvals}
        self.failed = False

        async def both() -> list[Any]:
            resumes = (agent.resume(run_id, decisions) for agent in agents)
            return await asyncio.gather(*resumes, return_exceptions=True)

        outcomes = self.run(both())
        went = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(went) <= 1, outcomes
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(
                outcome, RunConflict | StoreError
            ):
                raise outcome
        if not went and not self.failed and all(isinstance(o, RunConflict) for o in outcomes):
            # Refused: nothing changed.
            assert self.run(self._statuses()) == statuses
            assert self.run(self._run_snapshot(run_id)) == before_run
        if decisions:
            # Decisions passed in are written with the claim, whatever happened after it.
            after = self.run(self._statuses())
            for approval_id, approve in decisions.items():
                if statuses.get(approval_id) == "pending" and after[approval_id] != "pending":
                    assert after[approval_id] == ("used" if approve else "denied")
                    run.decided[approval_id] = approve
                    if approve:
                        approved_before.add(approval_id)
        for outcome in went:
            if outcome.status == "completed":
                for approval_id in approved_before:
                    assert run.approvals[approval_id] in self.executions, (approval_id, outcome)

    @precondition(lambda self: bool(self.runs))
    @rule(data=st.data(), p=st.integers(0, 1))
    def resume(self, data: st.DataObject, p: int) -> None:
        self._resume(data.draw(st.sampled_from(list(self.runs))), [self.agents[p]], None)

    @precondition(lambda self: bool(self.runs))
    @rule(data=st.data(), approve=st.booleans(), p=st.integers(0, 1))
    def resume_deciding(self, data: st.DataObject, approve: bool, p: int) -> None:
        run_id = data.draw(st.sampled_from(list(self.runs)))
        decisions = dict.fromkeys(self.runs[run_id].approvals, approve)
        self._resume(run_id, [self.agents[p]], decisions)

    @precondition(lambda self: bool(self.runs))
    @rule(data=st.data())
    def resume_twice_at_once(self, data: st.DataObject) -> None:
        self._resume(data.draw(st.sampled_from(list(self.runs))), self.agents, None)

    @precondition(lambda self: bool(self.runs))
    @rule(data=st.data(), p=st.integers(0, 1))
    def crash_mid_resume(self, data: st.DataObject, p: int) -> None:
        """A resume whose process dies while a tool runs; both processes restart."""
        run_id = data.draw(st.sampled_from(list(self.runs)))
        self.block = asyncio.Event()
        seen = len(self.executions)

        async def go() -> None:
            task = asyncio.ensure_future(self.agents[p].resume(run_id))
            for _ in range(200):
                if task.done() or len(self.executions) > seen:
                    break
                await asyncio.sleep(0.005)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        try:
            self.run(go())
        finally:
            self.block = None
        self._agents()

    @rule(n=st.integers(0, 8))
    def store_fails_soon(self, n: int) -> None:
        self.fail_in = n

    # --- invariants --------------------------------------------------------------------

    @invariant()
    def at_most_once(self) -> None:
        assert len(self.executions) == len(set(self.executions)), self.executions

    @invariant()
    def only_approved_calls_run(self) -> None:
        targets = {t: (run, a) for run in self.runs.values() for a, t in run.approvals.items()}
        for target in self.executions:
            run, approval_id = targets[target]
            assert run.decided.get(approval_id) is True, (target, run.decided)


@pytest.mark.parametrize("backend", BACKENDS)
def test_approvals_hold_under_every_interleaving(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(SERVERS[backend]) if backend in SERVERS else ""
    attributes = {"backend": backend, "server_url": url}
    machine = type(f"Approvals_{backend}", (ApprovalsMachine,), attributes)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=30,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
