"""The formats a prompted model writes when the instructions teach it to call tools.

- `pre_json`: `<pre>{"name": …, "arguments": {…}}</pre>` (or a list of such objects).
- `json_fence`: the same JSON in a fenced ```` ```json ```` block.
- `json`: a bare JSON call object (`"arguments"` or `"parameters"`), or a list of them,
  starting a line. Any other JSON value stays content.
- `tool_request`: the strict whole-message form `{"tool_request": {"name", "arguments"}}`.
  It is a call only when it is the entire message (whitespace aside); text around it,
  partial or invalid JSON make it ordinary content.

`pre_json` and `json_fence` are lenient, since prompted models drift off the taught
syntax: they also take `<tool>{"name", "arguments"}</tool>` and
`<function=NAME>{arguments}</function>`, and `json_fence` an untagged fence (a call when
it holds one, else an ordinary code block).

All of them accept a leading `<think>` block (or a pre-filled one) as reasoning.
"""

from __future__ import annotations

import re
from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, TextSink, ToolSpecs
from toolwire.parsing._json import JsonEndScanner, loads, loads_object
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ContentDelta, ParseEvent, ReasoningDelta
from toolwire.parsing.formats._calls import CallParser, Reasoning, ToolRegion
from toolwire.parsing.formats.hermes import call_from_object

THINK = Reasoning(open="<think>", close="</think>")


def calls_from_json(text: str, *, require_arguments: bool) -> list[RawCall] | None:
    """The calls in `text`: one call object or a non-empty list of them; else None."""
    try:
        value = loads(text)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = [call_from_object(v, require_arguments=require_arguments) for v in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def complete_list_items(text: str, *, require_arguments: bool) -> list[RawCall]:
    """The calls of a JSON list cut off before its end that the model finished.

    An item counts once the model moved on to the next one (its comma was written); an
    item that is not a call ends the salvage.
    """
    calls: list[RawCall] = []
    pos, n = 0, len(text)
    if not text.startswith("["):
        return calls
    pos = 1
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n or text[pos] != "{":
            return calls
        end = JsonEndScanner().feed(text[pos:])
        if end < 0:
            return calls
        item = text[pos : pos + end]
        pos += end
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n or text[pos] != ",":
            return calls
        pos += 1
        call = call_from_object(loads_object(item), require_arguments=require_arguments)
        if call is None:
            return calls
        calls.append(call)


def _parse_block(inner: str, closed: bool, truncated: bool) -> list[RawCall] | None:
    body = inner.strip()
    if truncated:
        calls = complete_list_items(body, require_arguments=False)
        # An unfinished JSON call is dropped rather than passed through as markup.
        return calls if calls or body.startswith(("{", "[")) else None
    return calls_from_json(body, require_arguments=False)


# ----------------------------------------------------------------------------- json

_VALUE_START = re.compile(r"[{\[]")


class _BareJson(StreamParser):
    """Content with call objects (or lists of them) that start a line."""

    def __init__(self) -> None:
        super().__init__()
        self._content = TextSink(ContentDelta)
        self._line_blank = True  # only whitespace so far on the current line
        self._scan: JsonEndScanner | None = None
        self._parts: list[str] = []

    def feed(self, delta: str) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        pos, n = 0, len(delta)
        while pos < n:
            if self._scan is not None:
                end = self._scan.feed(delta[pos:] if pos else delta)
                if end < 0:
                    self._parts.append(delta[pos:])
                    return out
                self._parts.append(delta[pos : pos + end])
                pos += end
                self._close_value(out)
                continue
            m = _VALUE_START.search(delta, pos)
            stop = n if m is None else m.start()
            if stop > pos:
                segment = delta[pos:stop]
                nl = segment.rfind("\n")
                if nl >= 0:
                    self._line_blank = not segment[nl + 1 :].strip()
                elif segment.strip():
                    self._line_blank = False
                self._content.write(segment, out)
            if m is None:
                return out
            if self._line_blank:
                self._scan = JsonEndScanner()
                self._parts = []
                pos = stop
            else:
                self._content.write(delta[stop], out)
                pos = stop + 1
        return out

    def _close_value(self, out: list[ParseEvent]) -> None:
        raw = "".join(self._parts)
        self._scan, self._parts = None, []
        calls = calls_from_json(raw, require_arguments=True)
        if calls is None:
            self._content.write(raw, out)
            self._line_blank = False
            return
        for call in calls:
            out.extend(self._call_events(call))
        self._line_blank = True

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        if self._scan is not None:
            raw = "".join(self._parts)
            self._scan, self._parts = None, []
            calls = complete_list_items(raw, require_arguments=True) if truncated else []
            if calls:
                for call in calls:
                    out.extend(self._call_events(call))
            else:
                # Unfinished JSON is not a call; it may not even have been meant as one.
                self._content.write(raw, out)
        return out


# ----------------------------------------------------------------------------- tool_request

_HEADER = '{"tool_request":{'
_WS_BEFORE = frozenset({0, 1, 15, 16})  # header positions whitespace may precede
_HEAD, _BODY, _AFTER, _TEXT = 0, 1, 2, 3


class _ToolRequest(StreamParser):
    """The whole message is `{"tool_request": {...}}`, or it is all content.

    Everything is held while the output so far could still be that message; the moment
    it cannot (another first key, text after the object), all of it is released.
    """

    def __init__(self) -> None:
        super().__init__()
        self._content = TextSink(ContentDelta)
        self._state = _HEAD
        self._held: list[str] = []
        self._header_pos = 0
        self._scan = JsonEndScanner()

    def feed(self, delta: str) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        if not delta:
            return out
        if self._state == _TEXT:
            self._content.write(delta, out)
            return out
        self._held.append(delta)
        if self._state == _HEAD and not self._match_header(delta):
            self._release(out)
            return out
        if self._state in (_HEAD, _BODY):
            end = self._scan.feed(delta)
            if end < 0:
                return out
            self._state = _AFTER
            delta = delta[end:]
        if delta.strip():
            self._release(out)
        return out

    def _match_header(self, delta: str) -> bool:
        pos = self._header_pos
        for c in delta:
            if pos == len(_HEADER):
                break
            if c == _HEADER[pos]:
                pos += 1
            elif not (c.isspace() and pos in _WS_BEFORE):
                return False
        self._header_pos = pos
        if pos == len(_HEADER):
            self._state = max(self._state, _BODY)
        return True

    def _release(self, out: list[ParseEvent]) -> None:
        self._state = _TEXT
        text, self._held = "".join(self._held), []
        self._content.write(text, out)

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        if self._state == _TEXT:
            return out
        if self._state == _AFTER and not truncated:
            call = _request_call(loads_object("".join(self._held)))
            if call is not None:
                self._held = []
                self._state = _TEXT
                return self._call_events(call)
        self._release(out)
        return out


def _request_call(obj: dict[str, Any] | None) -> RawCall | None:
    if obj is None or set(obj) != {"tool_request"}:
        return None
    request = obj["tool_request"]
    if not isinstance(request, dict) or not set(request) <= {"name", "arguments"}:
        return None
    name, args = request.get("name"), request.get("arguments", {})
    if not isinstance(name, str) or not name.strip() or not isinstance(args, dict):
        return None
    return RawCall(name.strip(), args)


# ----------------------------------------------------------------------------- reasoning


_LEAD, _REASON, _INNER = 0, 1, 2


class _ThinkFirst(StreamParser):
    """A leading `<think>…</think>` block as reasoning, then the rest to `inner`."""

    def __init__(self, inner: StreamParser, *, start_in_reasoning: bool) -> None:
        super().__init__()
        self._inner = inner
        self._state = _REASON if start_in_reasoning else _LEAD
        self._held = ""
        self._close = MarkerScanner([THINK.close])
        self._thoughts = TextSink(ReasoningDelta)

    def feed(self, delta: str) -> list[ParseEvent]:
        if self._state == _INNER:
            return self._inner.feed(delta)
        out: list[ParseEvent] = []
        text, self._held = self._held + delta, ""
        if self._state == _LEAD:
            head = text.lstrip()
            if THINK.open.startswith(head):
                self._held = text  # could still become the opener
                return out
            if not head.startswith(THINK.open):
                self._state = _INNER
                return self._inner.feed(text)
            self._state = _REASON
            text = head[len(THINK.open) :]
        m = self._close.search(text)
        if m is None:
            safe = self._close.safe_end(text)
            self._thoughts.write(text[:safe], out)
            self._held = text[safe:]
            return out
        self._thoughts.write(text[: m.start()], out)
        self._state = _INNER
        out.extend(self._inner.feed(text[m.end() :]))
        return out

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        held, self._held = self._held, ""
        if self._state == _LEAD:
            out.extend(self._inner.feed(held))
        elif self._state == _REASON:
            self._thoughts.write(held, out)
        out.extend(self._inner.finish(truncated=truncated))
        return out


# ----------------------------------------------------------------------------- factory


def _parse_function_block(inner: str, closed: bool, truncated: bool) -> list[RawCall] | None:
    """`<function=NAME>{arguments}</function>` (Llama 4 and Qwen3-Coder habits)."""
    if truncated:
        return []
    name, sep, body = inner.partition(">")
    name = name.strip()
    if not sep or not name or any(c.isspace() or c in "<{" for c in name):
        return None
    body = body.strip()
    try:
        arguments = loads(body) if body else {}
    except ValueError:
        return None
    return [RawCall(name, arguments)] if isinstance(arguments, dict) else None


_LENIENT = (
    # Off-format wrappers prompted models drift into; recognised in every generic format.
    ToolRegion(open="<tool>", close="</tool>", parse=_parse_block, json_aware=True),
    ToolRegion(open="<function=", close="</function>", parse=_parse_function_block),
)


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    thinking = prompt_suffix.rstrip().endswith(THINK.open)
    if name == "json":
        return _ThinkFirst(_BareJson(), start_in_reasoning=thinking)
    if name == "tool_request":
        return _ThinkFirst(_ToolRequest(), start_in_reasoning=thinking)
    if name == "json_fence":
        regions = [
            ToolRegion(open=opener, close="```", parse=_parse_block, json_aware=True)
            for opener in ("```json", "```JSON")
        ]
        # An untagged fence is a call when it holds one; any other code block is content.
        regions.append(
            ToolRegion(open="```\n", close="```", parse=_parse_block, json_aware=True, strict=False)
        )
    else:
        regions = [ToolRegion(open="<pre>", close="</pre>", parse=_parse_block, json_aware=True)]
    return CallParser(
        regions=[*regions, *_LENIENT],
        reasoning=[THINK],
        start_in_reasoning=thinking,
        drop=[THINK.close],
    )
