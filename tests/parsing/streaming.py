"""Helpers for format tests: parse a text whole and in every kind of split."""

from __future__ import annotations

import random
from typing import Any

from toolwire.parsing import ParsedOutput, assemble, parse_output, parser_for
from toolwire.parsing._base import ToolSpecs


def parse_pieces(
    pieces: list[str],
    fmt: str,
    *,
    prompt_suffix: str = "",
    truncated: bool = False,
    tools: ToolSpecs = None,
) -> ParsedOutput:
    parser = parser_for("test-model", tools, format=fmt, prompt_suffix=prompt_suffix)
    events = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    events.extend(parser.finish(truncated=truncated))
    return assemble(events)


def summary(out: ParsedOutput) -> tuple[Any, ...]:
    """What any split must agree on: content, reasoning, (name, arguments_json) of calls,
    and the failures reported."""
    calls = [(c.name, c.arguments_json) for c in out.tool_calls]
    return out.content, out.reasoning, calls, [(f.reason, f.text) for f in out.failures]


def every_split(text: str) -> list[list[str]]:
    """Per character, every two-piece cut, and seeded random pieces of 1-8 characters."""
    splits = [[text], list(text)]
    splits += [[text[:i], text[i:]] for i in range(1, len(text))]
    for seed in range(8):
        rng = random.Random(seed)
        pieces, pos = [], 0
        while pos < len(text):
            size = rng.randint(1, 8)
            pieces.append(text[pos : pos + size])
            pos += size
        splits.append(pieces)
    return splits


def parse_all_ways(
    text: str,
    fmt: str,
    *,
    prompt_suffix: str = "",
    truncated: bool = False,
    tools: ToolSpecs = None,
) -> ParsedOutput:
    """Parse `text` whole; assert every split gives the same result; return it."""
    whole = parse_output(
        text, "test-model", tools, format=fmt, prompt_suffix=prompt_suffix, truncated=truncated
    )
    for pieces in every_split(text):
        got = parse_pieces(
            pieces, fmt, prompt_suffix=prompt_suffix, truncated=truncated, tools=tools
        )
        assert summary(got) == summary(whole), pieces
    return whole


def calls(out: ParsedOutput) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in out.tool_calls]
