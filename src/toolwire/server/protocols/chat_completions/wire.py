"""Chat Completions responses as the gateway writes them: JSON bodies and SSE chunks.

Server-tool activity travels in an extension the `openai` SDK ignores: in a stream,
chunks with empty `choices` and a `toolwire` object (like the usage chunk OpenAI itself
sends); in a whole response, a top-level `toolwire` field.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Final

import orjson

from toolwire.models import AssistantMessage, FinishReason, Usage
from toolwire.tools import ToolCall

__all__ = [
    "DONE",
    "ChunkWriter",
    "completion_body",
    "new_completion_id",
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
