"""Stream-parser benchmarks: cost per delta, linear growth, and the naive alternative.

Run: `python benchmarks/bench_parsing.py [--quick] [FORMAT ...]` (prints figures; no
assertions). The naive re-parse of 64 KB takes about a minute; `--quick` stops it at 16 KB.

1. Median cost of one `feed()` of a ~4-character delta, in content and inside a tool
   call's arguments (target: under 5 µs), per format.
2. Total time to stream a 64 KB argument string in 4-character deltas, and 128 KB; the
   ratio must stay under 2.3 (linear growth).
3. Side by side: the naive approach that re-parses the accumulated arguments with
   `partial-json-parser` on every delta (what many servers do to stream partial
   arguments), on the same input.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable

from toolwire.parsing import ToolCallStart, parser_for

DELTA = 4
PROSE = "The quick brown fox jumps over the lazy dog; café, naïve, 東京 and more words. "

# format -> (text that opens a call and its one string argument, text that closes it)
OPENERS: dict[str, tuple[str, str]] = {
    "hermes": ('<tool_call>\n{"name": "write", "arguments": {"content": "', '"}}\n</tool_call>'),
    "pre_json": ('<pre>{"name": "write", "arguments": {"content": "', '"}}</pre>'),
    "json_fence": ('```json\n{"name": "write", "arguments": {"content": "', '"}}\n```'),
    "json": ('{"name": "write", "arguments": {"content": "', '"}}'),
    "tool_request": ('{"tool_request": {"name": "write", "arguments": {"content": "', '"}}}'),
    "qwen3_xml": (
        "<tool_call>\n<function=write>\n<parameter=content>\n",
        "\n</parameter>\n</function>\n</tool_call>",
    ),
    "llama3_json": ('{"name": "write", "parameters": {"content": "', '"}}'),
    "mistral_v11": ('[TOOL_CALLS]write[ARGS]{"content": "', '"}'),
    "harmony": (
        '<|channel|>commentary to=functions.write <|constrain|>json<|message|>{"content": "',
        '"}<|call|>',
    ),
    "deepseek_v31": (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>write<｜tool▁sep｜>{"content": "',
        '"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    ),
    "kimi_k2": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.write:0"
        '<|tool_call_argument_begin|>{"content": "',
        '"}<|tool_call_end|><|tool_calls_section_end|>',
    ),
    "glm47": (
        "</think><tool_call>write<arg_key>content</arg_key><arg_value>",
        "</arg_value></tool_call>",
    ),
    "gemma4": ('<|tool_call>call:write{content:<|"|>', '<|"|>}<tool_call|>'),
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write",
            "parameters": {"type": "object", "properties": {"content": {"type": "string"}}},
        },
    }
]


def _deltas(text: str) -> list[str]:
    return [text[i : i + DELTA] for i in range(0, len(text), DELTA)]


def _payload(size: int) -> str:
    return (PROSE * (size // len(PROSE) + 1))[:size]


def median_feed_us(fmt: str, prefix: str, body: str, *, batch: int = 200) -> float:
    """Median µs per feed() of a 4-char delta of `body`, after `prefix` was fed."""
    parser = parser_for("bench", TOOLS, format=fmt)
    parser.feed(prefix)
    deltas = _deltas(body)
    samples = []
    gc.disable()
    try:
        for start in range(0, len(deltas) - batch, batch):
            chunk = deltas[start : start + batch]
            t0 = time.perf_counter_ns()
            for d in chunk:
                parser.feed(d)
            samples.append((time.perf_counter_ns() - t0) / batch / 1000)
    finally:
        gc.enable()
    return statistics.median(samples)


def stream_seconds(fmt: str, size: int) -> float:
    """CPU time to stream one call whose argument string is `size` characters.

    CPU time of this process, not wall time: on a shared machine the scheduler's pauses
    would otherwise swamp the growth ratio this is meant to show.
    """
    opener, closer = OPENERS[fmt]
    deltas = _deltas(opener + _payload(size) + closer)
    best = float("inf")
    for _ in range(5):  # best of 5: the machine is shared, noise only ever adds time
        parser = parser_for("bench", TOOLS, format=fmt)
        events = []
        gc.disable()
        try:
            t0 = time.process_time()
            for d in deltas:
                events += parser.feed(d)
            events += parser.finish()
            best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
        assert any(isinstance(e, ToolCallStart) for e in events), f"{fmt}: no call parsed"
    return best


def naive_seconds(size: int) -> float:
    """Re-parse the accumulated arguments with partial-json-parser on every delta."""
    from partial_json_parser import loads as partial_loads

    deltas = _deltas(json.dumps({"content": _payload(size)}))
    acc: list[str] = []
    t0 = time.process_time()
    for d in deltas:
        acc.append(d)
        partial_loads("".join(acc))
    return time.process_time() - t0


def _row(*cells: object) -> str:
    return "  ".join(f"{c:>12}" if i else f"{c:<14}" for i, c in enumerate(cells))


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    formats = [a for a in argv if not a.startswith("--")] or list(OPENERS)
    print(f"feed() of a {DELTA}-character delta (median µs), and a whole call streamed")
    print(_row("format", "content µs", "args µs", "64 KB ms", "128 KB ms", "ratio"))
    for fmt in formats:
        opener, _ = OPENERS[fmt]
        content_us = median_feed_us(fmt, "", _payload(32_000))
        args_us = median_feed_us(fmt, opener, _payload(32_000))
        t64 = stream_seconds(fmt, 64 * 1024)
        t128 = stream_seconds(fmt, 128 * 1024)
        print(
            _row(
                fmt,
                f"{content_us:.2f}",
                f"{args_us:.2f}",
                f"{t64 * 1000:.1f}",
                f"{t128 * 1000:.1f}",
                f"{t128 / t64:.2f}",
            )
        )
    print()
    print("naive: partial-json-parser on the accumulated arguments at every delta")
    measure: list[tuple[str, Callable[[int], float]]] = [
        ("toolwire hermes", lambda n: stream_seconds("hermes", n)),
        ("naive re-parse", naive_seconds),
    ]
    sizes = [4 * 1024, 16 * 1024] if quick else [4 * 1024, 16 * 1024, 64 * 1024]
    print(_row("approach", *(f"{s // 1024} KB ms" for s in sizes)))
    for label, fn in measure:
        print(_row(label, *(f"{fn(s) * 1000:.1f}" for s in sizes)))


if __name__ == "__main__":
    main(sys.argv[1:])
