"""Qwen3-Coder and Qwen3.5+ XML calls.

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

Values are raw text: one newline on each side is markup (and an indented block's layout,
see `_without_layout`), strings are written verbatim (no escaping), other values as JSON
(or Python literals in some templates), so the tool's schema decides their type.

Because values are unescaped, a value may hold the format's own markup (a model writing a
parser's test fixture or a chat template to a file), so a value ends only where the
structure plainly continues. Inside a value, a `<parameter=` at a line start opens a
nested (literal) parameter that its own `</parameter>` closes. A `</parameter>` outside
any nested one ends the value when `</function>`, `</tool_call>`, the end of the output,
or a `<parameter=NAME>` of a parameter the tool declares and the call has not set yet
follows it. Anything else stays in the value.

Quirks handled, each seen from real models: a missing `</parameter>` (the value ends at
the next `\\n<parameter=`, `</function>` or `</tool_call>`), a missing `<tool_call>` opener
(`<function=` straight away), and a call written inside a reasoning block the model never
closed (the call ends the reasoning). A missing `</parameter>` only shows when no proper
end comes: the value is read on to the end of the output (or to a `</tool_call>` followed
by the next `<tool_call>`), and if no `</parameter>` ended it, it is read again, ending at
the first place where it could have ended (`_Candidate`). A model that left out a
`</parameter>` once writes the rest of its output the same way, so from then on values end
at the first such place straight away: the output is read at most about twice.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs, left_open
from toolwire.parsing._engine import WAIT, CursorParser
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.formats._schema import ArgSchemas

TOOL_OPEN, TOOL_CLOSE = "<tool_call>", "</tool_call>"
FUNC_OPEN, FUNC_CLOSE = "<function=", "</function>"
PARAM_OPEN, PARAM_CLOSE = "<parameter=", "</parameter>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# A parameter opener at a line start: inside a value, a nested (literal) parameter, or the
# next parameter after a missing `</parameter>`.
NEXT_PARAM = "\n" + PARAM_OPEN

_TURN_END = ("<|im_end|>", "<|endoftext|>")
_DROP = (THINK_CLOSE, TOOL_CLOSE, "<|im_start|>", *_TURN_END)
_VALUE_SCAN = MarkerScanner([PARAM_CLOSE, FUNC_CLOSE, TOOL_CLOSE, NEXT_PARAM])
_NAME_FORBID = "<\n"
# Not in a real function name: an unrendered template (`<function={{ tc.name }}>`) or prose.
_BAD_FUNCTION_NAME = re.compile(r"[\s{}<>\"']")
_WS = " \t\r\n"
_INDENT = " \t"
# What follows a `</tool_call>` that ends a call, and a `</function>` that ends one.
_NEXT_CALL = (TOOL_OPEN, *_TURN_END)
_AFTER_FUNC_CLOSE = (TOOL_CLOSE, FUNC_OPEN, *_NEXT_CALL)
_EOF = "$"
"""What `_peek` returns when only whitespace is left at the end of the output."""


class _Candidate(NamedTuple):
    """The first place where the value being read could end, were its `</parameter>`
    missing: an offset in the value's text and the marker found there."""

    offset: int
    marker: str


class QwenXmlParser(CursorParser):
    def __init__(self, tools: ToolSpecs, *, start_in_reasoning: bool) -> None:
        super().__init__(
            content_markers=[TOOL_OPEN, FUNC_OPEN, THINK_OPEN, *_DROP],
            reasoning_markers=[THINK_CLOSE, TOOL_OPEN, THINK_OPEN],
            start_in_reasoning=start_in_reasoning,
        )
        self._schemas = ArgSchemas(tools)
        self._name = ""
        self._names: frozenset[str] | None = None
        self._key = ""
        self._args: dict[str, Any] = {}
        # The value being read: its length so far, how many literal parameters are open in
        # it, and where it could have ended.
        self._vlen = 0
        self._depth = 0
        self._cand: _Candidate | None = None
        # A value of this output had to be read again: end values at their first candidate.
        self._eager = False

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
        if not name or _BAD_FUNCTION_NAME.search(name):
            self._fail_block()
            return True
        self._name, self._args = name, {}
        self._names = self._schemas.names(name)
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
        self._vlen = self._depth = 0
        self._cand = None
        self._state = self._value
        return True

    def _write_part(self, text: str) -> None:
        if text:
            self._parts.append(text)
            self._vlen += len(text)

    def _peek(self, j: int, options: tuple[str, ...]) -> tuple[str, int] | None:
        """Which of `options` starts at `j` after whitespace, and where: ("", -1) for none,
        (_EOF, -1) for only whitespace at the end of the output, WAIT when more input could
        tell."""
        buf, n, k = self._buf, len(self._buf), j
        while k < n and buf[k] in _WS:
            k += 1
        if k == n:
            return (_EOF, -1) if self._final else WAIT
        for option in options:
            if buf.startswith(option, k):
                return option, k
        rest = n - k
        if self._undecided() and any(rest < len(o) and o.startswith(buf[k:]) for o in options):
            return WAIT
        return "", -1

    def _name_at(self, j: int) -> str | None:
        """The `NAME>` of a parameter opener whose name starts at `j` ("" when malformed)."""
        k = self._find(j, ">", forbid=_NAME_FORBID)
        if k is WAIT:
            return WAIT
        return self._buf[j:k].strip() if k >= 0 else ""

    def _expected(self, key: str) -> bool:
        """Whether a parameter `key` may come next in this call: declared by the tool (when
        it declares any) and not set yet."""
        return (
            bool(key)
            and key != self._key
            and key not in self._args
            and (self._names is None or key in self._names)
        )

    def _value(self) -> bool:
        m = self._scan(_VALUE_SCAN, self._write_part)
        if m is None:
            return False
        marker, end = m.group(), m.end()
        top = self._depth == 0
        could_end = False
        if marker == NEXT_PARAM:
            if self._depth == 0 and self._cand is None:
                key = self._name_at(end)
                if key is WAIT:
                    return False
                could_end = self._expected(key)
            self._depth += 1
        elif marker == PARAM_CLOSE:
            found = self._peek(end, (PARAM_OPEN, FUNC_CLOSE, TOOL_CLOSE))
            if found is WAIT:
                return False
            nxt, at = found
            proper = nxt in (FUNC_CLOSE, TOOL_CLOSE, _EOF)
            if nxt == PARAM_OPEN:
                key = self._name_at(at + len(PARAM_OPEN))
                if key is WAIT:
                    return False
                proper = self._expected(key)
                could_end = bool(key)
            if proper and self._depth == 0:
                # The value's own `</parameter>`.
                self._pos = end
                self._end_value(trailing_newline=True)
                self._state = self._params
                return True
            could_end = could_end or proper
            self._depth = max(0, self._depth - 1)
        else:
            found = self._peek(end, _AFTER_FUNC_CLOSE if marker == FUNC_CLOSE else _NEXT_CALL)
            if found is WAIT:
                return False
            nxt = found[0]
            # A cut-off output that stops right after a closer does not show it was one.
            could_end = bool(nxt) and not (nxt == _EOF and self._truncated)
            if marker == TOOL_CLOSE and could_end and nxt != _EOF:
                # `</tool_call>` and the next call (or the end of the turn): this value did
                # not get its `</parameter>`; it ends at the first place it could have.
                if self._cand is None:
                    self._cand = _Candidate(self._vlen, marker)
                self._reread()
                return True
        if could_end and self._cand is None:
            self._cand = _Candidate(self._vlen, marker)
            if self._eager and top:
                self._reread()
                return True
        self._write_part(marker)
        self._pos = end
        return True

    def _reread(self) -> None:
        """End the value at its first candidate end and read what followed again."""
        assert self._cand is not None
        offset, marker = self._cand
        self._eager = True
        text = "".join(self._parts)
        self._unread(text[offset:])
        self._parts[:] = [text[:offset]]
        self._end_value(trailing_newline=marker != NEXT_PARAM)
        if marker == NEXT_PARAM:
            self._pos += 1  # the newline before `<parameter=` is markup
        elif marker == PARAM_CLOSE:
            self._pos += len(PARAM_CLOSE)
        self._state = self._params

    def _end_value(self, *, trailing_newline: bool) -> None:
        value = _without_layout("".join(self._parts), closer_line=trailing_newline)
        self._parts.clear()
        self._cand = None
        self._args[self._key] = self._schemas.coerce(self._name, self._key, value, python=True)

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
        elif self._state == self._value and self._cand is not None:
            # No `</parameter>` ended the value: it ends where it first could have.
            self._reread()
        else:
            super()._at_eof()


def _without_layout(raw: str, *, closer_line: bool) -> str:
    """A value without the layout its markup put around it.

    The template writes `<parameter=k>\nVALUE\n</parameter>`: the newline after the opening
    tag is markup, and so is the line the closing markup starts (`closer_line`: a newline
    and, when the model indents its block, that line's indentation). An indented closing
    line shows an indented block, so indentation common to the value's lines is layout
    too: `<parameter=city>\n      Dallas\n    </parameter>` is `Dallas` (llama.cpp and
    SGLang read it so). Everything else is the value's own: indentation in a block that is
    not indented, whitespace on the opener's line, a file's last newline.
    """
    indented = False
    if closer_line:
        cut = raw.rfind("\n")
        if cut >= 0 and not raw[cut + 1 :].strip(_INDENT):
            indented = cut + 1 < len(raw)
            raw = raw[:cut]
    if not raw.startswith("\n"):
        return raw
    raw = raw[1:]
    return _dedent(raw) if indented else raw


def _dedent(text: str) -> str:
    """`text` without the indentation common to its lines that hold more than whitespace.

    Lines of whitespace only lose up to that much (all of it when no line holds more).
    """
    lines = text.split("\n")
    filled = [line for line in lines if line.strip(_INDENT)]
    if not filled:
        return "\n" * (len(lines) - 1)
    first = filled[0]
    margin = first[: len(first) - len(first.lstrip(_INDENT))]
    for line in filled[1:]:
        while not line.startswith(margin):
            margin = margin[:-1]
    if not margin:
        return text
    n = len(margin)
    return "\n".join(line[n:] if line.startswith(margin) else "" for line in lines)


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    in_reasoning = left_open(prompt_suffix, THINK_OPEN, THINK_CLOSE)
    return QwenXmlParser(tools, start_in_reasoning=in_reasoning)
