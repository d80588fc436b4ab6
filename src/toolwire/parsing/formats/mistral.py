"""Mistral `[TOOL_CALLS]` calls, by tokenizer version.

- v3 (Mistral 7B v0.3, Mixtral, Nemo, Small 3.1, …): `[TOOL_CALLS][{"name": …,
  "arguments": {…}, "id"?: …}, …]`, one JSON array.
- v11 and later (Mistral Small 3.2, Magistral, Devstral, Ministral 3, …):
  `[TOOL_CALLS]name[CALL_ID]id[ARGS]{…}` once per call, `[CALL_ID]` optional; reasoning in
  `[THINK]…[/THINK]` (v13+) or plain-text `<think>…</think>` (Magistral 2506).

Neither form has a closing marker: a call ends where its JSON closes. Both readers accept
both call shapes (a v11 name can never start with `[` or `{`), so a model id matched to
the wrong version still parses.
"""

from __future__ import annotations

import re
from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs
from toolwire.parsing._blocks import CallParser, CallReader, Reasoning
from toolwire.parsing._json import JsonEndScanner, loads, loads_object

TOOL_CALLS, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
THINK = Reasoning(open="[THINK]", close="[/THINK]")
THINK_TEXT = Reasoning(open="<think>", close="</think>")

# Control tokens that never belong in content.
_DROP = (
    "</s>",
    "[/THINK]",
    "[INST]",
    "[/INST]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    ARGS,
    CALL_ID,
)

_NAME_CHAR = re.compile(r"[\w.:/-]")
_ID_CHAR = re.compile(r"[\w-]")

# Reader states.
_LEAD, _NAME, _MARK, _ID, _BEFORE_ARGS, _JSON, _ARRAY = range(7)


class _Reader(CallReader):
    """The text after one `[TOOL_CALLS]`: a v3 JSON array or a v11 `name[ARGS]{…}`."""

    def __init__(self) -> None:
        super().__init__()
        self._state = _LEAD
        self._name: list[str] = []
        self._id: list[str] = []
        self._mark = ""
        self._json: list[str] = []
        self._scanner = JsonEndScanner()

    def feed(self, piece: str) -> int:
        i, n = 0, len(piece)
        while i < n:
            state = self._state
            if state in (_JSON, _ARRAY):
                end = self._scanner.feed(piece[i:])
                stop = n if end < 0 else i + end
                self._json.append(piece[i:stop])
                self._parts.append(piece[i:stop])
                return -1 if end < 0 else stop
            c = piece[i]
            if state == _LEAD and c.isspace():
                pass
            elif state == _LEAD and c in "[{":
                self._state = _ARRAY
                continue
            elif state in (_LEAD, _NAME) and _NAME_CHAR.match(c):
                self._state = _NAME
                self._name.append(c)
            elif state == _ID and _ID_CHAR.match(c):
                self._id.append(c)
            elif state in (_NAME, _ID) and c == "[":
                self._state, self._mark = _MARK, c
            elif state == _MARK:
                mark = self._mark + c
                if mark == ARGS:
                    self._state = _BEFORE_ARGS
                elif mark == CALL_ID and not self._id:
                    self._state = _ID
                elif ARGS.startswith(mark) or CALL_ID.startswith(mark):
                    self._mark = mark
                else:
                    return self._refuse(i)
            elif state == _BEFORE_ARGS and c.isspace():
                pass
            elif state in (_BEFORE_ARGS, _NAME) and c == "{":
                # `name{…}` without [ARGS] is accepted too: the brace is unambiguous.
                self._state = _JSON
                continue
            else:
                return self._refuse(i)
            self._parts.append(c)
            i += 1
        return -1

    def _refuse(self, i: int) -> int:
        self._state = -1
        return i

    def calls(self) -> list[RawCall] | None:
        if self._state == _JSON:
            args = loads_object("".join(self._json))
            name = "".join(self._name)
            if args is None or not name:
                return None
            return [RawCall(name, args, "".join(self._id) or None)]
        if self._state == _ARRAY:
            return _array_calls("".join(self._json))
        return None


def _array_calls(text: str) -> list[RawCall] | None:
    try:
        value = loads(text)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        call = _object_call(item)
        if call is None:
            return None
        calls.append(call)
    return calls or None


def _object_call(item: Any) -> RawCall | None:
    if not isinstance(item, dict):
        return None
    name = item.get("name")
    args = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        # Some fine-tunes double-encode the arguments; accept an encoded object.
        args = loads_object(args)
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        return None
    call_id = item.get("id")
    return RawCall(name, args, call_id if isinstance(call_id, str) and call_id else None)


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    reasoning = [THINK, THINK_TEXT] if name != "mistral_v3" else []
    drop = _DROP + (("</think>",) if reasoning else ())
    return CallParser(
        openers={TOOL_CALLS: _Reader},
        reasoning=reasoning,
        drop=drop,
        prompt_suffix=prompt_suffix,
    )
