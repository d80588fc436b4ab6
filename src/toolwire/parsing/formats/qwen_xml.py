"""Qwen3-Coder and Qwen3.5+ XML calls.

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

Values are raw text: exactly one newline on each side is markup, strings are written
verbatim (no escaping), other values as JSON (or Python literals in some templates), so
the tool's schema decides their type. Because values are unescaped, a closer is only
structure where the structure continues after it: `</parameter>` must be followed by
another `<parameter=`, `</function>` or `</tool_call>`, and `</function>` by
`</tool_call>`, another call or the end. Quirks handled, each seen from real models:
a missing `</parameter>` (ended by the next `\\n<parameter=` or by `</function>`), a
missing `<tool_call>` opener (`<function=` straight away), and a call written inside a
reasoning block the model never closed (the call ends the reasoning).
"""

from __future__ import annotations

import re
from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.formats._cursor import WAIT, CursorParser
from toolwire.parsing.formats._schema import ArgSchemas

TOOL_OPEN, TOOL_CLOSE = "<tool_call>", "</tool_call>"
FUNC_OPEN, FUNC_CLOSE = "<function=", "</function>"
PARAM_OPEN, PARAM_CLOSE = "<parameter=", "</parameter>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# A parameter opener at a line start ends a value whose `</parameter>` is missing.
NEXT_PARAM = "\n" + PARAM_OPEN

_TURN_END = ("<|im_end|>", "<|endoftext|>")
_DROP = (THINK_CLOSE, TOOL_CLOSE, "<|im_start|>", *_TURN_END)
_VALUE_SCAN = MarkerScanner([PARAM_CLOSE, FUNC_CLOSE, NEXT_PARAM])
_NAME_FORBID = "<\n"


class QwenXmlParser(CursorParser):
    def __init__(self, tools: ToolSpecs, *, start_in_reasoning: bool) -> None:
        super().__init__(
            content_markers=[TOOL_OPEN, FUNC_OPEN, THINK_OPEN, *_DROP],
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
            self._open_block(self._block_start, m.start(), m.end())
        elif marker == FUNC_OPEN:
            self._open_block(self._function_name, m.start(), m.end())
        elif marker == THINK_OPEN:
            self._pos = m.end()
            self._state = self._reasoning_state
        else:
            self._pos = m.end()
        return True

    def _on_reasoning_marker(self, m: re.Match[str]) -> bool:
        marker = m.group()
        if marker == TOOL_OPEN:
            self._open_block(self._block_start, m.start(), m.end())
        else:
            self._pos = m.end()
            if marker == THINK_CLOSE:
                self._state = self._content_state
        return True

    # ------------------------------------------------------------------ block

    def _block_start(self) -> bool:
        found = self._expect((FUNC_OPEN, TOOL_CLOSE))
        if found is WAIT:
            return False
        if found == FUNC_OPEN:
            self._state = self._function_name
        elif found == TOOL_CLOSE:
            self._close_block()
        else:
            self._fail_block()
        return True

    def _read_name(self) -> str | None:
        """The `NAME>` at the cursor, "" when malformed, WAIT when not all here yet."""
        k = self._find(self._pos, ">", forbid=_NAME_FORBID)
        if k is WAIT:
            return WAIT
        name = self._buf[self._pos : k].strip() if k >= 0 else ""
        if name:
            self._pos = k + 1
        return name

    def _function_name(self) -> bool:
        name = self._read_name()
        if name is WAIT:
            return False
        if not name:
            self._fail_block()
            return True
        self._name, self._args = name, {}
        self._state = self._params
        return True

    def _params(self) -> bool:
        found = self._expect((PARAM_OPEN, FUNC_CLOSE, TOOL_CLOSE))
        if found is WAIT:
            return False
        if found == PARAM_OPEN:
            self._state = self._param_name
        elif found == FUNC_CLOSE:
            self._emit_call()
            self._state = self._after_function
        elif found == TOOL_CLOSE:
            self._emit_call()
            self._close_block()
        else:
            self._fail_block()
        return True

    def _param_name(self) -> bool:
        key = self._read_name()
        if key is WAIT:
            return False
        if not key:
            self._fail_block()
            return True
        self._key = key
        self._parts.clear()
        self._state = self._value
        return True

    def _value(self) -> bool:
        m = self._scan(_VALUE_SCAN, self._write_part)
        if m is None:
            return False
        marker, end = m.group(), m.end()
        ok: bool | None
        if marker == PARAM_CLOSE:
            ok = self._follows(end, (PARAM_OPEN, FUNC_CLOSE, TOOL_CLOSE), eof=True)
        elif marker == FUNC_CLOSE:
            ok = self._follows(end, (TOOL_CLOSE, TOOL_OPEN, FUNC_OPEN, *_TURN_END), eof=True)
        else:
            k = self._find(end, ">", forbid=_NAME_FORBID)
            ok = WAIT if k is WAIT else k > end
        if ok is WAIT:
            return False
        self._pos = end
        if not ok:
            # Data that only looks like a closer: part of the value.
            self._parts.append(marker)
            return True
        self._end_value(trailing_newline=marker != NEXT_PARAM)
        if marker == PARAM_CLOSE:
            self._state = self._params
        elif marker == FUNC_CLOSE:
            self._emit_call()
            self._state = self._after_function
        else:
            self._state = self._param_name
        return True

    def _end_value(self, *, trailing_newline: bool) -> None:
        value = "".join(self._parts)
        self._parts.clear()
        # One newline on each side is markup (`<parameter=k>\nVALUE\n</parameter>`).
        if value.startswith("\n"):
            value = value[1:]
        if trailing_newline and value.endswith("\n"):
            value = value[:-1]
        self._args[self._key] = self._schemas.coerce(self._name, self._key, value)

    def _after_function(self) -> bool:
        found = self._expect((TOOL_CLOSE, FUNC_OPEN))
        if found is WAIT:
            return False
        if found == FUNC_OPEN:
            self._state = self._function_name
        else:
            # `</tool_call>`, or the model went on without it: the call is complete anyway.
            self._close_block()
        return True

    def _emit_call(self) -> None:
        self._emit(RawCall(self._name, self._args))
        self._args = {}

    def _at_eof(self) -> None:
        if self._state == self._after_function:
            self._close_block()
        elif self._state == self._params and not self._truncated:
            # The output ended (not cut off) after a whole parameter: the call is complete.
            self._emit_call()
            self._close_block()
        else:
            super()._at_eof()


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    return QwenXmlParser(tools, start_in_reasoning=prompt_suffix.rstrip().endswith(THINK_OPEN))
