"""Responses API objects as the gateway writes them: the `response` object, its output
items, and the SSE events of a streamed response.

One `ResponseWriter` builds both forms from the same calls, so a streamed response and a
whole one never differ: the events are exactly those the `openai` SDK's stream
accumulator (`client.responses.stream(...)`) needs to rebuild the response it ends with.

The gateway's own tools are an MCP server to the client: their calls are `mcp_call`
items and calls waiting for a person are `mcp_approval_request` items, both with the
server label `toolwire`, as OpenAI shows the tools of a remote MCP server.

Two writers drive it, as the session (`toolwire.server.session`) runs a request: one
model turn (the direct path, `ResponsesTurnWriter`) or an agent run (server tools,
`ResponsesRunWriter`). The session keeps a response before its last event, so it is
stored before the client can name it in `previous_response_id`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

import orjson

from toolwire.agent import AgentEvent, TextDelta, ToolCallResult, ToolCallStart
from toolwire.agent.result import PendingApproval, RunResult
from toolwire.models import (
    FinishReason,
    ModelContentDelta,
    ModelDelta,
    ModelResponse,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    Usage,
)
from toolwire.server.http.errors import GatewayError
from toolwire.server.run_view import Shown
from toolwire.tools import ToolResult

__all__ = [
    "SERVER_LABEL",
    "CallInfo",
    "ResponseWriter",
    "ResponsesRunWriter",
    "ResponsesTurnWriter",
    "approval_request_item",
    "mcp_call_item",
    "new_id",
    "response_head",
    "usage_json",
]

SERVER_LABEL: Final = "toolwire"
"""The `server_label` of the gateway's own tools' items."""


def new_id(prefix: str) -> str:
    """A fresh id in OpenAI's style: `resp_…`, `msg_…`, `fc_…`, `mcp_…`."""
    return f"{prefix}_{os.urandom(16).hex()}"


def response_head(*, id: str, model: str, echo: dict[str, Any]) -> dict[str, Any]:
    """The fields of a response object fixed when it starts."""
    return {
        "id": id,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "error": None,
        "incomplete_details": None,
        **echo,
    }


DEFAULT_ECHO: Final[Mapping[str, Any]] = {
    "instructions": None,
    "max_output_tokens": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": {"effort": None},
    "store": True,
    "temperature": None,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
    "truncation": "disabled",
    "user": None,
}
"""The request fields a response echoes, as a request that set none of them has them."""


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def mcp_call_item(
    name: str, arguments: str, result: ToolResult, approval_id: str | None
) -> dict[str, Any]:
    """A server tool's call and result. `output` is the text the model was given."""
    error = result.error
    return {
        "type": "mcp_call",
        # Not the call id: a model may reuse one on a later turn, and item ids are unique.
        "id": new_id("mcp"),
        "server_label": SERVER_LABEL,
        "name": name,
        "arguments": arguments,
        "approval_request_id": approval_id,
        "output": result.to_model_text() if result.success else None,
        "error": None
        if error is None
        else {
            "type": "mcp_tool_execution_error",
            "content": [{"type": "text", "text": result.to_model_text()}],
        },
        "status": "completed" if result.success else "failed",
    }


def approval_request_item(approval: PendingApproval) -> dict[str, Any]:
    """A call waiting for a person's decision; its id is the approval's."""
    return {
        "type": "mcp_approval_request",
        "id": approval.id,
        "server_label": SERVER_LABEL,
        "name": approval.tool,
        "arguments": approval.arguments,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class ResponseWriter:
    """Builds one response's output items and, when streaming, its SSE events.

    Every method returns the SSE bytes to send (empty when not streaming) and keeps the
    items, so `final()` gives the whole response either way. Text opens a message item
    that stays open until something else (a tool call, the end) comes.
    """

    __slots__ = (
        "_calls",
        "_head",
        "_message",
        "_seq",
        "_stream",
        "_texts",
        "output",
        "response",
    )

    def __init__(self, head: dict[str, Any], *, stream: bool) -> None:
        self._head = head
        self._stream = stream
        self._seq = 0
        self.output: list[dict[str, Any]] = []
        self.response: dict[str, Any] | None = None
        """The whole response, once `final()` built it."""
        self._message: tuple[int, dict[str, Any]] | None = None
        self._texts: list[str] = []
        self._calls: dict[str, tuple[int, dict[str, Any]]] = {}
        """Function calls being streamed, by call id: output index and item."""

    @property
    def streaming(self) -> bool:
        return self._stream

    def _event(self, kind: str, payload: dict[str, Any]) -> bytes:
        if not self._stream:
            return b""
        data = orjson.dumps({"type": kind, "sequence_number": self._seq, **payload})
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"

    def _add(self, item: dict[str, Any]) -> tuple[int, bytes]:
        index = len(self.output)
        self.output.append(item)
        added = self._event("response.output_item.added", {"output_index": index, "item": item})
        return index, added

    def _done(self, index: int, item: dict[str, Any]) -> bytes:
        self.output[index] = item
        return self._event("response.output_item.done", {"output_index": index, "item": item})

    def opening(self) -> bytes:
        """`response.created` and `response.in_progress`."""
        snapshot = {**self._head, "status": "in_progress", "output": [], "usage": None}
        return self._event("response.created", {"response": snapshot}) + self._event(
            "response.in_progress", {"response": snapshot}
        )

    # --- text ---------------------------------------------------------------------------

    def text(self, delta: str) -> bytes:
        if not delta:
            return b""
        out = self._open_message() if self._message is None else b""
        self._texts.append(delta)
        return out + self._event(
            "response.output_text.delta", {**self._where(), "delta": delta, "logprobs": []}
        )

    def answer(self) -> bytes:
        """An empty message item when the output does not end with one: a finished
        response ends with the model's answer, even an empty one, so a client looking
        for it (`output_text`, the Agents SDK's final output) finds it."""
        if self._message is not None or (self.output and self.output[-1]["type"] == "message"):
            return b""
        return self._open_message() + self.close_message()

    def _open_message(self) -> bytes:
        item = {
            "id": new_id("msg"),
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        index, out = self._add(item)
        self._message = (index, item)
        self._texts = []
        part = {**self._where(), "part": _text_part("")}
        return out + self._event("response.content_part.added", part)

    def _where(self) -> dict[str, Any]:
        assert self._message is not None
        index, item = self._message
        return {"item_id": item["id"], "output_index": index, "content_index": 0}

    def close_message(self, status: str = "completed") -> bytes:
        """End the open message item, if any."""
        if self._message is None:
            return b""
        index, item = self._message
        text = "".join(self._texts)
        part = _text_part(text)
        out = self._event(
            "response.output_text.done", {**self._where(), "text": text, "logprobs": []}
        )
        out += self._event("response.content_part.done", {**self._where(), "part": part})
        self._message = None
        return out + self._done(index, {**item, "status": status, "content": [part]})

    # --- the client's function calls ----------------------------------------------------

    def call_start(self, call_id: str, name: str) -> bytes:
        """A function call begins; its arguments follow with `call_arguments`."""
        out = self.close_message()
        item = {
            "id": new_id("fc"),
            "type": "function_call",
            "status": "in_progress",
            "call_id": call_id,
            "name": name,
            "arguments": "",
        }
        index, added = self._add(item)
        self._calls[call_id] = (index, item)
        return out + added

    def call_arguments(self, call_id: str, delta: str) -> bytes:
        index, item = self._calls[call_id]
        item["arguments"] += delta
        return self._event(
            "response.function_call_arguments.delta",
            {"item_id": item["id"], "output_index": index, "delta": delta},
        )

    def call_done(self, call_id: str, arguments: str | None = None) -> bytes:
        """End a streamed call; `arguments` (the final ones) replace what was streamed."""
        index, item = self._calls.pop(call_id)
        final = {**item, "status": "completed"}
        if arguments is not None:
            final["arguments"] = arguments
        out = self._event(
            "response.function_call_arguments.done",
            {"item_id": item["id"], "output_index": index, "arguments": final["arguments"]},
        )
        return out + self._done(index, final)

    def function_call(self, call_id: str, name: str, arguments: str) -> bytes:
        """A whole function call (its arguments in one delta)."""
        out = self.call_start(call_id, name)
        if arguments:
            out += self.call_arguments(call_id, arguments)
        return out + self.call_done(call_id)

    def streaming_calls(self) -> Sequence[str]:
        """The ids of the function calls still open."""
        return list(self._calls)

    # --- the gateway's own tools --------------------------------------------------------

    def item(self, item: dict[str, Any]) -> bytes:
        """A whole item, added and done at once (`mcp_approval_request`)."""
        out = self.close_message()
        index, added = self._add(item)
        return out + added + self._done(index, item)

    def mcp_call(self, item: dict[str, Any]) -> bytes:
        """A server tool's call and result (an `mcp_call_item`) with the events OpenAI
        streams for one: the item added in progress with no arguments yet,
        `response.mcp_call.in_progress`, its arguments (`response.mcp_call_arguments.delta`
        and `.done`), `response.mcp_call.completed` (or `.failed`), the item done. A
        client that assembles the arguments from the deltas (Pydantic AI) needs them."""
        out = self.close_message()
        started = {**item, "arguments": "", "output": None, "error": None, "status": "in_progress"}
        index, added = self._add(started)
        ids = {"item_id": item["id"], "output_index": index}
        arguments = item["arguments"]
        out += added + self._event("response.mcp_call.in_progress", ids)
        out += self._event("response.mcp_call_arguments.delta", {**ids, "delta": arguments})
        out += self._event("response.mcp_call_arguments.done", {**ids, "arguments": arguments})
        ended = "completed" if item["status"] == "completed" else "failed"
        out += self._event(f"response.mcp_call.{ended}", ids)
        return out + self._done(index, item)

    # --- the end ------------------------------------------------------------------------

    def final(
        self,
        usage: Usage,
        *,
        incomplete: str | None = None,
        extension: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The whole response. Open items are closed first (call `finish` to stream
        their events); `incomplete` is the reason it stopped early (`max_output_tokens`)."""
        if self._message is not None or self._calls:
            raise RuntimeError("close the open items (finish()) before final()")
        response = {
            **self._head,
            "status": "incomplete" if incomplete else "completed",
            "completed_at": int(time.time()),
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "output": list(self.output),
            "usage": usage_json(usage),
        }
        if extension is not None:
            response["toolwire"] = extension
        self.response = response
        return response

    def finish(self, *, incomplete: bool = False) -> bytes:
        """Close every open item (as `incomplete` when the model was cut short)."""
        out = self.close_message("incomplete" if incomplete else "completed")
        for call_id in list(self._calls):
            out += self.call_done(call_id)
        return out

    def completed(self, response: dict[str, Any]) -> bytes:
        """The last event: `response.completed` (or `response.incomplete`)."""
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        return self._event(kind, {"response": response})

    def failed(self, message: str, code: str = "server_error") -> bytes:
        """The last event of a stream that failed after it started."""
        response = {
            **self._head,
            "status": "failed",
            "error": {"code": code, "message": message},
            "output": list(self.output),
            "usage": None,
        }
        return self._event("response.failed", {"response": response})


# --- a model turn and a run, as a response -------------------------------------------------


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
