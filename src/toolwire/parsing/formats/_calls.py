"""The stream parser for formats whose calls sit in blocks opened by a marker.

A block ends where its structure closes (Mistral `[TOOL_CALLS]name[ARGS]{…}`, Llama's
`<|python_tag|>{…}` or bare `{…}` / `[f(…)]`, Gemma 4 `<|tool_call>call:f{…}`) or at a
close marker (Hermes `<tool_call>…</tool_call>`, the generic `<pre>…</pre>` and fences).
`CallParser` does the streaming part once (marker hold-back, reasoning regions, dropped
markers, whitespace at the ends, truncation, failure reporting) and hands the text after an
opener to a `CallReader`, which finds the block's end incrementally and parses the finished
block. A `ToolRegion` declares the marker-closed kind: a reader that looks for the close
marker (outside JSON strings when asked) and gives the whole inner text to a `parse`
function, so that it only ever sees complete text.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from toolwire.parsing._base import RawCall, StreamParser, TextSink
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ContentDelta, ParseEvent, ReasoningDelta

__all__ = [
    "BlockParse",
    "CallParser",
    "CallReader",
    "Reasoning",
    "ToolRegion",
    "starts_in_reasoning",
]


class CallReader(ABC):
    """Reads one call block, from just after its opener to its structural end.

    `feed` records the text it consumes (see `text`) so that a block that turns out not to
    be a call can come back verbatim as content.
    """

    bare_at_end: ClassVar[bool] = False
    """Ask `at_end` also when the output ends inside a bare block (one without an opener).
    By default such a block comes back as content: it may never have been meant as a call
    (a JSON answer)."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def text(self) -> str:
        """Everything this reader consumed so far."""
        return "".join(self._parts)

    @abstractmethod
    def feed(self, piece: str) -> int:
        """Consume the start of `piece`.

        Returns the offset in `piece` just past the block's end, or -1 when the whole piece
        was consumed and the block is still open. A reader that sees the text cannot be a
        call returns the offset of the first character it refused; `calls` is then None.
        """

    @abstractmethod
    def calls(self) -> list[RawCall] | None:
        """The calls of an ended block, or None when it is not a valid call block."""

    def at_end(self, truncated: bool) -> list[RawCall] | None:
        """The output ended inside the block: the calls the model finished in it (an empty
        list drops the block's text), or None to give that text back as content.

        By default a block cut off by the token limit is dropped (never a call the model
        did not finish, nor its half-written markup), as is one that holds only
        whitespace; any other unfinished block is malformed.
        """
        return [] if truncated or not self.text().strip() else None

    def end_within(self) -> int:
        """After `at_end` gave None: where the block ends after all, as the offset in
        `text()` just past an end marker its structure hid (behind an unbalanced quote);
        the reader then holds the block up to there. -1: it has no such end."""
        return -1


BlockParse = Callable[[str, bool, bool], "list[RawCall] | None"]
"""`parse(inner, closed, truncated)`: the calls in a region's inner text.

`closed` is False when the output ended inside the block. Return the complete calls
(for an unclosed or truncated block, only those the model finished), or None when the
block is not a valid tool-call block; it then comes back verbatim as content.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRegion:
    """A call block that ends at a close marker and is parsed whole."""

    open: str
    close: str
    parse: BlockParse
    json_aware: bool = False
    """Ignore `close` inside JSON strings of the block (a marker in an argument is data)."""
    strict: bool = True
    """An invalid block is a `ParseFailure`. False for openers that ordinary text uses too
    (an untagged code fence): such a block that holds no call is just content."""


class _RegionReader(CallReader):
    """A `ToolRegion`'s block: collects the inner text up to the close marker, linear in
    the input (each character is examined once; only a possible partial marker waits)."""

    __slots__ = ("_close", "_escape", "_in_string", "_inner", "_out_re", "_parse", "_pending")

    def __init__(self, region: ToolRegion, out_re: re.Pattern[str] | None) -> None:
        super().__init__()
        self._close = region.close
        self._parse = region.parse
        self._out_re = out_re  # `"` or the close marker, when JSON-aware
        self._pending = ""  # a tail that could be the start of the close marker
        self._in_string = False
        self._escape = False
        self._inner: str | None = None  # set once the close marker is found

    def text(self) -> str:
        if self._inner is not None:
            return self._inner + self._close
        return "".join(self._parts) + self._pending

    def calls(self) -> list[RawCall] | None:
        return self._parse(self._inner or "", True, False)

    def at_end(self, truncated: bool) -> list[RawCall] | None:
        return self._parse(self.text(), False, truncated)

    def end_within(self) -> int:
        inner = self.text()
        cut = inner.find(self._close)
        if cut < 0:
            return -1
        self._inner = inner[:cut]
        return cut + len(self._close)

    def feed(self, piece: str) -> int:
        base = len(self._pending)
        text = self._pending + piece
        self._pending = ""
        close = self._close
        n = len(text)
        if self._out_re is None:
            j = text.find(close)
            if j >= 0:
                self._inner = "".join(self._parts) + text[:j]
                return j + len(close) - base
            keep = min(len(close) - 1, n)
            self._parts.append(text[: n - keep])
            self._pending = text[n - keep :]
            return -1
        i = 0
        while i < n:
            if self._in_string:
                if self._escape:
                    self._escape = False
                    i += 1
                    continue
                q = text.find('"', i)
                b = text.find("\\", i)
                if q < 0 and b < 0:
                    i = n
                elif b >= 0 and (q < 0 or b < q):
                    self._escape = True
                    i = b + 1
                else:
                    self._in_string = False
                    i = q + 1
                continue
            m = self._out_re.search(text, i)
            if m is None:
                # Hold back a tail that could still become the close marker.
                keep = min(len(close) - 1, n - i)
                while keep and not close.startswith(text[n - keep :]):
                    keep -= 1
                self._parts.append(text[: n - keep])
                self._pending = text[n - keep :]
                return -1
            if m.group() == '"':
                self._in_string = True
                i = m.end()
                continue
            self._inner = "".join(self._parts) + text[: m.start()]
            return m.end() - base
        self._parts.append(text)
        return -1


@dataclass(frozen=True, slots=True, kw_only=True)
class Reasoning:
    open: str
    close: str
    label: str = ""
    """A channel name written right after `open` (Gemma's `thought`), dropped."""
    leading: bool = False
    """Opens only at the very start of the output (after whitespace); anywhere else `open`
    is ordinary text."""


def starts_in_reasoning(prompt_suffix: str, regions: Sequence[Reasoning]) -> Reasoning | None:
    """The region a pre-filled prompt left open (its opener after its last closer), if any."""
    for region in regions:
        opened = prompt_suffix.rfind(region.open)
        if opened >= 0 and opened > prompt_suffix.rfind(region.close):
            return region
    return None


_CONTENT, _REASONING, _CALL, _BARE, _LEAD = 0, 1, 2, 3, 4
"""Modes; `_BARE` is content where a bare call may still begin (kept apart from
`_CONTENT` so that plain content pays nothing for it); `_LEAD` is the start of the
output, while it may still open a leading reasoning region."""


class CallParser(StreamParser):
    """Content, reasoning regions and call blocks, each ended by its reader.

    Args:
        openers: marker → factory of the reader for the block that follows it.
        regions: call blocks closed by a marker (openers whose reader is the region's).
        inline: markers that may start a call anywhere in content, unless they follow a
            word character (`[` for pythonic calls after prose). Ordinary text uses them
            too, so a block that is no call is plain content, never a `ParseFailure`.
        reasoning: reasoning regions (a `leading` one is looked for only at the start).
        drop: markers removed wherever they appear in content (stop tokens, stray closers).
        bare: factory of a reader for a call written without any marker, recognised only
            at the start of the output (after whitespace) by its first character.
        bare_start: the characters that can begin a bare call (`{`, `[`).
        bare_again: separators (besides whitespace) after which another bare call may
            follow a finished call (`;` for Llama 3); empty: bare calls only at the start.
        bare_lines: a bare call may also begin at the start of any line (after whitespace)
            and right after a finished call; the whitespace before it stays content.
        prompt_suffix: the end of the generation prompt; a reasoning opener it leaves open
            means the output starts inside reasoning.
        start_in_reasoning: the output starts inside the first reasoning region anyway
            (for formats that decide it from the prompt by a rule of their own).
        calls_end_reasoning: an opener inside reasoning ends the reasoning and starts the
            call (Qwen3 with thinking on may call a tool without closing `</think>`); the
            reasoning closer, if it comes later, should then be dropped.
        strip: strip whitespace at both ends of content and of reasoning.
    """

    def __init__(
        self,
        *,
        openers: Mapping[str, Callable[[], CallReader]] | None = None,
        regions: Sequence[ToolRegion] = (),
        inline: Mapping[str, Callable[[], CallReader]] | None = None,
        reasoning: Sequence[Reasoning] = (),
        drop: Sequence[str] = (),
        bare: Callable[[], CallReader] | None = None,
        bare_start: str = "",
        bare_again: str = "",
        bare_lines: bool = False,
        prompt_suffix: str = "",
        start_in_reasoning: bool = False,
        calls_end_reasoning: bool = False,
        strip: bool = True,
    ) -> None:
        super().__init__()
        self._openers = dict(openers or {})
        for r in regions:
            out_re = re.compile('"|' + re.escape(r.close)) if r.json_aware else None
            self._openers[r.open] = partial(_RegionReader, r, out_re)
        self._inline = dict(inline or {})
        # Openers whose block, when it is no call, is plain content and not a failure.
        self._lenient = {*self._inline, *(r.open for r in regions if not r.strict)}
        self._tail = ""  # the last character of content, to tell `x[f()]` from `: [f()]`
        self._reasoning = {r.open: r for r in reasoning if not r.leading}
        self._leading = [r for r in reasoning if r.leading]
        # With bare calls at any line start, their first characters are markers too.
        starts = list(bare_start) if bare_lines else []
        self._scan = MarkerScanner(
            [*self._openers, *self._inline, *self._reasoning, *drop, *starts]
        )
        ends = list(self._openers) if calls_end_reasoning else []
        self._close_scans = {r.close: MarkerScanner([r.close, *ends]) for r in reasoning}
        self._content = TextSink(ContentDelta, strip=strip)
        self._thoughts = TextSink(ReasoningDelta, strip=strip)
        self._bare = bare
        self._bare_start = bare_start
        self._bare_again = bare_again
        self._bare_lines = bare_lines
        self._line_blank = True  # with `bare_lines`: only whitespace so far on this line
        # Could a bare call begin here (at the start or after a call: `_BARE` mode)?
        self._bare_ok = bare is not None and not bare_lines
        self._lead = ""  # whitespace/separators held while a bare call may follow
        self._buf = ""
        self._mode = _BARE if self._bare_ok else _CONTENT
        self._region: Reasoning | None = None
        self._label = ""  # the part of the region's label still to drop
        self._opener = ""
        self._reader: CallReader | None = None
        region = starts_in_reasoning(prompt_suffix, reasoning)
        if region is not None:
            self._enter_reasoning(region)
            # The prompt may already hold the label (`<|channel>thought\n`).
            if prompt_suffix[prompt_suffix.rfind(region.open) + len(region.open) :].strip():
                self._label = ""
        elif start_in_reasoning and reasoning:
            self._enter_reasoning(reasoning[0])
        elif self._leading:
            self._mode = _LEAD

    def feed(self, delta: str) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        if delta:
            text = self._buf + delta if self._buf else delta
            self._buf = ""
            self._consume(text, out)
        return out

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        rest, self._buf = self._buf, ""
        if self._mode == _LEAD:
            # What was held could still have become a leading opener; it is text after all.
            self._mode = _BARE if self._bare_ok else _CONTENT
            self._consume(rest, out)
            rest, self._buf = self._buf, ""
        if self._mode in (_CONTENT, _BARE):
            self._content.write(self._lead + rest, out)
        elif self._mode == _REASONING:
            self._thoughts.write(self._label_held() + rest, out)
        else:
            assert self._reader is not None
            reader, opener = self._reader, self._opener
            self._mode, self._reader = _CONTENT, None
            if opener in self._inline and not reader.text().strip():
                self._text(opener + reader.text(), out)  # a bracket at the end is just text
                return out
            calls = reader.at_end(truncated) if opener or reader.bare_at_end else None
            if calls is not None:
                for call in calls:
                    out.extend(self._call_events(call))
                return out
            raw = reader.text()
            cut = -1 if truncated else reader.end_within()
            if cut >= 0:
                # An unbalanced quote hid the block's end; split there as written.
                self._end_call(opener, reader, out)
                self._consume(raw[cut:], out)
                return out + self.finish()
            self._content.write(opener + raw, out)
            if opener and opener not in self._lenient:
                self._failed("unfinished", opener + raw, out)
        return out

    # -- internals -------------------------------------------------------------------------

    def _enter_reasoning(self, region: Reasoning) -> None:
        self._mode = _REASONING
        self._region = region
        self._label = region.label

    def _label_held(self) -> str:
        # Text that matched a prefix of the label but never completed it is reasoning.
        if self._region is None or not self._label:
            return ""
        held = self._region.label[: len(self._region.label) - len(self._label)]
        self._label = ""
        return held

    def _text(self, text: str, out: list[ParseEvent]) -> None:
        if text:
            self._content.write(text, out)
            self._tail = text[-1]
            if self._bare_lines:
                self._note_line(text)

    def _note_line(self, text: str) -> None:
        """Track whether the current line holds only whitespace so far."""
        nl = text.rfind("\n")
        if nl >= 0:
            self._line_blank = not text[nl + 1 :].strip()
        elif self._line_blank and text.strip():
            self._line_blank = False

    def _start_call(self, opener: str, reader: CallReader) -> None:
        self._mode = _CALL
        self._opener = opener
        self._reader = reader
        self._bare_ok = False

    def _consume(self, text: str, out: list[ParseEvent]) -> None:
        pos, n = 0, len(text)
        while pos < n:
            if self._mode == _CONTENT:
                m = self._scan.search(text, pos)
                if m is None:
                    safe = self._scan.safe_end(text, pos)
                    self._content.write(text[pos:safe], out)  # `_text`, inlined: hot path
                    if self._inline and safe > pos:
                        self._tail = text[safe - 1]
                    elif self._bare_lines:
                        self._note_line(text[pos:safe])
                    self._buf = text[safe:]
                    return
                self._text(text[pos : m.start()], out)
                marker, pos = m.group(), m.end()
                if marker in self._openers:
                    self._start_call(marker, self._openers[marker]())
                elif marker in self._inline:
                    if self._tail.isalnum() or self._tail in "_)]":
                        self._text(marker, out)  # an index (`x[f()]`), not a call
                    else:
                        self._start_call(marker, self._inline[marker]())
                elif marker in self._reasoning:
                    self._enter_reasoning(self._reasoning[marker])
                elif self._bare_lines and marker in self._bare_start:
                    if self._line_blank:
                        assert self._bare is not None
                        self._start_call("", self._bare())
                        pos = m.start()  # the reader reads the bracket too
                    else:
                        self._text(marker, out)
                # else: a dropped marker
            elif self._mode == _REASONING:
                assert self._region is not None
                if self._label:
                    take = text[pos : pos + len(self._label)]
                    if self._label.startswith(take):
                        self._label = self._label[len(take) :]
                        pos += len(take)
                        continue
                    # Not the label after all: what matched of it is ordinary reasoning.
                    text = self._label_held() + text[pos:]
                    pos, n = 0, len(text)
                scan = self._close_scans[self._region.close]
                m = scan.search(text, pos)
                if m is None:
                    safe = scan.safe_end(text, pos)
                    self._thoughts.write(text[pos:safe], out)
                    self._buf = text[safe:]
                    return
                self._thoughts.write(text[pos : m.start()], out)
                marker, pos = m.group(), m.end()
                self._mode, self._region = _BARE if self._bare_ok else _CONTENT, None
                if marker in self._openers:  # a call ends reasoning never closed
                    self._start_call(marker, self._openers[marker]())
            elif self._mode == _CALL:
                assert self._reader is not None
                end = self._reader.feed(text[pos:])
                if end < 0:
                    return
                pos += end
                reader, self._mode, self._reader = self._reader, _CONTENT, None
                self._end_call(self._opener, reader, out)
            elif self._mode == _BARE:
                pos = self._maybe_bare(text, pos, out)
                if pos < 0:
                    return
            else:
                pos = self._lead_in(text, pos)
                if pos < 0:
                    return

    def _lead_in(self, text: str, pos: int) -> int:
        """At the start of the output: enter a leading reasoning region if it opens here
        (after whitespace), else go on as content. Returns the position to continue from,
        or -1 when all of `text` was held (it could still become an opener)."""
        head = text[pos:].lstrip()
        if any(r.open.startswith(head) for r in self._leading):
            self._buf = text[pos:]
            return -1
        for region in self._leading:
            if head.startswith(region.open):
                self._enter_reasoning(region)
                return len(text) - len(head) + len(region.open)
        self._mode = _BARE if self._bare_ok else _CONTENT
        return pos

    def _maybe_bare(self, text: str, pos: int, out: list[ParseEvent]) -> int:
        """Hold whitespace while a bare call may start; start it, or give up on it.

        Returns the position to continue from, or -1 when all of `text` was held.
        """
        n = len(text)
        i = pos
        seps = self._bare_again if self._call_index else ""
        while i < n and (text[i].isspace() or text[i] in seps):
            i += 1
        self._lead += text[pos:i]
        if i >= n:
            return -1
        assert self._bare is not None
        if text[i] in self._bare_start:
            self._lead = ""
            self._start_call("", self._bare())
        else:
            self._bare_ok = False
            self._mode = _CONTENT
            self._content.write(self._lead, out)
            self._lead = ""
        return i

    def _end_call(self, opener: str, reader: CallReader, out: list[ParseEvent]) -> None:
        """A block ended: emit its calls, or its text as content when it holds none."""
        calls = reader.calls()
        if calls is None:
            self._text(opener + reader.text(), out)
            if opener and opener not in self._lenient:
                self._failed("invalid", opener + reader.text(), out)
            return
        self._tail = ""
        for call in calls:
            out.extend(self._call_events(call))
        self._line_blank = True
        if self._bare is not None and self._bare_again:
            self._bare_ok = True
            self._mode = _BARE
