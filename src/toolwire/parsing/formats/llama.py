"""Llama calls.

- `llama3_json` (Llama 3.x): `{"name": …, "parameters": {…}}` (or `"arguments"`), either
  after `<|python_tag|>` or as the whole output (a JSON object at its start); several
  calls may follow one another, separated by `;` or whitespace. A JSON object that is not
  a call (`{"capital": "Paris"}`) is ordinary content. After `<|python_tag|>`, Llama 3.1's
  built-in tool syntax `name.call(k="v", …)` (`brave_search`, `wolfram_alpha`, and any tool
  the template renders that way) is a call too, its arguments Python literals.
- `pythonic` (Llama 4): `[f(a=1, b="x"), g()]`, optionally wrapped in
  `<|python_start|>…<|python_end|>`. Parsed with `ast`, literals only. Like SGLang (and
  unlike vLLM, which wants it at the start), a call list may also follow prose
  (`Here is the call: [get_weather(city="Paris")]`), when its `[` does not follow a word
  character (`x[f()]` is an index, not a call); a bracket that holds no call list is text.

Without a marker, whether the output is a call is only known when the object or list
closes; until then it is held, and released as content as soon as it cannot be one.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs
from toolwire.parsing._blocks import CallParser, CallReader, HeadedReader
from toolwire.parsing._json import JsonEndScanner, loads_object

PYTHON_TAG = "<|python_tag|>"
PYTHON_START, PYTHON_END = "<|python_start|>", "<|python_end|>"

# Header and end-of-turn tokens of Llama 3 and 4, never content.
_DROP = (
    "<|eom_id|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot|>",
    "<|eom|>",
    "<|header_start|>",
    "<|header_end|>",
    PYTHON_END,
)

_CALL_KEYS = frozenset({"name", "parameters", "arguments", "type", "id"})


_LEAD, _HEAD, _BODY, _REFUSED = range(4)  # `_JsonReader`'s


class _JsonReader(CallReader):
    """One JSON object: a call when it has a name and a parameters/arguments object."""

    def __init__(self) -> None:
        super().__init__()
        self._state = _LEAD
        self._scanner = JsonEndScanner()

    def feed(self, piece: str) -> int:
        i, n = 0, len(piece)
        while i < n and self._state != _BODY:
            c = piece[i]
            if c.isspace():
                pass
            elif self._state == _LEAD and c == "{":
                self._state = _HEAD
                self._scanner.feed(c)
            elif self._state == _HEAD and c in '"}':
                # A call object starts with a key (or is empty); anything else is not JSON.
                self._state = _BODY
                break
            else:
                self._state = _REFUSED
                return i
            self._parts.append(c)
            i += 1
        if self._state != _BODY:
            return -1
        end = self._scanner.feed(piece[i:])
        stop = n if end < 0 else i + end
        self._parts.append(piece[i:stop])
        return -1 if end < 0 else stop

    def calls(self) -> list[RawCall] | None:
        if self._state != _BODY:
            return None
        obj = loads_object(self.text().strip())
        if obj is None or not obj.keys() <= _CALL_KEYS:
            return None
        name = obj.get("name")
        args = obj.get("parameters", obj.get("arguments"))
        if isinstance(args, str):
            args = loads_object(args)
        if not isinstance(name, str) or not name or not isinstance(args, dict):
            return None
        return [RawCall(name, args)]


class _PyEndScanner:
    """Finds where a Python bracket expression ends; strings and escapes are skipped."""

    __slots__ = ("_depth", "_escape", "_quote")

    def __init__(self) -> None:
        self._depth = 0
        self._quote = ""
        self._escape = False

    def feed(self, piece: str) -> int:
        for i, c in enumerate(piece):
            if self._quote:
                if self._escape:
                    self._escape = False
                elif c == "\\":
                    self._escape = True
                elif c == self._quote:
                    self._quote = ""
            elif c in "'\"":
                self._quote = c
            elif c in "([{":
                self._depth += 1
            elif c in ")]}":
                self._depth -= 1
                if self._depth <= 0:
                    return i + 1
        return -1


# `[`, the first call's (dotted) name and `(`: what a call list must start with.
_PY_HEAD = re.compile(r"\s*\[\s*([A-Za-z_][\w.]*\s*(\()?)?")


class _PythonicReader(HeadedReader):
    """A `[f(a=1), g()]` list of calls; `lead` is what its opener already consumed."""

    HEAD = _PY_HEAD

    def __init__(self, lead: str = "") -> None:
        self._lead = lead
        super().__init__(lead)

    def _body_scanner(self) -> _PyEndScanner:
        return _PyEndScanner()

    def _body_start(self, head: re.Match[str]) -> str | None:
        return head.group() if head.group(2) else None

    def calls(self) -> list[RawCall] | None:
        return _pythonic_calls(self._lead + self.text()) if self.in_body else None


class _NotLiteral(ValueError):
    pass


def _literal(node: ast.expr) -> Any:
    value = ast.literal_eval(node)
    return _jsonable(value)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotLiteral("non-finite float")
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _NotLiteral("non-string key")
        return {k: _jsonable(v) for k, v in value.items()}
    raise _NotLiteral(type(value).__name__)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _pythonic_calls(text: str) -> list[RawCall] | None:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(tree.body, ast.List) or not tree.body.elts:
        return None
    calls = []
    for node in tree.body.elts:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = _dotted(node.func)
        if name is None:
            return None
        args: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                return None
            try:
                args[kw.arg] = _literal(kw.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
        calls.append(RawCall(name, args))
    return calls


class _BuiltinReader(HeadedReader):
    """A Llama 3.1 built-in tool call, `name.call(k="v", …)`, after `<|python_tag|>`."""

    # `name.call(`, read a character at a time; the group is its `(`.
    HEAD = re.compile(r"\s*(?:[A-Za-z_]\w*(?:\.(?:c(?:a(?:l(?:l(\()?)?)?)?)?)?)?")

    def _body_scanner(self) -> _PyEndScanner:
        return _PyEndScanner()

    def _body_start(self, head: re.Match[str]) -> str | None:
        return head.group(1)

    def calls(self) -> list[RawCall] | None:
        if not self.in_body:
            return None
        calls = _pythonic_calls("[" + self.text().strip() + "]")
        if calls is None or len(calls) != 1 or not calls[0].name.endswith(".call"):
            return None
        return [RawCall(calls[0].name.removesuffix(".call"), calls[0].arguments)]


class _TaggedReader(CallReader):
    """What follows `<|python_tag|>`: a JSON call object, or a built-in tool call."""

    def __init__(self) -> None:
        super().__init__()
        self._inner: CallReader | None = None

    def text(self) -> str:
        return self._inner.text() if self._inner is not None else super().text()

    def feed(self, piece: str) -> int:
        if self._inner is None:
            lead = super().text()
            i = len(piece) - len(piece.lstrip())
            if i == len(piece):
                self._parts.append(piece)
                return -1
            self._inner = _JsonReader() if piece[i] == "{" else _BuiltinReader()
            end = self._inner.feed(lead + piece)
            return end if end < 0 else end - len(lead)
        return self._inner.feed(piece)

    def calls(self) -> list[RawCall] | None:
        return None if self._inner is None else self._inner.calls()

    def at_end(self, truncated: bool) -> list[RawCall] | None:
        return super().at_end(truncated) if self._inner is None else self._inner.at_end(truncated)

    def end_within(self) -> int:
        return -1 if self._inner is None else self._inner.end_within()


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    if name == "pythonic":
        return CallParser(
            openers={PYTHON_START: _PythonicReader},
            inline={"[": lambda: _PythonicReader("[")},
            drop=(*_DROP, PYTHON_TAG),
            pairs={PYTHON_START: PYTHON_END},
            bare=_PythonicReader,
            bare_start="[",
        )
    return CallParser(
        openers={PYTHON_TAG: _TaggedReader},
        drop=_DROP,
        bare=_JsonReader,
        bare_start="{",
        bare_again=";",
    )
