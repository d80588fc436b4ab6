"""GLM-4.5/4.6 (`glm45`) and GLM-4.7/5.x (`glm47`) calls.

    <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value></tool_call>

GLM-4.5/4.6 put a newline after the name and after each value; 4.7 and 5.x are compact.
Both variants are accepted by both names. String values are raw (no escaping, whitespace
is data); other values are JSON, so the tool's schema decides their type. A value ends at
`</arg_value>`; when that is missing, at `</tool_call>` only if nothing but another call
or the end follows (a `</tool_call>` inside a string value is data), or at a following
`<arg_key>KEY</arg_key>`.

The names differ in where the output starts: GLM-4.5/4.6 write their own `<think>`, while
the GLM-4.7+ generation prompt ends with `<think>`, so their output starts inside
reasoning unless the prompt says otherwise (`</think>` pre-filled: thinking disabled).
"""

from __future__ import annotations

import re
from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs, left_open
from toolwire.parsing._engine import WAIT, CursorParser
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.formats._schema import ArgSchemas

TOOL_OPEN, TOOL_CLOSE = "<tool_call>", "</tool_call>"
KEY_OPEN, KEY_CLOSE = "<arg_key>", "</arg_key>"
VALUE_OPEN, VALUE_CLOSE = "<arg_value>", "</arg_value>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

# Stop and role tokens: they end a turn and never belong in content.
_TURN_TOKENS = ("<|endoftext|>", "<|user|>", "<|observation|>", "<|assistant|>", "<|system|>")
_DROP = (THINK_CLOSE, TOOL_CLOSE, *_TURN_TOKENS)
_VALUE_SCAN = MarkerScanner([VALUE_CLOSE, TOOL_CLOSE, KEY_OPEN])


class GlmParser(CursorParser):
    def __init__(self, tools: ToolSpecs, *, start_in_reasoning: bool) -> None:
        super().__init__(
            content_markers=[TOOL_OPEN, THINK_OPEN, *_DROP],
            reasoning_markers=[THINK_CLOSE, TOOL_OPEN, THINK_OPEN],
            start_in_reasoning=start_in_reasoning,
        )
        self._schemas = ArgSchemas(tools)
        self._name = ""
        self._key = ""
        self._args: dict[str, Any] = {}

    # ------------------------------------------------------------------ text

    def _on_content_marker(self, m: re.Match[str]) -> bool:
        marker = m.group()
        if marker == TOOL_OPEN:
            self._open_block(self._call_name, m.start(), m.end())
            return True
        self._pos = m.end()
        if marker == THINK_OPEN:
            self._state = self._reasoning_state
        return True

    def _on_reasoning_marker(self, m: re.Match[str]) -> bool:
        marker = m.group()
        if marker == TOOL_OPEN:
            # The model began a call without closing its reasoning: the call ends it.
            self._open_block(self._call_name, m.start(), m.end())
            return True
        self._pos = m.end()
        if marker == THINK_CLOSE:
            self._state = self._content_state
        return True

    # ------------------------------------------------------------------ block

    def _call_name(self) -> bool:
        k = self._find(self._pos, "<")
        if k is WAIT:
            return False
        name = self._buf[self._pos : k].strip() if k >= 0 else ""
        if not name or any(c.isspace() for c in name):
            self._fail_block()
            return True
        self._name, self._args = name, {}
        self._pos = k
        self._state = self._arguments
        return True

    def _arguments(self) -> bool:
        found = self._expect((KEY_OPEN, TOOL_CLOSE))
        if found is WAIT:
            return False
        if found == KEY_OPEN:
            self._state = self._key_text
        elif found == TOOL_CLOSE:
            self._emit_call()
        else:
            self._fail_block()
        return True

    def _key_text(self) -> bool:
        k = self._find(self._pos, KEY_CLOSE, forbid="<")
        if k is WAIT:
            return False
        key = self._buf[self._pos : k].strip() if k >= 0 else ""
        if not key:
            self._fail_block()
            return True
        self._key = key
        self._pos = k + len(KEY_CLOSE)
        self._state = self._value_open
        return True

    def _value_open(self) -> bool:
        found = self._expect((VALUE_OPEN,))
        if found is WAIT:
            return False
        if found:
            self._parts.clear()
            self._state = self._value
        else:
            self._fail_block()
        return True

    def _value(self) -> bool:
        m = self._scan(_VALUE_SCAN, self._write_part)
        if m is None:
            return False
        marker, end = m.group(), m.end()
        ok: bool | None = True
        if marker == TOOL_CLOSE:
            ok = self._follows(end, (TOOL_OPEN, *_TURN_TOKENS), eof=True)
        elif marker == KEY_OPEN:
            ok = self._next_key_follows(end)
        if ok is WAIT:
            return False
        self._pos = end
        if not ok:
            # Data that only looks like markup: part of the value.
            self._parts.append(marker)
            return True
        value = "".join(self._parts)
        self._parts.clear()
        self._args[self._key] = self._schemas.coerce(self._name, self._key, value)
        if marker == VALUE_CLOSE:
            self._state = self._arguments
        elif marker == TOOL_CLOSE:
            self._emit_call()
        else:
            self._state = self._key_text
        return True

    def _next_key_follows(self, j: int) -> bool | None:
        """Whether `<arg_key>` at `j` starts a real next argument (`KEY</arg_key><arg_value>`)."""
        k = self._find(j, KEY_CLOSE, forbid="<")
        if k is WAIT or k < 0:
            return k if k is WAIT else False
        return self._follows(k + len(KEY_CLOSE), (VALUE_OPEN,), eof=False)

    def _emit_call(self) -> None:
        self._emit(RawCall(self._name, self._args))
        self._args = {}
        self._close_block()

    def _at_eof(self) -> None:
        if self._state == self._arguments and not self._truncated:
            # The output ended (not cut off) after a whole argument: the call is complete.
            self._emit_call()
        else:
            super()._at_eof()


def _starts_in_reasoning(name: str, prompt_suffix: str) -> bool:
    if not prompt_suffix.strip():
        # No prompt given: assume the template's default generation prompt.
        return name == "glm47"
    return left_open(prompt_suffix, THINK_OPEN, THINK_CLOSE)


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    return GlmParser(tools, start_in_reasoning=_starts_in_reasoning(name, prompt_suffix))
