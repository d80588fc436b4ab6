"""A scriptable fake Anthropic Messages API server on a real loopback socket, for tests.

```python
with FakeAnthropicServer() as server:
    server.reply(message("hi"))
    server.reply(sse(events(text("hello"), chunk=2)))
    server.reply(sse(events(text("cut short")), drop_after=3))
    model = AnthropicModel(server.base_url, "key", "claude-test")
    ...
    assert server.requests[0].json["messages"][0]["content"][0]["text"] == "hello"
```

Each scripted `Reply` answers one request to `POST /v1/messages`, in order. A request with
nothing scripted gets an Anthropic-shaped 500 error. `GET /v1/models` lists `model_ids`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from fakes.scripted_server import ReceivedRequest, Reply, ScriptedServer, event_stream, raw

__all__ = [
    "FakeAnthropicServer",
    "ReceivedRequest",
    "Reply",
    "error",
    "events",
    "message",
    "raw",
    "sse",
    "text",
    "thinking",
    "tool_use",
]


# --- content blocks -----------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    """A `text` content block."""
    return {"type": "text", "text": value}


def thinking(value: str, signature: str = "sig-fake") -> dict[str, Any]:
    """A `thinking` content block."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool_use(name: str, input: Mapping[str, Any], id: str = "toolu_01") -> dict[str, Any]:
    """A `tool_use` content block."""
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input)}


# --- reply builders -----------------------------------------------------------------------


def message(
    *blocks: Mapping[str, Any] | str,
    stop_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "claude-fake",
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A non-streamed Messages API response; a string block is a text block."""
    content = [text(b) if isinstance(b, str) else dict(b) for b in blocks]
    has_tools = any(b["type"] == "tool_use" for b in content)
    body = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if has_tools else "end_turn"),
        "stop_sequence": None,
        "usage": dict(usage or {"input_tokens": 10, "output_tokens": 5}),
    }
    reply = raw(json.dumps(body), status=status)
    reply.headers.update(headers or {})
    return reply


def error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An Anthropic-shaped error response."""
    body = {"type": "error", "error": {"type": type, "message": message}}
    reply = raw(json.dumps(body), status=status)
    reply.headers.update(headers or {})
    return reply


def events(
    *blocks: Mapping[str, Any] | str,
    stop_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "claude-fake",
    chunk: int | None = None,
    ping: bool = True,
    stop: bool = True,
) -> list[dict[str, Any]]:
    """The stream events of a message made of `blocks`, as Anthropic sends them.

    Args:
        blocks: Content blocks (`text(...)`, `thinking(...)`, `tool_use(...)`); a string is
            a text block.
        stop_reason: Defaults to `tool_use` when a block is one, else `end_turn`.
        usage: `input_tokens` goes in `message_start`, `output_tokens` in `message_delta`.
        model: The model named in `message_start`.
        chunk: Characters per delta (text, thinking, and the tool input's JSON); `None`
            sends each block's content in one delta.
        ping: Send a `ping` event after `message_start`.
        stop: End with `message_stop` (leave it out to fake a stream cut short).
    """
    content = [text(b) if isinstance(b, str) else dict(b) for b in blocks]
    counts = dict(usage or {"input_tokens": 10, "output_tokens": 5})
    out: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": counts.get("input_tokens", 0), "output_tokens": 1},
            },
        }
    ]
    if ping:
        out.append({"type": "ping"})
    for index, block in enumerate(content):
        kind = block["type"]
        if kind == "text":
            start, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": p} for p in _split(block["text"], chunk)],
            )
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p} for p in _split(block["thinking"], chunk)
            ]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        elif kind == "tool_use":
            start = {**block, "input": {}}
            args = json.dumps(block["input"]) if block["input"] else ""
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _split(args, chunk)]
        else:
            start, deltas = block, []
        out.append({"type": "content_block_start", "index": index, "content_block": start})
        out.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        out.append({"type": "content_block_stop", "index": index})
    has_tools = any(b["type"] == "tool_use" for b in content)
    out.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": stop_reason or ("tool_use" if has_tools else "end_turn"),
                "stop_sequence": None,
            },
            "usage": {"output_tokens": counts.get("output_tokens", 0)},
        }
    )
    if stop:
        out.append({"type": "message_stop"})
    return out


def sse(
    stream_events: Iterable[Mapping[str, Any] | str],
    *,
    split: int | None = None,
    delay: float = 0.0,
    drop_after: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A `text/event-stream` body: dicts become `event: {type}` + `data: {json}` events,
    strings are sent verbatim.

    Args:
        stream_events: The events, in order (see `events`). A string is written as is (use
            it for malformed lines, comments or hand-made framing).
        split: If set, the bytes are sent in pieces of this size, cutting lines anywhere;
            otherwise each event is one piece.
        delay: Seconds to wait before the first byte.
        drop_after: Cut the connection after this many pieces, without ending the body.
    """
    parts: list[str] = []
    for ev in stream_events:
        if isinstance(ev, str):
            parts.append(ev)
        else:
            parts.append(f"event: {ev.get('type')}\ndata: {json.dumps(ev)}\n\n")
    return event_stream(
        parts, split=split, delay=delay, drop_after=drop_after, headers=dict(headers or {})
    )


def _split(value: str, size: int | None) -> list[str]:
    if not value:
        return []
    if size is None:
        return [value]
    return [value[i : i + size] for i in range(0, len(value), size)]


# --- the server ---------------------------------------------------------------------------


class FakeAnthropicServer(ScriptedServer):
    """A fake Anthropic Messages API server in a background thread on 127.0.0.1."""

    label = "fake Anthropic"

    def __init__(self, model_ids: Iterable[str] = ("claude-fake",)) -> None:
        super().__init__("/v1/messages", model_ids)

    @property
    def base_url(self) -> str:
        """The API root as Anthropic's own is written (`AnthropicModel` adds `/v1/messages`)."""
        return f"http://127.0.0.1:{self.port}"

    def models_body(self) -> Any:
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
            for m in self.model_ids
        ]
        return {"data": data, "has_more": False, "first_id": None, "last_id": None}

    def unscripted_body(self) -> Any:
        return {
            "type": "error",
            "error": {"type": "api_error", "message": "fake server: no reply scripted"},
        }
