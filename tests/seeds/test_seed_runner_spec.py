"""Seed 004 (`004_b697d53182f79a53.txt`): the tool runner spec.

- TOOLS_VIA_TOOLRUNNER: every tool call of a run goes through `ToolRunner.exec`.
- TOOLCALLID_STABLE: the same id from `tool_call_start` to `tool_call_result` to the tool
  message the model gets back; model-provided, or generated at the boundary.
- REDACTION_REQUIRED: under a strict policy a tool without an allowlist is an error,
  whatever its result's shape.
- ADAPTER_ASSEMBLES_TOOLCALLS: the streamed `delta.tool_calls` of section 4, accumulated by
  `index` in the model client; the loop runs only the assembled calls.
- Section 7: invalid JSON arguments → `tool_call_start`, then an `invalid_json` error result
  with a safe message, same id, and the loop goes on so the model can correct itself.
- Exactly one `done` per run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fakes.openai_server import FakeOpenAIServer, delta, sse
from toolwire import (
    Agent,
    AgentEvent,
    AssistantMessage,
    Done,
    MockTools,
    OpenAIChatModel,
    Policy,
    ScriptedModel,
    TextDelta,
    Tool,
    Toolbox,
    ToolCall,
    ToolCallResult,
    ToolCallStart,
    ToolContext,
    ToolMessage,
    ToolParameter,
    ToolResult,
    ToolRunner,
    UserMessage,
    tool,
)
from toolwire.models import ModelResponse
from toolwire.runner import Approver

# Section 4, verbatim: the first chunk carries id and name, the next ones argument pieces.
SECTION_4 = [
    'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_xxx","function":'
    '{"name":"generate_title","arguments":""},"type":"function"}]}}]}\n\n',
    'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":'
    '{"arguments":"{\\"mes"}}]}}]}\n\n',
    'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":'
    '{"arguments":"sage\\":\\"hi\\"}"}}]}}]}\n\n',
]

GENERATE_TITLE = Tool(
    name="generate_title",
    description="Generate a title for a message.",
    parameters={"message": ToolParameter(type="string", required=True)},
    allow=("title",),
)


class RecordingRunner(ToolRunner):
    """A runner that notes every call it executes (the public `exec`, nothing private)."""

    def __init__(self, provider: Any, **options: Any) -> None:
        super().__init__(provider, **options)
        self.executed: list[ToolCall] = []

    async def exec(
        self,
        call: ToolCall,
        ctx: ToolContext | None = None,
        *,
        approver: Approver | None = None,
        **options: Any,
    ) -> ToolResult:
        self.executed.append(call)
        return await super().exec(call, ctx, approver=approver, **options)


def titles() -> MockTools:
    return MockTools([GENERATE_TITLE], {"generate_title": {"title": "Hi", "internal": "x"}})


async def events_of(agent: Agent, text: str = "Title this: hi") -> list[AgentEvent]:
    return [event async for event in agent.run_stream(text)]


def kinds(events: Sequence[AgentEvent]) -> list[str]:
    return [e.type for e in events if not isinstance(e, TextDelta)]


# --- Section 4: streamed tool-call deltas ----------------------------------------------------


async def test_section_4_deltas_are_assembled_by_index(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(
        sse([*SECTION_4, delta(finish_reason="tool_calls")]),
        # Assembly state is per call: index 0 again is a new call, not a continuation.
        sse(
            [
                delta(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_yyy",
                            "type": "function",
                            "function": {"name": "generate_title", "arguments": '{"message":'},
                        }
                    ]
                ),
                delta(tool_calls=[{"index": 0, "function": {"arguments": '"bye"}'}}]),
                delta(finish_reason="tool_calls"),
            ]
        ),
    )
    model = OpenAIChatModel(openai_server.base_url, "key", "gpt-test")
    history = [UserMessage(content="Title this: hi")]
    finals: list[ModelResponse] = []
    for _ in range(2):
        events = [e async for e in model.stream(history, [GENERATE_TITLE])]
        final = events[-1]
        assert isinstance(final, ModelResponse)
        assert all(not isinstance(e, ModelResponse) for e in events[:-1])
        finals.append(final)
    assert finals[0].finish_reason == "tool_calls"
    assert finals[0].message.tool_calls == (
        ToolCall(id="call_xxx", name="generate_title", arguments='{"message":"hi"}'),
    )
    assert finals[1].message.tool_calls == (
        ToolCall(id="call_yyy", name="generate_title", arguments='{"message":"bye"}'),
    )


async def test_the_loop_runs_the_assembled_calls_through_the_runner_with_one_id(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply(
        sse([*SECTION_4, delta(finish_reason="tool_calls")]),
        sse([delta("Your title: Hi"), delta(finish_reason="stop")]),
    )
    provider = titles()
    runner = RecordingRunner(provider)
    model = OpenAIChatModel(openai_server.base_url, "key", "gpt-test")
    events = await events_of(Agent(model, provider, runner=runner))

    assert kinds(events) == ["tool_call_start", "tool_call_result", "done"]
    start, result = (e for e in events if isinstance(e, ToolCallStart | ToolCallResult))
    assert isinstance(start, ToolCallStart)
    assert isinstance(result, ToolCallResult)
    assert (start.call_id, start.name, start.arguments) == (
        "call_xxx",
        "generate_title",
        '{"message":"hi"}',
    )
    assert result.result.call_id == "call_xxx"
    assert result.result.result == {"title": "Hi"}  # redacted to the allowlist
    # One execution path: the runner ran exactly the calls the provider saw.
    assert [c.id for c in runner.executed] == ["call_xxx"]
    assert provider.call_history == [("generate_title", {"message": "hi"})]
    # The same id goes back to the model with the result.
    sent = openai_server.last.json["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == "call_xxx"
    assert (sent[-1]["role"], sent[-1]["tool_call_id"]) == ("tool", "call_xxx")
    assert json.loads(sent[-1]["content"]) == {"title": "Hi"}
    done = events[-1]
    assert isinstance(done, Done)
    assert done.result.output == "Your title: Hi"


async def test_a_call_without_an_id_gets_one_at_the_boundary_kept_to_the_end() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=(ToolCall(id="", name="generate_title", arguments='{"message":"a"}'),)
            ),
            "Done.",
        ]
    )
    events = await events_of(Agent(model, titles()))
    start = next(e for e in events if isinstance(e, ToolCallStart))
    result = next(e for e in events if isinstance(e, ToolCallResult))
    assert start.call_id
    assert result.result.call_id == start.call_id
    sent = model.requests[1].messages
    assert isinstance(sent[-2], AssistantMessage)
    assert sent[-2].tool_calls[0].id == start.call_id
    assert isinstance(sent[-1], ToolMessage)
    assert sent[-1].call_id == start.call_id


# --- Section 7: invalid JSON arguments --------------------------------------------------------


async def test_invalid_json_is_an_error_result_fed_back_and_the_loop_continues() -> None:
    raw = '{"message": "hi", token=sk-SECRET-123'
    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=(ToolCall(id="call_bad", name="generate_title", arguments=raw),)
            ),
            AssistantMessage(
                tool_calls=(
                    ToolCall(id="call_good", name="generate_title", arguments='{"message":"hi"}'),
                )
            ),
            "Your title: Hi",
        ]
    )
    provider = titles()
    events = await events_of(Agent(model, provider))

    assert kinds(events) == [
        "tool_call_start",
        "tool_call_result",
        "tool_call_start",
        "tool_call_result",
        "done",
    ]
    bad_start, bad_result, good_start, good_result = (
        e for e in events if isinstance(e, ToolCallStart | ToolCallResult)
    )
    assert isinstance(bad_start, ToolCallStart)
    assert isinstance(bad_result, ToolCallResult)
    assert (bad_start.call_id, bad_result.result.call_id) == ("call_bad", "call_bad")
    error = bad_result.result.error
    assert not bad_result.result.success
    assert error is not None
    assert error.code == "invalid_json"  # the seed's errorCode
    assert "not valid JSON" in error.message
    assert "sk-SECRET" not in error.message
    assert "token" not in error.message
    # Fed back to the model as a tool message, for self-correction.
    fed = model.requests[1].messages[-1]
    assert isinstance(fed, ToolMessage)
    assert fed.is_error
    assert fed.call_id == "call_bad"
    assert json.loads(fed.content)["error"]["code"] == "invalid_json"
    assert "sk-SECRET" not in repr(model.requests[1].messages)
    # The corrected call runs; the bad one never reached the provider.
    assert isinstance(good_result, ToolCallResult)
    assert good_result.result.success
    assert good_start.call_id == good_result.result.call_id == "call_good"
    assert provider.call_history == [("generate_title", {"message": "hi"})]
    done = events[-1]
    assert isinstance(done, Done)
    assert (done.result.status, done.result.output) == ("completed", "Your title: Hi")


# --- REDACTION_REQUIRED -----------------------------------------------------------------------


@tool
def motto() -> str:
    """Return the team's motto (text, no allowlist)."""
    return "internal motto"


@tool
def account() -> dict[str, Any]:
    """Return an account (an untyped dict, no allowlist)."""
    return {"name": "Ana", "password": "hunter2"}


@tool(allow=["name"])
def profile() -> dict[str, Any]:
    """Return a profile; only its name may reach the model."""
    return {"name": "Ana", "password": "hunter2"}


async def test_strict_policy_a_tool_without_an_allowlist_is_an_error_event() -> None:
    calls = tuple(
        ToolCall(id=f"call_{name}", name=name, arguments="{}")
        for name in ("motto", "account", "profile")
    )
    model = ScriptedModel([AssistantMessage(tool_calls=calls), "ok"])
    agent = Agent(model, [motto, account, profile], policy=Policy(require_allowlist=True))
    events = await events_of(agent)
    results = {e.result.name: e.result for e in events if isinstance(e, ToolCallResult)}
    for name in ("motto", "account"):
        error = results[name].error
        assert error is not None, name
        assert error.code == "execution_error"
        assert "declares no result allowlist" in error.message
    assert results["profile"].result == {"name": "Ana"}
    sent = repr(model.requests[1].messages)
    assert "hunter2" not in sent
    assert "internal motto" not in sent
    assert kinds(events).count("done") == 1


async def test_without_the_strict_policy_text_and_dicts_pass() -> None:
    runner = ToolRunner(Toolbox([motto, account]))
    text = await runner.exec(ToolCall(id="c1", name="motto", arguments="{}"))
    data = await runner.exec(ToolCall(id="c2", name="account", arguments="{}"))
    assert (text.result, data.result["name"]) == ("internal motto", "Ana")
