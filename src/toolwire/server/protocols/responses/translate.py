"""Events → a response: one model turn (the direct path) or an agent run (server tools).

Both are async generators of SSE bytes written by a `ResponseWriter`; not streaming,
they yield nothing and `collect` takes the whole response from the writer. Nothing is
sent before the first event of the model or the run, so a failure before it (the
upstream refusing the request, the store down) still gets a real HTTP status; a failure
after it ends the stream with `response.failed`.

`on_done` runs before the last event: a response is stored before the client can name
it in `previous_response_id`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from toolwire.agent import AgentEvent, TextDelta, ToolCallResult, ToolCallStart
from toolwire.agent.result import RunResult
from toolwire.models import (
    AssistantMessage,
    FinishReason,
    Model,
    ModelContentDelta,
    ModelError,
    ModelResponse,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.base import ModelSettings
from toolwire.models.messages import Message, Usage
from toolwire.server.http.errors import GatewayError, store_error, upstream_error
from toolwire.server.protocols.responses.wire import (
    ResponseWriter,
    approval_request_item,
    mcp_call_item,
)
from toolwire.server.run_view import Shown
from toolwire.store.base import StoreError
from toolwire.tools.tool import Tool

__all__ = ["CallInfo", "ResponsesRunWriter", "collect", "model_response"]

logger = logging.getLogger("toolwire.server")

CallInfo = tuple[str, str, str | None]
"""A server call as its `mcp_call` item shows it: name, arguments, approval id."""


async def collect(body: AsyncIterator[bytes], writer: ResponseWriter) -> dict[str, Any]:
    """Run a non-streaming body to its end: the whole response."""
    async for _ in body:
        pass
    assert writer.response is not None
    return writer.response


async def model_response(
    model: Model,
    messages: tuple[Message, ...],
    tools: tuple[Tool, ...],
    settings: ModelSettings,
    writer: ResponseWriter,
    *,
    stream: bool,
    redact: Callable[[str], str],
    on_done: Callable[[dict[str, Any], AssistantMessage], Awaitable[None]],
) -> AsyncIterator[bytes]:
    """One model turn. Streamed, text and each call's arguments go out as they arrive."""
    opened = False
    response: ModelResponse | None = None
    ids: dict[int, str] = {}  # streamed call index → call id
    events = model.stream(messages, tools, settings) if stream else None
    try:
        if events is None:
            response = await model.complete(messages, tools, settings)
        else:
            async for event in events:
                if isinstance(event, ModelResponse):
                    response = event
                    break
                chunk = b"" if opened else writer.opening()
                opened = True
                if isinstance(event, ModelContentDelta):
                    chunk += writer.text(event.text)
                elif isinstance(event, ModelToolCallStart):
                    ids[event.index] = event.id
                    chunk += writer.call_start(event.id, event.name)
                elif (
                    isinstance(event, ModelToolCallArgsDelta) and event.text and event.index in ids
                ):
                    chunk += writer.call_arguments(ids[event.index], event.text)
                if chunk:
                    yield chunk
    except ModelError as exc:
        error = upstream_error(exc, redact)
        if not opened:
            raise error from None
        logger.warning("upstream failed mid-stream: %s", error.message)
        yield writer.failed(error.message)
        return
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    if response is None:
        error = GatewayError(502, "The upstream ended its answer early.", type="upstream_error")
        if not opened:
            raise error
        yield writer.failed(error.message)
        return
    out = b"" if opened else writer.opening()
    message = response.message
    if events is None and message.content:
        out += writer.text(message.content)
    streamed = set(writer.streaming_calls())
    for call in message.tool_calls:
        if call.id in streamed:
            out += writer.call_done(call.id, call.arguments)
        else:
            out += writer.function_call(call.id, call.name, call.arguments)
    incomplete = _incomplete(response.finish_reason)
    out += writer.finish(incomplete=incomplete is not None)
    if not message.tool_calls:
        out += writer.answer()
    final = writer.final(response.usage, incomplete=incomplete)
    try:
        await on_done(final, message)
    except StoreError as exc:
        failure = store_error(exc)
        if writer.streaming:
            yield out + writer.failed(failure.message)
            return
        raise failure from None
    yield out + writer.completed(final)


class ResponsesRunWriter:
    """An agent run as a response: its text as message items (one per model turn), the
    server tools it ran as `mcp_call` items, then the client's calls as `function_call`
    items or the calls waiting for approval as `mcp_approval_request` items."""

    def __init__(
        self, writer: ResponseWriter, shown: Shown, calls: Mapping[str, CallInfo] | None = None
    ) -> None:
        """
        Args:
            shown: The arguments as items may show them (redacted).
            calls: Calls the run may report results of without starting them: a resumed
                run's approved calls, by call id (their arguments already as shown).
        """
        self.writer = writer
        self.shown = shown
        self.known: dict[str, CallInfo] = dict(calls or {})
        self.response: dict[str, Any] | None = None
        """The whole response, once the run is closed (what `on_done` keeps)."""

    @property
    def streaming(self) -> bool:
        return self.writer.streaming

    def opening(self) -> bytes:
        return self.writer.opening()

    def event(self, event: AgentEvent) -> bytes:
        writer = self.writer
        if isinstance(event, TextDelta):
            return writer.text(event.text)
        if isinstance(event, ToolCallStart):
            shown = self.shown(event.name, event.arguments)
            self.known[event.call_id] = (event.name, shown, None)
            return writer.close_message()
        if isinstance(event, ToolCallResult):
            done = event.result
            if done.error is None or done.error.code != "awaiting_approval":
                name, arguments, approval_id = self.known.get(done.call_id, (done.name, "{}", None))
                return writer.item(mcp_call_item(name, arguments, done, approval_id))
        return b""

    def close(self, result: RunResult) -> bytes:
        writer = self.writer
        out = writer.close_message()
        for call in result.client_calls if result.status == "client_tool_calls" else ():
            out += writer.function_call(call.id, call.name, call.arguments)
        for approval in result.approvals if result.status == "awaiting_approval" else ():
            visible = replace(approval, arguments=self.shown(approval.tool, approval.arguments))
            out += writer.item(approval_request_item(visible))
        incomplete: str | None = None
        if result.status == "completed":
            last = result.steps[-1].response if result.steps else None
            incomplete = _incomplete(last.finish_reason) if last is not None else None
            out += writer.finish(incomplete=incomplete is not None) + writer.answer()
        elif result.status not in ("client_tool_calls", "awaiting_approval"):
            # max_iterations: say why the run stopped, as the chat endpoint does.
            out += writer.text(result.output) + writer.finish()
        extension: dict[str, Any] = {"status": result.status}
        if result.status == "awaiting_approval":
            extension["run_id"] = result.run_id
        usage = Usage()
        for step in result.steps[result.first_step :]:
            usage.add(step.response.usage)
        self.response = writer.final(usage, incomplete=incomplete, extension=extension)
        return out

    def end(self, result: RunResult) -> bytes:
        assert self.response is not None
        return self.writer.completed(self.response)

    def failed(self, error: GatewayError) -> bytes:
        return self.writer.failed(error.message)

    def whole(self, result: RunResult) -> dict[str, Any]:
        assert self.writer.response is not None
        return self.writer.response


def _incomplete(reason: FinishReason) -> str | None:
    """Why a model turn stopped early, as `incomplete_details.reason` says it."""
    if reason == "length":
        return "max_output_tokens"
    if reason == "content_filter":
        return "content_filter"
    return None
