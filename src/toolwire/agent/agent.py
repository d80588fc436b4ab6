"""`Agent`: the bounded loop model → tools → model, as a stream of events."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from toolwire.agent.events import (
    AgentEvent,
    ApprovalRequired,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.agent.result import RunResult, RunStatus, Step
from toolwire.models.base import Model, ModelError, ModelResponse, ModelSettings
from toolwire.models.messages import (
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolwire.parsing.events import ContentDelta
from toolwire.parsing.events import ReasoningDelta as ModelReasoningDelta
from toolwire.runner import Approver, Policy, ToolRunner
from toolwire.tools.call import ToolCall, ToolResult, new_call_id
from toolwire.tools.context import ToolContext
from toolwire.tools.provider import ToolProvider
from toolwire.tools.tool import Tool
from toolwire.tools.toolbox import Toolbox

__all__ = ["Agent"]


class Agent:
    """Runs a model with tools until it answers, bounded by `max_iterations`.

    Each iteration asks the model for a turn; all tool calls of that turn run concurrently
    through one `ToolRunner` (the only execution path) and their results, errors included,
    go back to the model. A tool error never ends the run: the model sees it and can
    correct itself.

    Args:
        model: Any `Model` (`OpenAIChatModel`, `OfflineModel`, `ScriptedModel`, ...).
        tools: A `ToolProvider`, or a list of `@tool` functions, plain functions and `Tool`s
            (wrapped in a `Toolbox`).
        instructions: A system message put first in a new conversation.
        max_iterations: Model turns allowed per run; a run still calling tools after that
            many ends with status `"max_iterations"`.
        policy: How the runner executes tools (timeouts, approvals, concurrency, ...).
        approver: Asked before a tool that needs approval runs:
            `async (call, tool, ctx) -> bool | None`; `None` leaves the call pending and the
            run ends with status `"awaiting_approval"`.
        settings: Passed to the model on every turn.
        runner: Run the tools through this runner (sharing its cache and policy with
            other users of it) instead of a new one built from `tools` and `policy`.
    """

    def __init__(
        self,
        model: Model,
        tools: ToolProvider | Sequence[Callable[..., Any] | Tool | ToolProvider],
        *,
        instructions: str | None = None,
        max_iterations: int = 5,
        policy: Policy | None = None,
        approver: Approver | None = None,
        settings: ModelSettings | None = None,
        runner: ToolRunner | None = None,
    ) -> None:
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, not {max_iterations}.")
        self.model = model
        self.provider: ToolProvider = (
            tools if isinstance(tools, ToolProvider) else Toolbox(list(tools))
        )
        self.instructions = instructions
        self.max_iterations = max_iterations
        self.approver = approver
        self.settings = settings
        if runner is not None and policy is not None:
            raise ValueError("Give either runner= or policy=, not both: the runner has a policy.")
        self.runner = runner or ToolRunner(self.provider, policy=policy or Policy())

    async def run(
        self,
        input: str | Sequence[Message],
        ctx: ToolContext | None = None,
        *,
        settings: ModelSettings | None = None,
        client_tools: Sequence[Tool] = (),
    ) -> RunResult:
        """Run the loop to the end and return its result.

        Args:
            input: The user's message, or a whole conversation (for example a previous
                `RunResult.messages` plus a new `UserMessage`).
            ctx: Who is calling; a fresh `ToolContext` when omitted.
            settings: Model settings for this run (default: the agent's).
            client_tools: Tools offered to the model that the caller runs itself (see
                `run_stream`).

        Raises:
            ModelError: The model endpoint failed or could not be reached.
        """
        done: Done | None = None
        events = self.run_stream(
            input, ctx, stream=False, settings=settings, client_tools=client_tools
        )
        async for event in events:
            if isinstance(event, Done):
                done = event
        assert done is not None  # run_stream always ends with Done
        if done.exception is not None:
            raise done.exception
        return done.result

    async def run_stream(
        self,
        input: str | Sequence[Message],
        ctx: ToolContext | None = None,
        *,
        stream: bool = True,
        settings: ModelSettings | None = None,
        client_tools: Sequence[Tool] = (),
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the loop, yielding events as they happen and exactly one `Done` last.

        A failure (model endpoint down, a bug) ends the stream with `Done(error=...)`
        rather than an exception. If the consumer stops iterating or the task is
        cancelled, running tools are cancelled and no `Done` follows.

        Args:
            input: The user's message, or a whole conversation.
            ctx: Who is calling; a fresh `ToolContext` when omitted.
            stream: Ask the model to stream (text arrives in many `TextDelta`s); with
                `False` each turn is one request and its text one `TextDelta`.
            settings: Model settings for this run (default: the agent's). A forced
                `tool_choice` (`required` or a tool name) applies to the first turn only,
                so the model can answer once the tools have run.
            client_tools: Tools offered to the model that the caller owns and runs
                itself: the agent never executes them. When the model calls any, the
                turn's other calls run as usual and the run ends with status
                `"client_tool_calls"`; `RunResult.client_calls` lists the calls to run, and
                `messages` ends with their assistant message, ready for their results.
        """
        state = _RunState(
            messages=self._start(input),
            ctx=ctx if ctx is not None else ToolContext(run_id=uuid.uuid4().hex),
            settings=settings if settings is not None else self.settings,
            client_tools=tuple(client_tools),
        )
        try:
            async with contextlib.aclosing(self._loop(state, stream)) as events:
                async for event in events:
                    yield event
        except Exception as exc:  # the contract: the stream ends with Done, never raises
            yield Done(
                result=state.finish("error", _one_line(exc)),
                error=_one_line(exc),
                exception=exc,
            )
            return
        assert state.result is not None
        yield Done(result=state.result)

    def _start(self, input: str | Sequence[Message]) -> list[Message]:
        messages: list[Message] = (
            [UserMessage(content=input)] if isinstance(input, str) else list(input)
        )
        if self.instructions and not (messages and isinstance(messages[0], SystemMessage)):
            messages.insert(0, SystemMessage(content=self.instructions))
        return messages

    async def _loop(self, state: _RunState, stream: bool) -> AsyncGenerator[AgentEvent, None]:
        server_tools = await self.runner.list_tools()
        by_name = {t.name: t for t in server_tools}
        client_names = {t.name for t in state.client_tools}
        clash = client_names & by_name.keys()
        if clash:
            raise ValueError(
                f"Client tool(s) {', '.join(sorted(clash))} have the same name as the agent's "
                "own tools; rename them."
            )
        tools = [*server_tools, *state.client_tools]
        settings = state.settings
        for _ in range(self.max_iterations):
            response: ModelResponse | None = None
            if stream:
                turn_events = self._stream_turn(state.messages, tools, settings)
                async with contextlib.aclosing(turn_events) as turn:
                    async for item in turn:
                        if isinstance(item, ModelResponse):
                            response = item
                        else:
                            yield item
            else:
                response = await self.model.complete(state.messages, tools, settings)
                if response.message.reasoning:
                    yield ReasoningDelta(text=response.message.reasoning)
                if response.message.content:
                    yield TextDelta(text=response.message.content)
            assert response is not None
            state.usage.add(response.usage)
            step = Step(response=response)
            state.steps.append(step)
            message = response.message
            if not message.tool_calls:
                state.messages.append(message)
                state.finish("completed", message.content or "")
                return

            if settings is not None and settings.tool_choice not in (None, "auto", "none"):
                # A forced choice would force a call on every turn: the loop could never end.
                settings = replace(settings, tool_choice="auto")
            all_calls, stored = _prepare_calls(message.tool_calls)
            state.messages.append(replace(message, tool_calls=stored))
            client_calls = [c for c in all_calls if c.name in client_names]
            calls = [c for c in all_calls if c.name not in client_names]
            for call in calls:
                yield ToolCallStart(call_id=call.id, name=call.name, arguments=call.arguments)
            if calls:
                run_events = self._run_tools(calls, by_name, state.ctx)
                async with contextlib.aclosing(run_events) as run:
                    async for event in run:
                        if isinstance(event, list):
                            step.tool_results = event
                        else:
                            yield event

            pending = []
            for call, result in zip(calls, step.tool_results, strict=True):
                yield ToolCallResult(result=result)
                if result.error is not None and result.error.code == "awaiting_approval":
                    pending.append(call)
                    continue
                state.messages.append(
                    ToolMessage(
                        call_id=result.call_id or call.id,
                        name=call.name,
                        content=result.to_model_text(),
                        is_error=not result.success,
                    )
                )
            if client_calls:
                state.client_calls = client_calls
                state.pending = pending
                names = ", ".join(sorted({c.name for c in client_calls}))
                state.finish(
                    "client_tool_calls",
                    f"The model called the caller's tool(s) {names}; "
                    "send their results to continue.",
                )
                return
            if pending:
                state.pending = pending
                names = ", ".join(sorted({c.name for c in pending}))
                state.finish(
                    "awaiting_approval",
                    f"Waiting for approval to run {names} ({len(pending)} call(s) pending).",
                )
                return

        n = self.max_iterations
        state.finish(
            "max_iterations",
            f"Stopped after {n} iteration(s) without a final answer: the model was still "
            f"calling tools (max_iterations={n}). The tool results so far are in the messages.",
        )

    async def _stream_turn(
        self, messages: list[Message], tools: list[Tool], settings: ModelSettings | None
    ) -> AsyncGenerator[AgentEvent | ModelResponse, None]:
        response: ModelResponse | None = None
        events = self.model.stream(messages, tools, settings)
        try:
            async for item in events:
                if isinstance(item, ContentDelta):
                    if item.text:
                        yield TextDelta(text=item.text)
                elif isinstance(item, ModelReasoningDelta):
                    if item.text:
                        yield ReasoningDelta(text=item.text)
                elif isinstance(item, ModelResponse):
                    response = item
                # ToolCallStart / ToolCallArgsDelta are progress only; the complete calls
                # come in the ModelResponse.
        finally:
            # Close the model's stream (and its HTTP response) now, not when it is collected.
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        if response is None:
            raise ModelError(f"Model {self.model.name!r} ended its stream without a response.")
        yield response

    async def _run_tools(
        self, calls: list[ToolCall], by_name: dict[str, Tool], ctx: ToolContext
    ) -> AsyncGenerator[AgentEvent | list[ToolResult], None]:
        """Run one turn's calls, yielding `ApprovalRequired` events, then the results."""
        queue: asyncio.Queue[tuple[ApprovalRequired, asyncio.Future[None]] | None]
        queue = asyncio.Queue()
        user_approver = self.approver

        async def approver(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
            # Hand the event to the stream and wait until the consumer has taken it, so
            # whoever reads the stream learns about the request before anyone answers it.
            seen: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            queue.put_nowait((ApprovalRequired(call=call, tool=tool), seen))
            await seen
            if user_approver is None:
                return None
            return await user_approver(call, tool, ctx)

        if self.runner.policy.approval != "ask" or not any(
            (tool := by_name.get(call.name)) is not None and tool.effects == "destructive"
            for call in calls
        ):
            # Only destructive tools under approval "ask" consult an approver: skip the
            # event plumbing for every other turn.
            yield await self.runner.exec_many(calls, ctx, approver=approver)
            return
        task = asyncio.ensure_future(self.runner.exec_many(calls, ctx, approver=approver))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                event, seen = item
                yield event
                if not seen.done():
                    seen.set_result(None)
            results = task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        yield results


@dataclass(slots=True, kw_only=True)
class _RunState:
    messages: list[Message]
    ctx: ToolContext
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    settings: ModelSettings | None = None
    client_tools: tuple[Tool, ...] = ()
    pending: list[ToolCall] = field(default_factory=list)
    client_calls: list[ToolCall] = field(default_factory=list)
    result: RunResult | None = None

    def finish(self, status: RunStatus, output: str) -> RunResult:
        self.result = RunResult(
            output=output,
            messages=self.messages,
            steps=self.steps,
            status=status,
            usage=self.usage,
            pending_approvals=self.pending,
            client_calls=self.client_calls,
        )
        return self.result


def _prepare_calls(calls: Sequence[ToolCall]) -> tuple[list[ToolCall], tuple[ToolCall, ...]]:
    """The calls to run and the calls to keep in the history.

    Ids the model gave are kept; a missing or repeated one gets a fresh id, since results
    are matched to calls by id. In the history, arguments that are not a JSON object become
    `"{}"`: providers reject such a call on every later request, while the error result
    already tells the model what was wrong with it.
    """
    run: list[ToolCall] = []
    stored: list[ToolCall] = []
    seen: set[str] = set()
    for call in calls:
        if not call.id or call.id in seen:
            call = replace(call, id=new_call_id())
        seen.add(call.id)
        run.append(call)
        stored.append(call if _is_json_object(call.arguments) else replace(call, arguments="{}"))
    return run, tuple(stored)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, ModelError):
        return text or "The model request failed."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
