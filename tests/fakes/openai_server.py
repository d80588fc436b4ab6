"""A scriptable fake OpenAI-compatible server on a real loopback socket, for tests.

```python
with FakeOpenAIServer() as server:
    server.reply(completion(content="hi"))
    server.reply(sse([delta(content="h"), delta(content="i", finish_reason="stop")]))
    model = OpenAIChatModel(server.base_url, "key", "gpt-test")
    ...
    assert server.requests[0].json["messages"][0]["content"] == "hello"
```

Each scripted `Reply` answers one request to `POST /v1/chat/completions`, in order. A
`Handler` (a function of the `ReceivedRequest` returning a `Reply`) can stand in for a
reply and sees the request. A request with nothing scripted gets the `set_default` reply
(a `Reply` or a `Handler`, for benchmarks and long-running tests) or, without one, an
OpenAI-shaped 500 error. `GET /v1/models` lists `model_ids`.

Reply builders:

- `completion(...)`, `error(status, message)`, `raw(bytes)`: one-piece bodies.
- `delta(...)` makes one `chat.completion.chunk`; `sse(events, ...)` streams them
  (`split=` cuts the bytes anywhere, `delay=` waits before the first byte, `interval=`
  waits between pieces, `done=False` leaves out `data: [DONE]`, `drop=True` drops the
  connection after the last piece, with no end of body).
- `text_events(text, chunk=)` / `text_sse(...)`: raw text in `content`, as a model served
  without a tool parser streams it (for `parse:<format>` routes).
- `calls_events(calls, indexes=, ids=, chunk=)` / `calls_sse(...)`: streamed tool calls
  with the index quirks of real upstreams: `indexes="zero"` (every call at index 0),
  `"none"` (no index at all), or explicit numbers (`[1, 2]`); `ids="first"` (the id only on
  a call's first delta), `"every"`, `"none"`.
- `dropped(events)`: some events, then the connection is dropped mid-answer.
- `server.fail(n, status)`: the next `n` requests get an OpenAI-shaped error (optionally
  with `Retry-After`).

Streams and disconnects: every streamed reply is counted. `server.active` is the number
of streams in progress, `server.completed` those sent to the end, `server.cancelled`
those the client went away from before the end (use a slow stream, `interval=`, to see
it), `server.dropped` those the server cut. `server.wait_until(predicate)` waits (up to a
timeout) for the server thread to reach a state, e.g.
`server.wait_until(lambda: server.cancelled == 1)`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from fakes.scripted_server import Handler, ReceivedRequest, Reply, ScriptedServer, event_stream, raw

__all__ = [
    "FakeOpenAIServer",
    "Handler",
    "ReceivedRequest",
    "Reply",
    "calls_events",
    "calls_sse",
    "completion",
    "delta",
    "dropped",
    "error",
    "raw",
    "sse",
    "text_events",
    "text_sse",
    "tool_call",
]


# --- reply builders -----------------------------------------------------------------------


def tool_call(
    name: str, arguments: str | Mapping[str, Any], id: str | None = "call_1"
) -> dict[str, Any]:
    """A complete `tool_calls` entry of a non-streamed message."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": args}}
    if id is not None:
        out["id"] = id
    return out


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning_content: str | None = None,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "fake-model",
    status: int = 200,
) -> Reply:
    """A non-streamed Chat Completions response."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        body["usage"] = dict(usage)
    return raw(json.dumps(body), status=status)


def error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An OpenAI-shaped error response."""
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    reply = raw(json.dumps(body), status=status)
    reply.headers.update(headers or {})
    return reply


def delta(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning_content: str | None = None,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "fake-model",
) -> dict[str, Any]:
    """One streamed `chat.completion.chunk`. With only `usage`, `choices` is empty."""
    d: dict[str, Any] = {}
    if content is not None:
        d["content"] = content
    if reasoning_content is not None:
        d["reasoning_content"] = reasoning_content
    if reasoning is not None:
        d["reasoning"] = reasoning
    if tool_calls is not None:
        d["tool_calls"] = tool_calls
    chunk: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": model,
    }
    only_usage = usage is not None and not d and finish_reason is None
    chunk["choices"] = (
        [] if only_usage else [{"index": 0, "delta": d, "finish_reason": finish_reason}]
    )
    if usage is not None:
        chunk["usage"] = dict(usage)
    return chunk


def sse(
    events: Iterable[Mapping[str, Any] | str],
    *,
    done: bool = True,
    split: int | None = None,
    delay: float = 0.0,
    interval: float = 0.0,
    drop: bool = False,
) -> Reply:
    """A `text/event-stream` body: dicts become `data: {json}` events, strings are sent verbatim.

    Args:
        events: The chunks, in order. A string is written as is (use it for malformed
            lines, comments or hand-made framing).
        done: Whether to end with `data: [DONE]`.
        split: If set, the bytes are sent in pieces of this size, cutting lines anywhere.
        delay: Seconds to wait before the first byte.
        interval: Seconds to wait between pieces.
        drop: Drop the connection after the last piece, without ending the body.
    """
    parts: list[str] = []
    for ev in events:
        parts.append(ev if isinstance(ev, str) else f"data: {json.dumps(ev)}\n\n")
    if done:
        parts.append("data: [DONE]\n\n")
    return event_stream(
        parts,
        split=split,
        delay=delay,
        interval=interval,
        drop_at_end=drop,
    )


def dropped(events: Iterable[Mapping[str, Any] | str], **options: Any) -> Reply:
    """These events, then the connection is dropped: no `[DONE]`, no end of the body."""
    return sse(events, done=False, drop=True, **options)


def text_events(
    text: str,
    *,
    chunk: int = 1,
    finish_reason: str | None = "stop",
    usage: Mapping[str, int] | None = None,
    model: str = "fake-model",
) -> list[dict[str, Any]]:
    """Raw text streamed in `content`, `chunk` characters per delta, then the finish."""
    events = [delta(text[i : i + chunk], model=model) for i in range(0, len(text), chunk)]
    if finish_reason is not None:
        events.append(delta(finish_reason=finish_reason, model=model))
    if usage is not None:
        events.append(delta(usage=usage, model=model))
    return events


def text_sse(
    text: str,
    *,
    chunk: int = 1,
    finish_reason: str | None = "stop",
    usage: Mapping[str, int] | None = None,
    **options: Any,
) -> Reply:
    """`text_events` as a stream (`options` as for `sse`): what a model served without a
    tool parser sends, calls and all, for `parse:<format>` routes."""
    return sse(text_events(text, chunk=chunk, finish_reason=finish_reason, usage=usage), **options)


StreamedCall = tuple[str | None, str, str | Sequence[str]]
"""`(id, name, arguments)` of a streamed call: `None` for no id; the arguments as one
text (cut by `chunk=`) or as the exact pieces to send, one delta each."""


def calls_events(
    calls: Sequence[StreamedCall],
    *,
    indexes: Literal["distinct", "zero", "none"] | Sequence[int] = "distinct",
    ids: Literal["first", "every", "none"] = "first",
    chunk: int | None = None,
    content: str | None = None,
    finish_reason: str | None = "tool_calls",
) -> list[dict[str, Any]]:
    """Streamed tool calls, one after the other, with a real upstream's quirks.

    Args:
        calls: `(id, name, arguments)` per call (arguments as text or as pieces).
        indexes: `distinct` (0, 1, ...), `zero` (every call at index 0, as some servers
            do), `none` (no `index` key), or the numbers to use (e.g. `[1, 2]`).
        ids: Where the id goes: on a call's `first` delta only, on `every` delta, or
            `none` at all.
        chunk: Characters of arguments per delta (`None`: all in the first delta).
        content: Text streamed before the calls.
        finish_reason: The last chunk's finish reason (`None`: no finish chunk).
    """
    events: list[dict[str, Any]] = []
    if content:
        events.append(delta(content))
    for n, (call_id, name, arguments) in enumerate(calls):
        if indexes == "distinct":
            index: int | None = n
        elif indexes == "zero":
            index = 0
        elif indexes == "none":
            index = None
        else:
            index = list(indexes)[n]
        if isinstance(arguments, str):
            size = chunk or max(1, len(arguments))
            pieces = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
        else:
            pieces = list(arguments) or [""]
        for k, piece in enumerate(pieces):
            entry: dict[str, Any] = {"function": {"arguments": piece}}
            if index is not None:
                entry["index"] = index
            if call_id is not None and (ids == "every" or (ids == "first" and k == 0)):
                entry["id"] = call_id
            if k == 0:
                entry["type"] = "function"
                entry["function"]["name"] = name
            events.append(delta(tool_calls=[entry]))
    if finish_reason is not None:
        events.append(delta(finish_reason=finish_reason))
    return events


def calls_sse(calls: Sequence[StreamedCall], **options: Any) -> Reply:
    """`calls_events` as a stream: the keywords of `calls_events` shape the calls, the
    rest (`split`, `interval`, `done`, ...) go to `sse`."""
    names = ("indexes", "ids", "chunk", "content", "finish_reason")
    shape = {k: options.pop(k) for k in names if k in options}
    return sse(calls_events(calls, **shape), **options)


# --- the server ---------------------------------------------------------------------------


class FakeOpenAIServer(ScriptedServer):
    """A fake OpenAI-compatible server in a background thread on 127.0.0.1, a free port."""

    label = "fake OpenAI"

    def __init__(self, model_ids: Iterable[str] = ("fake-model",)) -> None:
        super().__init__("/v1/chat/completions", model_ids)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def fail(
        self,
        n: int = 1,
        status: int = 503,
        *,
        message: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Script `n` OpenAI-shaped error answers (with `Retry-After` when given)."""
        headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
        kind = "server_error" if status >= 500 else "invalid_request_error"
        text = message or f"fake server: scripted failure ({status})"
        self.reply(*(error(status, text, type=kind, headers=headers) for _ in range(n)))

    def models_body(self) -> Any:
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "owned_by": "fake"} for m in self.model_ids],
        }

    def unscripted_body(self) -> Any:
        return {"error": {"message": "fake server: no reply scripted", "type": "server_error"}}
