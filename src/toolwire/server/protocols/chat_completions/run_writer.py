"""The agent path of the chat endpoint: server tools run inside the gateway.

A run's events become Chat Completions chunks (server-tool activity as `toolwire`
extension chunks the `openai` SDK skips) or one whole response with a `toolwire` field.
The same writer serves a new request and a resumed run (`POST /v1/runs/{id}/resume`);
the run's life is `toolwire.server.session`.

A run that pauses for approval ends its response with the run id and the pending
approvals (an `approval_required` extension chunk per call, then a `run_status` chunk);
with `approvals.wait_seconds` set, a streamed run instead waits in the open stream for
the decisions and goes on in it.
"""

from __future__ import annotations

from typing import Any

from toolwire.agent import AgentEvent, ReasoningDelta, TextDelta, ToolCallResult
from toolwire.agent.result import RunResult
from toolwire.models import AssistantMessage, FinishReason
from toolwire.server.http.errors import GatewayError, error_body
from toolwire.server.protocols.chat_completions.wire import (
    DONE,
    ChunkWriter,
    completion_body,
    new_completion_id,
)
from toolwire.server.run_view import (
    TURN_SEPARATOR,
    Shown,
    event_payload,
    run_extension,
    run_status,
)

__all__ = ["ChatRunWriter"]


class ChatRunWriter:
    """A run's events as Chat Completions chunks, or one whole `chat.completion`."""

    def __init__(self, shown: Shown, *, model: str, stream: bool, include_usage: bool) -> None:
        self.shown = shown
        self.model = model
        self.chunks = ChunkWriter(id=new_completion_id(), model=model)
        self.stream = stream
        self.include_usage = include_usage
        self.wrote_text = self.separate = False

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
        payload = error_body(error.message, type=error.type, param=error.param, code=error.code)
        return ChunkWriter.error(payload) + DONE

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
