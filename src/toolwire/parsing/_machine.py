"""A stream parser driven by a state machine whose transitions are markers.

Formats whose structure is nested (Harmony headers and bodies, DeepSeek's DSML invoke and
parameter tags) do not fit `CallParser`'s "content, then one block" shape. They
subclass `MarkerMachine` instead: in each state a fixed set of markers matters; the text
between them goes to the state's `_text`, each marker to `_marker`, which may change
state. The streaming part (searching, holding back a possible partial marker, carrying it
over to the next delta) lives here once.
"""

from __future__ import annotations

from abc import abstractmethod

from toolwire.parsing._base import StreamParser
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ParseEvent

__all__ = ["JSON_QUOTE", "JSON_STRING", "MarkerMachine"]

JSON_STRING = MarkerScanner(["\\\\", '\\"', '"'])
"""Inside a JSON string: the two-character escapes that matter, and the closing quote.

Matching the escapes as whole markers means a backslash at the end of a delta is held
back until the character it escapes arrives."""

JSON_QUOTE = '"'
"""The marker that opens a JSON string; add it to the markers of a JSON-aware state."""


class MarkerMachine(StreamParser):
    """A `StreamParser` that walks its input marker by marker.

    Subclasses say which markers matter in the current state (`_scanner`), what to do
    with the text between markers (`_text`) and with each marker (`_marker`). The
    machine holds back only a tail that could still grow into one of the current
    state's markers, and re-examines it with whatever state is current when more text
    arrives. Work is linear: every character is searched a bounded number of times.
    """

    def __init__(self) -> None:
        super().__init__()
        self._held = ""

    @abstractmethod
    def _scanner(self) -> MarkerScanner:
        """The markers that end a run of text in the current state."""

    @abstractmethod
    def _text(self, text: str, out: list[ParseEvent]) -> None:
        """Non-empty text seen in the current state."""

    @abstractmethod
    def _marker(self, marker: str, out: list[ParseEvent]) -> None:
        """A marker of the current state's scanner; may change the state."""

    def feed(self, delta: str) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        if delta:
            text = self._held + delta if self._held else delta
            self._held = ""
            self._run(text, out)
        return out

    def _run(self, text: str, out: list[ParseEvent]) -> None:
        pos, n = 0, len(text)
        while pos < n:
            scan = self._scanner()
            m = scan.search(text, pos)
            if m is None:
                safe = scan.safe_end(text, pos)
                if safe > pos:
                    self._text(text[pos:safe], out)
                self._held = text[safe:]
                return
            if m.start() > pos:
                self._text(text[pos : m.start()], out)
            pos = m.end()
            self._marker(m.group(), out)

    def _release(self, out: list[ParseEvent]) -> None:
        """At the end of output: the held-back tail is plain text of the current state."""
        held, self._held = self._held, ""
        if held:
            self._text(held, out)
