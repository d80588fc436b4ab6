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

from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs
from toolwire.parsing._blocks import CallParser, CallReader, Reasoning, ToolRegion
from toolwire.parsing._json import JsonEndScanner, loads, loads_object
from toolwire.parsing.formats.hermes import call_from_object

THINK = Reasoning(open="<think>", close="</think>")
_LEADING_THINK = Reasoning(open=THINK.open, close=THINK.close, leading=True)
"""`json` and `tool_request` take only a `<think>` block that starts the output."""


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


class _JsonValue(CallReader):
    """A bare JSON value from its `{` or `[`: a call object or a list of them, else text."""

    bare_at_end = True

    def __init__(self) -> None:
        super().__init__()
        self._scan = JsonEndScanner()

    def feed(self, piece: str) -> int:
        end = self._scan.feed(piece)
        self._parts.append(piece if end < 0 else piece[:end])
        return end

    def calls(self) -> list[RawCall] | None:
        return calls_from_json(self.text(), require_arguments=True)

    def at_end(self, truncated: bool) -> list[RawCall] | None:
        # Unfinished JSON is not a call (it may not even have been meant as one); of a list
        # cut off by the token limit, the calls the model finished are kept.
        if not truncated:
            return None
        return complete_list_items(self.text(), require_arguments=True) or None


# ----------------------------------------------------------------------------- tool_request

_HEADER = '{"tool_request":{'
_WS_BEFORE = frozenset({0, 1, 15, 16})  # header positions whitespace may precede


class _ToolRequest(CallReader):
    """`{"tool_request": {...}}` as the whole rest of the output.

    The block never ends by itself: it runs to the end of the output, which decides (see
    `at_end`). The moment the text cannot be that message (another first key, text after
    the object), the block ends as no call and all of it is content.
    """

    bare_at_end = True

    def __init__(self) -> None:
        super().__init__()
        self._header_pos = 0
        self._scan: JsonEndScanner | None = JsonEndScanner()  # None once the object ended

    def feed(self, piece: str) -> int:
        i, n = 0, len(piece)
        if self._scan is not None:
            pos = self._header_pos
            while pos < len(_HEADER) and i < n:
                c = piece[i]
                if c == _HEADER[pos]:
                    pos += 1
                elif not (c.isspace() and pos in _WS_BEFORE):
                    return self._refuse(piece)
                i += 1
            self._header_pos = pos
            end = self._scan.feed(piece)
            if end < 0:
                self._parts.append(piece)
                return -1
            self._scan = None
            i = end
        # After the object only whitespace may follow.
        if piece[i:].strip():
            return self._refuse(piece)
        self._parts.append(piece)
        return -1

    def _refuse(self, piece: str) -> int:
        # Not the message: all of it is content. The rest of the piece comes along (it is
        # content too), so that what was held is released with it in one piece.
        self._parts.append(piece)
        return len(piece)

    def calls(self) -> list[RawCall] | None:
        return None  # the block ended before the output did: text followed the object

    def at_end(self, truncated: bool) -> list[RawCall] | None:
        if self._scan is not None or truncated:
            return None
        call = _request_call(loads_object(self.text()))
        return None if call is None else [call]


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
    if name in ("json", "tool_request"):
        return CallParser(
            reasoning=[_LEADING_THINK],
            prompt_suffix=prompt_suffix,
            bare=_JsonValue if name == "json" else _ToolRequest,
            bare_start="{[" if name == "json" else "{",
            bare_lines=name == "json",
        )
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
        prompt_suffix=prompt_suffix,
        drop=[THINK.close],
    )
