"""Paused runs: approvals bound to the exact call, serialisable state, resume exactly once."""

from __future__ import annotations

import orjson
import pytest

from toolwire.agent import Agent, RunConflict, RunState
from toolwire.agent.state import ApprovalDecision
from toolwire.models import AssistantMessage, ScriptedModel, ToolMessage
from toolwire.runner import Policy
from toolwire.store.base import AuditQuery, arguments_hash
from toolwire.store.memory import MemoryStore
from toolwire.tools import ToolCall, ToolContext, tool

deleted: list[str] = []


@tool(effects="destructive")
def delete_app(app_name: str, force: bool = False) -> str:
    """Delete an application and everything it owns."""
    deleted.append(app_name)
    return f"deleted {app_name}"


@tool
def list_apps() -> list[str]:
    """List the applications."""
    return ["demo-app", "api"]


@pytest.fixture(autouse=True)
def _clean() -> None:
    deleted.clear()


def ask_delete(app: str = "demo-app", id: str = "call_del") -> AssistantMessage:
    return AssistantMessage(
        content="I'll delete it.",
        tool_calls=(ToolCall(id=id, name="delete_app", arguments=f'{{"app_name": "{app}"}}'),),
    )


async def test_a_paused_run_lists_its_approval_bound_to_the_validated_arguments() -> None:
    model = ScriptedModel([ask_delete()])
    result = await Agent(model, [delete_app, list_apps]).run("delete demo-app")

    assert result.status == "awaiting_approval"
    assert deleted == []
    [approval] = result.approvals
    assert approval.id.startswith("apr_")
    assert approval.call_id == "call_del"
    assert approval.tool == "delete_app"
    # The defaults the runner fills in are part of what is approved.
    assert orjson.loads(approval.arguments) == {"app_name": "demo-app", "force": False}
    assert approval.arguments_hash == arguments_hash({"app_name": "demo-app", "force": False})
    assert "destructive" in approval.reason
    assert result.run_id
    assert result.state is not None
    assert result.state.run_id == result.run_id


async def test_resume_runs_the_approved_call_once_and_the_model_answers() -> None:
    model = ScriptedModel([ask_delete(), "demo-app is deleted."])
    agent = Agent(model, [delete_app])
    paused = await agent.run("delete demo-app")

    # Through JSON and back, as a store or a client would keep it.
    state = RunState.from_json(orjson.loads(orjson.dumps(paused.state.to_json())))  # type: ignore[union-attr]
    done = await agent.resume(state, {paused.approvals[0].id: "approve"})

    assert deleted == ["demo-app"]
    assert done.status == "completed"
    assert done.output == "demo-app is deleted."
    sent = model.requests[1].messages
    assert isinstance(sent[-1], ToolMessage)
    assert sent[-1].call_id == "call_del"
    assert sent[-1].content == "deleted demo-app"
    assert not sent[-1].is_error
    model.assert_complete()


async def test_a_denied_call_reaches_the_model_as_denied_with_the_reason() -> None:
    model = ScriptedModel([ask_delete(), "OK, I left it alone."])
    agent = Agent(model, [delete_app])
    paused = await agent.run("delete demo-app")

    done = await agent.resume(
        paused, {"call_del": ApprovalDecision(approve=False, reason="not on a Friday")}
    )

    assert deleted == []
    assert done.status == "completed"
    result_message = model.requests[1].messages[-1]
    assert isinstance(result_message, ToolMessage)
    assert result_message.is_error
    error = orjson.loads(result_message.content)["error"]
    assert error["code"] == "denied"
    assert "not on a Friday" in error["message"]


async def test_resume_without_a_decision_is_refused_and_nothing_runs() -> None:
    agent = Agent(ScriptedModel([ask_delete()]), [delete_app])
    paused = await agent.run("delete demo-app")

    with pytest.raises(RunConflict, match="still waits for a decision"):
        await agent.resume(paused, {})
    assert deleted == []


async def test_arguments_changed_after_approval_never_run() -> None:
    model = ScriptedModel([ask_delete(), "Could not delete."])
    agent = Agent(model, [delete_app])
    paused = await agent.run("delete demo-app")
    assert paused.state is not None
    data = paused.state.to_json()
    # Someone edits the kept state to delete another app under the same approval.
    data["pending_calls"][0]["arguments"] = '{"app_name": "production-db"}'

    done = await agent.resume(RunState.from_json(data), {paused.approvals[0].id: True})

    assert deleted == []
    assert done.status == "completed"
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage)
    assert orjson.loads(sent.content)["error"]["code"] == "denied"


async def test_a_completed_run_cannot_be_resumed() -> None:
    agent = Agent(ScriptedModel(["Hello."]), [delete_app])
    result = await agent.run("hi")
    with pytest.raises(RunConflict, match="completed"):
        await agent.resume(result, {})


async def test_a_stored_run_resumes_by_id_once_with_decisions_from_the_store() -> None:
    store = MemoryStore()
    model = ScriptedModel([ask_delete(), "Deleted."])
    agent = Agent(model, [delete_app], store=store)
    paused = await agent.run("delete demo-app", ToolContext(principal="alice"))

    record = await store.get_run(paused.run_id)
    assert record is not None
    assert record.status == "awaiting_approval"
    assert record.owner == "alice"
    [approval] = await store.list_approvals(status="pending", now=0.0)
    assert approval.requested_by == "alice"

    # A person decides through the store (as the gateway's approval API does).
    from dataclasses import replace

    decided = replace(approval, status="approved", decided_by="bob", decided_at=1.0)
    assert await store.update_approval(decided, expect=("pending",))

    done = await agent.resume(paused.run_id)
    assert done.status == "completed"
    assert deleted == ["demo-app"]
    used = await store.get_approval(approval.id)
    assert used is not None
    assert used.status == "used"
    with pytest.raises(RunConflict):
        await agent.resume(paused.run_id)
    assert deleted == ["demo-app"]

    finished = await store.get_run(paused.run_id)
    assert finished is not None
    assert finished.status == "completed"
    audit = await store.list_audit(AuditQuery())
    runs = [(r.event, r.tool, r.outcome, r.approved_by) for r in audit]
    assert ("started", "delete_app", None, "bob") in runs
    assert ("finished", "delete_app", "ok", "bob") in runs


async def test_two_concurrent_resumes_of_one_stored_run_run_the_call_once() -> None:
    import asyncio

    store = MemoryStore()
    model = ScriptedModel([ask_delete(), "Deleted.", "Deleted."])
    agent = Agent(model, [delete_app], store=store)
    paused = await agent.run("delete demo-app")
    decisions = {paused.approvals[0].id: True}

    outcomes = await asyncio.gather(
        agent.resume(paused.run_id, decisions),
        agent.resume(paused.run_id, decisions),
        return_exceptions=True,
    )

    assert deleted == ["demo-app"]
    assert sum(isinstance(o, RunConflict) for o in outcomes) == 1


async def test_tools_the_caller_may_not_call_are_not_offered_to_the_model() -> None:
    @tool(scopes=["admin"])
    def purge_cache() -> str:
        """Purge every cache."""
        return "purged"

    model = ScriptedModel(["Hi.", "Hi."])
    agent = Agent(model, [list_apps, purge_cache])
    await agent.run("hello", ToolContext(scopes=frozenset()))
    await agent.run("hello", ToolContext(scopes=frozenset({"admin"})))
    assert model.requests[0].tool_names == ["list_apps"]
    assert model.requests[1].tool_names == ["list_apps", "purge_cache"]


async def test_calls_past_the_per_turn_cap_are_refused_and_not_run() -> None:
    calls = tuple(
        ToolCall(id=f"c{i}", name="delete_app", arguments=f'{{"app_name": "a{i}"}}')
        for i in range(5)
    )
    model = ScriptedModel([AssistantMessage(tool_calls=calls), "Done."])
    agent = Agent(model, [delete_app], max_tool_calls=2, policy=Policy(approval="auto"))
    result = await agent.run("delete five apps")

    assert deleted == ["a0", "a1"]
    assert result.status == "completed"
    sent = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [m.call_id for m in sent] == ["c0", "c1", "c2", "c3", "c4"]
    refused = [orjson.loads(m.content)["error"]["code"] for m in sent[2:]]
    assert refused == ["too_many_calls"] * 3


async def test_a_paused_run_reports_the_wait_for_the_decision_apart_from_the_call() -> None:
    store = MemoryStore()
    model = ScriptedModel([ask_delete(), "Deleted."])
    agent = Agent(model, [delete_app], store=store)
    paused = await agent.run("delete demo-app", ToolContext(principal="alice"))
    [pending] = paused.approvals
    assert pending.requested_at is not None

    # The person decided 42 s after the run paused.
    decided_at = pending.requested_at + 42
    decision = ApprovalDecision(approve=True, decided_by="bob", decided_at=decided_at)
    done = await agent.resume(paused.run_id, {pending.id: decision})

    assert done.status == "completed"
    audit = await store.list_audit(AuditQuery())
    [finished] = [r for r in audit if r.event == "finished" and r.outcome == "ok"]
    assert finished.approval_wait_ms == pytest.approx(42_000, abs=1)
    assert finished.duration_ms is not None
    assert finished.duration_ms < 1_000
