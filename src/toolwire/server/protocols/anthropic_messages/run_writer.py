"""The agent path of `/v1/messages`: server tools run inside the gateway.

A run's events become one assistant message, streamed or whole, through the same
`MessageWriter`. Server-tool activity goes out as `event: toolwire` events (the same
payloads as the chat endpoint's extension chunks: `tool_call`, `tool_result`,
`approval_required`, `run_status`), and a whole message carries the chat endpoint's
`toolwire` field. The model's text of every turn goes into one text block, turns apart
by a blank line, so `content[0].text` is the whole answer as on the chat endpoint. Client
tool calls end the message as `tool_use` blocks (`stop_reason: "tool_use"`).

A run paused for approval ends the message with its explanation as text and the run id
and pending approvals in `toolwire` (streams: a `run_status` event); with
`approvals.wait_seconds` set, a stream waits for the decisions and goes on in it
(the run's life is `toolwire.server.session`).
"""

from __future__ import annotations

from typing import Any

from toolwire.agent import AgentEvent, ReasoningDelta, TextDelta, ToolCallResult
from toolwire.agent.result import RunResult
from toolwire.server.http.errors import GatewayError
from toolwire.server.protocols.anthropic_messages.wire import (
    MessageWriter,
    error_body,
    stop_reason,
)
from toolwire.server.run_view import TURN_SEPARATOR, Shown, event_payload, run_extension, run_status

__all__ = ["MessagesRunWriter"]


class MessagesRunWriter:
    """A run's events through one `MessageWriter`: SSE events, or one whole message."""

    def __init__(self, shown: Shown, writer: MessageWriter) -> None:
        self.shown = shown
        self.writer = writer
        self.separate = False

    @property
    def streaming(self) -> bool:
        return self.writer.stream

    def opening(self) -> bytes:
        return self.writer.start()

    def event(self, event: AgentEvent) -> bytes:
        writer = self.writer
        out = b""
        if isinstance(event, TextDelta) and event.text:
            # A turn after tool results starts a new paragraph of the same block.
            if self.separate and writer.text_open:
                out = writer.text(TURN_SEPARATOR)
            self.separate = False
        elif isinstance(event, ToolCallResult):
            self.separate = True
        return out + _event_bytes(event, writer, self.shown)

    def close(self, result: RunResult) -> bytes:
        return b""

    def end(self, result: RunResult) -> bytes:
        writer = self.writer
        out = b""
        if result.status != "completed" and result.status != "client_tool_calls":
            out += writer.extension({"type": "run_status", **run_status(result, self.shown)})
            # The output says why the run stopped: a client that ignores the extension
            # must not get an empty answer.
            if result.output:
                if writer.text_open:
                    out += writer.text(TURN_SEPARATOR)
                out += writer.text(result.output)
        for call in result.client_calls:
            out += writer.tool_use(call)
        return out + writer.finish(_stop(result), result.usage)

    def failed(self, error: GatewayError) -> bytes:
        return MessageWriter.error(error_body(error))

    def whole(self, result: RunResult) -> dict[str, Any]:
        return self.writer.message(run_extension(result, self.shown))


def _stop(result: RunResult) -> str:
    if result.status == "client_tool_calls":
        return "tool_use"
    steps = result.steps[result.first_step :]
    if result.status == "completed" and steps:
        return stop_reason(steps[-1].response.finish_reason)
    return "end_turn"


def _event_bytes(event: AgentEvent, writer: MessageWriter, shown: Shown) -> bytes:
    if isinstance(event, TextDelta):
        return writer.text(event.text)
    if isinstance(event, ReasoningDelta):
        return writer.reasoning(event.text)
    payload = event_payload(event, shown)
    return writer.extension(payload) if payload is not None else b""
