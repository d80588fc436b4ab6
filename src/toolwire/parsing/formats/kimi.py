"""Kimi calls: K2.x section tokens (`kimi_k2`, `kimi_k2_thinking`) and K3 XTML (`kimi_k3`).

K2.x:

    <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
    <|tool_call_argument_begin|>{JSON}<|tool_call_end|>…<|tool_calls_section_end|>

The tool name lives only in the call id, which becomes the call's id. Text inside the
section but outside a call is noise and dropped; `<|tool_call_end|>` inside a JSON string
of the arguments is data. Each call is emitted at its own `<|tool_call_end|>`, or at the
next `<|tool_call_begin|>` when the model left the end marker out. Call tokens outside a
call (`<|tool_call_argument_begin|>`, `<|tool_call_end|>`) never reach content.
`kimi_k2_thinking` (K2-Thinking, K2.5, K2.6) differs only in that its generation prompt
opens `<think>`, so the output starts inside reasoning unless the prompt closed it.

K3 writes XTML elements, `<|open|>TAG attr="…"<|sep|>` … `<|close|>TAG<|sep|>`:
a `think` channel (reasoning, opened by the default generation prompt), a `response`
channel (content) and a `tools` element of `call tool="NAME"` elements holding
`argument key="K" type="T"` elements. Attribute values escape `&` and `"`; argument bodies
are raw, typed by their `type` attribute. Since a body is raw, `<|close|>argument<|sep|>`
ends it only where another argument or the call's end follows.

Kimi templates insert no separators around calls, so content keeps its whitespace.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs, left_open, tool_names
from toolwire.parsing._blocks import CloseMarkerReader
from toolwire.parsing._engine import WAIT, CursorParser
from toolwire.parsing._json import loads_object
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ParseEvent
from toolwire.parsing.formats._schema import ArgSchemas, coerce, types_of

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARGS_BEGIN, CALL_END = (
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)
# Stray closers, call tokens outside a call and the end-of-turn token never belong in content.
_DROP = (THINK_CLOSE, SECTION_END, ARGS_BEGIN, CALL_END, "<|im_end|>")

_SECTION_SCAN = MarkerScanner([CALL_BEGIN, SECTION_END])
_AFTER_CALLS_SCAN = MarkerScanner([THINK_CLOSE, SECTION_BEGIN, CALL_BEGIN])


def _arguments_reader() -> CloseMarkerReader:
    # Outside a JSON string the arguments end at `<|tool_call_end|>`, or before the next
    # call's `<|tool_call_begin|>` when the model left the end marker out.
    return CloseMarkerReader(CALL_END, json_aware=True, ends_before=(CALL_BEGIN,))


def _name_from_id(call_id: str) -> str:
    """`functions.get_weather:0` → `get_weather` (the prefix and index are optional)."""
    name = call_id.removeprefix("functions.")
    head, sep, index = name.rpartition(":")
    if sep and index.strip().isdigit():
        name = head
    return name.strip()


class KimiK2Parser(CursorParser):
    def __init__(self, tools: ToolSpecs = None, *, start_in_reasoning: bool) -> None:
        super().__init__(
            content_markers=[SECTION_BEGIN, CALL_BEGIN, THINK_OPEN, *_DROP],
            reasoning_markers=[THINK_CLOSE, SECTION_BEGIN, CALL_BEGIN, THINK_OPEN],
            start_in_reasoning=start_in_reasoning,
            strip=False,
        )
        self._bare = False
        # A call id that is only a counter (`0`) names no tool: with one tool offered, the
        # call is to it (as vLLM reads it).
        names = tool_names(tools)
        self._only_tool = next(iter(names)) if len(names) == 1 else ""
        self._id = ""
        self._args_reader = _arguments_reader()
        self._in_thought = False  # the current block was opened inside reasoning
        self._held: list[str] = []

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        out = super().finish(truncated=truncated)
        if self._held:
            # No `</think>` came after the calls: what followed them was the answer.
            held, self._held = "".join(self._held), []
            self._content.write(held, out)
        return out

    def _on_content_marker(self, m: re.Match[str]) -> bool:
        marker = m.group()
        if marker in (SECTION_BEGIN, CALL_BEGIN):
            self._in_thought = False
            self._open(marker, m)
            return True
        self._pos = m.end()
        if marker == THINK_OPEN:
            self._state = self._reasoning_state
        return True

    def _on_reasoning_marker(self, m: re.Match[str]) -> bool:
        marker = m.group()
        if marker in (SECTION_BEGIN, CALL_BEGIN):
            # K2-Thinking calls tools inside `<think>` and may think on after them.
            self._in_thought = True
            self._open(marker, m)
            return True
        self._pos = m.end()
        if marker == THINK_CLOSE:
            self._state = self._content_state
        return True

    def _close_block(self) -> None:
        super()._close_block()
        if self._in_thought:
            self._state = self._after_calls_in_thought

    def _after_calls_in_thought(self) -> bool:
        """Text after calls made inside `<think>`: more reasoning if a `</think>` follows,
        else (the output ends first) the answer; held until that is known."""
        m = self._scan(_AFTER_CALLS_SCAN, self._held.append)
        if m is None:
            return False
        held, self._held = "".join(self._held), []
        self._write_reasoning(held)
        if m.group() == THINK_CLOSE:
            self._pos = m.end()
            self._state = self._content_state
            return True
        self._open(m.group(), m)
        return True

    def _open(self, marker: str, m: re.Match[str]) -> None:
        # A call without a section around it is read the same way, alone.
        self._bare = marker == CALL_BEGIN
        self._open_block(self._call_id if self._bare else self._section, m.start(), m.end())

    def _section(self) -> bool:
        m = self._scan(_SECTION_SCAN, _discard)
        if m is None:
            return False
        self._pos = m.end()
        if m.group() == CALL_BEGIN:
            self._state = self._call_id
        else:
            self._close_block()
        return True

    def _call_id(self) -> bool:
        k = self._find(self._pos, ARGS_BEGIN, forbid="<")
        if k is WAIT:
            return False
        call_id = self._buf[self._pos : k].strip() if k >= 0 else ""
        if not _name_from_id(call_id):
            self._fail_block()
            return True
        self._id = call_id
        self._pos = k + len(ARGS_BEGIN)
        self._args_reader = _arguments_reader()
        self._state = self._arguments
        return True

    def _arguments(self) -> bool:
        """Collect the JSON arguments up to a `<|tool_call_end|>` (or the next call's begin
        marker) outside JSON strings."""
        buf, pos = self._buf, self._pos
        end = self._args_reader.feed(buf[pos:]) if pos < len(buf) else -1
        if end < 0:
            self._pos = len(buf)
            return False
        self._pos = pos + end
        if self._args_reader.unread:  # the next call's marker began in an earlier delta
            self._unread(self._args_reader.unread)
        self._end_call()
        return True

    def _end_call(self) -> None:
        text = self._args_reader.inner.strip()
        args = loads_object(text) if text else {}
        if args is None:
            self._fail_block()
            return
        name = _name_from_id(self._id)
        if name.isdigit() and self._only_tool:
            name = self._only_tool
        self._emit(RawCall(name, args, id=self._id))
        if self._bare:
            self._close_block()
        else:
            self._state = self._section

    def _at_eof(self) -> None:
        if self._state == self._section:
            # The section's end marker is missing, but every call in it was complete.
            self._close_block()
        elif (
            self._state == self._arguments
            and not self._truncated
            and not self._args_reader.in_string
        ):
            self._end_call()
            if self._in_block:
                self._close_block()
        else:
            super()._at_eof()


def _discard(text: str) -> None:
    """Noise between the calls of a section is not content."""


# ---------------------------------------------------------------------------- K3 XTML

OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"
END_OF_MSG = "<|end_of_msg|>"
ARG_CLOSE = CLOSE + "argument" + SEP
_ARG_NEXT = (OPEN + "argument", CLOSE + "call" + SEP)
_VALUE_SCAN = MarkerScanner([CLOSE])
_HEADER = re.compile(r'\s*([A-Za-z_][\w.-]*)((?:\s+[\w.-]+="[^"]*")*)\s*')
_ATTR = re.compile(r'([\w.-]+)="([^"]*)"')


@dataclass(frozen=True, slots=True)
class _Tag:
    kind: str  # OPEN or CLOSE
    name: str
    attrs: dict[str, str]
    end: int


class KimiK3Parser(CursorParser):
    def __init__(self, tools: ToolSpecs, *, start_in_reasoning: bool) -> None:
        super().__init__(
            content_markers=[OPEN, CLOSE, END_OF_MSG],
            reasoning_markers=[OPEN, CLOSE, END_OF_MSG],
            start_in_reasoning=start_in_reasoning,
            strip=False,
        )
        self._schemas = ArgSchemas(tools)
        self._bare = False
        self._name = ""
        self._key = ""
        self._type = ""
        self._args: dict[str, Any] = {}

    def _tag(self, k: int) -> _Tag | Literal[False] | None:
        """The element tag at `k`, False when there is none, WAIT when not all here yet."""
        buf = self._buf
        kind = OPEN if buf.startswith(OPEN, k) else CLOSE if buf.startswith(CLOSE, k) else ""
        if not kind:
            rest = buf[k : k + len(OPEN)]
            partial = any(len(rest) < len(t) and t.startswith(rest) for t in (OPEN, CLOSE))
            return WAIT if partial and self._undecided() else False
        j = k + len(kind)
        e = self._find(j, SEP, forbid="<>", cap=1024)
        if e is WAIT:
            return WAIT
        header = _HEADER.fullmatch(buf, j, e) if e >= 0 else None
        if header is None or (kind == CLOSE and header.group(2)):
            return False
        attrs = {a: html.unescape(v) for a, v in _ATTR.findall(header.group(2))}
        return _Tag(kind, header.group(1), attrs, e + len(SEP))

    # ------------------------------------------------------------------ channels

    def _on_content_marker(self, m: re.Match[str]) -> bool:
        return self._channel_marker(m, self._write_content)

    def _on_reasoning_marker(self, m: re.Match[str]) -> bool:
        return self._channel_marker(m, self._write_reasoning)

    def _channel_marker(self, m: re.Match[str], write: Callable[[str], None]) -> bool:
        if m.group() == END_OF_MSG:
            self._pos = m.end()
            return True
        tag = self._tag(m.start())
        if tag is WAIT:
            return False
        if tag and tag.kind == OPEN and tag.name == "tools":
            self._bare = False
            self._open_block(self._tools, m.start(), tag.end)
            return True
        if tag and tag.kind == OPEN and self._starts_call(tag):
            # A `call` outside `tools` is read alone.
            self._bare = True
            self._open_block(self._call, m.start(), tag.end)
            return True
        if not tag or tag.name not in ("think", "response", "message", "tools"):
            write(m.group())  # marker text that is not an element of a message
            self._pos = m.end()
            return True
        self._pos = tag.end
        # Any channel switch ends reasoning; only an opened `think` starts it.
        is_think = tag.kind == OPEN and tag.name == "think"
        self._state = self._reasoning_state if is_think else self._content_state
        return True

    # ------------------------------------------------------------------ tools

    def _next_tag(self) -> _Tag | Literal[False] | None:
        if not self._skip_ws():
            return WAIT
        return self._tag(self._pos)

    def _starts_call(self, tag: _Tag) -> bool:
        name = tag.attrs.get("tool", "").strip() if tag.name == "call" else ""
        if name:
            self._name, self._args = name, {}
        return bool(name)

    def _tools(self) -> bool:
        tag = self._next_tag()
        if tag is WAIT:
            return False
        if tag and tag.kind == OPEN and self._starts_call(tag):
            self._pos = tag.end
            self._state = self._call
        elif tag and tag.kind == CLOSE and tag.name == "tools":
            self._pos = tag.end
            self._close_block()
        else:
            self._fail_block()
        return True

    def _call(self) -> bool:
        tag = self._next_tag()
        if tag is WAIT:
            return False
        if tag and tag.kind == OPEN and tag.name == "argument" and "key" in tag.attrs:
            self._key, self._type = tag.attrs["key"], tag.attrs.get("type", "")
            self._parts.clear()
            self._pos = tag.end
            self._state = self._value
        elif tag and tag.kind == CLOSE and tag.name == "call":
            self._pos = tag.end
            self._emit(RawCall(self._name, self._args))
            self._args = {}
            if self._bare:
                self._close_block()
            else:
                self._state = self._tools
        else:
            self._fail_block()
        return True

    def _value(self) -> bool:
        m = self._scan(_VALUE_SCAN, self._write_part)
        if m is None:
            return False
        start = m.start()
        ok = self._follows(start, (ARG_CLOSE,), eof=False)
        if ok:
            ok = self._follows(start + len(ARG_CLOSE), _ARG_NEXT, eof=True)
        if ok is WAIT:
            return False
        if not ok:
            # A body is raw text: marker text in it that structure does not follow is data.
            self._parts.append(CLOSE)
            self._pos = m.end()
            return True
        self._pos = start + len(ARG_CLOSE)
        value = "".join(self._parts)
        self._parts.clear()
        types = types_of([self._type])
        typed = (
            coerce(value, types) if types else self._schemas.coerce(self._name, self._key, value)
        )
        self._args[self._key] = typed
        self._state = self._call
        return True

    def _at_eof(self) -> None:
        if self._state == self._tools:
            self._close_block()
        elif self._state == self._call and not self._truncated:
            self._emit(RawCall(self._name, self._args))
            self._close_block()
        else:
            super()._at_eof()


def _k3_starts_in_reasoning(prompt_suffix: str) -> bool:
    suffix = prompt_suffix.rstrip()
    if not suffix:
        return True  # the default generation prompt opens the think channel
    last = suffix.rfind(OPEN)
    return last >= 0 and suffix[last + len(OPEN) :].split(SEP, 1)[0].strip() == "think"


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    if name == "kimi_k3":
        return KimiK3Parser(tools, start_in_reasoning=_k3_starts_in_reasoning(prompt_suffix))
    # No prompt given: the thinking models' default prompt opens `<think>`.
    if prompt_suffix.strip():
        in_reasoning = left_open(prompt_suffix, THINK_OPEN, THINK_CLOSE)
    else:
        in_reasoning = name == "kimi_k2_thinking"
    return KimiK2Parser(tools, start_in_reasoning=in_reasoning)
