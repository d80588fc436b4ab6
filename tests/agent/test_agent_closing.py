"""A run's event stream closes the generators it opened, in the consumer's task.

An async generator dropped unfinished is closed by the event loop's finalizer hook: a
task scheduled through `call_soon_threadsafe` (an eventfd write and an extra wake-up of
the loop), after the request that left it. The gateway closes a run's stream right
after its `Done`, so the runs below must leave nothing for that hook.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from toolwire.agent import Agent, Done
from toolwire.models import AssistantMessage, ScriptedModel
from toolwire.store import MemoryStore
from toolwire.tools import ToolCall, tool


@tool(effects="destructive")
def delete_app(app_name: str) -> str:
    """Delete an application.

    Args:
        app_name: The application.
    """
    return f"deleted {app_name}"


@tool
def lookup(key: str) -> dict[str, Any]:
    """Look a key up.

    Args:
        key: The key.
    """
    return {"key": key, "value": 42}


@contextlib.contextmanager
def left_to_the_loop() -> Iterator[list[str]]:
    """The names of the async generators the loop's finalizer hook is asked to close.

    Entered inside the test: the loop sets its own hooks each time it starts running
    (and puts the previous ones back when it stops), so a fixture's would not last.
    """
    firstiter, finalizer = sys.get_asyncgen_hooks()
    left: list[str] = []

    def record(agen: Any) -> None:
        left.append(agen.ag_code.co_qualname)
        if finalizer is not None:
            finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=record)
    try:
        yield left
    finally:
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)


def calling_agent(**kw: Any) -> Agent:
    call = ToolCall(id="call_1", name="lookup", arguments='{"key": "abc"}')
    return Agent(ScriptedModel([AssistantMessage(tool_calls=(call,)), "42"]), [lookup], **kw)


async def until_done(agent: Agent, *, stream: bool) -> Done:
    """Read a run as the gateway does: up to its `Done`, then close the stream."""
    async with contextlib.aclosing(agent.run_stream("look up abc", stream=stream)) as events:
        async for event in events:
            if isinstance(event, Done):
                return event
    raise AssertionError("the run ended without Done")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("store", [False, True], ids=["no store", "store"])
async def test_a_run_closed_at_its_done_leaves_nothing_open(stream: bool, store: bool) -> None:
    agent = calling_agent(store=MemoryStore() if store else None)

    with left_to_the_loop() as left:
        done = await until_done(agent, stream=stream)
        gc.collect()

    assert done.result.status == "completed"
    assert done.result.output == "42"
    assert left == []


async def test_a_run_closed_early_closes_its_loop_at_once() -> None:
    with left_to_the_loop() as left:
        events = calling_agent().run_stream("look up abc")
        first = await anext(events)
        await events.aclose()
        gc.collect()

    assert not isinstance(first, Done)
    assert left == []


async def test_a_resumed_run_closed_at_its_done_leaves_nothing_open() -> None:
    call = ToolCall(id="call_del", name="delete_app", arguments='{"app_name": "demo"}')
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "demo is deleted."])
    agent = Agent(model, [delete_app])
    paused = await agent.run("delete demo")
    assert paused.state is not None

    with left_to_the_loop() as left:
        decisions = {paused.approvals[0].id: "approve"}
        events = agent.resume_stream(paused.state, decisions, stream=False)
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, Done):
                    break
        gc.collect()

    assert isinstance(event, Done)
    assert event.result.output == "demo is deleted."
    assert left == []
