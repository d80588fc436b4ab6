"""Conversion between toolwire's messages and the OpenAI Chat Completions wire format.

Pure functions and one small stateful object with no I/O (`ChatStreamAssembler`, for the
chunks of a stream), so both `OpenAIChatModel` and the gateway can use them. Streaming
tool-call deltas are assembled here and only here.

Call ids: every function that writes or reads call ids takes an optional `IdMap`; ids
sent upstream go through `ids.upstream()`, ids read back through `ids.client()`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    "RESERVED_FIELDS",
    "ChatStreamAssembler",
    "UpstreamError",
    "WireError",
    "build_request",
    "error_message",
    "error_object",
    "message_to_openai",
    "messages_to_openai",
    "parse_completion",
    "tool_choice_to_openai",
    "tools_to_openai",
    "wire_arguments",
]


_EMPTY_ARGS = "{}"

RESERVED_FIELDS: frozenset[str] = frozenset(
    {"model", "messages", "tools", "stream", "stream_options"}
)
"""Request fields `ModelSettings.extra` never overrides: toolwire owns them."""


class WireError(ValueError):
    """A body does not fit the Chat Completions format. The message is one line."""


class UpstreamError(Exception):
    """The upstream reported an error inside an otherwise well-formed body or stream.

    Attributes:
        body: The upstream's error object (`message`, `type`, `param`, `code`).
    """

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        super().__init__(str(body.get("message") or "unspecified error"))


# --- toolwire -> wire -------------------------------------------------------------------


def wire_arguments(arguments: str) -> str:
    """The arguments of a call as they may be sent back upstream in the history.

    A call whose arguments were not a JSON object (invalid JSON, truncated output, a bare
    string) is sent as `"{}"`: several providers and chat templates reject or crash on
    anything else, which would poison every later request of the conversation. The tool
    result that follows already tells the model what was wrong with its arguments.
    """
    if not arguments:
        return _EMPTY_ARGS
    arguments = str.__str__(arguments)  # a `ToolArguments` too: orjson takes exact `str`s only
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return _EMPTY_ARGS
    return arguments if isinstance(parsed, dict) else _EMPTY_ARGS


def message_to_openai(message: Message, ids: IdMap | None = None) -> dict[str, Any]:
    """One toolwire message as a Chat Completions `messages` entry.

    Args:
        message: The message.
        ids: Rewrites the call ids sent upstream (`None`: sent as they are).
    """
    if isinstance(message, UserMessage):
        if message.parts is not None:
            # orjson serialises plain dicts only; parts usually are dicts already.
            parts = [p if type(p) is dict else dict(p) for p in message.parts]
            return {"role": "user", "content": parts}
        return {"role": "user", "content": message.content}
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id if ids is None else ids.upstream(call.id),
                    "type": "function",
                    "function": {"name": call.name, "arguments": wire_arguments(call.arguments)},
                }
                for call in message.tool_calls
            ]
        elif message.content is None:
            out["content"] = ""
        return out
    if isinstance(message, ToolMessage):
        call_id = message.call_id if ids is None else ids.upstream(message.call_id)
        return {"role": "tool", "tool_call_id": call_id, "content": message.content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    raise TypeError(f"Not a toolwire message: {type(message).__name__}.")


def messages_to_openai(
    messages: Sequence[Message], ids: IdMap | None = None
) -> list[dict[str, Any]]:
    """The conversation as a Chat Completions `messages` list (see `message_to_openai`)."""
    return [message_to_openai(m, ids) for m in messages]


def tools_to_openai(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The Chat Completions `tools` list."""
    return [t.to_openai() for t in tools]


def tool_choice_to_openai(choice: ToolChoice) -> str | dict[str, Any]:
    """`auto` / `none` / `required` as they are; a tool name as a named function choice."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[Tool],
    settings: ModelSettings | None = None,
    *,
    stream: bool = False,
    ids: IdMap | None = None,
) -> dict[str, Any]:
    """The JSON body of a `POST /chat/completions` request.

    `settings.extra` is merged in as it is, except the fields toolwire owns
    (`RESERVED_FIELDS`); the typed settings (`temperature`, `max_tokens`, ...) win over
    the same names in `extra`.

    Args:
        model: The model name sent upstream.
        messages: The conversation.
        tools: The tools the model may call.
        settings: Sampling and tool-choice settings, and pass-through fields.
        stream: Ask for a server-sent event stream (with usage in its last chunk).
        ids: Rewrites the call ids sent upstream (`None`: sent as they are).
    """
    body: dict[str, Any] = {"model": model, "messages": messages_to_openai(messages, ids)}
    if tools:
        body["tools"] = tools_to_openai(tools)
    if settings is not None:
        if settings.extra:
            for key, value in settings.extra.items():
                if key not in RESERVED_FIELDS:
                    body[key] = value
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        # Without tools, some servers reject tool_choice / parallel_tool_calls outright.
        if tools and settings.tool_choice is not None:
            body["tool_choice"] = tool_choice_to_openai(settings.tool_choice)
        if tools and settings.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


# --- wire -> toolwire -------------------------------------------------------------------

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "content_filter": "content_filter",
    "error": "error",
}


def error_message(body: Any) -> str | None:
    """The human message of an error body (`{"error": {"message": ...}}` and variants)."""
    if not isinstance(body, Mapping):
        return None
    err = body.get("error")
    if isinstance(err, Mapping):
        msg = err.get("message") or err.get("msg")
        if isinstance(msg, str) and msg.strip():
            return one_line(msg)
    if isinstance(err, str) and err.strip():
        return one_line(err)
    for key in ("message", "detail"):
        msg = body.get(key)
        if isinstance(msg, str) and msg.strip():
            return one_line(msg)
    return None


def error_object(body: Any, fallback: str) -> dict[str, Any]:
    """The upstream's error object in OpenAI's shape (`message`, `type`, `param`, `code`).

    `{"error": {...}}` gives the inner object as it is (with `message` filled in from
    `fallback` when it has none); anything else (`{"error": "text"}`, `{"detail": ...}`,
    a body that is not JSON) gives a synthesized `upstream_error` object.

    Args:
        body: The decoded error body (`None` when it was not JSON).
        fallback: The message to use when the body has none (e.g. a snippet of the body).
    """
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            out = dict(inner)
            if not isinstance(out.get("message"), str) or not out["message"]:
                out["message"] = error_message(body) or fallback
            return out
    message = error_message(body) or fallback
    return {"message": message, "type": "upstream_error", "param": None, "code": None}


def parse_completion(body: Any, ids: IdMap | None = None) -> ModelResponse:
    """A non-streaming Chat Completions response body as a `ModelResponse`.

    Args:
        body: The decoded JSON body.
        ids: Maps the upstream's call ids back to the client's (`None`: kept as they are).

    Raises:
        UpstreamError: The body is an error report.
        WireError: The body is not a completion.
    """
    if not isinstance(body, Mapping):
        raise WireError(f"expected a JSON object, got {json_type(body)}")
    choices = body.get("choices")
    if not choices:
        if "error" in body:
            raise UpstreamError(error_object(body, "unspecified error"))
        raise WireError("the response has no 'choices'")
    if not isinstance(choices, list) or not isinstance(choices[0], Mapping):
        raise WireError("'choices' is not a list of objects")
    choice = choices[0]
    msg = choice.get("message")
    if not isinstance(msg, Mapping):
        raise WireError("choices[0] has no 'message' object")

    calls: list[ToolCall] = []
    raw_calls = msg.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise WireError("'tool_calls' is not a list")
    for raw in raw_calls:
        fn = raw.get("function") if isinstance(raw, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise WireError("a tool call has no function name")
        upstream_id = str_or_none(raw.get("id"))
        if upstream_id is None:
            call_id = new_call_id()
        else:
            call_id = upstream_id if ids is None else ids.client(upstream_id)
        calls.append(
            ToolCall(
                id=call_id,
                name=fn["name"],
                arguments=_arguments_text(fn.get("arguments")),
            )
        )
    legacy = msg.get("function_call")
    if not calls and isinstance(legacy, Mapping) and isinstance(legacy.get("name"), str):
        calls.append(
            ToolCall(
                id=new_call_id(),
                name=legacy["name"],
                arguments=_arguments_text(legacy.get("arguments")),
            )
        )

    message = AssistantMessage(
        content=_content_text(msg.get("content")),
        reasoning=_reasoning_text(msg),
        tool_calls=tuple(calls),
    )
    return ModelResponse(
        message=message,
        finish_reason=_finish_reason(choice.get("finish_reason"), bool(calls)),
        usage=parse_usage(body.get("usage")),
        model=str_or_none(body.get("model")),
    )


def parse_usage(raw: Any) -> Usage:
    """Token counts from a `usage` object; `requests` is always 1."""
    usage = Usage(requests=1)
    if isinstance(raw, Mapping):
        usage.input_tokens = as_int(raw.get("prompt_tokens", raw.get("input_tokens")))
        usage.output_tokens = as_int(raw.get("completion_tokens", raw.get("output_tokens")))
    return usage


@dataclass(slots=True)
class _PartialCall:
    index: int
    id: str | None = None
    """The upstream's id, once seen."""
    name: str | None = None
    args: list[str] = field(default_factory=list)
    client_id: str | None = None
    """The id shown to the client, fixed when `ModelToolCallStart` is emitted."""


def plain_text(chunk: Any) -> str | None:
    """The content of a plain text chunk, else None.

    A plain text chunk has one choice, index 0, a `delta` holding `content` (a string)
    and nothing else that matters: no reasoning, no tool calls, no finish reason, no
    usage.
    """
    if type(chunk) is not dict:
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or chunk.get("usage"):
        return None
    choice = choices[0]
    if (
        type(choice) is not dict
        or choice.get("finish_reason") is not None
        or choice.get("index", 0) != 0
    ):
        return None
    delta = choice.get("delta")
    if type(delta) is not dict:
        return None
    text = delta.get("content")
    if (
        type(text) is not str
        or delta.get("tool_calls")
        or delta.get("reasoning_content")
        or delta.get("reasoning")
    ):
        return None
    return text


_CONTENT_KEY = b'"content":"'
_RAW_STRING = re.compile(rb'[^"\\\x00-\x1f]*')
"""JSON string content that needs no decoding: no quote, no escape, no control byte."""
_STRING_BODY = rb'(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+'
"""The content of a JSON string, escapes included (possessive: linear)."""
_SEPARATOR = b"\\u0000"
"""Put between the contents of a run's chunks to decode them at once (`_joined_contents`)."""


class TextChunkShape:
    """Reads the content of a stream's plain text chunks from their bytes, without
    decoding the JSON.

    An upstream writes every text chunk of a stream the same way but for the content:
    same id, model, timestamp and keys in the same order. Learnt from one plain text
    chunk decoded in full, the bytes before its content string and after it are a
    template: a chunk with that prefix and that suffix, whose middle needs no JSON
    decoding (no quote, escape or control byte), is the same chunk with another content,
    exactly. Anything else (an escape, another shape, a changed id) is decoded as usual.
    """

    __slots__ = ("_event", "_heads", "_prefix", "_run", "_size", "_suffix")

    def __init__(self) -> None:
        self._prefix = b""
        self._suffix = b""
        self._heads: tuple[bytes, ...] = ()
        """The start of the line of a chunk of the shape, up to its content: `data: ` or
        `data:`, then the prefix."""
        self._size = 0
        self._run: re.Pattern[bytes] | None = None
        self._event: re.Pattern[bytes] | None = None

    def run(self, piece: bytes, pos: int) -> tuple[str, int] | None:
        """The content of the events of the learnt shape that follow one another from
        `pos` in the raw SSE bytes of a read (`data: ` line, blank line), joined, and the
        offset where they end; None when no such event starts at `pos`.

        A fast upstream's hundreds of one-character chunks per read cost no Python call
        each: the usual run is read with a few calls at C speed (`_line_run`), any other
        with two regex scans of the bytes.
        """
        if self._run is None or self._event is None:
            return None
        found = self._line_run(piece, pos)
        if found is not None:
            return found
        m = self._run.match(piece, pos)
        if m is None:
            return None
        body = b"".join(self._event.findall(piece, pos, m.end()))
        try:
            # Escapes are decoded once for the whole run (the bodies, joined, are one
            # JSON string's content).
            text = orjson.loads(b'"' + body + b'"') if b"\\" in body else body.decode()
        except (UnicodeDecodeError, orjson.JSONDecodeError):
            return None
        if type(text) is not str:
            return None
        return text, m.end()

    def _line_run(self, piece: bytes, pos: int) -> tuple[str, int] | None:
        """`run` for the usual run, without a regex: chunks of the shape, each one `data:`
        line and a blank line. (The regexes' two passes over every byte of the run were
        most of the gateway's CPU on a fast stream of tiny chunks; a split, slices and
        joins cost a fraction of that.)

        The read is split where each chunk of the shape ends and the contents cut out of
        the pieces at once; the chunks put back together from them must be the bytes of
        the read, up to the first piece that is not such a chunk, found one by one only
        then. The contents are decoded at once (`_joined_contents`, which turns down any
        holding a line end: so each chunk was one line and a blank one). None when no
        chunk of the shape starts at `pos`, or its contents need `run`'s regex.
        """
        for head in self._heads:
            if piece.startswith(head, pos):
                break
        else:
            return None
        suffix = self._suffix
        # Split on the end of the suffix and the blank line (under 6 bytes: CPython's
        # cheapest search but for one byte), which ends each chunk of the shape.
        rest, end_mark = suffix[:-3], suffix[-3:] + b"\n\n"
        events = _events_from(piece, pos, end_mark)
        count = len(events) - 1  # complete events, if each ends with the mark
        if count < 1 or not rest:
            return None
        cut, strip = len(head), -len(rest)
        contents = [event[cut:strip] for event in events[:count]]
        end = _rebuilt_end(piece, pos, head, contents, suffix)
        if end < 0:
            count = _shape_events(events, count, head, rest)
            if not count:
                return None
            del contents[count:]
            end = _rebuilt_end(piece, pos, head, contents, suffix)
        text = _joined_contents(contents)
        if text is None:
            return None
        return text, end

    def text(self, data: bytes) -> str | None:
        """The content of `data` when it is a plain text chunk of the learnt shape."""
        prefix, suffix = self._prefix, self._suffix
        if (
            not self._size
            or len(data) < self._size
            or not data.startswith(prefix)
            or not data.endswith(suffix)
        ):
            return None
        middle = data[len(prefix) : len(data) - len(suffix)]
        if _RAW_STRING.fullmatch(middle) is None:
            return None
        try:
            return middle.decode()
        except UnicodeDecodeError:
            return None

    def next_run(self, piece: bytes, pos: int) -> int:
        """Where, after the event at `pos`, the next event that may start a `run` begins
        (the line holding the learnt prefix), or `len(piece)`: what lies between goes
        through the SSE decoder at once."""
        end = piece.find(b"\n\n", pos)
        if end < 0 or not self._size:
            return len(piece)
        k = piece.find(self._prefix, end)
        return len(piece) if k < 0 else piece.rfind(b"\n", end, k) + 1

    def learn(self, data: bytes, text: str) -> None:
        """Take the shape of `data`, a plain text chunk with content `text`, if its content
        is written plainly and `"content":"` appears in it only there."""
        start = data.find(_CONTENT_KEY)
        if start < 0 or data.find(_CONTENT_KEY, start + 1) >= 0 or b"\n" in data:
            # (The data of several `data:` lines: not the template of one line.)
            return
        start += len(_CONTENT_KEY)
        end = data.find(b'"', start)
        middle = data[start:end]
        if end < 0 or _RAW_STRING.fullmatch(middle) is None or middle != text.encode():
            return
        self._prefix, self._suffix = data[:start], data[end:]
        self._size = len(self._prefix) + len(self._suffix)
        self._heads = (b"data: " + self._prefix, b"data:" + self._prefix)
        head, tail = rb"data: ?" + re.escape(self._prefix), re.escape(self._suffix) + rb"\n\n"
        self._event = re.compile(head + rb"(" + _STRING_BODY + rb")" + tail)
        self._run = re.compile(rb"(?:" + head + _STRING_BODY + tail + rb")+")


def _events_from(piece: bytes, pos: int, end_mark: bytes) -> list[bytes]:
    """`piece` from `pos` on, split on `end_mark`.

    A read usually starts with the end of an event the last one began: then `pos` is
    just after the first mark, and the events are those of the whole read less one
    (cheaper than copying the read from `pos` to split that)."""
    if not pos:
        return piece.split(end_mark)
    first = piece.find(end_mark)
    if first >= 0 and first + len(end_mark) == pos:
        return piece.split(end_mark)[1:]
    return piece[pos:].split(end_mark)


def _rebuilt_end(piece: bytes, pos: int, head: bytes, contents: list[bytes], suffix: bytes) -> int:
    """Where the chunks of the shape holding `contents` end, if `piece` holds them from
    `pos` on (line after line, each followed by a blank one); else -1."""
    middle = (suffix + b"\n\n" + head).join(contents)
    start = pos + len(head)
    end = start + len(middle)
    if (
        piece.startswith(head, pos)
        and piece.startswith(middle, start)
        and piece.startswith(suffix, end)
        and piece.startswith(b"\n\n", end + len(suffix))
    ):
        return end + len(suffix) + 2
    return -1


def _shape_events(events: list[bytes], count: int, head: bytes, rest: bytes) -> int:
    """How many of the first `count` of `events` (each cut before its end mark) are chunks
    of the shape: the head, a content without a line end and `rest` (the suffix less the
    end mark)."""
    size = len(head) + len(rest)
    for i in range(count):
        event = events[i]
        if (
            len(event) < size
            or not event.startswith(head)
            or not event.endswith(rest)
            or b"\n" in event
        ):
            return i
    return count


def _joined_contents(contents: list[bytes]) -> str | None:
    """The JSON string contents `contents` decoded and joined, when each one is valid on its
    own; else None.

    They are decoded at once, joined with the escape `\\u0000` (a NUL character) and the
    NULs then dropped. That text is theirs exactly when each of them was a valid JSON
    string content on its own, which the checks make sure of: no content writes
    `\\u0000` itself (the separators' text is counted), and each separator decodes as a
    NUL (those are counted too), so none was swallowed by the escape of a content ending
    in a lone backslash, and every content ends outside any escape. A content holding an
    unescaped quote, a control character or invalid UTF-8, or a lone surrogate (which
    cannot pair with the next content's across a separator) fails the decode.
    """
    separators = len(contents) - 1
    body = _SEPARATOR.join(contents)
    if body.count(_SEPARATOR) != separators:
        return None
    try:
        text = orjson.loads(b'"' + body + b'"')
    except orjson.JSONDecodeError:
        return None
    if type(text) is not str or text.count("\x00") != separators:
        return None
    return text.replace("\x00", "") if separators else text


class ChatStreamAssembler:
    """Turns streamed Chat Completions chunks into deltas and one final `ModelResponse`.

    Tool calls are assembled by the upstream's `index`: arguments are concatenated, the
    name and id come from the first delta carrying them, and the arguments are left as
    text until the stream ends (they are never parsed while partial). The indexes in the
    events count the calls from 0 in order of appearance, whatever the upstream sent.

    Upstream quirks handled (each has a test):

    - indexes that do not start at 0 or are not contiguous (`1, 2`, `3, 7`);
    - every call sent with index 0 (or without an index): a delta with a different id
      starts a new call, and so does a delta naming a function when the current call
      already has a name and either a different one or complete JSON arguments (for
      upstreams that send ids only on a call's first delta, or none at all);
    - ids or names repeated on every delta of a call;
    - arguments arriving before the name (buffered until the name is known);
    - arguments sent as a JSON object instead of text.

    Calls without an id get a generated one. `ModelToolCallStart` is emitted as soon as a call's
    name is known, and its id is the one the final response carries.

    Args:
        ids: Maps the upstream's call ids back to the client's (`None`: kept as they are).
    """

    def __init__(self, ids: IdMap | None = None) -> None:
        self.shape = TextChunkShape()
        """The byte shape of this stream's plain text chunks, once one was seen."""
        self._ids = ids
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[_PartialCall] = []
        self._by_upstream: dict[int, _PartialCall] = {}
        self._last: _PartialCall | None = None
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._model: str | None = None

    @property
    def finished(self) -> bool:
        """Whether a chunk carried a `finish_reason` (the answer is complete)."""
        return self._finish is not None

    def feed(self, chunk: Any) -> list[ModelDelta]:
        """Take one decoded chunk (the JSON of one `data:` line); return its deltas.

        Raises:
            UpstreamError: The chunk is an error report.
            WireError: The chunk is not a Chat Completions chunk.
        """
        # On the gateway's hot path: decoded JSON objects are dicts, so plain `dict`
        # checks (much cheaper than `Mapping` ones) and no per-chunk helper calls.
        if not isinstance(chunk, dict):
            raise WireError(f"a stream event is {json_type(chunk)}, not a JSON object")
        choices = chunk.get("choices")
        if not choices and "error" in chunk:
            raise UpstreamError(error_object(chunk, "unspecified error"))
        if self._model is None:
            self._model = str_or_none(chunk.get("model"))
        usage = chunk.get("usage")
        if usage:
            self._usage = parse_usage(usage)
        if not choices:
            return []
        if not isinstance(choices, list):
            raise WireError("'choices' in a stream event is not a list")
        out: list[ModelDelta] = []
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise WireError("a stream event's 'delta' is not an object")
            content = delta.get("content")
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                self._reasoning.append(reasoning)
                out.append(ModelReasoningDelta(reasoning))
            if content and isinstance(content, str):
                self._content.append(content)
                out.append(ModelContentDelta(content))
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                if not isinstance(tool_calls, list):
                    raise WireError("'tool_calls' in a stream event is not a list")
                for raw in tool_calls:
                    if isinstance(raw, dict):
                        self._feed_call(raw, out)
            reason = choice.get("finish_reason")
            if reason and isinstance(reason, str):
                self._finish = reason
        return out

    def feed_text_run(self, chunks: list[Any], start: int) -> tuple[str, int]:
        """The content of the plain text chunks from `chunks[start]` on, joined, and the
        index of the first chunk that is not one (to go through `feed`).

        A plain text chunk (see `plain_text`) is nearly every chunk of a long answer;
        taking a run of them at once (no delta object per chunk) is the gateway's main
        saving on fast streams. A `str` in `chunks` is such a chunk's content, already
        read from its bytes (`TextChunkShape`).
        """
        if self._model is None and type(chunks[start]) is not str:
            return "", start  # the first chunk goes through `feed` (it names the model)
        parts: list[str] = []
        i, n = start, len(chunks)
        while i < n:
            chunk = chunks[i]
            text = chunk if type(chunk) is str else plain_text(chunk)
            if text is None:
                break
            if text:
                parts.append(text)
            i += 1
        if not parts:
            return "", i
        joined = parts[0] if len(parts) == 1 else "".join(parts)
        self._content.append(joined)
        return joined, i

    def _feed_call(self, raw: dict[str, Any], out: list[ModelDelta]) -> None:
        index = raw.get("index")
        key: int | None = index if type(index) is int else None
        call_id = str_or_none(raw.get("id"))
        fn = raw.get("function")
        fn = fn if isinstance(fn, dict) else {}
        name = str_or_none(fn.get("name"))
        fragment = fn.get("arguments")
        if fragment is not None and not isinstance(fragment, str):
            fragment = orjson.dumps(fragment).decode()

        call = self._last if key is None else self._by_upstream.get(key)
        if call is None or _starts_new_call(call, call_id, name):
            call = _PartialCall(index=len(self._calls))
            self._calls.append(call)
            if key is not None:
                self._by_upstream[key] = call
        self._last = call
        if call_id and call.id is None:
            call.id = call_id
        if name and call.name is None:
            call.name = name
        if fragment:
            call.args.append(fragment)

        if call.client_id is not None:
            if fragment:
                out.append(ModelToolCallArgsDelta(call.index, fragment))
        elif call.name is not None:
            if call.id is None:
                call.client_id = new_call_id()
            else:
                call.client_id = call.id if self._ids is None else self._ids.client(call.id)
            out.append(ModelToolCallStart(call.index, call.client_id, call.name))
            if call.args:
                out.append(ModelToolCallArgsDelta(call.index, "".join(call.args)))

    def finish(self) -> ModelResponse:
        """The complete response of everything fed so far."""
        calls = tuple(
            ToolCall(
                id=c.client_id or new_call_id(),
                name=c.name,
                arguments="".join(c.args).strip() or _EMPTY_ARGS,
            )
            for c in self._calls
            # A fragment without a name cannot be called or sent back; drop it.
            if c.name is not None
        )
        message = AssistantMessage(
            content="".join(self._content) or None,
            reasoning="".join(self._reasoning) or None,
            tool_calls=calls,
        )
        return ModelResponse(
            message=message,
            finish_reason=_finish_reason(self._finish, bool(calls)),
            usage=self._usage or Usage(requests=1),
            model=self._model,
        )


def _starts_new_call(call: _PartialCall, call_id: str | None, name: str | None) -> bool:
    """Whether a delta addressed to `call` (same upstream index) is really a new call."""
    if call_id is not None and call.id is not None:
        return call_id != call.id
    if name is None or call.name is None:
        return False
    if name != call.name:
        return True
    # The same name again and no id to tell: a repeat of the name on every delta, or a
    # second call to the same tool. Complete arguments mean the first call is over.
    if not call.args or not call.args[-1].rstrip().endswith("}"):
        return False
    try:
        orjson.loads("".join(call.args))
    except orjson.JSONDecodeError:
        return False
    return True


# --- helpers ----------------------------------------------------------------------------


def _finish_reason(raw: Any, has_calls: bool) -> FinishReason:
    reason = _FINISH.get(raw) if isinstance(raw, str) else None
    # Several servers report "stop" (or nothing) for a turn that ends in tool calls.
    if has_calls and reason in (None, "stop"):
        return "tool_calls"
    if reason is None or (reason == "tool_calls" and not has_calls):
        return "stop"
    return reason


def _arguments_text(raw: Any) -> str:
    if raw is None:
        return _EMPTY_ARGS
    if isinstance(raw, str):
        return raw.strip() or _EMPTY_ARGS
    # Some servers (Ollama-style) send the arguments as an object instead of JSON text.
    return orjson.dumps(raw).decode()


def _content_text(raw: Any) -> str | None:
    if isinstance(raw, str):
        return raw or None
    if isinstance(raw, list):
        parts = [
            p["text"] for p in raw if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        return "".join(parts) or None
    return None


def _reasoning_text(msg: Mapping[str, Any]) -> str | None:
    for key in ("reasoning_content", "reasoning"):
        value = msg.get(key)
        if isinstance(value, str) and value:
            return value
    return None
