"""A stream parser driven by a state machine whose transitions are markers.

Formats whose structure is nested (Harmony headers and bodies, DeepSeek's DSML invoke and
parameter tags) do not fit `CallParser`'s "content, then one block" shape. They
subclass `MarkerMachine` instead: in each state a fixed set of markers matters; the text
between them goes to the state's `_text`, each marker to `_marker`, which may change
state. The streaming part (searching, holding back a possible partial marker, carrying it
over to the next delta) is `CursorParser`'s: the machine is one cursor state.
"""

from __future__ import annotations

import re
from abc import abstractmethod

from toolwire.parsing._engine import CursorParser
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ParseEvent

__all__ = ["JSON_QUOTE", "JSON_STRING", "MarkerMachine"]

JSON_STRING = MarkerScanner(["\\\\", '\\"', '"'])
"""Inside a JSON string: the two-character escapes that matter, and the closing quote.

Matching the escapes as whole markers means a backslash at the end of a delta is held
back until the character it escapes arrives."""

JSON_QUOTE = '"'
"""The marker that opens a JSON string; add it to the markers of a JSON-aware state."""


class MarkerMachine(CursorParser):
    """A `CursorParser` that walks its input marker by marker.

    Subclasses say which markers matter in the current mode (`_scanner`), what to do
    with the text between markers (`_text`) and with each marker (`_marker`); their modes
    are their own (`_mode`), the cursor state is always `_step`. Only a tail that could
    still grow into one of the current mode's markers stays in the buffer, re-examined
    with whatever mode is current when more text arrives. Work is linear: every character
    is searched a bounded number of times.
    """

    def __init__(self) -> None:
        super().__init__(content_markers=(), reasoning_markers=())
        self._state = self._step

    @abstractmethod
    def _scanner(self) -> MarkerScanner:
        """The markers that end a run of text in the current mode."""

    @abstractmethod
    def _text(self, text: str, out: list[ParseEvent]) -> None:
        """Non-empty text seen in the current mode."""

    @abstractmethod
    def _marker(self, marker: str, out: list[ParseEvent]) -> None:
        """A marker of the current mode's scanner; may change the mode."""

    def _step(self) -> bool:
        # `CursorParser._scan`, inlined: this runs once per delta at least.
        scan, buf, pos = self._scanner(), self._buf, self._pos
        m = scan.search(buf, pos)
        if m is None:
            end = len(buf) if self._final else scan.safe_end(buf, pos)
            if end > pos:
                self._text(buf[pos:end], self._out)
            self._pos = end
            return False
        start = m.start()
        if start > pos:
            self._text(buf[pos:start], self._out)
        self._pos = m.end()
        self._marker(m.group(), self._out)
        return True

    def _on_content_marker(self, m: re.Match[str]) -> bool:
        raise AssertionError("a MarkerMachine has no content state")

    def _on_reasoning_marker(self, m: re.Match[str]) -> bool:
        raise AssertionError("a MarkerMachine has no reasoning state")

    def _release(self, out: list[ParseEvent]) -> None:
        """At the end of output: the undecided tail is plain text of the current mode.

        The machine stays open (a later `feed` reads on, as it always did): subclasses
        decide what the end of output means in their `finish`.
        """
        self._out = out
        self._final = True
        self._run()
        self._final = False

    def _replay(self, text: str, out: list[ParseEvent]) -> None:
        """At the end of output: read `text` as the rest of it, then `_release`."""
        self._buf, self._pos = text, 0
        self._release(out)
