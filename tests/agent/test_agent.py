"""The agent loop: limits, events, errors, concurrency, ids, approvals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolwire.agent import (
    Agent,
    AgentEvent,
    ApprovalRequired,
    Done,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.models import (
    AssistantMessage,
    ModelError,
    ModelResponse,
    ScriptedModel,
    ScriptedRequest,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolwire.runner import Policy
from toolwire.tools import Tool, Toolbox, ToolCall, ToolContext, ToolResult, tool


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather in a city (fake data).

    Args:
        city: The city name.
    """
    return {"city": city, "temperature_c": 21}


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("secret internal detail /etc/passwd")


@tool(effects="destructive")
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


deleted: list[str] = []


def call(name: str, arguments: str = "{}", id: str = "c1") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def turn(*calls: ToolCall, content: str | None = None) -> AssistantMessage:
    return AssistantMessage(content=content, tool_calls=calls)


async def collect(agent: Agent, text: str = "hi", **kw: Any) -> list[AgentEvent]:
    return [event async for event in agent.run_stream(text, **kw)]


def only_done(events: list[AgentEvent]) -> Done:
    dones = [e for e in events if isinstance(e, Done)]
    assert len(dones) == 1
    assert events[-1] is dones[0]
    return dones[0]


@pytest.fixture(autouse=True)
def _clear_deleted() -> None:
    deleted.clear()


async def test_tool_call_then_answer() -> None:
    model = ScriptedModel(
        [turn(call("get_weather", '{"city": "Lisbon"}', id="call_a")), "It is 21 °C in Lisbon."]
    )
    result = await Agent(model, [get_weather]).run("Weather in Lisbon?")

    assert result.status == "completed"
    assert result.output == "It is 21 °C in Lisbon."
    assert len(result.steps) == 2
    assert result.steps[0].tool_results[0].result == {"city": "Lisbon", "temperature_c": 21}
    assert result.steps[1].tool_results == []
    assert result.usage.requests == 2
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    tool_msg = result.messages[2]
    assert isinstance(tool_msg, ToolMessage)
    assert tool_msg.call_id == "call_a"
    assert tool_msg.is_error is False
    assert tool_msg.content == '{"city":"Lisbon","temperature_c":21}'
    # The model saw the tool result on its second turn.
    assert model.requests[1].messages[-1] == tool_msg
    assert model.requests[0].tool_names == ["get_weather"]
    model.assert_complete()


async def test_run_uses_complete_and_run_stream_streams() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model, [get_weather])
    await agent.run("a")
    events = await collect(agent, "b")
    assert [r.stream for r in model.requests] == [False, True]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "two"


async def test_max_iterations_ends_with_clear_message() -> None:
    def always_call(request: ScriptedRequest) -> AssistantMessage:
        n = len(request.messages)
        return turn(call("get_weather", '{"city": "Paris"}', id=f"c{n}"))

    model = ScriptedModel([always_call] * 3)
    result = await Agent(model, [get_weather], max_iterations=3).run("loop forever")

    assert result.status == "max_iterations"
    assert "max_iterations=3" in result.output
    assert "3 iteration" in result.output
    assert len(model.requests) == 3
    assert len(result.steps) == 3
    assert all(len(s.tool_results) == 1 for s in result.steps)
    model.assert_complete()


async def test_default_max_iterations_is_five() -> None:
    model = ScriptedModel(
        [turn(call("get_weather", '{"city": "X"}', id=f"c{i}")) for i in range(5)]
    )
    result = await Agent(model, [get_weather]).run("go")
    assert result.status == "max_iterations"
    assert len(model.requests) == 5


def test_max_iterations_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_iterations"):
        Agent(ScriptedModel(), [get_weather], max_iterations=0)


async def test_event_order_for_a_streamed_run() -> None:
    model = ScriptedModel(
        [
            turn(call("get_weather", '{"city": "Oslo"}', id="w1"), content="Checking."),
            "Cold.",
        ],
        chunk_size=3,
    )
    events = await collect(Agent(model, [get_weather]))
    kinds = [e.type for e in events]
    assert kinds == [
        "text_delta",
        "text_delta",
        "text_delta",
        "tool_call_start",
        "tool_call_result",
        "text_delta",
        "text_delta",
        "done",
    ]
    start = events[3]
    assert isinstance(start, ToolCallStart)
    assert (start.call_id, start.name, start.arguments) == ("w1", "get_weather", '{"city": "Oslo"}')
    res = events[4]
    assert isinstance(res, ToolCallResult)
    assert res.result.call_id == "w1"
    assert res.result.success
    done = only_done(events)
    assert done.error is None
    assert done.result.status == "completed"
    assert done.result.output == "Cold."


async def test_model_error_gives_exactly_one_done() -> None:
    model = ScriptedModel([turn(call("get_weather", '{"city": "Rome"}'))])  # no second turn
    events = await collect(Agent(model, [get_weather]))
    done = only_done(events)
    assert done.result.status == "error"
    assert done.error is not None
    assert "no response left" in done.error
    assert "\n" not in done.error
    assert isinstance(done.exception, ModelError)
    # What happened before the failure is kept.
    assert [m.role for m in done.result.messages] == ["user", "assistant", "tool"]
    assert any(isinstance(e, ToolCallResult) for e in events)


async def test_run_raises_the_model_error() -> None:
    async def fail(request: ScriptedRequest) -> str:
        raise ModelError("Cannot reach http://127.0.0.1:9/v1: connection refused")

    with pytest.raises(ModelError, match="connection refused"):
        await Agent(ScriptedModel([fail]), [get_weather]).run("hi")


async def test_unexpected_exception_also_ends_with_done() -> None:
    class BrokenTools:
        async def list_tools(self) -> list[Tool]:
            raise KeyError("boom")

        async def execute_tool(self, name: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
            raise AssertionError("never called")

    events = await collect(Agent(ScriptedModel(["x"]), BrokenTools()))
    done = only_done(events)
    assert done.error == "KeyError: 'boom'"
    assert done.result.status == "error"


async def test_tool_exception_goes_back_to_the_model() -> None:
    model = ScriptedModel([turn(call("explode", id="e1")), "Sorry, that failed."])
    events = await collect(Agent(model, [explode]))
    done = only_done(events)
    assert done.error is None
    assert done.result.status == "completed"
    msg = model.requests[1].messages[-1]
    assert isinstance(msg, ToolMessage)
    assert msg.is_error
    assert msg.call_id == "e1"
    assert '"execution_error"' in msg.content
    assert "/etc/passwd" not in msg.content


async def test_unknown_tool_and_invalid_arguments_are_error_results() -> None:
    model = ScriptedModel(
        [
            turn(
                call("no_such_tool", id="u1"),
                call("get_weather", '{"town": "Lisbon"}', id="u2"),
            ),
            "done",
        ]
    )
    result = await Agent(model, [get_weather]).run("x")
    codes = [r.error.code for r in result.steps[0].tool_results if r.error]
    assert codes == ["unknown_tool", "invalid_arguments"]
    tool_msgs = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert [m.call_id for m in tool_msgs] == ["u1", "u2"]
    assert all(m.is_error for m in tool_msgs)
    assert "get_weather" in tool_msgs[0].content  # lists the available tools


async def test_tool_calls_of_one_turn_run_concurrently() -> None:
    barrier = asyncio.Barrier(3)

    @tool(timeout=5)
    async def meet(who: str) -> str:
        """Waits until three calls are running at once."""
        await barrier.wait()
        return who

    calls = [call("meet", f'{{"who": "{w}"}}', id=w) for w in ("a", "b", "c")]
    model = ScriptedModel([turn(*calls), "all met"])
    result = await Agent(model, [meet]).run("meet")
    assert result.status == "completed"
    assert [r.result for r in result.steps[0].tool_results] == ["a", "b", "c"]


async def test_invalid_json_arguments_round_trip() -> None:
    bad = '{"city": "Lis'
    model = ScriptedModel(
        [
            turn(call("get_weather", bad, id="bad1"), call("get_weather", "[1, 2]", id="bad2")),
            turn(call("get_weather", '{"city": "Lisbon"}', id="good")),
            "21 °C",
        ]
    )
    events = await collect(Agent(model, [get_weather]))
    done = only_done(events)
    assert done.result.status == "completed"

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts[0].arguments == bad  # the event shows what the model sent

    first = done.result.steps[0]
    assert first.response.message.tool_calls[0].arguments == bad  # the step keeps it raw
    assert first.tool_results[0].error is not None
    assert first.tool_results[0].error.code == "invalid_json"
    assert first.tool_results[1].error is not None

    # Later requests carry the call in a form every provider accepts.
    later = model.requests[1].messages
    stored = later[1]
    assert isinstance(stored, AssistantMessage)
    assert [(c.id, c.arguments) for c in stored.tool_calls] == [("bad1", "{}"), ("bad2", "{}")]
    results = [m for m in later if isinstance(m, ToolMessage)]
    assert [(m.call_id, m.is_error) for m in results] == [("bad1", True), ("bad2", True)]
    assert "invalid_json" in results[0].content
    assert "Lis" not in results[0].content  # no raw argument echo


async def test_call_ids_are_kept_or_generated() -> None:
    model = ScriptedModel(
        [
            turn(
                call("get_weather", '{"city": "A"}', id="keep_me"),
                call("get_weather", '{"city": "B"}', id=""),
                call("get_weather", '{"city": "C"}', id="keep_me"),
            ),
            "ok",
        ]
    )
    events = await collect(Agent(model, [get_weather]))
    ids = [e.call_id for e in events if isinstance(e, ToolCallStart)]
    assert ids[0] == "keep_me"
    assert ids[1].startswith("call_")
    assert ids[2].startswith("call_")
    assert len(set(ids)) == 3
    result = only_done(events).result
    assistant = result.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert [c.id for c in assistant.tool_calls] == ids
    assert [m.call_id for m in result.messages if isinstance(m, ToolMessage)] == ids
    assert [r.call_id for r in result.steps[0].tool_results] == ids


async def test_awaiting_approval_stops_the_run() -> None:
    model = ScriptedModel(
        [
            turn(
                call("delete_file", '{"path": "a.txt"}', id="d1"),
                call("get_weather", '{"city": "Nice"}', id="w1"),
            )
        ]
    )
    events = await collect(Agent(model, [delete_file, get_weather]))
    done = only_done(events)
    result = done.result
    assert result.status == "awaiting_approval"
    assert [c.id for c in result.pending_approvals] == ["d1"]
    assert "delete_file" in result.output
    assert deleted == []
    kinds = [e.type for e in events]
    assert kinds.index("approval_required") < kinds.index("tool_call_result")
    approval = next(e for e in events if isinstance(e, ApprovalRequired))
    assert approval.tool.name == "delete_file"
    assert approval.call.id == "d1"
    # The other call ran and its result is in the history; the pending one has none yet.
    tool_msgs = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert [m.call_id for m in tool_msgs] == ["w1"]
    model.assert_complete()


async def test_denied_call_goes_back_to_the_model() -> None:
    seen_before_asking: list[list[str]] = []
    events: list[AgentEvent] = []

    async def approver(c: ToolCall, t: Tool, ctx: ToolContext) -> bool:
        seen_before_asking.append([e.type for e in events])
        return False

    model = ScriptedModel([turn(call("delete_file", '{"path": "a.txt"}', id="d1")), "Not deleted."])
    agent = Agent(model, [delete_file], approver=approver)
    async for event in agent.run_stream("delete a.txt"):
        events.append(event)

    assert seen_before_asking == [["tool_call_start", "approval_required"]]
    done = only_done(events)
    assert done.result.status == "completed"
    assert deleted == []
    msg = model.requests[1].messages[-1]
    assert isinstance(msg, ToolMessage)
    assert msg.is_error
    assert '"denied"' in msg.content


async def test_approved_call_runs() -> None:
    async def approver(c: ToolCall, t: Tool, ctx: ToolContext) -> bool:
        return True

    model = ScriptedModel([turn(call("delete_file", '{"path": "b.txt"}')), "Deleted."])
    result = await Agent(model, [delete_file], approver=approver).run("delete b.txt")
    assert result.status == "completed"
    assert deleted == ["b.txt"]


async def test_policy_auto_runs_destructive_tools_without_asking() -> None:
    model = ScriptedModel([turn(call("delete_file", '{"path": "c.txt"}')), "Deleted."])
    agent = Agent(model, [delete_file], policy=Policy(approval="auto"))
    events = await collect(agent)
    assert deleted == ["c.txt"]
    assert not any(isinstance(e, ApprovalRequired) for e in events)


async def test_instructions_are_added_once_and_conversations_continue() -> None:
    model = ScriptedModel(["first", "second"])
    agent = Agent(model, [get_weather], instructions="Be brief.")
    first = await agent.run("one")
    assert first.messages[0] == SystemMessage(content="Be brief.")
    second = await agent.run([*first.messages, UserMessage(content="two")])
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert model.requests[1].messages[0] == SystemMessage(content="Be brief.")
    assert second.output == "second"


async def test_usage_is_summed() -> None:
    model = ScriptedModel(
        [
            ModelResponse(
                message=turn(call("get_weather", '{"city": "Bern"}')),
                usage=Usage(input_tokens=10, output_tokens=5, requests=1),
            ),
            ModelResponse(
                message=AssistantMessage(content="ok"),
                usage=Usage(input_tokens=20, output_tokens=2, requests=1),
            ),
        ]
    )
    result = await Agent(model, [get_weather]).run("x")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 7)
    assert result.usage.requests == 2


async def test_cancelling_a_run_cancels_its_running_tools() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool(timeout=30)
    async def slow() -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    events: list[AgentEvent] = []

    async def consume() -> None:
        async for event in Agent(ScriptedModel([turn(call("slow"))]), [slow]).run_stream("x"):
            events.append(event)

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()
    assert not any(isinstance(e, Done) for e in events)


async def test_closing_the_stream_at_an_approval_never_runs_the_tool() -> None:
    model = ScriptedModel([turn(call("delete_file", '{"path": "x"}'))])

    async def approver(c: ToolCall, t: Tool, ctx: ToolContext) -> bool:
        return True

    stream = Agent(model, [delete_file], approver=approver).run_stream("x")
    async for event in stream:
        if isinstance(event, ApprovalRequired):
            break
    await stream.aclose()
    assert deleted == []


async def test_tools_may_be_a_list_of_plain_functions() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedModel([turn(call("add", '{"a": 2, "b": "3"}')), "5"])
    result = await Agent(model, [add]).run("2+3")
    assert result.steps[0].tool_results[0].result == 5


class _GrowingProvider:
    """Lists `get_weather` first; from its second listing on, `delete_file` as well (an MCP
    server that gained a tool while a turn was under way)."""

    def __init__(self) -> None:
        self.listings = 0
        self.tools = Toolbox([get_weather, delete_file])

    async def list_tools(self) -> list[Tool]:
        self.listings += 1
        return [get_weather] if self.listings == 1 else [get_weather, delete_file]

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        return await self.tools.execute_tool(name, arguments, ctx)


@pytest.mark.parametrize("decision", [True, False, None], ids=["approved", "denied", "no approver"])
async def test_a_destructive_tool_found_only_when_the_call_came_still_asks(
    decision: bool | None,
) -> None:
    """The turn's tool list did not have `delete_file`; the runner finds it when it lists
    again for the call. The approver is still asked, after the stream has announced the
    request, and the turn ends (it used to wait forever for a reader of its approvals)."""
    events: list[AgentEvent] = []
    seen_before_asking: list[list[str]] = []

    async def approver(c: ToolCall, t: Tool, ctx: ToolContext) -> bool:
        seen_before_asking.append([e.type for e in events])
        assert decision is not None
        return decision

    provider = _GrowingProvider()
    model = ScriptedModel([turn(call("delete_file", '{"path": "g.txt"}', id="d1")), "Done."])
    agent = Agent(model, provider, approver=approver if decision is not None else None)

    async def consume() -> None:
        async for event in agent.run_stream("delete g.txt"):
            events.append(event)

    await asyncio.wait_for(consume(), timeout=10)
    assert provider.listings == 2
    kinds = [e.type for e in events]
    assert kinds.index("approval_required") < kinds.index("tool_call_result")
    result = only_done(events).result
    if decision is None:
        assert result.status == "awaiting_approval"
        assert [c.id for c in result.pending_approvals] == ["d1"]
        assert deleted == []
        return
    assert seen_before_asking == [["tool_call_start", "approval_required"]]
    assert result.status == "completed"
    assert deleted == (["g.txt"] if decision else [])


@tool(name="tidy", effects="read")
def tidy_reading(path: str) -> str:
    """Look at a folder."""
    return f"looked at {path}"


@tool(name="tidy", effects="destructive")
def tidy_deleting(path: str) -> str:
    """Delete a folder's old files."""
    deleted.append(path)
    return f"tidied {path}"


async def test_a_tool_that_became_destructive_during_the_turn_still_asks() -> None:
    """The turn was listed with `tidy` as a read tool; while the model wrote its call, the
    tools were listed again and `tidy` became destructive. The runner asks about it and
    the stream announces the request before the call's result."""
    listings: list[list[Tool]] = [[tidy_reading], [tidy_deleting]]
    boxes = {id(t): Toolbox([t]) for tools in listings for t in tools}
    current: list[Tool] = []

    class Changing:
        async def list_tools(self) -> list[Tool]:
            current[:] = listings.pop(0) if listings else current
            return list(current)

        async def execute_tool(
            self, name: str, arguments: dict[str, Any], ctx: ToolContext
        ) -> ToolResult:
            return await boxes[id(current[0])].execute_tool(name, arguments, ctx)

    asked: list[str] = []

    async def approver(c: ToolCall, t: Tool, ctx: ToolContext) -> bool:
        asked.append(t.effects)
        return True

    agent = Agent(ScriptedModel(["unused"]), Changing(), approver=approver)

    async def relisted_then_call(request: ScriptedRequest) -> AssistantMessage:
        await agent.runner.refresh_tools()
        return turn(call("tidy", '{"path": "tmp"}', id="t1"))

    agent.model = ScriptedModel([relisted_then_call, "Tidied."])
    events = await asyncio.wait_for(collect(agent), timeout=10)
    assert asked == ["destructive"]
    kinds = [e.type for e in events]
    assert kinds.index("approval_required") < kinds.index("tool_call_result")
    assert only_done(events).result.status == "completed"
    assert deleted == ["tmp"]
