"""Events → a response: one model turn (the direct path, `ResponsesTurnWriter`) or an
agent run (server tools, `ResponsesRunWriter`), written by a `ResponseWriter` as the
session (`toolwire.server.session`) drives them. The session keeps a response before its
last event, so it is stored before the client can name it in `previous_response_id`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolwire.agent import AgentEvent, TextDelta, ToolCallResult, ToolCallStart
from toolwire.agent.result import RunResult
from toolwire.models import (
    FinishReason,
    ModelContentDelta,
    ModelDelta,
    ModelResponse,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.messages import Usage
from toolwire.server.http.errors import GatewayError
from toolwire.server.protocols.responses.wire import (
    ResponseWriter,
    approval_request_item,
    mcp_call_item,
)
from toolwire.server.run_view import Shown

__all__ = ["CallInfo", "ResponsesRunWriter", "ResponsesTurnWriter"]

logger = logging.getLogger("toolwire.server")

CallInfo = tuple[str, str, str | None]
"""A server call as its `mcp_call` item shows it: name, arguments, approval id."""


class ResponsesTurnWriter:
    """One model turn as a response. Streamed, text and each call's arguments go out as
    they arrive; the whole response is `response` once the turn is closed (what a stored
    response keeps)."""

    def __init__(self, writer: ResponseWriter) -> None:
        self.writer = writer
        self.streaming = writer.streaming
        self.ids: dict[int, str] = {}
        """Streamed call index → call id."""
        self.response: dict[str, Any] | None = None

    def opening(self) -> bytes:
        return self.writer.opening()

    def delta(self, event: ModelDelta) -> bytes:
        writer = self.writer
        if isinstance(event, ModelContentDelta):
            return writer.text(event.text)
        if isinstance(event, ModelToolCallStart):
            self.ids[event.index] = event.id
            return writer.call_start(event.id, event.name)
        if isinstance(event, ModelToolCallArgsDelta) and event.text and event.index in self.ids:
            return writer.call_arguments(self.ids[event.index], event.text)
        return b""

    def close(self, response: ModelResponse) -> bytes:
        writer = self.writer
        message = response.message
        out = b""
        if not writer.streaming and message.content:
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
        self.response = writer.final(response.usage, incomplete=incomplete)
        return out

    def end(self, response: ModelResponse) -> bytes:
        assert self.response is not None
        return self.writer.completed(self.response)

    def failed(self, error: GatewayError) -> bytes:
        return self.writer.failed(error.message)

    def whole(self, response: ModelResponse) -> dict[str, Any]:
        self.opening()
        self.close(response)
        self.end(response)
        assert self.writer.response is not None
        return self.writer.response


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
                return writer.mcp_call(mcp_call_item(name, arguments, done, approval_id))
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
