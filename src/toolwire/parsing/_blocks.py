"""Formats whose calls sit in blocks opened by a marker, declared on the engine.

A block ends where its structure closes (Mistral `[TOOL_CALLS]name[ARGS]{…}`, Llama's
`<|python_tag|>{…}` or bare `{…}` / `[f(…)]`, Gemma 4 `<|tool_call>call:f{…}`) or at a
close marker (Hermes `<tool_call>…</tool_call>`, the generic `<pre>…</pre>` and fences).
`CallParser` is the engine's states for such formats, configured by declarations
(openers, reasoning regions, dropped markers, bare calls); it hands the text after an
opener to a `CallReader`, which finds the block's end incrementally and parses the finished
block. A `ToolRegion` declares the marker-closed kind: a reader that looks for the close
marker (outside JSON strings when asked) and gives the whole inner text to a `parse`
function, so that it only ever sees complete text.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import ClassVar, Protocol

from toolwire.parsing._base import RawCall, left_open
from toolwire.parsing._engine import CursorParser, State
from toolwire.parsing._json import string_run_end
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ParseEvent

__all__ = [
    "BlockParse",
    "CallParser",
    "CallReader",
    "CloseMarkerReader",
    "HeadedReader",
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


class EndScanner(Protocol):
    def feed(self, piece: str) -> int:
        """The offset in `piece` just past the body's end, or -1 while it goes on."""
        ...


class HeadedReader(CallReader):
    """A block that starts with a head (`[f(`, `name.call(`, `call:f{`), read a character
    at a time while `HEAD` still matches it whole, then a body whose end a scanner finds.

    The first character that cannot continue the head refuses the block there (it is no
    call), so nothing longer than a head is ever held for it. Subclasses give `HEAD` (it
    matches every prefix of a head), the body's scanner, `_body_start` and `calls`.
    """

    HEAD: ClassVar[re.Pattern[str]]
    HEAD_MAX: ClassVar[int] = 256

    def __init__(self, lead: str = "") -> None:
        super().__init__()
        self.head = lead
        """The head as read, from `lead` (what the block's opener already consumed)."""
        self.in_body = False
        self._scanner = self._body_scanner()

    @abstractmethod
    def _body_scanner(self) -> EndScanner: ...

    @abstractmethod
    def _body_start(self, head: re.Match[str]) -> str | None:
        """Once `head` is a whole head, what of it to give the body's scanner first (the
        brackets it opened); None while it is not whole yet."""

    def feed(self, piece: str) -> int:
        i, n = 0, len(piece)
        while i < n and not self.in_body:
            head = self.head + piece[i]
            m = self.HEAD.fullmatch(head)
            if m is None or len(head) > self.HEAD_MAX:
                return i
            self.head = head
            self._parts.append(piece[i])
            i += 1
            start = self._body_start(m)
            if start is not None:
                self.in_body = True
                self._scanner.feed(start)
        if not self.in_body:
            return -1
        end = self._scanner.feed(piece[i:])
        stop = n if end < 0 else i + end
        self._parts.append(piece[i:stop])
        return -1 if end < 0 else stop


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


class CloseMarkerReader(CallReader):
    """Collects a block's text up to its close marker, outside JSON strings when
    `json_aware` (a marker inside a string argument is data). Linear in the input: each
    character is examined once; only a tail that could be the start of the marker waits.

    A `ToolRegion`'s reader (`parse` gets the inner text); formats whose blocks are read by
    engine states use it for a JSON value that ends at a marker (Kimi K2's arguments).
    `ends_before` (JSON-aware only): markers that also end the block but belong to what
    follows it; `feed` then returns their offset, unconsumed, and when the marker began in
    an earlier piece, that beginning is in `unread` for the caller to read again.
    """

    __slots__ = (
        "_close",
        "_close_scan",
        "_escape",
        "_in_string",
        "_inner",
        "_out_re",
        "_parse",
        "_pending",
        "unread",
    )

    def __init__(
        self,
        close: str,
        parse: BlockParse | None = None,
        *,
        json_aware: bool,
        ends_before: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        self._close = close
        self._parse = parse
        # With `json_aware`: a pattern for `"` or the marker, and a scanner for its prefixes.
        self._out_re: re.Pattern[str] | None = None
        self._close_scan: MarkerScanner | None = None
        if json_aware:
            self._out_re, self._close_scan = _close_patterns(close, *ends_before)
        self._pending = ""  # a tail that could be the start of the close marker
        self._in_string = False
        self._escape = False
        self._inner: str | None = None  # set once the close marker is found
        self.unread = ""

    @property
    def inner(self) -> str:
        """The text before the close marker (all the text, until it is found)."""
        return self.text() if self._inner is None else self._inner

    @property
    def in_string(self) -> bool:
        return self._in_string

    def text(self) -> str:
        if self._inner is not None:
            return self._inner + self._close
        return "".join(self._parts) + self._pending

    def calls(self) -> list[RawCall] | None:
        assert self._parse is not None
        return self._parse(self._inner or "", True, False)

    def at_end(self, truncated: bool) -> list[RawCall] | None:
        assert self._parse is not None
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
        text = self._pending + piece if base else piece
        self._pending = ""
        close = self._close
        n = len(text)
        out_re = self._out_re
        if out_re is None:
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
                # `string_run_end`'s common case inlined (this runs for every delta of a
                # string argument): no escape before the closing quote.
                q = text.find('"', i)
                if text.find("\\", i, n if q < 0 else q) < 0:
                    if q < 0:
                        break
                    self._in_string = False
                    i = q + 1
                    continue
                i = string_run_end(text, i)
                if i < n:
                    self._in_string = self._escape = text[i] != '"'
                    i += 1
                continue
            m = out_re.search(text, i)
            if m is None:
                assert self._close_scan is not None
                safe = self._close_scan.safe_end(text, i)
                self._parts.append(text[:safe])
                self._pending = text[safe:]
                return -1
            marker = m.group()
            if marker == '"':
                self._in_string = True
                i = m.end()
                continue
            self._inner = "".join(self._parts) + text[: m.start()]
            if marker != close:
                self._close = ""  # the block ended before a marker that is not its own
                self.unread = text[m.start() : base]
                return max(m.start() - base, 0)
            return m.end() - base
        self._parts.append(text)
        return -1


@functools.cache
def _close_patterns(*markers: str) -> tuple[re.Pattern[str], MarkerScanner]:
    """`"` or one of `markers`, and a scanner for the markers' prefixes."""
    return re.compile("|".join(['"', *map(re.escape, markers)])), MarkerScanner(markers)


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
    return next((r for r in regions if left_open(prompt_suffix, r.open, r.close)), None)


class CallParser(CursorParser):
    """Content, reasoning regions and call blocks, each ended by its reader.

    Args:
        openers: marker → factory of the reader for the block that follows it.
        regions: call blocks closed by a marker (openers whose reader is the region's).
        inline: markers that may start a call anywhere in content, unless they follow a
            word character (`[` for pythonic calls after prose). Ordinary text uses them
            too, so a block that is no call is plain content, never a `ParseFailure`.
        reasoning: reasoning regions (a `leading` one is looked for only at the start).
        drop: markers removed wherever they appear in content (stop tokens, stray closers).
        pairs: opener → the closer the model writes after its block (Gemma's
            `<tool_call|>`) when the block's own structure ends it: the closer is dropped
            after a call, and given back with the opener when the block is not a call, so
            content never holds half of the markup. Name it in `drop` too.
        bare: factory of a reader for a call written without any marker, recognised only
            at the start of the output or of the answer after reasoning (after
            whitespace) by its first character.
        bare_start: the characters that can begin a bare call (`{`, `[`).
        bare_again: separators (besides whitespace) after which another bare call may
            follow a finished call (`;` for Llama 3); empty: bare calls only at the start.
        bare_lines: a bare call may also begin at the start of any line (after whitespace)
            and right after a finished call; the whitespace before it stays content.
        prompt_suffix: the end of the generation prompt; a reasoning opener it leaves open
            means the output starts inside reasoning.
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
        pairs: Mapping[str, str] | None = None,
        bare: Callable[[], CallReader] | None = None,
        bare_start: str = "",
        bare_again: str = "",
        bare_lines: bool = False,
        prompt_suffix: str = "",
        calls_end_reasoning: bool = False,
        strip: bool = True,
    ) -> None:
        self._openers = dict(openers or {})
        for r in regions:
            self._openers[r.open] = partial(
                CloseMarkerReader, r.close, r.parse, json_aware=r.json_aware
            )
        self._inline = dict(inline or {})
        self._reasoning = {r.open: r for r in reasoning if not r.leading}
        # With bare calls at any line start, their first characters are markers too.
        starts = list(bare_start) if bare_lines else []
        super().__init__(
            content_markers=[*self._openers, *self._inline, *self._reasoning, *drop, *starts],
            reasoning_markers=(),
            strip=strip,
        )
        # Openers whose block, when it is no call, is plain content and not a failure.
        self._lenient = {*self._inline, *(r.open for r in regions if not r.strict)}
        self._tail = ""  # the last character of content, to tell `x[f()]` from `: [f()]`
        # Only inline openers and bare calls at line starts look back at written content.
        self._tracked = bool(self._inline) or bare_lines
        self._leading = [r for r in reasoning if r.leading]
        ends = list(self._openers) if calls_end_reasoning else []
        self._close_scans = {r.close: MarkerScanner([r.close, *ends]) for r in reasoning}
        self._bare = bare
        self._bare_start = bare_start
        self._bare_again = bare_again
        self._bare_lines = bare_lines
        self._line_blank = True  # with `bare_lines`: only whitespace so far on this line
        # Could a bare call begin here (at the start or after a call: `_bare_state`)?
        self._bare_ok = bare is not None and not bare_lines
        self._lead = ""  # whitespace/separators held while a bare call may follow
        self._region: Reasoning | None = None
        self._label = ""  # the part of the region's label still to drop
        self._opener = ""
        self._reader: CallReader | None = None
        self._pairs = dict(pairs or {})
        self._give_back = ""  # the closer of an opener just given back as text
        self._state = self._text_state()
        region = starts_in_reasoning(prompt_suffix, reasoning)
        if region is not None:
            self._enter_reasoning(region)
            # The prompt may already hold the label (`<|channel>thought\n`).
            if prompt_suffix[prompt_suffix.rfind(region.open) + len(region.open) :].strip():
                self._label = ""
        elif self._leading:
            self._state = self._lead_state

    # -- the end of output -------------------------------------------------------------------

    def _end_of_output(self) -> None:
        while self._state == self._call_state:
            assert self._reader is not None
            reader, opener = self._reader, self._opener
            self._state, self._reader = self._content_state, None
            if opener in self._inline and not reader.text().strip():
                self._write_content(opener + reader.text())  # a bracket at the end is text
                return
            calls = reader.at_end(self._truncated) if opener or reader.bare_at_end else None
            if calls is not None:
                for call in calls:
                    self._out.extend(self._call_events(call))
                return
            raw = reader.text()
            cut = -1 if self._truncated else reader.end_within()
            if cut >= 0:
                # An unbalanced quote hid the block's end; split there as written.
                self._end_call(opener, reader)
                self._buf, self._pos = raw[cut:], 0
                self._run()
                continue
            self._content.write(opener + raw, self._out)
            if opener and opener not in self._lenient:
                self._failed("unfinished", opener + raw, self._out)
            return
        if self._state == self._bare_state:
            self._content.write(self._lead, self._out)
        elif self._state == self._reasoning_state:
            self._thoughts.write(self._label_held(), self._out)

    # -- text --------------------------------------------------------------------------------

    def _text_state(self) -> State:
        """Content, where a bare call may still begin (after a call, or at the start)."""
        return self._bare_state if self._bare_ok else self._content_state

    def _write_content(self, text: str) -> None:
        self._content.write(text, self._out)
        if self._tracked and text:
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

    def _on_content_marker(self, m: re.Match[str]) -> bool:
        marker = m.group()
        self._pos = m.end()
        if marker in self._openers:
            self._start_call(marker, self._openers[marker]())
        elif marker in self._inline:
            if self._tail.isalnum() or self._tail in "_)]":
                self._write_content(marker)  # an index (`x[f()]`), not a call
            else:
                self._start_call(marker, self._inline[marker]())
        elif marker in self._reasoning:
            self._enter_reasoning(self._reasoning[marker])
        elif self._bare_lines and marker in self._bare_start:
            if self._line_blank:
                assert self._bare is not None
                self._start_call("", self._bare())
                self._pos = m.start()  # the reader reads the bracket too
            else:
                self._write_content(marker)
        elif marker == self._give_back:
            self._write_content(marker)  # the pair of an opener that came back as text
            self._give_back = ""
        # else: a dropped marker
        return True

    def _enter_reasoning(self, region: Reasoning) -> None:
        self._state = self._reasoning_state
        self._region = region
        self._label = region.label
        self._reasoning_scan = self._close_scans[region.close]

    def _label_held(self) -> str:
        # Text that matched a prefix of the label but never completed it is reasoning.
        if self._region is None or not self._label:
            return ""
        held = self._region.label[: len(self._region.label) - len(self._label)]
        self._label = ""
        return held

    def _reasoning_state(self) -> bool:
        if self._label:
            buf, pos = self._buf, self._pos
            assert self._region is not None
            opener = self._region.open
            if self._label == self._region.label and opener.startswith(
                buf[pos : pos + len(opener)]
            ):
                # Before the label, the opener again (`<|channel><|channel>thought`) is
                # dropped, as llama.cpp reads it.
                if buf.startswith(opener, pos):
                    self._pos = pos + len(opener)
                    return True
                if not self._final:
                    return False
            take = buf[pos : pos + len(self._label)]
            if self._label.startswith(take):
                self._label = self._label[len(take) :]
                self._pos = pos + len(take)
                return bool(take) and not self._label
            # Not the label after all: what matched of it is ordinary reasoning.
            self._thoughts.write(self._label_held(), self._out)
        return super()._reasoning_state()

    def _on_reasoning_marker(self, m: re.Match[str]) -> bool:
        marker = m.group()
        self._pos = m.end()
        self._region = None
        self._state = self._text_state()
        if marker in self._openers:  # a call ends reasoning never closed
            self._start_call(marker, self._openers[marker]())
        return True

    def _lead_state(self) -> bool:
        """At the start of the output: enter a leading reasoning region if it opens here
        (after whitespace), else go on as content."""
        buf, pos = self._buf, self._pos
        head = buf[pos:].lstrip()
        if any(r.open.startswith(head) for r in self._leading):
            if not self._final:
                return False  # it could still become an opener
        else:
            for region in self._leading:
                if head.startswith(region.open):
                    self._enter_reasoning(region)
                    self._pos = len(buf) - len(head) + len(region.open)
                    return True
        self._state = self._text_state()
        return True

    def _bare_state(self) -> bool:
        """Hold whitespace while a bare call may start; start it, or give up on it."""
        buf, pos = self._buf, self._pos
        n = len(buf)
        i = pos
        seps = self._bare_again if self._call_index else ""
        while i < n and (buf[i].isspace() or buf[i] in seps):
            i += 1
        self._lead += buf[pos:i]
        self._pos = i
        if i >= n:
            return False
        assert self._bare is not None
        if buf[i] in self._bare_start:
            self._lead = ""
            self._start_call("", self._bare())
            return True
        for opener, region in self._reasoning.items():
            # Reasoning before the answer: a bare call may still open the answer.
            if buf.startswith(opener, i):
                self._lead = ""
                self._pos = i + len(opener)
                self._enter_reasoning(region)
                return True
            if not self._final and opener.startswith(buf[i:]):
                return False  # it could still become the opener
        self._bare_ok = False
        self._state = self._content_state
        self._content.write(self._lead, self._out)
        self._lead = ""
        return True

    # -- call blocks -------------------------------------------------------------------------

    def _start_call(self, opener: str, reader: CallReader) -> None:
        self._state = self._call_state
        self._opener = opener
        self._reader = reader
        self._bare_ok = False
        self._give_back = ""

    def feed(self, delta: str) -> list[ParseEvent]:
        # The engine's `feed` without its block bookkeeping (a reader keeps its own text),
        # and with one shortcut: inside a call block with nothing held (the reader holds
        # its own tail) the delta goes straight to the reader, the path of every delta of a
        # long argument.
        out: list[ParseEvent] = []
        self._out = out
        if not delta or self._final:
            return out
        reader = self._reader
        if reader is not None and self._pos == len(self._buf):
            end = reader.feed(delta)
            if end < 0:
                return out
            self._buf, self._pos = delta, end
            self._call_ended()
        else:
            self._buf = self._buf[self._pos :] + delta
            self._pos = 0
        while self._state():
            pass
        return out

    def _call_state(self) -> bool:
        buf, pos = self._buf, self._pos
        if pos == len(buf):
            return False
        assert self._reader is not None
        end = self._reader.feed(buf[pos:])
        if end < 0:
            self._pos = len(buf)
            return False
        self._pos = pos + end
        self._call_ended()
        return True

    def _call_ended(self) -> None:
        assert self._reader is not None
        reader, self._reader = self._reader, None
        self._state = self._content_state
        self._end_call(self._opener, reader)

    def _end_call(self, opener: str, reader: CallReader) -> None:
        """A block ended: emit its calls, or its text as content when it holds none."""
        calls = reader.calls()
        if calls is None:
            self._write_content(opener + reader.text())
            if opener and opener not in self._lenient:
                self._failed("invalid", opener + reader.text(), self._out)
            self._give_back = self._pairs.get(opener, "")
            return
        self._tail = ""
        for call in calls:
            self._out.extend(self._call_events(call))
        self._line_blank = True
        if self._bare is not None and self._bare_again:
            self._bare_ok = True
            self._state = self._bare_state
