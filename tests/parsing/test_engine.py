"""The shared call-block engine (`CallParser`) on a made-up format that mixes its two kinds
of block: a marker-closed region (`<call>{…}</call>`) and a structurally ended one
(`@{…}`, over when its JSON closes), with reasoning that a call may end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming import every_split, summary

from toolwire.parsing import ParsedOutput, assemble
from toolwire.parsing._base import RawCall
from toolwire.parsing._blocks import CallParser, CallReader, Reasoning, ToolRegion
from toolwire.parsing._json import JsonEndScanner, loads_object


def _region(inner: str, closed: bool, truncated: bool) -> list[RawCall] | None:
    if truncated:
        return []
    obj = loads_object(inner.strip())
    return None if obj is None or "name" not in obj else [RawCall(obj["name"], {})]


class _At(CallReader):
    def __init__(self) -> None:
        super().__init__()
        self._scan = JsonEndScanner()

    def feed(self, piece: str) -> int:
        end = self._scan.feed(piece)
        self._parts.append(piece if end < 0 else piece[:end])
        return end

    def calls(self) -> list[RawCall] | None:
        obj = loads_object(self.text())
        return None if obj is None or "name" not in obj else [RawCall(obj["name"], {})]


def _make() -> CallParser:
    return CallParser(
        openers={"@": _At},
        regions=[
            ToolRegion(open="<call>", close="</call>", parse=_region, json_aware=True),
            ToolRegion(open="<maybe>", close="</maybe>", parse=_region, strict=False),
        ],
        reasoning=[Reasoning(open="<r>", close="</r>")],
        drop=["</r>"],
        calls_end_reasoning=True,
    )


def _parse(text: str, *, truncated: bool = False) -> ParsedOutput:
    results = []
    for pieces in every_split(text):
        parser = _make()
        events = [e for piece in pieces for e in parser.feed(piece)]
        results.append(assemble([*events, *parser.finish(truncated=truncated)]))
    for got in results:
        assert summary(got) == summary(results[0])
    return results[0]


def _names(out: ParsedOutput) -> list[str]:
    return [c.name for c in out.tool_calls]


def test_both_kinds_of_block_in_one_output() -> None:
    out = _parse('Hi <call>{"name": "a", "x": "</call>"}</call> and @{"name": "b"} done')
    assert (out.content, _names(out), out.failures) == ("Hi  and  done", ["a", "b"], [])


def test_a_structural_opener_ends_reasoning_never_closed() -> None:
    out = _parse('<r>thinking @{"name": "b"}</r> after')
    assert (out.reasoning, out.content, _names(out)) == ("thinking", "after", ["b"])


def test_strict_regions_fail_lenient_ones_are_content() -> None:
    out = _parse("<call>nope</call> <maybe>nope</maybe>")
    assert out.content == "<call>nope</call> <maybe>nope</maybe>"
    assert [(f.reason, f.text) for f in out.failures] == [("invalid", "<call>nope</call>")]


def test_a_close_marker_hidden_by_an_unbalanced_quote_still_ends_the_region() -> None:
    out = _parse('<call>{"name": "a</call> text @{"name": "b"}')
    assert out.content == '<call>{"name": "a</call> text'
    assert _names(out) == ["b"]
    assert [f.reason for f in out.failures] == ["invalid"]


def test_truncated_blocks_are_dropped() -> None:
    assert _parse('ok <call>{"name": "a"', truncated=True).content == "ok"
    assert _parse('ok @{"name": "a"', truncated=True).content == "ok"


class _Salvaging(_At):
    bare_at_end = True

    def at_end(self, truncated: bool) -> list[RawCall] | None:
        return [RawCall("salvaged", {})] if truncated else None


def _parse_with(make: Callable[[], CallParser], text: str, **kw: Any) -> ParsedOutput:
    results = []
    for pieces in every_split(text):
        parser = make()
        events = [e for piece in pieces for e in parser.feed(piece)]
        results.append(assemble([*events, *parser.finish(**kw)]))
    for got in results:
        assert summary(got) == summary(results[0])
    return results[0]


def _lines(**kw: Any) -> CallParser:
    return CallParser(
        reasoning=[Reasoning(open="<r>", close="</r>", leading=True)],
        bare=_At,
        bare_start="{",
        bare_lines=True,
        **kw,
    )


def test_a_leading_reasoning_region_opens_only_at_the_start() -> None:
    out = _parse_with(_lines, ' \n<r>hm</r>{"name": "a"} <r>no</r>')
    assert (out.reasoning, _names(out), out.content) == ("hm", ["a"], "<r>no</r>")
    out = _parse_with(_lines, "x <r>no</r>")
    assert (out.reasoning, out.content) == (None, "x <r>no</r>")
    assert _parse_with(_lines, " <r>").content == "<r>"  # held, then text after all


def test_bare_calls_at_any_line_start_keep_the_whitespace_before_them() -> None:
    text = 'a {"name": "x"}\n  {"name": "b"} {"name": "c"}\n{"no": 1} {"name": "d"}'
    out = _parse_with(_lines, text)
    assert _names(out) == ["b", "c"]
    assert out.content == 'a {"name": "x"}\n   \n{"no": 1} {"name": "d"}'


def test_a_bare_reader_may_salvage_a_block_the_output_ends_in() -> None:
    def make() -> CallParser:
        return CallParser(bare=_Salvaging, bare_start="{")

    assert _names(_parse_with(make, '{"name": "a"', truncated=True)) == ["salvaged"]
    assert _parse_with(make, '{"name": "a"').content == '{"name": "a"'
    # Without `bare_at_end`, a bare block cut short is content.
    out = _parse_with(lambda: CallParser(bare=_At, bare_start="{"), '{"name"', truncated=True)
    assert (out.content, out.tool_calls) == ('{"name"', [])
