"""The stream-parser base class every format builds on."""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.parsing._json import dumps
from toolwire.parsing.events import (
    ContentDelta,
    ParseEvent,
    ParseFailure,
    ReasoningDelta,
    ToolCallArgsDelta,
    ToolCallStart,
)

__all__ = ["RawCall", "StreamParser", "TextSink", "ToolSpecs", "left_open", "tool_names"]

ToolSpecs = Sequence[Mapping[str, Any]] | None
"""Tools offered to the model, in OpenAI `tools` form (`{"type": "function", "function": ...}`)
or bare function dicts with `name` and `parameters`. Some formats need the schemas to
decide value types (raw-string arguments)."""


def tool_names(tools: ToolSpecs) -> set[str]:
    names: set[str] = set()
    for t in tools or ():
        fn = t.get("function", t)
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


def left_open(prompt_suffix: str, open: str, close: str) -> bool:
    """Whether the end of the generation prompt leaves `open` unclosed (its last `open`
    after its last `close`): the output then starts inside that region.

    Every format decides "the template pre-filled `<think>`" by this one rule, so a prompt
    that also pre-fills the first words of the reasoning counts, and an earlier turn's
    closed reasoning does not.
    """
    opened = prompt_suffix.rfind(open)
    return opened >= 0 and opened > prompt_suffix.rfind(close)


@dataclass(frozen=True, slots=True)
class RawCall:
    """A complete tool call recovered from model text."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None
    """The id the model wrote, if the format carries one."""


class StreamParser(ABC):
    """Turns model output into events, fed in pieces of any size.

    Contract: for any split of a text, the concatenated events of `feed(...)` calls and
    `finish()` describe the same result as one `feed(text)` + `finish()`. A tool call is
    emitted only once it is complete, so output cut off mid-call (`finish(truncated=True)`)
    never yields a call the model did not finish. Malformed output degrades to content;
    neither method raises on any input.
    """

    def __init__(self) -> None:
        self._call_index = 0
        self._id_prefix = "call_" + uuid.uuid4().hex[:16]

    @abstractmethod
    def feed(self, delta: str) -> list[ParseEvent]:
        """Consume the next piece of output; return the events it completes."""

    @abstractmethod
    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        """The output has ended (`truncated`: cut off by max_tokens); flush what is held."""

    def _failed(self, reason: str, text: str, out: list[ParseEvent]) -> None:
        """Report a call the output opened but did not write validly (its text is kept)."""
        out.append(ParseFailure(reason, text))

    def _call_events(self, call: RawCall) -> list[ParseEvent]:
        index = self._call_index
        self._call_index += 1
        call_id = call.id or f"{self._id_prefix}{index:04d}"
        return [
            ToolCallStart(index=index, id=call_id, name=call.name),
            ToolCallArgsDelta(index=index, text=dumps(call.arguments)),
        ]


class TextSink:
    """Emits content or reasoning text with the ends of each stripped, streaming-safe.

    Leading whitespace is dropped until the first visible character; trailing whitespace
    is held until more visible text follows (then released verbatim) or the stream ends
    (then dropped). The middle is passed through untouched.
    """

    __slots__ = ("_kind", "_pending_ws", "_started", "_strip")

    def __init__(
        self, kind: type[ContentDelta] | type[ReasoningDelta], *, strip: bool = True
    ) -> None:
        self._kind = kind
        self._strip = strip
        self._started = False
        self._pending_ws = ""

    def write(self, text: str, out: list[ParseEvent]) -> None:
        if not text:
            return
        if not self._strip:
            out.append(self._kind(text))
            return
        if not self._started:
            text = text.lstrip()
            if not text:
                return
            self._started = True
        body = text.rstrip()
        if not body:
            self._pending_ws += text
            return
        tail = text[len(body) :]
        if self._pending_ws:
            body = self._pending_ws + body
        self._pending_ws = tail
        out.append(self._kind(body))

    def new_paragraph(self) -> None:
        """What comes next is a new message: a blank line before it, if text came before
        (nothing when no more visible text follows)."""
        if self._started and self._pending_ws.count("\n") < 2:
            self._pending_ws = "\n\n"
