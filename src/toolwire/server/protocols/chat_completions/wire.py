"""Chat Completions responses as the gateway writes them: JSON bodies and SSE chunks.

Server-tool activity travels in an extension the `openai` SDK ignores: in a stream,
chunks with empty `choices` and a `toolwire` object (like the usage chunk OpenAI itself
sends); in a whole response, a top-level `toolwire` field.

A run's events (`ChatRunWriter`, for new and resumed runs alike; the run's life is
`toolwire.server.session`): server-tool activity as extension chunks, or one whole
response with a `toolwire` field. A run that pauses for approval ends its response with
the run id and the pending approvals (an `approval_required` extension chunk per call,
then a `run_status` chunk); with `approvals.wait_seconds` set, a streamed run instead
waits in the open stream for the decisions and goes on in it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from functools import cached_property
from typing import Any, Final

import orjson

from toolwire.agent import AgentEvent, ReasoningDelta, TextDelta, ToolCallResult
from toolwire.agent.result import RunResult
from toolwire.models import (
    AssistantMessage,
    FinishReason,
    ModelContentDelta,
    ModelDelta,
    ModelReasoningDelta,
    ModelResponse,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    Usage,
)
from toolwire.server.http.errors import GatewayError, error_body
from toolwire.server.run_view import (
    TURN_SEPARATOR,
    Shown,
    event_payload,
    run_extension,
    run_status,
)
from toolwire.server.session import Reply
from toolwire.tools import ToolCall

__all__ = [
    "DONE",
    "ChatRunWriter",
    "ChatTurnWriter",
    "ChunkWriter",
    "completion_body",
    "new_completion_id",
    "shutdown_event",
    "tool_calls_json",
    "usage_json",
]

DONE: Final = b"data: [DONE]\n\n"


def new_completion_id() -> str:
    return "chatcmpl-" + os.urandom(12).hex()


def usage_json(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def tool_calls_json(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in calls
    ]


def completion_body(
    *,
    id: str,
    model: str,
    message: AssistantMessage,
    finish_reason: FinishReason,
    usage: Usage,
    extension: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole `chat.completion` object."""
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.reasoning:
        out["reasoning_content"] = message.reasoning
    if message.tool_calls:
        out["tool_calls"] = tool_calls_json(message.tool_calls)
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": out,
                "logprobs": None,
                "finish_reason": _wire_finish(finish_reason),
            }
        ],
        "usage": usage_json(usage),
    }
    if extension is not None:
        body["toolwire"] = extension
    return body


def _wire_finish(reason: FinishReason) -> str:
    # "error" is toolwire's own; on the wire a failed turn has already become an error.
    return "stop" if reason == "error" else reason


class ChunkWriter:
    """Writes the `chat.completion.chunk` events of one streamed response as SSE bytes.

    The first delta carries `role: "assistant"`, as OpenAI's does; every chunk shares the
    response's id, creation time and model.
    """

    __slots__ = ("_head", "_role_sent")

    def __init__(self, *, id: str, model: str) -> None:
        # Every chunk starts the same way: serialise that prefix once.
        prefix = orjson.dumps(
            {
                "id": id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
            }
        )
        self._head = b"data: " + prefix[:-1] + b","
        self._role_sent = False

    def _event(self, rest: dict[str, Any]) -> bytes:
        return self._head + orjson.dumps(rest)[1:] + b"\n\n"

    def _delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        if not self._role_sent:
            self._role_sent = True
            delta = {"role": "assistant", **delta}
        return self._event(
            {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        )

    def role(self) -> bytes:
        """The opening chunk (role only), sent as soon as the upstream answers."""
        return self._delta({"content": ""})

    def content(self, text: str) -> bytes:
        return self._delta({"content": text})

    def reasoning(self, text: str) -> bytes:
        return self._delta({"reasoning_content": text})

    def tool_call_start(self, index: int, call_id: str, name: str, arguments: str = "") -> bytes:
        call = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        return self._delta({"tool_calls": [call]})

    def tool_call_arguments(self, index: int, text: str) -> bytes:
        return self._delta({"tool_calls": [{"index": index, "function": {"arguments": text}}]})

    def finish(self, reason: FinishReason) -> bytes:
        return self._delta({}, _wire_finish(reason))

    def usage(self, usage: Usage) -> bytes:
        return self._event({"choices": [], "usage": usage_json(usage)})

    def extension(self, payload: dict[str, Any]) -> bytes:
        """A chunk with no choices and a `toolwire` object: clients that do not know it
        skip it, as they skip OpenAI's own usage chunk."""
        return self._event({"choices": [], "toolwire": payload})

    @staticmethod
    def error(body: dict[str, Any]) -> bytes:
        """An error event (`{"error": {...}}`): the `openai` SDK raises it as `APIError`."""
        return b"data: " + orjson.dumps(body) + b"\n\n"


def shutdown_event(message: str) -> bytes:
    """The error event that ends a stream a shutdown interrupted."""
    return ChunkWriter.error(error_body(message, type="server_error", code="shutting_down"))


# --- one model turn, passed through -------------------------------------------------------


class ChatTurnWriter:
    """One model turn as chunks, one for one as the upstream writes them (a client tool
    call streams its arguments as they arrive), or one whole `chat.completion`."""

    def __init__(self, reply: Reply) -> None:
        self.model = reply.model
        self.streaming = reply.stream
        self.include_usage = reply.include_usage

    @cached_property
    def chunks(self) -> ChunkWriter:
        # Only a stream needs one (a whole answer is one `completion_body`).
        return ChunkWriter(id=new_completion_id(), model=self.model)

    def opening(self) -> bytes:
        return self.chunks.role()

    def delta(self, event: ModelDelta) -> bytes:
        chunks = self.chunks
        if isinstance(event, ModelContentDelta):
            return chunks.content(event.text) if event.text else b""
        if isinstance(event, ModelReasoningDelta):
            return chunks.reasoning(event.text) if event.text else b""
        if isinstance(event, ModelToolCallStart):
            return chunks.tool_call_start(event.index, event.id, event.name)
        if isinstance(event, ModelToolCallArgsDelta) and event.text:
            return chunks.tool_call_arguments(event.index, event.text)
        return b""

    def close(self, response: ModelResponse) -> bytes:
        out = self.chunks.finish(response.finish_reason)
        return out + self.chunks.usage(response.usage) if self.include_usage else out

    def end(self, response: ModelResponse) -> bytes:
        return DONE

    def failed(self, error: GatewayError) -> bytes:
        return _failed(error)

    def whole(self, response: ModelResponse) -> dict[str, Any]:
        return completion_body(
            id=new_completion_id(),
            model=self.model,
            message=response.message,
            finish_reason=response.finish_reason,
            usage=response.usage,
        )


def _failed(error: GatewayError) -> bytes:
    payload = error_body(error.message, type=error.type, param=error.param, code=error.code)
    return ChunkWriter.error(payload) + DONE


# --- a run's events ------------------------------------------------------------------------


class ChatRunWriter:
    """A run's events as Chat Completions chunks, or one whole `chat.completion`."""

    def __init__(self, shown: Shown, reply: Reply) -> None:
        self.shown = shown
        self.model = reply.model
        self.stream = reply.stream
        self.include_usage = reply.include_usage
        self.wrote_text = self.separate = False

    @cached_property
    def chunks(self) -> ChunkWriter:
        # Only a stream needs one (a whole answer is one `completion_body`).
        return ChunkWriter(id=new_completion_id(), model=self.model)

    @property
    def streaming(self) -> bool:
        return self.stream

    def opening(self) -> bytes:
        return self.chunks.role() if self.stream else b""

    def event(self, event: AgentEvent) -> bytes:
        if not self.stream:
            return b""
        out = b""
        if isinstance(event, TextDelta) and event.text:
            # Text of a turn after a tool turn starts a new paragraph, exactly as the
            # turns are joined in a whole response.
            if self.separate:
                out = self.chunks.content(TURN_SEPARATOR)
                self.separate = False
            self.wrote_text = True
        elif isinstance(event, ToolCallResult):
            self.separate = self.wrote_text
        return out + (_event_chunk(event, self.chunks, self.shown) or b"")

    def close(self, result: RunResult) -> bytes:
        return b""

    def end(self, result: RunResult) -> bytes:
        if not self.stream:
            return b""
        return b"".join(_finish(result, self.chunks, self.include_usage, self.shown))

    def failed(self, error: GatewayError) -> bytes:
        return _failed(error)

    def whole(self, result: RunResult) -> dict[str, Any]:
        message, finish = _final_message(result)
        return completion_body(
            id=new_completion_id(),
            model=self.model,
            message=message,
            finish_reason=finish,
            usage=result.usage,
            extension=run_extension(result, self.shown),
        )


def _event_chunk(event: AgentEvent, writer: ChunkWriter, shown: Shown) -> bytes | None:
    if isinstance(event, TextDelta):
        return writer.content(event.text) if event.text else None
    if isinstance(event, ReasoningDelta):
        return writer.reasoning(event.text) if event.text else None
    payload = event_payload(event, shown)
    return writer.extension(payload) if payload is not None else None


def _finish(
    result: RunResult, writer: ChunkWriter, include_usage: bool, shown: Shown
) -> list[bytes]:
    out: list[bytes] = []
    if result.status != "completed" and result.status != "client_tool_calls":
        out.append(writer.extension({"type": "run_status", **run_status(result, shown)}))
        # As in a whole response (`_final_message`), the output says why the run stopped;
        # a client that ignores the extension must not get an empty answer.
        if result.output:
            out.append(writer.content(result.output))
    for index, call in enumerate(result.client_calls):
        out.append(writer.tool_call_start(index, call.id, call.name, call.arguments))
    _, finish = _final_message(result)
    out.append(writer.finish(finish))
    if include_usage:
        out.append(writer.usage(result.usage))
    out.append(DONE)
    return out


def _final_message(result: RunResult) -> tuple[AssistantMessage, FinishReason]:
    """The assistant message the client gets, and its finish reason.

    Its content is the text of every turn of the run, as it was streamed: what the model
    said before calling server tools belongs to its answer too.
    """
    steps = result.steps[result.first_step :]
    last = steps[-1].response if steps else None
    text = TURN_SEPARATOR.join(
        s.response.message.content for s in steps if s.response.message.content
    )
    if result.status == "client_tool_calls":
        return AssistantMessage(content=text or None, tool_calls=tuple(result.client_calls)), (
            "tool_calls"
        )
    if result.status == "completed" and last is not None:
        return AssistantMessage(
            content=text or last.message.content, reasoning=last.message.reasoning
        ), last.finish_reason
    # max_iterations / awaiting_approval: what the model said, then why the run stopped
    # (as a stream sends them).
    return AssistantMessage(
        content=TURN_SEPARATOR.join(t for t in (text, result.output) if t)
    ), "stop"
