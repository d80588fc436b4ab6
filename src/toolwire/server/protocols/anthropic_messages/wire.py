"""Anthropic Messages responses as the gateway writes them: message JSON and SSE events.

One `MessageWriter` serves a streamed and a whole response alike: it keeps the content
blocks it was given (the whole message) and, when streaming, turns each step into the
events Anthropic sends (`message_start`, `ping`, `content_block_start` /
`content_block_delta` / `content_block_stop`, `message_delta`, `message_stop`), each with
its `event:` name. So a stream and a whole response of the same run cannot disagree.

Server-tool activity is no content block: the `anthropic` SDK builds unknown block types
as text blocks with no text, and a client that sends `response.content` back would return
them. It travels instead as `event: toolwire` events (the SDK's accumulator skips event
types it does not know) and as a top-level `toolwire` field of a whole message.

A run's events (`MessagesRunWriter`, new and resumed runs alike; the run's life is
`toolwire.server.session`) become one assistant message through a `MessageWriter`. The
model's text of every turn goes into one text block, turns apart by a blank line, so
`content[0].text` is the whole answer as on the chat endpoint; client tool calls end
the message as `tool_use` blocks (`stop_reason: "tool_use"`). A run paused for approval
ends the message with its explanation as text and the run id and pending approvals in
`toolwire` (streams: a `run_status` event).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from toolwire.agent import AgentEvent, ReasoningDelta, TextDelta, ToolCallResult
from toolwire.agent.result import RunResult
from toolwire.models import (
    FinishReason,
    ModelContentDelta,
    ModelDelta,
    ModelReasoningDelta,
    ModelResponse,
    Usage,
)
from toolwire.server.http.errors import GatewayError
from toolwire.server.run_view import TURN_SEPARATOR, Shown, event_payload, run_extension, run_status
from toolwire.server.session import Reply
from toolwire.tools import ToolCall

__all__ = [
    "ERROR_TYPES",
    "MessageWriter",
    "MessagesRunWriter",
    "MessagesTurnWriter",
    "error_body",
    "error_type",
    "input_object",
    "new_message_id",
    "shutdown_event",
    "stop_reason",
    "usage_json",
]

ERROR_TYPES: Final = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "overloaded_error",
    }
)
"""The error types of Anthropic's API that the gateway answers with."""

_STATUS_TYPES: Final[Mapping[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}

_STOP_REASONS: Final[Mapping[FinishReason, str]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
    # A failed turn has already become an error on the wire.
    "error": "end_turn",
}


def new_message_id() -> str:
    return "msg_" + os.urandom(12).hex()


def stop_reason(finish: FinishReason) -> str:
    """Anthropic's `stop_reason` for a toolwire finish reason."""
    return _STOP_REASONS.get(finish, "end_turn")


def usage_json(usage: Usage) -> dict[str, int]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}


def input_object(arguments: str) -> dict[str, Any]:
    """A call's raw JSON arguments as the object a `tool_use` block's `input` must be.

    Models sometimes encode the object twice (a JSON string holding it): that is undone.
    Anything else that is not a JSON object becomes `{}`: Anthropic's clients expect an
    object, and the tool's own validation then tells the model what was missing.
    """
    try:
        value = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


def error_type(status: int, hint: str | None = None) -> str:
    """The Anthropic error type of a failure: by status first (that is what the SDK maps
    to its exception classes), then the failure's own type when it is one of Anthropic's
    (an Anthropic upstream's, relayed)."""
    known = _STATUS_TYPES.get(status)
    if known is not None:
        return known
    if hint in ERROR_TYPES:
        return hint
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(error: GatewayError) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}}`, Anthropic's error shape."""
    return {
        "type": "error",
        "error": {"type": error_type(error.status, error.type), "message": error.message},
    }


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


@dataclass(slots=True)
class _Block:
    """One content block; the text of a text or thinking block is kept in pieces (joined
    once at the end, not copied on every delta)."""

    json: dict[str, Any]
    pieces: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        kind = self.json["type"]
        if kind in ("text", "thinking"):
            return {**self.json, kind: "".join(self.pieces)}
        return dict(self.json)


class MessageWriter:
    """Builds one assistant message from text, thinking and tool calls, in order.

    Consecutive text goes into one text block, consecutive thinking into one thinking
    block; a tool call is one `tool_use` block, written whole (its `input` in a single
    `input_json_delta`), so a client's partial-JSON accumulator always ends with exactly
    the arguments the gateway returns. Each method returns the SSE bytes of what it
    wrote (`b""` when not streaming, or when there is nothing to send).

    Args:
        id: The message id (`msg_…`).
        model: The public model id, as the client sent it.
        stream: Produce SSE events; otherwise only the whole message is kept.
        thinking: Show reasoning as `thinking` blocks. Anthropic sends them only when the
            request enables extended thinking, and clients read `content[0].text`.
    """

    __slots__ = ("_blocks", "_open", "_stop", "_usage", "id", "model", "stream", "thinking")

    def __init__(self, *, id: str, model: str, stream: bool, thinking: bool) -> None:
        self.id = id
        self.model = model
        self.stream = stream
        self.thinking = thinking
        self._blocks: list[_Block] = []
        self._open: str | None = None
        """The type of the last block while more of it may come (`text`, `thinking`)."""
        self._stop = "end_turn"
        self._usage = Usage()

    @property
    def text_open(self) -> bool:
        """Whether more text would extend the last block (rather than start a new one)."""
        return self._open == "text"

    def start(self) -> bytes:
        """`message_start` and a `ping`, sent as soon as the upstream answers."""
        if not self.stream:
            return b""
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # Counts are known at the end; message_delta carries them.
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return _event("message_start", {"type": "message_start", "message": message}) + _event(
            "ping", {"type": "ping"}
        )

    def text(self, text: str) -> bytes:
        return self._append("text", text) if text else b""

    def reasoning(self, text: str) -> bytes:
        """Reasoning, as a `thinking` block when the request enabled thinking."""
        return self._append("thinking", text) if text and self.thinking else b""

    def tool_use(self, call: ToolCall) -> bytes:
        out = self._close()
        block = {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": input_object(call.arguments),
        }
        index = len(self._blocks)
        self._blocks.append(_Block(block))
        if not self.stream:
            return b""
        delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}
        return (
            out
            + _event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                },
            )
            + _event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            + _event("content_block_stop", {"type": "content_block_stop", "index": index})
        )

    def extension(self, payload: Mapping[str, Any]) -> bytes:
        """An `event: toolwire` event: server-tool activity and run status, which the
        `anthropic` SDK passes over (its accumulator skips unknown event types)."""
        if not self.stream:
            return b""
        return _event("toolwire", {"type": "toolwire", "toolwire": payload})

    def finish(self, stop: str, usage: Usage) -> bytes:
        """Close the message: the last block's stop, `message_delta`, `message_stop`."""
        self._stop, self._usage = stop, usage
        out = self._close()
        if not self.stream:
            return b""
        delta = {"stop_reason": stop, "stop_sequence": None}
        return (
            out
            + _event(
                "message_delta",
                {"type": "message_delta", "delta": delta, "usage": usage_json(usage)},
            )
            + _event("message_stop", {"type": "message_stop"})
        )

    def message(self, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The whole message (after `finish`), with a top-level `toolwire` field if given."""
        body: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [b.to_json() for b in self._blocks],
            "stop_reason": self._stop,
            "stop_sequence": None,
            "usage": usage_json(self._usage),
        }
        if extension is not None:
            body["toolwire"] = dict(extension)
        return body

    @staticmethod
    def error(body: Mapping[str, Any]) -> bytes:
        """An `event: error` event, as Anthropic ends a stream that failed; the SDK raises
        it as an `APIStatusError`."""
        return _event("error", body)

    # --- blocks ---------------------------------------------------------------------------

    def _append(self, kind: str, text: str) -> bytes:
        out = b""
        if self._open != kind:
            out = self._close()
            block: dict[str, Any] = {"type": kind, kind: ""}
            if kind == "thinking":
                # No signature can be given; clients only need the field to exist.
                block["signature"] = ""
            self._blocks.append(_Block(block))
            self._open = kind
            if self.stream:
                start = {"type": "content_block_start", "index": len(self._blocks) - 1}
                out += _event("content_block_start", {**start, "content_block": block})
        self._blocks[-1].pieces.append(text)
        if not self.stream:
            return b""
        delta = {"type": f"{kind}_delta", kind: text}
        index = len(self._blocks) - 1
        return out + _event(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )

    def _close(self) -> bytes:
        """The stop of the open text or thinking block, if any (a tool_use block is
        closed as soon as it is written)."""
        if self._open is None:
            return b""
        self._open = None
        if not self.stream:
            return b""
        index = len(self._blocks) - 1
        return _event("content_block_stop", {"type": "content_block_stop", "index": index})


def shutdown_event(message: str) -> bytes:
    """The event that ends a stream a shutdown interrupted: Anthropic ends a failed stream
    with `event: error`, and `overloaded_error` is its word for "temporarily unable"."""
    return MessageWriter.error(error_body(GatewayError(503, message, type="overloaded_error")))


# --- one model turn, passed through -------------------------------------------------------


class MessagesTurnWriter:
    """One model turn as one message: text and thinking stream as the upstream writes
    them; each tool call is written whole once the turn is complete."""

    def __init__(self, reply: Reply) -> None:
        self.writer = MessageWriter(
            id=new_message_id(), model=reply.model, stream=reply.stream, thinking=reply.thinking
        )
        self.streaming = reply.stream

    def opening(self) -> bytes:
        return self.writer.start()

    def delta(self, event: ModelDelta) -> bytes:
        if isinstance(event, ModelContentDelta):
            return self.writer.text(event.text)
        if isinstance(event, ModelReasoningDelta):
            return self.writer.reasoning(event.text)
        # Tool-call deltas are not forwarded: the calls are written whole from the final
        # response, whose arguments are the authoritative (assembled, parsed, repaired) ones.
        return b""

    def close(self, response: ModelResponse) -> bytes:
        writer = self.writer
        out = b""
        for call in response.message.tool_calls:
            out += writer.tool_use(call)
        return out + writer.finish(stop_reason(response.finish_reason), response.usage)

    def end(self, response: ModelResponse) -> bytes:
        return b""

    def failed(self, error: GatewayError) -> bytes:
        return MessageWriter.error(error_body(error))

    def whole(self, response: ModelResponse) -> dict[str, Any]:
        self.writer.reasoning(response.message.reasoning or "")
        self.writer.text(response.message.content or "")
        self.close(response)
        return self.writer.message()


# --- a run's events ------------------------------------------------------------------------


class MessagesRunWriter:
    """A run's events through one `MessageWriter`: SSE events, or one whole message."""

    def __init__(self, shown: Shown, reply: Reply) -> None:
        self.shown = shown
        self.writer = MessageWriter(
            id=new_message_id(), model=reply.model, stream=reply.stream, thinking=reply.thinking
        )
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
