"""Approval of destructive tools: `denied`, `awaiting_approval`, and the policy modes."""

from __future__ import annotations

import logging

import orjson
import pytest
from runner_support import call

from toolwire.runner import DecisionApprover, Policy, ToolRunner, approve_all, deny_all
from toolwire.tools import Tool, Toolbox, ToolCall, ToolContext, tool

deleted: list[str] = []


@tool(effects="destructive")
def delete_file(path: str, force: bool = False) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


@tool(effects="write")
def write_note(text: str) -> str:
    """Write a note."""
    return "saved"


@pytest.fixture(autouse=True)
def _reset() -> None:
    deleted.clear()


def make(policy: Policy | None = None, approver: object = None) -> ToolRunner:
    return ToolRunner(Toolbox([delete_file, write_note]), policy=policy, approver=approver)  # type: ignore[arg-type]


async def test_ask_without_approver_awaits_approval() -> None:
    result = await make().exec(call("delete_file", {"path": "/tmp/a"}))
    assert result.error is not None
    assert result.error.code == "awaiting_approval"
    assert "'delete_file'" in result.error.message
    assert deleted == []


async def test_write_tools_need_no_approval() -> None:
    result = await make().exec(call("write_note", {"text": "hi"}))
    assert result.success


async def test_approver_true_runs_and_false_denies() -> None:
    assert (await make(approver=approve_all).exec(call("delete_file", {"path": "a"}))).success
    denied = await make(approver=deny_all).exec(call("delete_file", {"path": "b"}))
    assert denied.error is not None
    assert denied.error.code == "denied"
    assert "denied" in denied.error.message
    assert deleted == ["a"]


async def test_approver_none_awaits_and_decisions_resume_by_call_id() -> None:
    approver = DecisionApprover({"call_yes": True, "call_no": False})
    runner = make(approver=approver)
    results = await runner.exec_many(
        [
            call("delete_file", {"path": "1"}, id="call_yes"),
            call("delete_file", {"path": "2"}, id="call_no"),
            call("delete_file", {"path": "3"}, id="call_later"),
        ]
    )
    assert [r.success for r in results] == [True, False, False]
    assert [r.error.code for r in results[1:] if r.error] == ["denied", "awaiting_approval"]
    assert deleted == ["1"]


async def test_per_call_approver_overrides_the_runner_one() -> None:
    runner = make(approver=deny_all)
    result = await runner.exec(call("delete_file", {"path": "x"}), approver=approve_all)
    assert result.success
    assert deleted == ["x"]


async def test_policy_auto_and_deny() -> None:
    auto = await make(Policy(approval="auto")).exec(call("delete_file", {"path": "auto"}))
    assert auto.success
    never = make(Policy(approval="deny"), approver=approve_all)
    result = await never.exec(call("delete_file", {"path": "never"}))
    assert result.error is not None
    assert result.error.code == "denied"
    assert deleted == ["auto"]


async def test_approver_sees_validated_arguments_and_context() -> None:
    seen: list[tuple[ToolCall, str, str | None]] = []

    async def approver(c: ToolCall, t: Tool, ctx: ToolContext) -> bool | None:
        seen.append((c, t.name, ctx.principal))
        return True

    runner = make(approver=approver)
    await runner.exec(
        call("delete_file", {"path": "p", "force": "true"}, id="c1"), ToolContext(principal="ana")
    )
    approved, name, principal = seen[0]
    assert (approved.id, approved.name, name, principal) == (
        "c1",
        "delete_file",
        "delete_file",
        "ana",
    )
    assert orjson.loads(approved.arguments) == {"path": "p", "force": True}


async def test_approval_comes_after_validation_and_scopes() -> None:
    asked: list[str] = []

    async def approver(c: ToolCall, t: Tool, ctx: ToolContext) -> bool | None:
        asked.append(c.id)
        return True

    @tool(effects="destructive", scopes=["admin"])
    def drop_table(name: str) -> str:
        """Drop a table."""
        return "dropped"

    runner = ToolRunner(Toolbox([drop_table]), approver=approver)
    invalid = await runner.exec(call("drop_table", {}))
    forbidden = await runner.exec(call("drop_table", {"name": "t"}))
    assert invalid.error is not None
    assert invalid.error.code == "invalid_arguments"
    assert forbidden.error is not None
    assert forbidden.error.code == "forbidden"
    assert asked == []


async def test_failing_approver_denies(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(c: ToolCall, t: Tool, ctx: ToolContext) -> bool | None:
        raise RuntimeError("approval service down")

    with caplog.at_level(logging.ERROR, logger="toolwire.runner"):
        result = await make(approver=broken).exec(call("delete_file", {"path": "x"}))
    assert result.error is not None
    assert result.error.code == "denied"
    assert deleted == []
    assert any("Approver failed" in r.getMessage() for r in caplog.records)


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be at least 1"):
        Policy(max_concurrency=0)
    with pytest.raises(ValueError, match="approval must be 'ask', 'auto' or 'deny'"):
        Policy(approval="maybe")  # type: ignore[arg-type]


async def test_the_time_an_approver_takes_is_reported_apart_from_the_duration() -> None:
    import asyncio

    from toolwire.store.base import AuditQuery
    from toolwire.store.memory import MemoryStore

    async def slow_person(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool:
        await asyncio.sleep(0.3)
        return True

    store = MemoryStore()
    runner = ToolRunner(Toolbox([delete_file]), approver=slow_person, audit=store)
    result = await runner.exec(call("delete_file", {"path": "/tmp/a"}))

    assert result.success
    assert result.approval_wait_ms >= 290
    assert result.duration_ms < 100  # the tool itself is instant; the 300 ms are not its
    finished = [r for r in await store.list_audit(AuditQuery()) if r.event == "finished"]
    assert finished[0].approval_wait_ms == pytest.approx(result.approval_wait_ms, abs=0.01)
    assert finished[0].duration_ms is not None
    assert finished[0].duration_ms < 100


async def test_calls_without_an_approval_report_no_wait() -> None:
    result = await make().exec(call("write_note", {"text": "hi"}))
    assert result.approval_wait_ms == 0.0
