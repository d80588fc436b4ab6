"""A marker-driven stream parser: content, reasoning regions and tool-call regions.

Most formats are "text, then a marked block that holds one or more calls": Hermes
`<tool_call>…</tool_call>`, Qwen XML, GLM, Kimi sections, Gemma. `RegionParser` does the
streaming part for all of them (hold-back at marker boundaries, reasoning, whitespace at
the ends) and hands each complete block to the format's `parse` function, which only ever
sees whole text. Formats that do not fit (Harmony's headers, bare JSON) write their own
`StreamParser`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolwire.parsing._base import RawCall, StreamParser, TextSink
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ContentDelta, ParseEvent, ReasoningDelta

__all__ = ["BlockParse", "ReasoningRegion", "RegionParser", "ToolRegion"]

BlockParse = Callable[[str, bool, bool], "list[RawCall] | None"]
"""`parse(inner, closed, truncated)`: the calls in a block's inner text.

`closed` is False when the output ended inside the block. Return the complete calls
(for an unclosed or truncated block, only those the model finished), or None when the
block is not a valid tool-call block; it then comes back verbatim as content.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRegion:
    open: str
    close: str
    parse: BlockParse
    json_aware: bool = False
    """Ignore `close` inside JSON strings of the block (a marker in an argument is data)."""
    strict: bool = True
    """An invalid block is a `ParseFailure`. False for openers that ordinary text uses too
    (an untagged code fence): such a block that holds no call is just content."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningRegion:
    open: str
    close: str


_CONTENT, _REASONING, _TOOL = 0, 1, 2


class _Body:
    """Collects a block's inner text and finds its close marker, linear in the input."""

    __slots__ = ("_close", "_escape", "_in_string", "_json", "_out_re", "_parts", "_pending")

    def __init__(self, close: str, json_aware: bool) -> None:
        self._close = close
        self._json = json_aware
        self._parts: list[str] = []
        self._pending = ""  # examined-later tail: could be the start of the close marker
        self._in_string = False
        self._escape = False
        self._out_re = re.compile('"|' + re.escape(close)) if json_aware else None

    def text(self) -> str:
        return "".join(self._parts) + self._pending

    def feed(self, piece: str) -> tuple[str, int] | None:
        """Add `piece`. When the close marker is found, return (inner, end) where `end`
        is the offset in `piece` just past the marker; otherwise None."""
        base = len(self._pending)
        text = self._pending + piece
        self._pending = ""
        i = 0
        n = len(text)
        close = self._close
        if self._out_re is None:
            j = text.find(close)
            if j >= 0:
                inner = "".join(self._parts) + text[:j]
                self._parts.clear()
                return inner, j + len(close) - base
            keep = min(len(close) - 1, n)
            self._parts.append(text[: n - keep])
            self._pending = text[n - keep :]
            return None
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
                return None
            if m.group() == '"':
                self._in_string = True
                i = m.end()
                continue
            inner = "".join(self._parts) + text[: m.start()]
            self._parts.clear()
            return inner, m.end() - base
        self._parts.append(text)
        return None


class RegionParser(StreamParser):
    """Content with reasoning regions and tool-call regions, split by markers.

    Args:
        tools: the tool-call regions of the format.
        reasoning: reasoning regions (e.g. `<think>`…`</think>`).
        start_in_reasoning: the prompt pre-filled a reasoning opener.
        drop: markers removed wherever they appear in content (end-of-turn tokens, stray
            closers), so they never leak.
        strip: strip whitespace at both ends of content and of reasoning.
        calls_end_reasoning: a tool-call opener inside reasoning ends the reasoning and
            starts the call (Qwen3 with thinking on may call a tool without closing
            `</think>`); the reasoning closer, if it comes later, is then dropped.
    """

    def __init__(
        self,
        *,
        tools: Sequence[ToolRegion],
        reasoning: Sequence[ReasoningRegion] = (),
        start_in_reasoning: bool = False,
        drop: Sequence[str] = (),
        strip: bool = True,
        calls_end_reasoning: bool = False,
    ) -> None:
        super().__init__()
        self._tools = {r.open: r for r in tools}
        self._reasoning = {r.open: r for r in reasoning}
        self._drop = frozenset(drop)
        self._content_scan = MarkerScanner([*self._tools, *self._reasoning, *self._drop])
        openers = list(self._tools) if calls_end_reasoning else []
        self._close_scans = {r.close: MarkerScanner([r.close, *openers]) for r in reasoning}
        self._content = TextSink(ContentDelta, strip=strip)
        self._thoughts = TextSink(ReasoningDelta, strip=strip)
        self._buf = ""
        self._mode = _CONTENT
        self._reason_close = ""
        self._region: ToolRegion | None = None
        self._body: _Body | None = None
        if start_in_reasoning and reasoning:
            self._mode = _REASONING
            self._reason_close = reasoning[0].close

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
            self._content.write(rest, out)
        elif self._mode == _REASONING:
            self._thoughts.write(rest, out)
        else:
            assert self._region is not None
            assert self._body is not None
            region, inner = self._region, self._body.text()
            self._mode, self._region, self._body = _CONTENT, None, None
            calls = region.parse(inner, False, truncated)
            if calls is None and not truncated and region.close in inner:
                # The marker was hidden by an unbalanced quote; split at it as written.
                cut = inner.index(region.close)
                self._close_block(region, inner[:cut], out)
                self._consume(inner[cut + len(region.close) :], out)
                return out + self.finish(truncated=truncated)
            if calls is None:
                self._content.write(region.open + inner, out)
                if region.strict:
                    self._failed("unfinished", region.open + inner, out)
            else:
                for call in calls:
                    out.extend(self._call_events(call))
        return out

    def _close_block(self, region: ToolRegion, inner: str, out: list[ParseEvent]) -> None:
        calls = region.parse(inner, True, False)
        if calls is None:
            text = region.open + inner + region.close
            self._content.write(text, out)
            if region.strict:
                self._failed("invalid", text, out)
        else:
            for call in calls:
                out.extend(self._call_events(call))

    def _consume(self, text: str, out: list[ParseEvent]) -> None:
        pos, n = 0, len(text)
        while pos < n:
            if self._mode == _CONTENT:
                m = self._content_scan.search(text, pos)
                if m is None:
                    safe = self._content_scan.safe_end(text, pos)
                    self._content.write(text[pos:safe], out)
                    self._buf = text[safe:]
                    return
                self._content.write(text[pos : m.start()], out)
                marker, pos = m.group(), m.end()
                if marker in self._tools:
                    self._region = self._tools[marker]
                    self._body = _Body(self._region.close, self._region.json_aware)
                    self._mode = _TOOL
                elif marker in self._reasoning:
                    self._reason_close = self._reasoning[marker].close
                    self._mode = _REASONING
                # else: a dropped marker
            elif self._mode == _REASONING:
                scan = self._close_scans[self._reason_close]
                m = scan.search(text, pos)
                if m is None:
                    safe = scan.safe_end(text, pos)
                    self._thoughts.write(text[pos:safe], out)
                    self._buf = text[safe:]
                    return
                self._thoughts.write(text[pos : m.start()], out)
                marker, pos = m.group(), m.end()
                self._mode = _CONTENT
                region = self._tools.get(marker)
                if region is not None:  # a call ends a reasoning block never closed
                    self._region = region
                    self._body = _Body(region.close, region.json_aware)
                    self._mode = _TOOL
            else:
                assert self._region is not None
                assert self._body is not None
                found = self._body.feed(text[pos:])
                if found is None:
                    return
                inner, end = found
                region = self._region
                self._mode, self._region, self._body = _CONTENT, None, None
                self._close_block(region, inner, out)
                pos += end
