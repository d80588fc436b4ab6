"""A stream parser for formats whose calls end where their structure closes.

Mistral (`[TOOL_CALLS]name[ARGS]{…}`), Llama (`<|python_tag|>{…}`, a bare JSON object or a
pythonic `[f(…)]` list at the start of the output) and Gemma 4 (`<|tool_call>call:f{…}`)
have no reliable closing marker: a call is over when its JSON object, Python list or
object notation closes. `CallParser` does the streaming part (marker hold-back, reasoning
regions, whitespace at the ends, truncation) and hands the text after an opening marker to
a format's `CallReader`, which finds the end incrementally and parses the finished block.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from toolwire.parsing._base import RawCall, StreamParser, TextSink
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ContentDelta, ParseEvent, ReasoningDelta

__all__ = ["CallParser", "CallReader", "Reasoning", "starts_in_reasoning"]


class CallReader(ABC):
    """Reads one call block, from just after its opener to its structural end.

    `feed` records the text it consumes (see `text`) so that a block that turns out not to
    be a call can come back verbatim as content.
    """

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Reasoning:
    open: str
    close: str
    label: str = ""
    """A channel name written right after `open` (Gemma's `thought`), dropped."""


def starts_in_reasoning(prompt_suffix: str, regions: Sequence[Reasoning]) -> Reasoning | None:
    """The region a pre-filled prompt left open (its opener after its last closer), if any."""
    for region in regions:
        opened = prompt_suffix.rfind(region.open)
        if opened >= 0 and opened > prompt_suffix.rfind(region.close):
            return region
    return None


_CONTENT, _REASONING, _CALL = 0, 1, 2


class CallParser(StreamParser):
    """Content, reasoning regions and structurally ended call blocks.

    Args:
        openers: marker → factory of the reader for the block that follows it.
        reasoning: reasoning regions.
        drop: markers removed wherever they appear in content (stop tokens, stray closers).
        bare: factory of a reader for a call written without any marker, recognised only
            at the start of the output (after whitespace) by its first character.
        bare_start: the characters that can begin a bare call (`{`, `[`).
        bare_again: separators (besides whitespace) after which another bare call may
            follow a finished call (`;` for Llama 3); empty: bare calls only at the start.
        inline: markers that may start a call anywhere in content, unless they follow a
            word character (`[` for pythonic calls after prose). Ordinary text uses them
            too, so a block that is no call is plain content, never a `ParseFailure`.
        prompt_suffix: the end of the generation prompt; a reasoning opener it leaves open
            means the output starts inside reasoning.
    """

    def __init__(
        self,
        *,
        openers: Mapping[str, Callable[[], CallReader]],
        inline: Mapping[str, Callable[[], CallReader]] | None = None,
        reasoning: Sequence[Reasoning] = (),
        drop: Sequence[str] = (),
        bare: Callable[[], CallReader] | None = None,
        bare_start: str = "",
        bare_again: str = "",
        prompt_suffix: str = "",
    ) -> None:
        super().__init__()
        self._openers = dict(openers)
        self._inline = dict(inline or {})
        self._tail = ""  # the last character of content, to tell `x[f()]` from `: [f()]`
        self._reasoning = {r.open: r for r in reasoning}
        self._scan = MarkerScanner([*self._openers, *self._inline, *self._reasoning, *drop])
        self._close_scans = {r.close: MarkerScanner([r.close]) for r in reasoning}
        self._content = TextSink(ContentDelta)
        self._thoughts = TextSink(ReasoningDelta)
        self._bare = bare
        self._bare_start = bare_start
        self._bare_again = bare_again
        self._bare_ok = bare is not None  # could a bare call begin here?
        self._lead = ""  # whitespace/separators held while a bare call may follow
        self._buf = ""
        self._mode = _CONTENT
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
        if self._mode == _CONTENT:
            self._content.write(self._lead + rest, out)
        elif self._mode == _REASONING:
            self._thoughts.write(self._label_held() + rest, out)
        else:
            assert self._reader is not None
            reader, opener = self._reader, self._opener
            self._mode, self._reader = _CONTENT, None
            raw = reader.text()
            if opener in self._inline and not raw.strip():
                self._text(opener + raw, out)  # a bracket at the end is just text
                return out
            if not raw.strip():
                return out  # the output ended right after an opener: nothing to show
            if truncated and opener:
                return out  # an unfinished call is never returned, nor its half-written text
            # Unfinished and not cut off (malformed), or a bare block that may never have
            # been a call (a JSON answer cut short): verbatim content.
            self._content.write(opener + raw, out)
            if opener and opener not in self._inline:
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

    def _start_call(self, opener: str, reader: CallReader) -> None:
        self._mode = _CALL
        self._opener = opener
        self._reader = reader
        self._bare_ok = False

    def _consume(self, text: str, out: list[ParseEvent]) -> None:
        pos, n = 0, len(text)
        while pos < n:
            if self._mode == _CONTENT:
                if self._bare_ok:
                    pos = self._maybe_bare(text, pos, out)
                    if pos < 0:
                        return
                    if self._mode != _CONTENT:
                        continue
                m = self._scan.search(text, pos)
                if m is None:
                    safe = self._scan.safe_end(text, pos)
                    self._text(text[pos:safe], out)
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
                pos = m.end()
                self._mode, self._region = _CONTENT, None
            else:
                assert self._reader is not None
                end = self._reader.feed(text[pos:])
                if end < 0:
                    return
                pos += end
                self._end_call(out)

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
            self._content.write(self._lead, out)
            self._lead = ""
        return i

    def _end_call(self, out: list[ParseEvent]) -> None:
        assert self._reader is not None
        reader, opener = self._reader, self._opener
        self._mode, self._reader = _CONTENT, None
        calls = reader.calls()
        if calls is None:
            self._text(opener + reader.text(), out)
            if opener and opener not in self._inline:
                self._failed("invalid", opener + reader.text(), out)
            return
        self._tail = ""
        for call in calls:
            out.extend(self._call_events(call))
        if self._bare is not None and self._bare_again:
            self._bare_ok = True
