"""`Agent`: the bounded loop model → tools → model, as a stream of events."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from toolwire import tracing
from toolwire.agent.claim import Resolved, RunConflict
from toolwire.agent.claim import claim as take
from toolwire.agent.events import (
    AgentEvent,
    ApprovalRequired,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.agent.journal import RunJournal
from toolwire.agent.result import PendingApproval, RunResult, Step
from toolwire.agent.state import Decision, RunState
from toolwire.models import ModelContentDelta, ModelReasoningDelta
from toolwire.models.base import Model, ModelError, ModelResponse, ModelSettings
from toolwire.models.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.runner import Approver, Policy, ToolRunner
from toolwire.runner.audit import Grant, redact_arguments_json
from toolwire.store.base import (
    Store,
    StoreError,
    arguments_hash,
    canonical_json,
)
from toolwire.tools.call import ToolCall, ToolResult, new_call_id
from toolwire.tools.context import ToolContext
from toolwire.tools.provider import AnyToolProvider, ToolProvider, as_provider
from toolwire.tools.tool import Tool
from toolwire.tools.toolbox import Toolbox

__all__ = ["Agent", "RunConflict", "RunInterrupted"]


class RunInterrupted(StoreError):
    """The store failed after tools that change something had run: the run cannot go on,
    and repeating the request would run them again (so this is never `StoreUnavailable`,
    which a gateway answers as retryable)."""


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
        store: Where paused runs, their approvals and runs executing write or
            destructive tools are kept, so `resume(run_id, ...)` works after a restart
            and from another process. Without one, resume from `RunResult.state`.
        approval_ttl: Seconds a pending approval stays valid (stored runs).
        max_tool_calls: Tool calls one model turn may make; the calls past it are not run
            (the model gets a `too_many_calls` result for each).
    """

    def __init__(
        self,
        model: Model,
        tools: AnyToolProvider | Sequence[Callable[..., Any] | Tool | AnyToolProvider],
        *,
        instructions: str | None = None,
        max_iterations: int = 5,
        policy: Policy | None = None,
        approver: Approver | None = None,
        settings: ModelSettings | None = None,
        runner: ToolRunner | None = None,
        store: Store | None = None,
        approval_ttl: float = 3600.0,
        max_tool_calls: int = 64,
    ) -> None:
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, not {max_iterations}.")
        if max_tool_calls < 1:
            raise ValueError(f"max_tool_calls must be at least 1, not {max_tool_calls}.")
        self.max_tool_calls = max_tool_calls
        self.model = model
        # A list becomes a Toolbox; a provider (either shape) is used as it is, adapted.
        self.provider: ToolProvider = (
            Toolbox(tools) if isinstance(tools, Sequence) else as_provider(tools)
        )
        self.instructions = instructions
        self.max_iterations = max_iterations
        self.approver = approver
        self.settings = settings
        if runner is not None and policy is not None:
            raise ValueError("Give either runner= or policy=, not both: the runner has a policy.")
        self.runner = runner or ToolRunner(self.provider, policy=policy or Policy(), audit=store)
        self.store = store
        self.approval_ttl = approval_ttl

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
        model_id: str | None = None,
        unknown_calls_to_client: bool = False,
        door: str = "",
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
            model_id: The name the run is listed under in the store (a gateway's public
                model id); the model's own name by default.
            unknown_calls_to_client: Hand calls to tools the agent does not have back to
                the caller as client calls instead of answering them `unknown_tool` (the
                caller owns every tool it did not give the agent).
            door: The gateway front door the run started on, kept in its state so a
                resume answers in that door's protocol.
        """
        ctx = ctx if ctx is not None else ToolContext()
        if ctx.run_id is None:
            ctx.run_id = "run_" + uuid.uuid4().hex
        messages = self._start(input)
        run = _Run(
            state=RunState(
                run_id=ctx.run_id,
                status="completed",
                output="",
                messages=messages,
                input_messages=len(messages),
                client_tools=list(client_tools),
                settings=settings if settings is not None else self.settings,
                unknown_calls_to_client=unknown_calls_to_client,
                door=door,
            ),
            ctx=ctx,
            journal=self._journal(ctx, model_id),
        )
        # Closed here when the consumer stops (after `Done`, or early): left to the
        # collector, an unfinished async generator is closed by a task the loop schedules
        # through `call_soon_threadsafe`, an eventfd write and a wake-up per run.
        async with contextlib.aclosing(self._drive(run, self._loop(run, stream))) as events:
            async for event in events:
                yield event

    async def resume(
        self,
        run: str | RunState | RunResult,
        decisions: Mapping[str, Decision] | None = None,
        ctx: ToolContext | None = None,
        *,
        stream: bool = False,
    ) -> RunResult:
        """Continue a run that stopped with `awaiting_approval`, once people decided.

        Approved calls run exactly once, with exactly the arguments that were approved;
        denied ones reach the model as `denied` results; then the loop goes on (with a
        fresh `max_iterations` budget) until the model answers or pauses again.

        Args:
            run: The run's id (needs the agent's `store`), its `RunState`, or the
                `RunResult` it ended with.
            decisions: Per approval id (or tool-call id): `True` / `"approve"`, `False` /
                `"deny"`, or an `ApprovalDecision` with a reason. With a store, approvals
                decided there (the gateway's approval API) need no entry here.
            ctx: Who resumes (scopes, token for HTTP tools); a fresh context by default.
            stream: Ask the model to stream its turns.

        Raises:
            RunConflict: The run is not waiting for approvals (already resumed or
                finished, unknown), or an approval has no decision yet.
            ModelError: The model endpoint failed.
        """
        done: Done | None = None
        async for event in self.resume_stream(run, decisions, ctx, stream=stream):
            if isinstance(event, Done):
                done = event
        assert done is not None
        if done.exception is not None:
            raise done.exception
        return done.result

    async def resume_stream(
        self,
        run: str | RunState | RunResult,
        decisions: Mapping[str, Decision] | None = None,
        ctx: ToolContext | None = None,
        *,
        stream: bool = True,
    ) -> AsyncGenerator[AgentEvent, None]:
        """`resume` as a stream of events (the approved calls' results first), ending
        with exactly one `Done`.

        Raises:
            RunConflict: Before the first event, as in `resume`.
        """
        claim = await take(self.store, run, decisions or {})
        state, record = claim.state, claim.record
        ctx = ctx if ctx is not None else ToolContext()
        ctx.run_id = state.run_id
        journal = self._journal(ctx, record.model if record is not None else None, claim.holder)
        if journal is not None and record is not None:
            # The run keeps its owner, model and start time whoever resumes it.
            journal.owner, journal.created_at = record.owner, record.created_at
            journal.written = True
            journal.hold(state)
        resolved = claim.resolved
        active = _Run(state=state, ctx=ctx, journal=journal, first_step=len(state.steps))
        driven = self._drive(active, self._continue(active, resolved, stream))
        async with contextlib.aclosing(driven) as events:
            async for event in events:
                yield event

    def _journal(
        self, ctx: ToolContext, model_id: str | None, holder: str | None = None
    ) -> RunJournal | None:
        if self.store is None:
            return None
        return RunJournal(
            self.store,
            owner=ctx.principal,
            model=model_id or self.model.name,
            approval_ttl=self.approval_ttl,
            holder=holder,
        )

    async def _drive(
        self, run: _Run, events: AsyncGenerator[AgentEvent, None]
    ) -> AsyncGenerator[AgentEvent, None]:
        """Yield a loop's events and then exactly one `Done`, after committing the run."""
        state = run.state
        ended = False
        try:
            async with contextlib.aclosing(events) as loop_events:
                async for event in loop_events:
                    yield event
            ended = True
            if run.journal is not None:
                if state.status == "awaiting_approval":
                    await run.journal.paused(state)
                    waiting = {a.id for a in state.approvals}
                    for event in run.announce:
                        if event.approval is not None and event.approval.id in waiting:
                            yield event
                else:
                    await run.journal.finished(state)
        except StoreError as exc:
            if run.effects and ended and state.status != "awaiting_approval":
                # Only the run's last record failed and the answer stands: a retry would
                # run the tools again, so the record is written late instead.
                assert run.journal is not None
                run.journal.finish_late(state, exc)
                yield Done(result=run.result())
                return
            if run.effects:
                # Tools that change something ran: the failure must not read as the
                # store's retryable one (a retry would run them again).
                exc = RunInterrupted(
                    f"Run {state.run_id!r} stopped: the state store failed after tools that "
                    f"change something had run ({_one_line(exc)}). Do not repeat the request "
                    "as it is: the audit log shows what ran, and the run reads as interrupted."
                )
            state.status, state.output = "error", _one_line(exc)
            yield Done(result=run.result(), error=_one_line(exc), exception=exc)
            return
        except Exception as exc:  # the contract: the stream ends with Done, never raises
            state.status, state.output = "error", _one_line(exc)
            if run.journal is not None and run.journal.written:
                with contextlib.suppress(Exception):
                    await run.journal.finished(state)
            yield Done(result=run.result(), error=_one_line(exc), exception=exc)
            return
        finally:
            if run.journal is not None:
                run.journal.release()
        yield Done(result=run.result())

    def _start(self, input: str | Sequence[Message]) -> list[Message]:
        messages: list[Message] = (
            [UserMessage(content=input)] if isinstance(input, str) else list(input)
        )
        if self.instructions and not (messages and isinstance(messages[0], SystemMessage)):
            messages.insert(0, SystemMessage(content=self.instructions))
        return messages

    async def _tools(
        self, state: RunState, ctx: ToolContext
    ) -> tuple[list[Tool], dict[str, Tool], set[str]]:
        """The tools to offer the model, every agent tool by name, and the client's names.

        Tools whose scopes the caller lacks are not offered (a call to one would only be
        refused as `forbidden`), so the model never learns of them.
        """
        server_tools = await self.runner.list_tools()
        by_name = {t.name: t for t in server_tools}
        offered = [t for t in server_tools if not t.scopes or ctx.scopes.issuperset(t.scopes)]
        client_names = {t.name for t in state.client_tools}
        clash = client_names & by_name.keys()
        if clash:
            raise ValueError(
                f"Client tool(s) {', '.join(sorted(clash))} have the same name as the agent's "
                "own tools; rename them."
            )
        return [*offered, *state.client_tools], by_name, client_names

    async def _loop(self, run: _Run, stream: bool) -> AsyncGenerator[AgentEvent, None]:
        """Model turn → its calls split (agent, client, past the cap) → agent calls run →
        results recorded → stop (answer, approvals, client calls) or the next turn."""
        state = run.state
        tools, by_name, client_names = await self._tools(state, run.ctx)
        for _ in range(self.max_iterations):
            response: ModelResponse | None = None
            started = time.time_ns()
            if stream:
                turn_events = self._stream_turn(state.messages, tools, state.settings)
                async with contextlib.aclosing(turn_events) as turn:
                    async for item in turn:
                        if isinstance(item, ModelResponse):
                            response = item
                        else:
                            yield item
            else:
                response = await self.model.complete(state.messages, tools, state.settings)
                for event in _answer_events(response.message):
                    yield event
            assert response is not None
            _trace_turn(self.model.name, started, response)
            state.usage.add(response.usage)
            step = Step(response=response)
            state.steps.append(step)
            if not response.message.tool_calls:
                state.messages.append(response.message)
                state.status, state.output = "completed", response.message.content or ""
                return
            calls, client_calls, over = self._take_calls(state, response, by_name, client_names)
            approvals: dict[str, PendingApproval] = {}
            run_events = self._run_calls(run, step, calls, by_name, approvals)
            async with contextlib.aclosing(run_events) as call_events:
                async for event in call_events:
                    yield event
            pending: list[ToolCall] = []
            for event in self._record_results(state, step, calls, over, pending):
                yield event
            if _pause(state, pending, approvals, client_calls):
                return
        n = self.max_iterations
        state.status = "max_iterations"
        state.output = (
            f"Stopped after {n} iteration(s) without a final answer: the model was still "
            f"calling tools (max_iterations={n}). The tool results so far are in the messages."
        )

    def _take_calls(
        self,
        state: RunState,
        response: ModelResponse,
        by_name: dict[str, Tool],
        client_names: set[str],
    ) -> tuple[list[ToolCall], list[ToolCall], list[ToolCall]]:
        """Keep the turn's message; split its calls into the agent's, the client's, and
        those past `max_tool_calls`."""
        settings = state.settings
        if settings is not None and settings.tool_choice not in (None, "auto", "none"):
            # A forced choice would force a call on every turn: the loop could never end.
            state.settings = replace(settings, tool_choice="auto")
        message = response.message
        all_calls, stored = _prepare_calls(message.tool_calls)
        # The message is frozen: when its calls are kept as they are, it is kept itself.
        state.messages.append(
            message if stored is message.tool_calls else replace(message, tool_calls=stored)
        )
        limit = self.max_tool_calls
        over = all_calls[limit:]
        all_calls = all_calls[:limit]
        foreign = state.unknown_calls_to_client
        client_calls = [
            c for c in all_calls if c.name in client_names or (foreign and c.name not in by_name)
        ]
        calls = [c for c in all_calls if c not in client_calls]
        return calls, client_calls, over

    async def _run_calls(
        self,
        run: _Run,
        step: Step,
        calls: list[ToolCall],
        by_name: dict[str, Tool],
        approvals: dict[str, PendingApproval],
    ) -> AsyncGenerator[AgentEvent, None]:
        """Announce and run the agent's calls; their results go to `step.tool_results`."""
        for call in calls:
            yield ToolCallStart(call_id=call.id, name=call.name, arguments=call.arguments)
        if not calls:
            return
        # A name missing from the turn's list may be found when the runner lists again for
        # it, as a write or destructive tool: it is guarded and may ask, like one.
        tools = [by_name.get(c.name) for c in calls]
        changes = run.journal is not None and any(t is None or t.effects != "read" for t in tools)
        async with _guard(run, run.state) if changes else contextlib.nullcontext():
            later = run.announce if run.journal is not None else None
            if self.runner.policy.approval != "ask" or not any(
                t is None or t.effects == "destructive" for t in tools
            ):
                # Only destructive tools under approval "ask" consult an approver: no event
                # comes from every other turn's calls, which are awaited here, without the
                # event plumbing of `_run_tools` (a generator, a queue, a task).
                missed: list[ApprovalRequired] = []
                asker = _Asker(self.approver, approvals, later, missed)
                step.tool_results = await self.runner.exec_many(calls, run.ctx, approver=asker)
                for request in missed:
                    yield request
            else:
                run_events = self._run_tools(calls, run.ctx, approvals, later)
                async with contextlib.aclosing(run_events) as tool_events:
                    async for event in tool_events:
                        if isinstance(event, list):
                            step.tool_results = event
                        else:
                            yield event

    def _record_results(
        self,
        state: RunState,
        step: Step,
        calls: list[ToolCall],
        over: list[ToolCall],
        pending: list[ToolCall],
    ) -> Iterator[ToolCallResult]:
        """Each result as an event and a tool message; calls awaiting approval go to
        `pending` instead, and calls past the cap are refused."""
        for call, result in zip(calls, step.tool_results, strict=True):
            yield ToolCallResult(result=result)
            if result.error is not None and result.error.code == "awaiting_approval":
                pending.append(call)
                continue
            state.messages.append(_tool_message(call, result))
        limit = self.max_tool_calls
        for call in over:
            # Past the cap nothing runs and nothing goes to the client; the model is told.
            refused = ToolResult.fail(
                call.id,
                call.name,
                "too_many_calls",
                f"Not run: a turn may make at most {limit} tool calls and this one made "
                f"{limit + len(over)}. Make fewer calls at once; the first {limit} ran.",
            )
            step.tool_results.append(refused)
            yield ToolCallResult(result=refused)
            state.messages.append(_tool_message(call, refused))

    async def _continue(
        self,
        run: _Run,
        resolved: list[Resolved],
        stream: bool,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run (or deny) the decided calls, then go on with the loop."""
        state = run.state
        results: dict[str, ToolResult] = {}
        approved = [(c, a, d) for c, a, d in resolved if d.approve]
        changes = run.journal is not None and bool(approved)
        async with _guard(run, state) if changes else contextlib.nullcontext():
            for call, approval, decision in resolved:
                if decision.approve:
                    grant = Grant(
                        approval_id=approval.id,
                        approved_by=decision.decided_by,
                        approved_at=decision.decided_at,
                        requested_at=approval.requested_at,
                    )
                    results[call.id] = await self.runner.exec(
                        call, run.ctx, approver=_exact(approval), grant=grant
                    )
                else:
                    results[call.id] = ToolResult.fail(
                        call.id,
                        call.name,
                        "denied",
                        _denied_message(call.name, decision.reason),
                    )
        for call, _approval, _decision in resolved:
            result = results[call.id]
            yield ToolCallResult(result=result)
            state.messages.append(_tool_message(call, result))
        if state.steps:
            last = state.steps[-1]
            last.tool_results = [results.get(r.call_id, r) for r in last.tool_results]
        state.pending_calls, state.approvals = [], []
        if state.client_calls:
            state.status = "client_tool_calls"
            state.output = _client_calls_output(state.client_calls)
            return
        async for event in self._loop(run, stream):
            yield event

    async def _stream_turn(
        self, messages: list[Message], tools: list[Tool], settings: ModelSettings | None
    ) -> AsyncGenerator[AgentEvent | ModelResponse, None]:
        response: ModelResponse | None = None
        events = self.model.stream(messages, tools, settings)
        try:
            async for item in events:
                if isinstance(item, ModelContentDelta):
                    if item.text:
                        yield TextDelta(text=item.text)
                elif isinstance(item, ModelReasoningDelta):
                    if item.text:
                        yield ReasoningDelta(text=item.text)
                elif isinstance(item, ModelResponse):
                    response = item
                # ModelToolCallStart / ModelToolCallArgsDelta are progress only; the complete calls
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
        self,
        calls: list[ToolCall],
        ctx: ToolContext,
        approvals: dict[str, PendingApproval],
        later: list[ApprovalRequired] | None = None,
    ) -> AsyncGenerator[AgentEvent | list[ToolResult], None]:
        """Run one turn's calls, some of which ask an approver, yielding `ApprovalRequired`
        events, then the results.

        Every call that needs approval gets a `PendingApproval` in `approvals` (keyed by
        call id), bound to the validated arguments the runner would execute.

        Args:
            later: Where the `ApprovalRequired` events go instead, when nobody is asked on
                the spot and the run pauses in a store: they are announced once the
                approvals are stored, so an announced id can always be decided.
        """
        asker = _Asker(self.approver, approvals, later)
        queue = asker.events()
        task = asyncio.ensure_future(self.runner.exec_many(calls, ctx, approver=asker))
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


class _Asker:
    """The approver of one turn's calls: it binds a `PendingApproval` to each call it is
    asked about, then holds the call back for later (a run that pauses in a store), or
    hands the request to the stream and waits until the consumer has taken it, so whoever
    reads the stream learns about it before anyone answers it, and then asks the agent's
    own approver (if any)."""

    __slots__ = ("approvals", "later", "missed", "queue", "user")

    def __init__(
        self,
        user: Approver | None,
        approvals: dict[str, PendingApproval],
        later: list[ApprovalRequired] | None,
        missed: list[ApprovalRequired] | None = None,
    ) -> None:
        self.user = user
        self.approvals = approvals
        self.later = later
        self.missed = missed
        """Where requests go when nobody reads the stream while the calls run (a turn that
        was expected to ask nobody): they are announced once the calls are done."""
        self.queue: asyncio.Queue[tuple[ApprovalRequired, asyncio.Future[None]] | None] | None
        self.queue = None
        """The stream's requests; made when first needed (most turns ask nobody)."""

    def events(self) -> asyncio.Queue[tuple[ApprovalRequired, asyncio.Future[None]] | None]:
        if self.queue is None:
            self.queue = asyncio.Queue()
        return self.queue

    async def __call__(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
        pending = _pending(call, tool)
        self.approvals[call.id] = pending
        if self.user is None and self.later is not None:
            self.later.append(ApprovalRequired(call=call, tool=tool, approval=pending))
            return None
        event = ApprovalRequired(call=call, tool=tool, approval=pending)
        if self.missed is not None:
            # A tool that became destructive after the turn's list was taken: waiting for
            # a reader would wait forever, so it is asked now and announced after.
            self.missed.append(event)
        else:
            seen: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.events().put_nowait((event, seen))
            await seen
        if self.user is None:
            return None
        return await self.user(call, tool, ctx)


@dataclass(slots=True, kw_only=True)
class _Run:
    """A run in progress: its state, who runs it, and where it is journaled."""

    state: RunState
    ctx: ToolContext
    journal: RunJournal | None = None
    first_step: int = 0
    effects: bool = False
    """Write or destructive tools may have run: a failure from here on is not retryable."""
    announce: list[ApprovalRequired] = field(default_factory=list)
    """Approval requests held back until the run's pause is stored."""

    def result(self) -> RunResult:
        state = self.state
        paused = state.status in ("awaiting_approval", "client_tool_calls")
        return RunResult(
            output=state.output,
            messages=state.messages,
            steps=state.steps,
            status=state.status,
            usage=state.usage,
            pending_approvals=list(state.pending_calls),
            client_calls=list(state.client_calls),
            run_id=state.run_id,
            approvals=list(state.approvals),
            first_step=self.first_step,
            input_messages=state.input_messages,
            # No copy: `resume` works on its own copy of whatever it is given.
            state=state if paused else None,
        )


def _answer_events(message: AssistantMessage) -> list[AgentEvent]:
    """A non-streamed turn's reasoning and text, as a stream would have brought them."""
    events: list[AgentEvent] = []
    if message.reasoning:
        events.append(ReasoningDelta(text=message.reasoning))
    if message.content:
        events.append(TextDelta(text=message.content))
    return events


def _pause(
    state: RunState,
    pending: list[ToolCall],
    approvals: dict[str, PendingApproval],
    client_calls: list[ToolCall],
) -> bool:
    """Whether the run stops after this turn's calls (and with what status)."""
    state.pending_calls = pending
    state.approvals = [approvals[c.id] for c in pending if c.id in approvals]
    state.client_calls = client_calls
    if pending:
        # Approvals first, even beside client calls: they are stored with the run
        # and announced now; the client's calls go back once the run resumes.
        names = ", ".join(sorted({c.name for c in pending}))
        state.status = "awaiting_approval"
        state.output = f"Waiting for approval to run {names} ({len(pending)} call(s) pending)."
        return True
    if client_calls:
        state.status = "client_tool_calls"
        state.output = _client_calls_output(client_calls)
        return True
    return False


def _trace_turn(model: str, started: int, response: ModelResponse) -> None:
    usage = response.usage
    tracing.model_turn(
        model, started, response.finish_reason, usage.input_tokens, usage.output_tokens
    )


def _pending(call: ToolCall, tool: Tool) -> PendingApproval:
    arguments = orjson.loads(call.arguments)
    text = canonical_json(arguments)
    return PendingApproval(
        id="apr_" + uuid.uuid4().hex,
        call_id=call.id,
        tool=tool.name,
        arguments=text,
        shown_arguments=redact_arguments_json(tool, text),
        arguments_hash=arguments_hash(arguments),
        reason=f"{tool.name!r} is a {tool.effects} tool: a person must approve this call.",
        effects=tool.effects,
        approver=tool.approver,
        requested_at=time.time(),
    )


def _exact(approval: PendingApproval) -> Approver:
    """An approver that approves exactly the approved call with the approved arguments."""

    async def approve(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
        return (
            call.id == approval.call_id
            and tool.name == approval.tool
            and arguments_hash(orjson.loads(call.arguments)) == approval.arguments_hash
        )

    return approve


def _client_calls_output(calls: Sequence[ToolCall]) -> str:
    names = ", ".join(sorted({c.name for c in calls}))
    return f"The model called the caller's tool(s) {names}; send their results to continue."


def _denied_message(name: str, reason: str | None) -> str:
    why = f" ({reason})" if reason else ""
    return (
        f"The user denied running tool {name!r}{why}. Do not call it again with the same "
        "arguments; continue without it or ask the user what to do instead."
    )


def _tool_message(call: ToolCall, result: ToolResult) -> ToolMessage:
    return ToolMessage(
        call_id=result.call_id or call.id,
        name=call.name,
        content=result.to_model_text(),
        is_error=not result.success,
    )


@contextlib.asynccontextmanager
async def _guard(run: _Run, state: RunState) -> AsyncIterator[None]:
    """Write the run as `running` before write/destructive tools execute."""
    assert run.journal is not None
    await run.journal.executing(state)
    run.effects = True
    yield


def _prepare_calls(calls: Sequence[ToolCall]) -> tuple[list[ToolCall], tuple[ToolCall, ...]]:
    """The calls to run and the calls to keep in the history.

    Ids the model gave are kept; a missing or repeated one gets a fresh id, since results
    are matched to calls by id. In the history, arguments that are not a JSON object become
    `"{}"`: providers reject such a call on every later request, while the error result
    already tells the model what was wrong with it. When no call changed, the history's
    calls are `calls` itself.
    """
    run: list[ToolCall] = []
    stored: list[ToolCall] = []
    seen: set[str] = set()
    changed = False
    for call in calls:
        if not call.id or call.id in seen:
            call = replace(call, id=new_call_id())
            changed = True
        seen.add(call.id)
        run.append(call)
        if _is_json_object(call.arguments):
            stored.append(call)
        else:
            stored.append(replace(call, arguments="{}"))
            changed = True
    return run, tuple(stored) if changed or not isinstance(calls, tuple) else calls


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
