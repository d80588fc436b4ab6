"""Gemma 4 calls: `<|tool_call>call:NAME{key:value,…}<tool_call|>`.

Arguments are written in the template's object notation, not JSON: bare keys (which may
contain spaces), strings between `<|"|>` tokens and never escaped (raw newlines, quotes,
braces and even marker text inside), numbers as Python prints them (`1e-05`), `true`,
`false`, `null`, and nested `{…}` / `[…]`. A call ends where its object closes; the
`<tool_call|>` after it is optional, since engines may stop on it. Reasoning is the
thought channel, `<|channel>thought…<channel|>`; a prompt that pre-fills an empty,
closed channel (thinking off) starts in content.
"""

from __future__ import annotations

import re
from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs
from toolwire.parsing._blocks import CallParser, HeadedReader, Reasoning

TOOL_CALL, TOOL_CALL_END = "<|tool_call>", "<tool_call|>"
QUOTE = '<|"|>'
THOUGHT = Reasoning(open="<|channel>", close="<channel|>", label="thought")

_DROP = (
    TOOL_CALL_END,
    "<|tool_response>",
    "<tool_response|>",
    QUOTE,
    "<|turn>",
    "<turn|>",
    "<|think|>",
    "<channel|>",
    "<eos>",
)

# `call:` and the function name up to the `{` that opens the arguments (after a name only);
# a stray `:` before `call:` (`<|tool_call>:call:f{…}`, seen from Gemma 4 and read by vLLM)
# is tolerated.
_HEAD = re.compile(r"\s*(?::\s*)?(?:c(?:a(?:l(?:l(?::(?:([^\s{}\[\]<>:,]+)(\{)?)?)?)?)?)?)?")
_STRUCT = re.compile(r"<\|\"\|>|[{}\[\]]")


def _quote_prefix(text: str, start: int) -> int:
    """Length of the longest tail of `text[start:]` that is a proper prefix of `<|"|>`."""
    for k in range(min(len(QUOTE) - 1, len(text) - start), 0, -1):
        if QUOTE.startswith(text[len(text) - k :]):
            return k
    return 0


_VALUE_STARTS = ":,[{"
"""What a `<|"|>` that opens a string follows; after anything else it closes a value the
model wrote without its opening delimiter (`query:weather in Tokyo<|"|>`, as SGLang reads
it)."""


class _EndScanner:
    """Finds where a `{…}` in object notation closes; `<|"|>` strings are skipped."""

    __slots__ = ("_depth", "_in_string", "_last", "_pending")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._last = ""  # the last character outside strings that is not whitespace
        self._pending = ""  # a tail that may be the start of `<|"|>`

    def feed(self, piece: str) -> int:
        base = len(self._pending)
        text = self._pending + piece
        self._pending = ""
        i, n = 0, len(text)
        while i < n:
            if self._in_string:
                j = text.find(QUOTE, i)
                if j < 0:
                    break
                self._in_string = False
                self._last = '"'
                i = j + len(QUOTE)
                continue
            m = _STRUCT.search(text, i)
            if m is None:
                between = text[i : n - _quote_prefix(text, i)].rstrip()
                if between:
                    self._last = between[-1]
                break
            between = text[i : m.start()].rstrip()
            if between:
                self._last = between[-1]
            token, i = m.group(), m.end()
            if token == QUOTE:
                self._in_string = self._last in _VALUE_STARTS
                self._last = '"'
            elif token in "{[":
                self._depth += 1
                self._last = token
            else:
                self._depth -= 1
                self._last = token
                if self._depth <= 0:
                    return i - base
        keep = _quote_prefix(text, i)
        self._pending = text[n - keep :] if keep else ""
        return -1


class _Reader(HeadedReader):
    """The text after `<|tool_call>`: `call:NAME{…}`."""

    HEAD = _HEAD

    def _body_scanner(self) -> _EndScanner:
        return _EndScanner()

    def _body_start(self, head: re.Match[str]) -> str | None:
        return head.group(2)

    def calls(self) -> list[RawCall] | None:
        m = _HEAD.fullmatch(self.head)
        if not self.in_body or m is None:
            return None
        text = self.text()
        args = _parse_arguments(text[text.index("{") :])
        return None if args is None else [RawCall(m.group(1), args)]


class _Malformed(ValueError):
    pass


_NUMBER = re.compile(r"-?\d+(\.\d*)?([eE][+-]?\d+)?")
_WORDS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
}


def _parse_arguments(text: str) -> dict[str, Any] | None:
    """The arguments object of a complete `{…}`, or None when it is not well formed."""
    try:
        value, end = _value(text, 0)
    except (_Malformed, IndexError, RecursionError):
        return None
    if not isinstance(value, dict) or text[end:].strip():
        return None
    return value


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _value(text: str, i: int) -> tuple[Any, int]:
    i = _skip_ws(text, i)
    if text.startswith(QUOTE, i):
        end = text.find(QUOTE, i + len(QUOTE))
        if end < 0:
            raise _Malformed("unterminated string")
        return text[i + len(QUOTE) : end], end + len(QUOTE)
    c = text[i]
    if c == "{":
        return _object(text, i + 1)
    if c == "[":
        return _array(text, i + 1)
    return _scalar(text, i)


def _object(text: str, i: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    i = _skip_ws(text, i)
    if text[i] == "}":
        return out, i + 1
    while True:
        i = _skip_ws(text, i)
        if text.startswith(QUOTE, i):
            key, i = _value(text, i)
            i = _skip_ws(text, i)
            if text[i] != ":":
                raise _Malformed("expected ':'")
        else:
            colon = text.find(":", i)
            if colon < 0:
                raise _Malformed("expected a key")
            key = text[i:colon].strip()
            if not key or any(ch in key for ch in "{}[],<>"):
                raise _Malformed("bad key")
            i = colon
        out[key], i = _value(text, i + 1)
        i = _skip_ws(text, i)
        if text[i] == "}":
            return out, i + 1
        if text[i] != ",":
            raise _Malformed("expected ',' or '}'")
        i += 1


def _array(text: str, i: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    i = _skip_ws(text, i)
    if text[i] == "]":
        return out, i + 1
    while True:
        item, i = _value(text, i)
        out.append(item)
        i = _skip_ws(text, i)
        if text[i] == "]":
            return out, i + 1
        if text[i] != ",":
            raise _Malformed("expected ',' or ']'")
        i += 1


def _scalar(text: str, i: int) -> tuple[Any, int]:
    end = i
    while end < len(text) and text[end] not in ",}]":
        end += 1
    # Up to the next key's `:` only, so that many values cost their own length each.
    colon = text.find(":", i)
    q = text.find(QUOTE, i, len(text) if colon < 0 else colon)
    if q >= 0:
        written = text[i:q].rstrip()
        if written and written[-1] not in _VALUE_STARTS:
            # A string the model began without its `<|"|>`: it ends at the closing one.
            return written.strip(), q + len(QUOTE)
    token = text[i:end].strip()
    if not token or QUOTE in token:
        raise _Malformed("missing value")
    if token in _WORDS:
        return _WORDS[token], end
    if _NUMBER.fullmatch(token):
        number = float(token) if any(ch in token for ch in ".eE") else int(token)
        return number, end
    # An unquoted word: the model forgot the string delimiters; its meaning is plain.
    return token, end


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    return CallParser(
        openers={TOOL_CALL: _Reader},
        # `call:NAME{…}` without its `<|tool_call>` opening the answer (vLLM reads it).
        bare=_Reader,
        bare_start="c",
        reasoning=[THOUGHT],
        drop=_DROP,
        pairs={TOOL_CALL: TOOL_CALL_END},
        prompt_suffix=prompt_suffix,
    )
