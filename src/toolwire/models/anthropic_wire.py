"""Conversion between toolwire's messages and the Anthropic Messages API wire format.

Pure functions and one small stateful object (`MessageStreamAssembler`) with no I/O.
Every tool-call id goes through the request's `IdMap`: ids sent upstream through
`.upstream()`, ids read back through `.client()`, so the caller only sees its own ids.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from toolwire.models._values import as_int, json_type, one_line, str_or_none
from toolwire.models.base import FinishReason, ModelResponse, ModelSettings, ToolChoice
from toolwire.models.call_ids import IdMap
from toolwire.models.events import (
    ModelContentDelta,
    ModelDelta,
    ModelReasoningDelta,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolwire.tools.call import ToolCall, new_call_id
from toolwire.tools.tool import Tool

__all__ = [
    "ERROR_STATUS",
    "MessageStreamAssembler",
    "UpstreamError",
    "WireError",
    "build_request",
    "error_body",
    "messages_to_anthropic",
    "parse_message",
    "tool_choice_to_anthropic",
    "user_content",
]


ERROR_STATUS: Final[Mapping[str, int]] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status Anthropic uses for each error type (for errors reported inside a stream)."""

_DATA_URL: Final = re.compile(
    r"data:(?P<type>[\w.+-]+/[\w.+-]+)(?:;[^,;]*)*;base64,(?P<data>.*)", re.S
)


class WireError(ValueError):
    """A body does not fit the Messages API format. The message is one line."""


class UpstreamError(Exception):
    """The upstream reported an error inside a body or a stream (`{"type": "error", ...}`).

    Attributes:
        body: The error in OpenAI's shape (`message`, `type`, `param`, `code`).
        status: The HTTP status Anthropic gives that error type, when known.
    """

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self.status = ERROR_STATUS.get(str(body.get("type")))
        super().__init__(str(body.get("message") or "unspecified error"))


# --- toolwire -> wire -------------------------------------------------------------------


def user_content(message: UserMessage) -> list[dict[str, Any]]:
    """The content blocks of a user message: text, and images given as data: or http(s)
    URLs. Parts Anthropic cannot take (audio, files) are left out."""
    if message.parts is None:
        return [_text(message.content)]
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            if part["text"]:
                blocks.append(_text(part["text"]))
        elif kind == "image_url":
            image = _image_block(part.get("image_url"))
            if image is not None:
                blocks.append(image)
    # Anthropic rejects an empty content list; the joined text is the best stand-in.
    return blocks or [_text(message.content)]


def messages_to_anthropic(
    messages: Sequence[Message], ids: IdMap
) -> tuple[str | None, list[dict[str, Any]]]:
    """The `system` text and the `messages` list of a request.

    System messages are joined, in order, into the top-level `system`. Consecutive tool
    results become one user turn of `tool_result` blocks, and any two consecutive turns of
    the same role are merged, since Anthropic requires the roles to alternate. Reasoning is
    not sent back: Anthropic only accepts thinking blocks with their signature.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            if message.content:
                system.append(message.content)
            continue
        if isinstance(message, UserMessage):
            role, blocks = "user", user_content(message)
        elif isinstance(message, ToolMessage):
            role, blocks = "user", [_tool_result(message, ids)]
        elif isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_content(message, ids)
            if not blocks:
                continue  # an empty turn says nothing; Anthropic rejects empty content
        else:
            raise TypeError(f"Not a toolwire message: {type(message).__name__}.")
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # Tool results must open their user turn; a stable sort keeps both groups' order.
            turn["content"].sort(key=lambda b: b.get("type") != "tool_result")
    return ("\n\n".join(system) or None), turns


def tool_choice_to_anthropic(
    choice: ToolChoice | None, parallel_tool_calls: bool | None = None
) -> dict[str, Any] | None:
    """`auto` / `required` / `none` / a tool name as a Messages API `tool_choice`;
    `parallel_tool_calls=False` becomes `disable_parallel_tool_use`."""
    if choice is None:
        out: dict[str, Any] | None = None if parallel_tool_calls is not False else {"type": "auto"}
    elif choice == "auto":
        out = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        return {"type": "none"}
    else:
        out = {"type": "tool", "name": choice}
    if out is not None and parallel_tool_calls is False:
        out["disable_parallel_tool_use"] = True
    return out


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[Tool],
    settings: ModelSettings | None,
    *,
    ids: IdMap,
    max_tokens: int,
    stream: bool = False,
) -> dict[str, Any]:
    """The JSON body of a `POST /v1/messages` request.

    Args:
        model: The model name sent upstream.
        messages: The conversation.
        tools: The tools the model may call.
        settings: Per-request settings; of `extra`, `stop`, `top_p`, `top_k` and `user`
            are mapped and the rest ignored.
        ids: The request's call-id map.
        max_tokens: Used when the settings give none (Anthropic requires it).
        stream: Ask for server-sent events.
    """
    settings = settings or ModelSettings()
    system, turns = messages_to_anthropic(messages, ids)
    extra = settings.extra
    limit = settings.max_tokens
    if limit is None and isinstance(extra.get("max_completion_tokens"), int):
        limit = extra["max_completion_tokens"]
    body: dict[str, Any] = {"model": model, "max_tokens": limit or max_tokens}
    if system is not None:
        body["system"] = system
    body["messages"] = turns
    if tools:
        body["tools"] = [t.to_anthropic() for t in tools]
        choice = tool_choice_to_anthropic(settings.tool_choice, settings.parallel_tool_calls)
        if choice is not None:
            body["tool_choice"] = choice
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    stop = extra.get("stop")
    if isinstance(stop, str):
        body["stop_sequences"] = [stop]
    elif isinstance(stop, list | tuple) and stop:
        body["stop_sequences"] = [s for s in stop if isinstance(s, str)]
    for key in ("top_p", "top_k"):
        if extra.get(key) is not None:
            body[key] = extra[key]
    if isinstance(extra.get("user"), str):
        body["metadata"] = {"user_id": extra["user"]}
    if stream:
        body["stream"] = True
    return body


# --- wire -> toolwire -------------------------------------------------------------------

_FINISH: Final[Mapping[str, FinishReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def error_body(body: Any) -> dict[str, Any] | None:
    """An Anthropic error body (`{"type": "error", "error": {"type", "message"}}`) in
    OpenAI's shape (`message`, `type`, `param`, `code`); `None` when `body` is no error.

    OpenAI-shaped bodies (from proxies in front of Anthropic) are accepted as they are.
    """
    if not isinstance(body, Mapping):
        return None
    err = body.get("error")
    if isinstance(err, Mapping):
        message = err.get("message")
        kind = err.get("type")
        return {
            "message": one_line(message) if isinstance(message, str) else "unspecified error",
            "type": kind if isinstance(kind, str) else "api_error",
            "param": err.get("param") if isinstance(err.get("param"), str) else None,
            "code": err.get("code") if isinstance(err.get("code"), str) else None,
        }
    if isinstance(err, str) and err.strip():
        return {"message": one_line(err), "type": "api_error", "param": None, "code": None}
    return None


def parse_message(body: Any, ids: IdMap) -> ModelResponse:
    """A non-streaming Messages API response body as a `ModelResponse`.

    Raises:
        UpstreamError: The body is an error report.
        WireError: The body is not a message.
    """
    if not isinstance(body, Mapping):
        raise WireError(f"expected a JSON object, got {json_type(body)}")
    if body.get("type") == "error":
        raise UpstreamError(error_body(body) or _unspecified())
    blocks = body.get("content")
    if not isinstance(blocks, list):
        raise WireError("the response has no 'content' list")
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            raise WireError("a content block is not an object")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thinking.append(block["thinking"])
        elif kind == "tool_use":
            name = block.get("name")
            if not isinstance(name, str) or not name:
                raise WireError("a tool_use block has no name")
            raw_input = block.get("input")
            calls.append(
                ToolCall(
                    id=_call_id(block.get("id"), ids),
                    name=name,
                    arguments=orjson.dumps(raw_input).decode() if raw_input else "{}",
                )
            )
    message = AssistantMessage(
        content="".join(text) or None,
        reasoning="".join(thinking) or None,
        tool_calls=tuple(calls),
    )
    usage = Usage(requests=1)
    _read_usage(usage, body.get("usage"))
    return ModelResponse(
        message=message,
        finish_reason=_finish_reason(body.get("stop_reason"), bool(calls)),
        usage=usage,
        model=str_or_none(body.get("model")),
    )


@dataclass(slots=True)
class _Call:
    index: int
    id: str
    name: str
    args: list[str] = field(default_factory=list)
    start_input: Any = None


@dataclass(slots=True)
class _Block:
    kind: str
    call: _Call | None = None


class MessageStreamAssembler:
    """Turns the Messages API stream events into deltas and one final `ModelResponse`.

    Each event's deltas are returned as soon as it is fed. Tool calls are numbered from 0
    in order of appearance (not by Anthropic's block index); `ModelToolCallStart` comes with
    the `content_block_start` of a `tool_use` block, then one `ModelToolCallArgsDelta` per
    `input_json_delta`. `done` turns true at `message_stop`.
    """

    def __init__(self, ids: IdMap) -> None:
        self._ids = ids
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[_Call] = []
        self._blocks: dict[int, _Block] = {}
        self._stop_reason: str | None = None
        self._usage = Usage(requests=1)
        self._model: str | None = None
        self.done = False

    def feed(self, event: Any) -> list[ModelDelta]:
        """Take one decoded event (the JSON of one `data:` field); return its deltas.

        Raises:
            UpstreamError: The event is an `error` event.
            WireError: The event does not fit the Messages API.
        """
        if not isinstance(event, Mapping):
            raise WireError(f"a stream event is {json_type(event)}, not a JSON object")
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_stop":
            return self._stop(event)
        if kind == "message_start":
            msg = event.get("message")
            if isinstance(msg, Mapping):
                self._model = str_or_none(msg.get("model"))
                _read_usage(self._usage, msg.get("usage"))
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = delta["stop_reason"]
            _read_usage(self._usage, event.get("usage"))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise UpstreamError(error_body(event) or _unspecified())
        # `ping` and event types added later carry nothing we use.
        return []

    def _start(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        index = _block_index(event)
        block = event.get("content_block")
        if not isinstance(block, Mapping):
            raise WireError("a content_block_start event has no 'content_block' object")
        kind = str(block.get("type"))
        entry = _Block(kind)
        self._blocks[index] = entry
        if kind == "text":
            return self._add_text(block.get("text"))
        if kind == "thinking":
            return self._add_thinking(block.get("thinking"))
        if kind == "tool_use":
            name = block.get("name")
            if not isinstance(name, str) or not name:
                raise WireError("a tool_use block has no name")
            call = _Call(len(self._calls), _call_id(block.get("id"), self._ids), name)
            call.start_input = block.get("input")
            self._calls.append(call)
            entry.call = call
            return [ModelToolCallStart(call.index, call.id, call.name)]
        return []

    def _delta(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        index = _block_index(event)
        delta = event.get("delta")
        if not isinstance(delta, Mapping):
            raise WireError("a content_block_delta event has no 'delta' object")
        kind = delta.get("type")
        if kind == "text_delta":
            return self._add_text(delta.get("text"))
        if kind == "thinking_delta":
            return self._add_thinking(delta.get("thinking"))
        if kind == "input_json_delta":
            block = self._blocks.get(index)
            if block is None or block.call is None:
                raise WireError(f"an input_json_delta for block {index}, which is no tool_use")
            fragment = delta.get("partial_json")
            if isinstance(fragment, str) and fragment:
                block.call.args.append(fragment)
                return [ModelToolCallArgsDelta(block.call.index, fragment)]
        # signature_delta and citations_delta carry nothing toolwire keeps.
        return []

    def _stop(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        block = self._blocks.get(_block_index(event))
        call = block.call if block is not None else None
        if call is not None and not call.args and call.start_input:
            # Some proxies put the whole input in content_block_start instead of deltas.
            text = orjson.dumps(call.start_input).decode()
            call.args.append(text)
            return [ModelToolCallArgsDelta(call.index, text)]
        return []

    def _add_text(self, text: Any) -> list[ModelDelta]:
        if isinstance(text, str) and text:
            self._text.append(text)
            return [ModelContentDelta(text)]
        return []

    def _add_thinking(self, text: Any) -> list[ModelDelta]:
        if isinstance(text, str) and text:
            self._thinking.append(text)
            return [ModelReasoningDelta(text)]
        return []

    def finish(self) -> ModelResponse:
        """The complete response of everything fed so far."""
        calls = tuple(
            ToolCall(id=c.id, name=c.name, arguments="".join(c.args).strip() or "{}")
            for c in self._calls
        )
        message = AssistantMessage(
            content="".join(self._text) or None,
            reasoning="".join(self._thinking) or None,
            tool_calls=calls,
        )
        return ModelResponse(
            message=message,
            finish_reason=_finish_reason(self._stop_reason, bool(calls)),
            usage=self._usage,
            model=self._model,
        )


# --- helpers ----------------------------------------------------------------------------


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_block(raw: Any) -> dict[str, Any] | None:
    url = raw.get("url") if isinstance(raw, Mapping) else raw
    if not isinstance(url, str):
        return None
    match = _DATA_URL.fullmatch(url)
    if match is not None:
        source = {"type": "base64", "media_type": match["type"], "data": match["data"]}
        return {"type": "image", "source": source}
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    return None


def _tool_result(message: ToolMessage, ids: IdMap) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": ids.upstream(message.call_id),
        "content": message.content,
        "is_error": message.is_error,
    }


def _assistant_content(message: AssistantMessage, ids: IdMap) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append(_text(message.content))
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": ids.upstream(call.id),
                "name": call.name,
                "input": _input_object(call.arguments),
            }
        )
    return blocks


def _input_object(arguments: str) -> dict[str, Any]:
    # Arguments that were not a JSON object go back as {}: Anthropic rejects anything
    # else, and the tool result that follows already told the model what was wrong.
    try:
        # str.__str__: a `ToolArguments` too, as orjson takes exact `str`s only.
        parsed = orjson.loads(str.__str__(arguments)) if arguments else {}
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _call_id(raw: Any, ids: IdMap) -> str:
    return ids.client(raw) if isinstance(raw, str) and raw else new_call_id()


def _block_index(event: Mapping[str, Any]) -> int:
    index = event.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise WireError(f"a {event.get('type')} event has no block 'index'")
    return index


def _read_usage(usage: Usage, raw: Any) -> None:
    """Update `usage` from a Messages API `usage` object (counts there are cumulative)."""
    if not isinstance(raw, Mapping):
        return
    parts = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    if any(isinstance(raw.get(k), int) for k in parts):
        # Cached prompt tokens are reported apart from input_tokens; all of them are input.
        # Counts only grow during a stream; a later event reporting 0 means "not counted here".
        usage.input_tokens = max(usage.input_tokens, sum(as_int(raw.get(k)) for k in parts))
    usage.output_tokens = max(usage.output_tokens, as_int(raw.get("output_tokens")))


def _finish_reason(raw: Any, has_calls: bool) -> FinishReason:
    reason = _FINISH.get(raw) if isinstance(raw, str) else None
    if has_calls and reason in (None, "stop"):
        return "tool_calls"
    if reason is None or (reason == "tool_calls" and not has_calls):
        return "stop"
    return reason


def _unspecified() -> dict[str, Any]:
    return {"message": "unspecified error", "type": "api_error", "param": None, "code": None}
