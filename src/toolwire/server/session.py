"""A request's life in the gateway, written once for every front door.

A door is a reader and writers (`Door`): its protocol → the door's request (every client
mistake a 400 naming the field), and neutral events → its wire, streamed or whole. The
door's route calls `serve(request, door)`; the session owns everything in between:

- the key, the body, the model id;
- without server tools, one model turn passed through (`Turn`, with the door's
  `TurnWriter`);
- with them, a run (`Session`, with the door's `RunWriter`): restoring the gateway's
  memory of its earlier steps, running or resuming the agent, waiting in an open stream
  for approval decisions (`approvals.wait_seconds`), remembering the new steps,
  finishing;
- mapping failures: before the first byte to an HTTP status (the door's error handler
  answers it in its shape), after it to the protocol's last event.

Nothing is sent before the first event of the model or the run, so an upstream refusing
the request or a store that is down still gets a real status. The Responses door keeps
its own reading (stored responses, `previous_response_id`, approval answers) and hands
the session a `Turn` or a `Session` as the others do.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from toolwire import tracing
from toolwire.agent import AgentEvent, Done, RunConflict
from toolwire.agent.result import RunResult
from toolwire.agent.state import message_from_json, message_to_json
from toolwire.models import Model, ModelError, ModelResponse
from toolwire.models.base import ModelSettings
from toolwire.models.events import ModelDelta
from toolwire.models.messages import AssistantMessage, Message, ToolMessage
from toolwire.server.gateway import Gateway
from toolwire.server.http.errors import GatewayError, store_error, upstream_error
from toolwire.server.http.requests import read_json
from toolwire.server.http.responses import dropped_header, json_response
from toolwire.server.http.streaming import stream_response, unless_disconnected
from toolwire.server.keys.access import resume_audit, run_context
from toolwire.server.keys.caller import Caller, authenticate, gateway_of
from toolwire.server.run_view import Shown, wait_for_decisions
from toolwire.store.base import RunRecord, Store, StoreError
from toolwire.tools import ToolContext
from toolwire.tools.tool import Tool

__all__ = [
    "Answer",
    "Door",
    "Events",
    "OnDone",
    "ReadRequest",
    "Reply",
    "Run",
    "RunRequest",
    "RunWriter",
    "Session",
    "Turn",
    "TurnWriter",
    "Writer",
    "failure",
    "resume",
    "serve",
    "start",
]

logger = logging.getLogger("toolwire.server")

Events = AsyncGenerator[AgentEvent, None]
OnDone = Callable[[RunResult], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """A new run as every door asks for it."""

    door: str
    """The door's name, kept in the run's state: a resume answers in its protocol."""
    model: str
    messages: tuple[Message, ...]
    """The client's conversation; the gateway's remembered steps are put back into it."""
    tools: tuple[Tool, ...]
    settings: ModelSettings
    stream: bool
    prefix: tuple[Message, ...] = ()
    """What the run starts with before `messages`, as is (instructions, a stored history)."""


class ReadRequest(Protocol):
    """What a door's reader made of a request, as far as a run needs it."""

    @property
    def model(self) -> str: ...

    @property
    def messages(self) -> tuple[Message, ...]: ...

    @property
    def tools(self) -> tuple[Tool, ...]: ...

    @property
    def settings(self) -> ModelSettings: ...

    @property
    def stream(self) -> bool: ...

    @property
    def dropped_results(self) -> tuple[str, ...]:
        """The ids of orphan tool results dropped (reported in a response header)."""
        ...


End = TypeVar("End", contravariant=True)


class Writer(Protocol[End]):
    """What a request's answer is written with, in one protocol: each method returns the
    bytes to send (empty when there are none, as when not streaming). `End` is what the
    answer ends with: a run's result, or a model turn's response."""

    @property
    def streaming(self) -> bool: ...

    def opening(self) -> bytes: ...

    def close(self, done: End) -> bytes:
        """A stream's last content, before the answer is kept (`on_done`)."""
        ...

    def end(self, done: End) -> bytes:
        """A stream's last bytes, once it is kept."""
        ...

    def failed(self, error: GatewayError) -> bytes:
        """The last event of a stream that failed after it started."""
        ...

    def whole(self, done: End) -> dict[str, Any]:
        """The whole answer, not streamed."""
        ...


class RunWriter(Writer[RunResult], Protocol):
    """A run's neutral events → one protocol's wire."""

    def event(self, event: AgentEvent) -> bytes: ...


class TurnWriter(Writer[ModelResponse], Protocol):
    """One model turn → one protocol's wire, for a gateway without server tools: its
    deltas pass through as the upstream writes them."""

    def delta(self, event: ModelDelta) -> bytes: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """How a run's answer is written, whichever door writes it."""

    model: str
    """The model id the answer names (as the client sent it)."""
    stream: bool
    include_usage: bool = False
    """Chat Completions' `stream_options.include_usage`: end a stream with its usage."""
    thinking: bool = False
    """Anthropic's extended thinking: reasoning is shown as `thinking` blocks."""


R = TypeVar("R", bound=ReadRequest)


@dataclass(frozen=True, slots=True)
class Door(Generic[R]):
    """A front door as the session sees it: how its protocol is read and written.

    `read` turns a request body into the door's request (every client mistake a 400
    naming the field); `writer` writes a run's events in the protocol, and `turn` one
    model turn's (a gateway without server tools passes the upstream's answer through).
    """

    name: str
    """The door's name, kept in a run's state: a resume answers in its protocol."""
    read: Callable[[Any, Gateway], R]
    reply: Callable[[R], Reply]
    writer: Callable[[Shown, Reply], RunWriter]
    turn: Callable[[Reply], TurnWriter]
    shutdown_event: Callable[[str], bytes]
    """The event that ends a stream the gateway's drain interrupted."""
    headers: Callable[[R, ToolContext], dict[str, str]] | None = None
    """The door's own response headers, besides the dropped tool results'."""


async def serve(request: Request, door: Door[Any]) -> Response:
    """One request through a door, from the key to the last byte.

    Raises:
        GatewayError: Before the first byte: the key, the body, the model, the upstream
            or the store refused (the door's error handler answers in its shape).
    """
    caller = authenticate(request)
    gateway = gateway_of(request)
    data = await read_json(request, limit=gateway.config.limits.max_body_bytes)
    read = door.read(data, gateway)
    request.state.model = read.model  # for the access log and metrics
    model = gateway.models.get(read.model)
    if model is None:
        raise gateway.unknown_model(read.model)
    headers = dropped_header(read.dropped_results)
    if door.headers is not None:
        headers.update(door.headers(read, caller.ctx))
    reply = door.reply(read)
    answer: Answer
    if not gateway.server_tool_names:
        answer = Turn(gateway, model, read.messages, read.tools, read.settings, door.turn(reply))
    else:
        new = RunRequest(
            door=door.name,
            model=read.model,
            messages=read.messages,
            tools=read.tools,
            settings=read.settings,
            stream=read.stream,
        )
        run = await start(gateway, caller.ctx, new)
        answer = Session(gateway, run, door.writer(gateway.shown_arguments, reply))
    return await answer.respond(request, headers, door.shutdown_event)


@dataclass(slots=True)
class Run:
    """A run's events, what keeps its result, and how a paused stream goes on."""

    events: Events
    stream: bool
    """Whether the run streams (its answer is streamed too)."""
    on_done: OnDone | None = None
    resume: Callable[[str], Events] | None = None
    """Continues the paused run by id in the same stream; set when a stream may wait for
    approval decisions."""


async def start(gateway: Gateway, ctx: ToolContext, req: RunRequest) -> Run:
    """A new agent run; its steps are remembered when it hands client calls back.

    Raises:
        GatewayError: The store failed.
    """
    try:
        await gateway.ready()
        restored = await _restore_steps(gateway.store, ctx.principal, req.messages)
    except StoreError as exc:
        raise store_error(exc) from None
    messages = (*req.prefix, *restored)
    agent = gateway.agents[req.model]
    events = agent.run_stream(
        messages,
        ctx,
        stream=req.stream,
        settings=req.settings,
        client_tools=req.tools,
        model_id=req.model,
        unknown_calls_to_client=gateway.config.dialect == "tool_request",
        door=req.door,
    )

    async def remember(result: RunResult) -> None:
        ttl = gateway.config.memory_ttl
        await _remember_steps(gateway.store, ctx.principal, result, len(messages), ttl)

    def go_on(run_id: str) -> Events:
        return agent.resume_stream(run_id, None, ctx, stream=True)

    return Run(events, req.stream, remember, go_on if req.stream else None)


async def resume(
    gateway: Gateway, caller: Caller, record: RunRecord, *, stream: bool, not_routed: GatewayError
) -> Run:
    """Continue a stored run once its approvals are decided. Its tools run for whoever
    started it, with that key's scopes; the resume is audited before anything runs.

    Args:
        not_routed: The error when the run's model is no longer routed here.

    Raises:
        GatewayError: The run cannot be resumed (409), or the store failed.
    """
    agent = gateway.agents.get(record.model or "")
    if agent is None:
        raise not_routed
    ctx = run_context(gateway.keyring, caller, record.owner)
    try:
        # Before anything runs: a failed write changes nothing.
        await gateway.store.append_audit(resume_audit(record, caller, ctx))
    except StoreError as exc:
        raise store_error(exc) from None
    events = agent.resume_stream(record.id, None, ctx, stream=stream)
    try:
        # The claim and the decision checks happen before the first event.
        first = await anext(events)
    except RunConflict as exc:
        raise GatewayError(409, str(exc), code="run_not_resumable") from None
    except StoreError as exc:
        raise store_error(exc) from None

    async def replay() -> Events:
        async with contextlib.aclosing(events):
            yield first
            async for event in events:
                yield event

    async def remember(result: RunResult) -> None:
        # Client calls handed back after server tools ran (a turn that also asked for
        # approval): the client's next request must find the server steps again.
        ttl = gateway.config.memory_ttl
        await _remember_steps(gateway.store, record.owner, result, result.input_messages, ttl)

    return Run(replay(), stream, remember)


class Answer:
    """What a request is answered with: a stream, or one whole body."""

    streaming: bool

    async def respond(
        self, request: Request, headers: dict[str, str], on_shutdown: Callable[[str], bytes]
    ) -> Response:
        """The HTTP answer: the stream (ended by `on_shutdown`'s event if the gateway
        drains), or the whole answer unless the client left first."""
        if self.streaming:
            return await stream_response(self.stream(), headers, request, on_shutdown=on_shutdown)
        return json_response(await unless_disconnected(request, self.whole()), headers=headers)

    def stream(self) -> AsyncIterator[bytes]:
        raise NotImplementedError

    async def whole(self) -> dict[str, Any]:
        raise NotImplementedError


class Turn(Answer):
    """One model turn through a door's `TurnWriter`: a gateway without server tools.

    The one copy of the pass-through rules: nothing is sent before the upstream's first
    event (a refusal keeps its real status), a failure after it ends the stream with the
    protocol's error event, and an upstream that stops without its final response is an
    error, never a truncated answer.
    """

    def __init__(
        self,
        gateway: Gateway,
        model: Model,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings,
        writer: TurnWriter,
        on_done: Callable[[ModelResponse], Awaitable[None]] | None = None,
    ) -> None:
        """
        Args:
            on_done: Keeps the turn (a stored response) before its last bytes go out.
        """
        self.gateway = gateway
        self.model = model
        self.messages = messages
        self.tools = tools
        self.settings = settings
        self.writer = writer
        self.on_done = on_done
        self.streaming = writer.streaming

    async def whole(self) -> dict[str, Any]:
        """The whole answer.

        Raises:
            GatewayError: The upstream or the store failed.
        """
        started = time.time_ns()
        try:
            response = await self.model.complete(self.messages, self.tools, self.settings)
        except ModelError as exc:
            raise upstream_error(exc, self.gateway.redact) from None
        _traced(self.model, started, response)
        body = self.writer.whole(response)
        if self.on_done is not None:
            await self._keep(response)
        return body

    async def stream(self) -> AsyncIterator[bytes]:
        """The answer's bytes as the upstream writes them."""
        writer = self.writer
        started = time.time_ns()
        events = self.model.stream(self.messages, self.tools, self.settings)
        opened = False
        response: ModelResponse | None = None
        try:
            async for event in events:
                if isinstance(event, ModelResponse):
                    response = event
                    break
                if opened:
                    chunk = writer.delta(event)
                else:
                    opened = True
                    chunk = writer.opening() + writer.delta(event)
                if chunk:
                    yield chunk
        except ModelError as exc:
            error = upstream_error(exc, self.gateway.redact)
            if not opened:
                raise error from None
            logger.warning("upstream failed mid-stream: %s", error.message)
            yield writer.failed(error)
            return
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        if response is None:
            early = GatewayError(502, "The upstream ended its answer early.", type="upstream_error")
            if not opened:
                raise early
            yield writer.failed(early)
            return
        _traced(self.model, started, response)
        out = (b"" if opened else writer.opening()) + writer.close(response)
        if self.on_done is not None:
            try:
                await self._keep(response)
            except GatewayError as error:
                yield out + writer.failed(error)
                return
        yield out + writer.end(response)

    async def _keep(self, response: ModelResponse) -> None:
        assert self.on_done is not None
        try:
            await self.on_done(response)
        except StoreError as exc:
            raise store_error(exc) from None


def _traced(model: Model, started: int, response: ModelResponse) -> None:
    if not tracing.enabled():
        return
    usage = response.usage
    tracing.model_turn(
        model.name, started, response.finish_reason, usage.input_tokens, usage.output_tokens
    )


class Session(Answer):
    """One run through one writer; keeps the run's result."""

    def __init__(self, gateway: Gateway, run: Run, writer: RunWriter) -> None:
        self.gateway = gateway
        self.run = run
        self.writer = writer
        self.result: RunResult | None = None
        self.streaming = writer.streaming

    async def whole(self) -> dict[str, Any]:
        """The whole answer.

        Raises:
            GatewayError: The upstream or the store failed.
        """
        async for _ in self.stream():
            pass
        assert self.result is not None
        return self.writer.whole(self.result)

    async def stream(self) -> AsyncIterator[bytes]:
        """The answer's bytes as the run goes."""
        gateway, run, writer = self.gateway, self.run, self.writer
        events = run.events
        opened = False
        while True:
            final: RunResult | None = None
            async with contextlib.aclosing(events):
                async for event in events:
                    if isinstance(event, Done):
                        if event.exception is not None:
                            error = failure(gateway, event.exception)
                            if not (opened and writer.streaming):
                                raise error
                            logger.warning(
                                "run failed mid-stream: %s", gateway.redact(event.error or "")
                            )
                            yield writer.failed(error)
                            return
                        final = event.result
                        break
                    chunk = b""
                    if not opened:
                        opened = True
                        chunk = writer.opening()
                    chunk += writer.event(event)
                    if chunk:
                        yield chunk
            assert final is not None
            head = b""
            if not opened:
                opened = True
                head = writer.opening()
            wait = gateway.config.approvals.wait_seconds
            if (
                final.status == "awaiting_approval"
                and run.resume is not None
                and wait > 0
                and await wait_for_decisions(gateway, final, wait)
            ):
                # Decided while the client waited: go on in the same stream.
                if head:
                    yield head
                events = run.resume(final.run_id)
                continue
            tail = head + writer.close(final)
            if run.on_done is not None:
                try:
                    await run.on_done(final)
                except StoreError as exc:
                    error = store_error(exc)
                    if not writer.streaming:
                        raise error from None
                    yield tail + writer.failed(error)
                    return
            self.result = final
            yield tail + writer.end(final)
            return


def failure(gateway: Gateway, exc: BaseException) -> GatewayError:
    """What a client is told of a run's failure."""
    if isinstance(exc, ModelError):
        return upstream_error(exc, gateway.redact)
    if isinstance(exc, StoreError):
        return store_error(exc)
    if isinstance(exc, GatewayError):
        return exc
    logger.error("run failed", exc_info=exc)
    return GatewayError(
        500, "The gateway failed while running the request; see its log.", type="server_error"
    )


# --- the gateway's memory of its own steps between a client's requests ----------------


def _key(principal: str | None, call_id: str) -> str:
    owner = hashlib.sha256((principal or "").encode()).hexdigest()[:16]
    return f"steps:{owner}:{call_id}"


async def _remember_steps(
    store: Store, principal: str | None, result: RunResult, first: int, ttl: float
) -> None:
    """Keep the run's own messages (from index `first`) when it handed client calls back
    after server tools ran."""
    if result.status != "client_tool_calls" or not result.client_calls:
        return
    steps = result.messages[first:]
    if not any(isinstance(m, ToolMessage) for m in steps):
        return  # no server tool ran: the client's transcript misses nothing
    await store.remember(
        _key(principal, result.client_calls[0].id),
        {
            "client_calls": [c.id for c in result.client_calls],
            "messages": [message_to_json(m) for m in steps],
        },
        ttl,
    )


async def _restore_steps(
    store: Store, principal: str | None, messages: Sequence[Message]
) -> tuple[Message, ...]:
    """`messages` with each assistant message the gateway answered with after its own
    steps replaced by those steps (the server calls, their results, the whole turn)."""
    out: list[Message] = []
    changed = False
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            remembered = await store.recall(_key(principal, ids[0]))
            if remembered is not None and remembered.get("client_calls") == ids:
                out.extend(message_from_json(m) for m in remembered["messages"])
                changed = True
                continue
        out.append(message)
    return tuple(out) if changed else tuple(messages)
