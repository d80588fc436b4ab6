"""Client tools (offered to the model, run by the caller) and per-run settings."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.agent import Agent, Done, ToolCallResult, ToolCallStart
from toolwire.models import (
    AssistantMessage,
    ModelSettings,
    ScriptedModel,
    ToolMessage,
    UserMessage,
)
from toolwire.tools import Tool, ToolCall, tool


@tool
def get_time(city: str) -> str:
    """The local time in a city (fake)."""
    return f"12:00 in {city}"


SEND_EMAIL = Tool(
    name="send_email",
    description="Send an email (the client runs this).",
    input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
)


def turn(*calls: ToolCall, content: str | None = None) -> AssistantMessage:
    return AssistantMessage(content=content, tool_calls=calls)


async def test_client_call_ends_the_run_and_is_not_executed() -> None:
    model = ScriptedModel([turn(ToolCall(id="c1", name="send_email", arguments='{"to": "a"}'))])
    result = await Agent(model, [get_time]).run("mail a", client_tools=[SEND_EMAIL])
    assert result.status == "client_tool_calls"
    assert [c.id for c in result.client_calls] == ["c1"]
    assert result.steps[0].tool_results == []
    assert isinstance(result.messages[-1], AssistantMessage)
    assert model.requests[0].tool_names == ["get_time", "send_email"]
    model.assert_complete()


async def test_mixed_turn_runs_server_calls_and_returns_client_calls() -> None:
    model = ScriptedModel(
        [
            turn(
                ToolCall(id="s1", name="get_time", arguments='{"city": "Oslo"}'),
                ToolCall(id="c1", name="send_email", arguments='{"to": "b"}'),
            )
        ]
    )
    events = [e async for e in Agent(model, [get_time]).run_stream("x", client_tools=[SEND_EMAIL])]
    starts = [e.call_id for e in events if isinstance(e, ToolCallStart)]
    results = [e.result for e in events if isinstance(e, ToolCallResult)]
    assert starts == ["s1"]
    assert [r.result for r in results] == ["12:00 in Oslo"]
    done = events[-1]
    assert isinstance(done, Done)
    assert done.result.status == "client_tool_calls"
    assert [c.name for c in done.result.client_calls] == ["send_email"]
    # The server result is in the history; the client call waits for the caller's result.
    tool_messages = [m for m in done.result.messages if isinstance(m, ToolMessage)]
    assert [m.call_id for m in tool_messages] == ["s1"]


async def test_resuming_with_the_client_result_completes() -> None:
    model = ScriptedModel([turn(ToolCall(id="c1", name="send_email", arguments="{}")), "Sent."])
    agent = Agent(model, [get_time])
    first = await agent.run("mail", client_tools=[SEND_EMAIL])
    history = [
        *first.messages,
        ToolMessage(call_id="c1", name="send_email", content="ok"),
    ]
    second = await agent.run(history, client_tools=[SEND_EMAIL])
    assert second.status == "completed"
    assert second.output == "Sent."


async def test_client_tool_with_a_server_tool_name_is_refused() -> None:
    clash = Tool(name="get_time", description="", input_schema={"type": "object"})
    model = ScriptedModel(["never"])
    with pytest.raises(ValueError, match="get_time"):
        await Agent(model, [get_time]).run("x", client_tools=[clash])


async def test_forced_tool_choice_applies_to_the_first_turn_only() -> None:
    model = ScriptedModel(
        [turn(ToolCall(id="s1", name="get_time", arguments='{"city": "Rome"}')), "Noon."]
    )
    settings = ModelSettings(tool_choice="get_time", temperature=0.5)
    result = await Agent(model, [get_time]).run("time?", settings=settings)
    assert result.status == "completed"
    seen: list[Any] = [r.settings for r in model.requests]
    assert seen[0] == settings
    assert seen[1].tool_choice == "auto"
    assert seen[1].temperature == 0.5


async def test_per_run_settings_override_the_agents() -> None:
    model = ScriptedModel(["a"])
    agent = Agent(model, [get_time], settings=ModelSettings(temperature=0.1))
    await agent.run([UserMessage(content="hi")], settings=ModelSettings(temperature=0.9))
    assert model.requests[0].settings == ModelSettings(temperature=0.9)
