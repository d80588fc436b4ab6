"""The incremental engine every stream parser is built on.

A parser is a state machine over a short buffer: `feed` appends the delta and runs the
current state until it needs more input.

- a state looks at `_buf[_pos:]`, consumes what it can decide now and returns True when it
  made progress, or False when it needs more input;
- decided text is moved out at once (into the content/reasoning sinks or the current
  value's parts), so the buffer only ever holds an undecided tail and the work is linear;
- at the end of input (`_final`) states decide with what they have.

The engine gives the text states (content and reasoning, each searched for its markers,
holding back only a tail that could still grow into one), lookahead helpers, and tool-call
block bookkeeping: a block remembers its raw text since the last emitted call, so a block
that turns out malformed comes back verbatim as content (or reasoning, if it was opened
there) with a `ParseFailure`.

Formats are declared on it in one of three ways, by how much structure their calls have:

- `CallParser` (`_blocks.py`): content, reasoning regions and call blocks, each block read
  by a small `CallReader` or, for a marker-closed block parsed whole, a `ToolRegion`
  declaration (Hermes, the generic formats, Mistral, Llama, Gemma);
- `MarkerMachine` (`_machine.py`): a table of markers per mode (Harmony, DeepSeek);
- states written directly on the engine, for calls whose raw argument values may contain
  their own markup (Qwen XML, GLM, Kimi).
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable, Sequence

from toolwire.parsing._base import RawCall, StreamParser, TextSink
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ContentDelta, ParseEvent, ReasoningDelta

__all__ = ["WAIT", "CursorParser", "State"]

State = Callable[[], bool]
WAIT = None
"""What lookahead helpers return when the input so far cannot decide."""

_WS = " \t\r\n"


class CursorParser(StreamParser):
    """The engine: a buffer, a cursor and the current state.

    Subclasses act on the markers of the text states and add the states of their blocks.

    Args:
        content_markers: markers to look for in content.
        reasoning_markers: markers to look for in reasoning.
        start_in_reasoning: the prompt left the output inside reasoning.
        strip: strip whitespace at both ends of content and of reasoning.
    """

    def __init__(
        self,
        *,
        content_markers: Sequence[str],
        reasoning_markers: Sequence[str],
        start_in_reasoning: bool = False,
        strip: bool = True,
    ) -> None:
        super().__init__()
        self._buf = ""
        self._pos = 0
        self._final = False
        self._truncated = False
        self._out: list[ParseEvent] = []
        self._content = TextSink(ContentDelta, strip=strip)
        self._thoughts = TextSink(ReasoningDelta, strip=strip)
        self._content_scan = MarkerScanner(content_markers)
        self._reasoning_scan = MarkerScanner(reasoning_markers)
        self._state: State = self._reasoning_state if start_in_reasoning else self._content_state
        # Tool-call block bookkeeping: raw text since the block opened or its last call.
        self._in_block = False
        self._raw: list[str] = []
        self._mark = 0
        self._return: State = self._content_state
        self._parts: list[str] = []

    # ------------------------------------------------------------------ driving

    def feed(self, delta: str) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        self._out = out
        if delta and not self._final:
            if self._in_block:
                self._raw.append(self._buf[self._mark : self._pos])
                self._mark = 0
            self._buf = self._buf[self._pos :] + delta
            self._pos = 0
            while self._state():  # `_run`, inlined: once per delta
                pass
        return out

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        self._out = out
        if self._final:
            return out
        self._final = True
        self._truncated = truncated
        self._run()
        self._end_of_output()
        return out

    def _end_of_output(self) -> None:
        """The input is all read (`_final`) and the states ran: settle what is open."""
        while self._in_block:
            self._at_eof()
            self._run()

    def _run(self) -> None:
        while self._state():
            pass

    # ------------------------------------------------------------------ text states

    def _content_state(self) -> bool:
        # `_scan`, inlined: this is the path of every delta of prose.
        buf, pos, scan = self._buf, self._pos, self._content_scan
        m = scan.search(buf, pos)
        end = m.start() if m else len(buf) if self._final else scan.safe_end(buf, pos)
        if end > pos:
            self._write_content(buf[pos:end])
        self._pos = end
        return m is not None and self._on_content_marker(m)

    def _reasoning_state(self) -> bool:
        m = self._scan(self._reasoning_scan, self._write_reasoning)
        return m is not None and self._on_reasoning_marker(m)

    @abstractmethod
    def _on_content_marker(self, m: re.Match[str]) -> bool:
        """Act on a marker found in content (cursor at its start); True on progress."""

    @abstractmethod
    def _on_reasoning_marker(self, m: re.Match[str]) -> bool:
        """Act on a marker found in reasoning (cursor at its start); True on progress."""

    def _write_content(self, text: str) -> None:
        self._content.write(text, self._out)

    def _write_reasoning(self, text: str) -> None:
        self._thoughts.write(text, self._out)

    def _write_part(self, text: str) -> None:
        if text:
            self._parts.append(text)

    def _scan(self, scanner: MarkerScanner, write: Callable[[str], None]) -> re.Match[str] | None:
        """Write text up to the next marker and return it (cursor at its start), or write
        all that cannot start a marker and return None."""
        buf, pos = self._buf, self._pos
        m = scanner.search(buf, pos)
        if m is None:
            end = len(buf) if self._final else scanner.safe_end(buf, pos)
            write(buf[pos:end])
            self._pos = end
            return None
        write(buf[pos : m.start()])
        self._pos = m.start()
        return m

    # ------------------------------------------------------------------ lookahead

    def _undecided(self) -> bool:
        """Whether text that could still grow into markup is left undecided.

        True while more input may come, and also when the output was cut off: an unfinished
        construct at the end is then dropped with its block rather than called malformed.
        """
        return not self._final or self._truncated

    def _skip_ws(self) -> bool:
        """Move past whitespace; True when something else follows in the buffer."""
        buf, n, k = self._buf, len(self._buf), self._pos
        while k < n and buf[k] in _WS:
            k += 1
        self._pos = k
        return k < n

    def _follows(self, j: int, options: Sequence[str], *, eof: bool) -> bool | None:
        """Whether the text at `j`, after optional whitespace, starts with one of `options`.

        `eof` answers the case where only whitespace remains at the end of input; WAIT when
        more input is needed to tell.
        """
        buf, n, k = self._buf, len(self._buf), j
        while k < n and buf[k] in _WS:
            k += 1
        if k == n:
            return eof if self._final else WAIT
        rest = n - k
        for option in options:
            if buf.startswith(option, k):
                return True
        if self._undecided() and any(rest < len(o) and o.startswith(buf[k:]) for o in options):
            return WAIT
        return False

    def _expect(self, options: Sequence[str]) -> str | None:
        """Consume whitespace and then one of `options`, returning it.

        Returns "" when something else follows and WAIT when the input so far cannot tell
        (including only whitespace at the end of input: `_at_eof` decides then).
        """
        if not self._skip_ws():
            return WAIT
        buf, k = self._buf, self._pos
        for option in options:
            if buf.startswith(option, k):
                self._pos = k + len(option)
                return option
        rest = len(buf) - k
        if self._undecided() and any(rest < len(o) and o.startswith(buf[k:]) for o in options):
            return WAIT
        return ""

    def _find(self, j: int, stop: str, *, forbid: str = "", cap: int = 256) -> int | None:
        """Index of `stop` within `cap` characters of `j`, with none of `forbid` before it.

        -1 when there is none; WAIT when more input could still bring it.
        """
        buf, n = self._buf, len(self._buf)
        limit = min(n, j + cap + len(stop))
        k = buf.find(stop, j, limit)
        # Before a stop that is not there yet, only text that cannot be its start counts.
        upto = k if k >= 0 else max(j, n - len(stop) + 1)
        if any(buf.find(c, j, upto) >= 0 for c in forbid):
            return -1
        if k >= 0:
            return k
        if n >= j + cap + len(stop) or not self._undecided():
            return -1
        return WAIT

    def _unread(self, text: str) -> None:
        """Put `text`, the last characters consumed, back in front of the cursor.

        For a state that read on speculatively and must read that text again another way.
        A block's raw text (what a failed block gives back) stays exactly what was read.
        """
        n = len(text)
        if n <= self._pos - (self._mark if self._in_block else 0):
            self._pos -= n
            return
        if self._in_block:
            raw = "".join(self._raw) + self._buf[self._mark : self._pos]
            self._raw[:] = [raw[: len(raw) - n]]
            self._mark = 0
        self._buf = text + self._buf[self._pos :]
        self._pos = 0

    # ------------------------------------------------------------------ blocks

    def _open_block(self, state: State, start: int, end: int) -> None:
        """Enter a tool-call block whose opener spans `start:end` of the buffer."""
        self._in_block = True
        self._raw.clear()
        self._mark = start
        self._pos = end
        self._return = self._state
        self._state = state

    def _emit(self, call: RawCall) -> None:
        """A complete call: emit it; the block's raw text so far is settled."""
        self._out.extend(self._call_events(call))
        self._raw.clear()
        self._mark = self._pos
        # A call ends reasoning the model forgot to close.
        self._return = self._content_state

    def _close_block(self) -> None:
        self._in_block = False
        self._raw.clear()
        self._state = self._content_state

    def _fail_block(self, reason: str = "invalid") -> None:
        """Malformed block: its raw text since the last call goes back as plain text, and
        reading resumes at the cursor in the mode the block was opened from."""
        text = "".join(self._raw) + self._buf[self._mark : self._pos]
        self._in_block = False
        self._raw.clear()
        self._state = self._return
        if self._return == self._content_state:
            self._write_content(text)
        else:
            self._write_reasoning(text)
        self._failed(reason, text, self._out)

    def _at_eof(self) -> None:
        """End of input inside a block: emit what is complete, drop or fail the rest.

        The default keeps nothing unfinished: dropped when truncated, text otherwise.
        """
        if self._truncated:
            self._close_block()
        else:
            self._fail_block("unfinished")
