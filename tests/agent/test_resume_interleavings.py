"""Issue 22: an approved call runs exactly once and nothing else runs, under the
interleavings a review found broken (each test failed on the code before the fix)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
import pytest
from faulty_store import FaultyStore

from toolwire.agent import Agent, RunConflict, RunResult, RunState
from toolwire.agent import journal as journal_module
from toolwire.models import AssistantMessage, ScriptedModel
from toolwire.runner import ToolRunner
from toolwire.store import AuditQuery, RunRecord, Store, StoreError, arguments_hash, canonical_json
from toolwire.tools import Tool, Toolbox, ToolCall, ToolContext, tool

StoreFactory = Callable[[], Store]

ran: list[tuple[str, dict[str, Any]]] = []


@tool(effects="destructive")
def delete_app(app_name: str) -> str:
    """Delete an application."""
    ran.append(("delete_app", {"app_name": app_name}))
    return f"deleted {app_name}"


@tool(effects="write")
def write_note(text: str) -> str:
    """Write a note."""
    ran.append(("write_note", {"text": text}))
    return "written"


@pytest.fixture(autouse=True)
def _clean() -> None:
    ran.clear()


def calls(*pairs: tuple[str, str]) -> AssistantMessage:
    return AssistantMessage(
        content="",
        tool_calls=tuple(
            ToolCall(
                id=f"call_{app}",
                name="delete_app",
                arguments=orjson.dumps({"app_name": app}).decode(),
            )
            for _, app in pairs
        ),
    )


async def approve(store: Store, approval_id: str, *, by: str = "alice") -> None:
    record = await store.get_approval(approval_id)
    assert record is not None
    decided = replace(record, status="approved", decided_by=by, decided_at=record.created_at + 1)
    assert await store.update_approval(decided, expect=("pending",))


async def statuses(store: Store, ids: list[str]) -> list[str]:
    out = []
    for i in ids:
        record = await store.get_approval(i)
        assert record is not None
        out.append(record.status)
    return out


async def test_a_refused_resume_uses_no_approval_and_the_run_ends_with_both_calls(
    any_store: Store,
) -> None:
    model = ScriptedModel([calls(("d", "a"), ("d", "b")), "both deleted"])
    agent = Agent(model, [delete_app], store=any_store)
    paused = await agent.run("delete a and b")
    assert paused.status == "awaiting_approval"
    first, second = (a.id for a in paused.approvals)
    before = await any_store.get_run(paused.run_id)
    assert before is not None

    await approve(any_store, first)
    with pytest.raises(RunConflict, match=second):
        await agent.resume(paused.run_id)

    # Nothing changed: the approval is still approved (not used), the run still waits.
    assert await statuses(any_store, [first, second]) == ["approved", "pending"]
    after = await any_store.get_run(paused.run_id)
    assert after is not None
    assert (after.status, after.version, after.holder) == (
        "awaiting_approval",
        before.version,
        None,
    )
    assert ran == []

    await approve(any_store, second)
    done = await agent.resume(paused.run_id)
    assert done.status == "completed"
    assert sorted(ran, key=str) == [
        ("delete_app", {"app_name": "a"}),
        ("delete_app", {"app_name": "b"}),
    ]
    assert await statuses(any_store, [first, second]) == ["used", "used"]


async def test_a_refused_resume_starts_no_task(any_store: Store) -> None:
    model = ScriptedModel([calls(("d", "a"), ("d", "b"))])
    agent = Agent(model, [delete_app], store=any_store)
    paused = await agent.run("delete a and b")
    await approve(any_store, paused.approvals[0].id)
    before = asyncio.all_tasks()
    for _ in range(5):
        with pytest.raises(RunConflict):
            await agent.resume(paused.run_id)
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()


async def _running_write(
    store: Store, release: asyncio.Event
) -> tuple[asyncio.Task[RunResult], RunRecord]:
    """A run whose write tool waits for `release`, and its record once stored `running`."""

    @tool(effects="write")
    async def slow_write(text: str) -> str:
        """Write slowly."""
        await release.wait()
        return "written"

    call = ToolCall(id="c1", name="slow_write", arguments='{"text": "x"}')
    model = ScriptedModel([AssistantMessage(content="", tool_calls=(call,)), "ok"])
    task = asyncio.create_task(Agent(model, [slow_write], store=store).run("write"))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if runs := await store.list_runs(status="running"):
            return task, runs[0]
    raise AssertionError("the run was never stored as running")


async def test_a_lease_renewal_never_writes_over_another_claim(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "LEASE_SECONDS", 0.3)  # renewals every 0.1 s
    release = asyncio.Event()
    task, record = await _running_write(any_store, release)
    # Another claim takes the run (as after this process's lease ran out).
    theirs = replace(record, holder="elsewhere:1:2:3", state={"theirs": True}, lease_until=123.0)
    assert await any_store.transition_run(record.id, expect=("running",), run=theirs)
    await asyncio.sleep(0.35)  # three renewal periods
    release.set()
    result = await task
    assert result.status == "completed"  # the answer stands; its record is dropped, logged
    await asyncio.sleep(0.2)
    stored = await any_store.get_run(record.id)
    assert stored is not None
    assert (stored.holder, stored.state, stored.lease_until) == (
        "elsewhere:1:2:3",
        {"theirs": True},
        123.0,
    )


async def test_renewal_extends_the_lease_of_the_claim_that_holds_the_run(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "LEASE_SECONDS", 0.3)
    release = asyncio.Event()
    task, first = await _running_write(any_store, release)
    await asyncio.sleep(0.45)
    later = await any_store.get_run(first.id)
    assert later is not None
    assert later.status == "running"
    assert later.lease_until is not None
    assert first.lease_until is not None
    assert later.lease_until > first.lease_until
    assert later.state == first.state
    assert later.version == first.version
    release.set()
    assert (await task).status == "completed"


async def test_a_failed_final_audit_write_after_a_side_effect_is_late_not_an_error(
    any_store: Store,
) -> None:
    down = True
    faulty = FaultyStore(
        any_store,
        lambda name, args, kwargs: down and name == "append_audit" and args[0].event == "finished",
    )
    runner = ToolRunner(Toolbox([write_note]), audit=faulty)  # type: ignore[arg-type]
    result = await runner.exec(ToolCall(id="c1", name="write_note", arguments='{"text": "hi"}'))
    assert result.success
    assert ran == [("write_note", {"text": "hi"})]
    assert runner.late is not None
    assert len(runner.late) == 1
    down = False
    for _ in range(100):
        if not len(runner.late):
            break
        await asyncio.sleep(0.05)
    records = await any_store.list_audit(AuditQuery(run_id=None))
    assert [(r.call_id, r.event, r.outcome) for r in records] == [
        ("c1", "started", None),
        ("c1", "finished", "ok"),
    ]


async def test_a_failure_before_any_side_effect_stays_retryable(any_store: Store) -> None:
    faulty = FaultyStore(any_store, lambda name, args, kwargs: name == "append_audit")
    runner = ToolRunner(Toolbox([write_note]), audit=faulty)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="injected failure"):
        await runner.exec(ToolCall(id="c1", name="write_note", arguments='{"text": "hi"}'))
    assert ran == []


async def test_a_store_failure_on_one_call_lets_the_others_finish_and_be_recorded(
    any_store: Store,
) -> None:
    faulty = FaultyStore(
        any_store,
        lambda name, args, kwargs: name == "append_audit" and args[0].call_id == "c2",
    )
    runner = ToolRunner(Toolbox([write_note]), audit=faulty)  # type: ignore[arg-type]
    results = await runner.exec_many(
        [
            ToolCall(id="c1", name="write_note", arguments='{"text": "one"}'),
            ToolCall(id="c2", name="write_note", arguments='{"text": "two"}'),
        ]
    )
    assert results[0].success
    assert results[1].error is not None
    assert results[1].error.code == "unavailable"
    assert ran == [("write_note", {"text": "one"})]
    records = await any_store.list_audit(AuditQuery())
    assert [(r.call_id, r.event) for r in records] == [("c1", "started"), ("c1", "finished")]


async def test_a_client_tool_beside_a_destructive_call_waits_for_the_approval_first(
    any_store: Store,
) -> None:
    client = Tool(
        name="lookup",
        description="The client's lookup.",
        input_schema={"type": "object", "properties": {}},
    )
    turn = AssistantMessage(
        content="",
        tool_calls=(
            ToolCall(id="c_client", name="lookup", arguments="{}"),
            ToolCall(id="c_del", name="delete_app", arguments='{"app_name": "a"}'),
        ),
    )
    agent = Agent(ScriptedModel([turn]), [delete_app], store=any_store)
    paused = await agent.run("look up and delete", client_tools=[client])
    assert paused.status == "awaiting_approval"
    [approval] = paused.approvals
    stored = await any_store.get_approval(approval.id)
    assert stored is not None
    assert stored.status == "pending"
    await approve(any_store, approval.id)
    resumed = await agent.resume(paused.run_id)
    assert resumed.status == "client_tool_calls"
    assert [c.id for c in resumed.client_calls] == ["c_client"]
    assert ran == [("delete_app", {"app_name": "a"})]


async def test_an_edited_state_does_not_use_the_stored_approval(any_store: Store) -> None:
    model = ScriptedModel([calls(("d", "a")), "deleted"])
    agent = Agent(model, [delete_app], store=any_store)
    paused = await agent.run("delete a")
    assert paused.state is not None
    await approve(any_store, paused.approvals[0].id)

    edited = RunState.from_json(paused.state.to_json())
    evil = {"app_name": "production"}
    edited.pending_calls = [replace(edited.pending_calls[0], arguments=orjson.dumps(evil).decode())]
    edited.approvals = [
        replace(
            edited.approvals[0], arguments=canonical_json(evil), arguments_hash=arguments_hash(evil)
        )
    ]
    with pytest.raises(RunConflict, match="does not match the stored run"):
        await agent.resume(edited)
    assert ran == []
    assert await statuses(any_store, [paused.approvals[0].id]) == ["approved"]

    done = await agent.resume(paused.state)  # the state as it was: bound to the stored run
    assert done.status == "completed"
    assert ran == [("delete_app", {"app_name": "a"})]


async def test_without_a_store_one_state_resumes_once() -> None:
    model = ScriptedModel([calls(("d", "a")), "deleted", "again"])
    agent = Agent(model, [delete_app])
    paused = await agent.run("delete a")
    assert paused.state is not None
    decision = {paused.approvals[0].id: "approve"}
    assert (await agent.resume(paused.state, decision)).status == "completed"  # type: ignore[arg-type]
    with pytest.raises(RunConflict, match="resumed from this state already"):
        await agent.resume(paused.state, decision)  # type: ignore[arg-type]
    assert ran == [("delete_app", {"app_name": "a"})]


async def test_resumes_racing_through_two_stores_run_the_call_once(
    store_factory: StoreFactory,
) -> None:
    first, second = store_factory(), store_factory()
    await first.open()
    await second.open()
    for round in range(10):
        ran.clear()
        model = ScriptedModel([calls(("d", f"app{round}"))] + ["done"] * 2)
        paused = await Agent(model, [delete_app], store=first).run("delete")
        await approve(first, paused.approvals[0].id)
        outcomes = await asyncio.gather(
            Agent(model, [delete_app], store=first).resume(paused.run_id),
            Agent(model, [delete_app], store=second).resume(paused.run_id),
            return_exceptions=True,
        )
        assert sum(isinstance(o, RunConflict) for o in outcomes) == 1, outcomes
        assert ran == [("delete_app", {"app_name": f"app{round}"})]


async def test_a_resume_by_an_admin_is_not_needed_for_context(any_store: Store) -> None:
    # A paused run's context (who asked) survives a resume under another principal.
    model = ScriptedModel([calls(("d", "a")), "deleted"])
    agent = Agent(model, [delete_app], store=any_store)
    paused = await agent.run("delete a", ToolContext(principal="alice"))
    await approve(any_store, paused.approvals[0].id)
    await agent.resume(paused.run_id, ctx=ToolContext(principal="root"))
    record = await any_store.get_run(paused.run_id)
    assert record is not None
    assert record.owner == "alice"


async def test_a_store_failure_at_each_operation_of_a_resume_never_runs_a_call_twice(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    await store.open()
    for k in range(100):
        ran.clear()
        script = [calls(("d", f"a{k}"), ("d", f"b{k}"))] + ["done"] * 3
        paused = await Agent(ScriptedModel(script), [delete_app], store=store).run("delete")
        for approval in paused.approvals:
            await approve(store, approval.id)
        operations = 0

        def fail(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
            nonlocal operations
            operations += 1
            return operations == k + 1  # noqa: B023 (read at once, in this round)

        faulty = FaultyStore(store, fail)
        agent = Agent(ScriptedModel(script[1:]), [delete_app], store=faulty)  # type: ignore[arg-type]
        first = None
        with contextlib.suppress(StoreError):  # the injected failure, or a run it interrupted
            first = await agent.resume(paused.run_id)
        # Whatever happened, a second resume through a healthy store never runs a call again.
        with contextlib.suppress(RunConflict):
            await Agent(ScriptedModel(["done"]), [delete_app], store=store).resume(paused.run_id)
        names = [args["app_name"] for _, args in ran]
        assert len(names) == len(set(names)), (k, names)
        assert set(names) <= {f"a{k}", f"b{k}"}
        if first is not None and first.status == "completed":
            assert sorted(names) == [f"a{k}", f"b{k}"], k
        if operations <= k:
            break  # the resume made fewer operations than k: every one has failed once
    else:
        pytest.fail("a resume made over 100 store operations")


async def test_an_approval_record_shows_redacted_arguments_and_the_call_runs_the_real_ones(
    any_store: Store,
) -> None:
    got: list[dict[str, Any]] = []

    @tool(effects="destructive")
    def connect(host: str, settings: dict[str, Any]) -> str:
        """Connect to a host."""
        got.append(settings)
        return "connected"

    real = {
        "host": "db1",
        "settings": {"region": "eu", "login": {"user": "me", "password": "hunter2"}},
    }
    turn = AssistantMessage(
        content="",
        tool_calls=(ToolCall(id="c1", name="connect", arguments=orjson.dumps(real).decode()),),
    )
    agent = Agent(ScriptedModel([turn, "done"]), [connect], store=any_store)
    paused = await agent.run("connect")
    [approval] = paused.approvals
    record = await any_store.get_approval(approval.id)
    assert record is not None
    assert "hunter2" not in record.arguments
    assert orjson.loads(record.arguments)["settings"] == {
        "region": "eu",
        "login": {"user": "me", "password": "[redacted]"},
    }
    assert record.arguments_hash == arguments_hash(real)
    await approve(any_store, approval.id)
    assert (await agent.resume(paused.run_id)).status == "completed"
    assert got == [real["settings"]]
