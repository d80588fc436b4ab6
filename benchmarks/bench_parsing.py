"""Stream-parser benchmarks: the 128 KB call in 1-character deltas, linear growth, cost per
delta, and other parsers side by side.

Run: `python benchmarks/bench_parsing.py [--quick] [--no-gateway] [FORMAT ...]` (prints
figures; no assertions). `--quick` (under a minute) takes fewer repeats and smaller
comparison inputs; the full run takes a few minutes.

1. A 128 KB string argument (the text `gateway_fake_upstream.py` streams: quotes and
   newlines, so escapes too) streamed in 1-character deltas, total CPU time
   (`time.process_time`, gc on, as in a server):
   - through `parser_for(..., format="hermes")` alone (target: under 100 ms);
   - through the gateway's parse path, `ParsedTurn.feed(ModelContentDelta)` then `finish()`
     (target: under 300 ms);
   - through a real `toolwire serve` (`parse:hermes` route, upstream: the fake OpenAI
     server sending one character per SSE chunk): the gateway process's CPU for the
     request (utime + stime from /proc; target: under 300 ms). Reuses
     `bench_gateway.py`'s processes; `--no-gateway` skips it.
2. Linear growth, every format in `toolwire.parsing.FORMATS`: one call whose string
   argument is 16, 64, 128 and 256 KB, streamed in 4-character deltas (best of 5, gc off:
   the scheduler's pauses would swamp the ratio); time per KB and the ratio 256 KB / 16 KB
   per KB (near 1 when linear). Then the same for an argument made only of escapes
   (`\\n` × N, in the formats that write JSON: N escaped newlines), parsed whole: a
   scanner that searched for a string's closing quote again past every escape was
   quadratic there, which 4-character deltas hide.
3. Median cost of one `feed()` of a 4-character delta, in content and inside a tool call's
   arguments (target: under 5 µs), per format.
4. Side by side:
   - `canitoolcall` (a dev dependency) ships no parser of its own: its adapters replay
     fixtures through vLLM, SGLang, llama.cpp, Ollama or transformers, each in its own
     engine virtualenv, none of which this machine has. So the other parser is SGLang's
     own (`FunctionCallParser`, the serving layer's streaming entry point), as extracted
     in the `llm-router-utils` package: `bash benchmarks/setup_sglang_parsers.sh`
     installs it (no dependencies; they are toolwire's) into benchmarks/.sglang-parsers.
     Same inputs, streamed (4 KB, and 16 KB without `--quick`, 4-character deltas) and
     whole text (128 KB); the ratio toolwire / SGLang (under 1: toolwire is faster).
   - the naive approach: re-parse the accumulated arguments with `partial-json-parser` on
     every delta (what many servers do to stream partial arguments).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway_fake_upstream import HERMES_PATH, HERMES_TOOL, hermes_argument, hermes_text
from toolwire.models.base import ModelResponse, ModelStreamEvent
from toolwire.models.events import ModelContentDelta
from toolwire.models.messages import AssistantMessage
from toolwire.models.parsed import ParsedTurn
from toolwire.parsing import (
    FORMATS,
    ParseEvent,
    assemble,
    parser_for,
)
from toolwire.tools.tool import Tool

HERE = Path(__file__).resolve().parent
DELTA = 4
BIG_KB = 128
GROWTH_KB = (16, 64, 128, 256)
PROSE = "The quick brown fox jumps over the lazy dog; café, naïve, 東京 and more words. "

PARSER_TARGET_MS = 100.0
TURN_TARGET_MS = 300.0
GATEWAY_TARGET_MS = 300.0
FEED_TARGET_US = 5.0

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
    "pythonic": ('[write(content="', '")]'),
    "mistral_v3": ('[TOOL_CALLS] [{"name": "write", "arguments": {"content": "', '"}}]'),
    "mistral_v11": ('[TOOL_CALLS]write[ARGS]{"content": "', '"}'),
    # As gpt-oss writes it: an analysis message, then the call in a commentary message.
    "harmony": (
        "<|channel|>analysis<|message|>Write it.<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.write <|constrain|>json<|message|>{"content": "',
        '"}<|call|>',
    ),
    "deepseek_v3": (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>write\n"
        '```json\n{"content": "',
        '"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    ),
    "deepseek_v31": (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>write<｜tool▁sep｜>{"content": "',
        '"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    ),
    "deepseek_v32": (
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="write">\n'
        '<｜DSML｜parameter name="content" string="true">',
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
    ),
    "deepseek_v4": (
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="write">\n'
        '<｜DSML｜parameter name="content" string="true">',
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    ),
    "deepseek_v41": (
        '<｜DSML｜ calls>\n<｜DSML｜ invoke name="write">\n'
        '<｜DSML｜ parameter name="content" string="true">',
        "</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>",
    ),
    "kimi_k2": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.write:0"
        '<|tool_call_argument_begin|>{"content": "',
        '"}<|tool_call_end|><|tool_calls_section_end|>',
    ),
    "kimi_k2_thinking": (
        "</think><|tool_calls_section_begin|><|tool_call_begin|>functions.write:0"
        '<|tool_call_argument_begin|>{"content": "',
        '"}<|tool_call_end|><|tool_calls_section_end|>',
    ),
    "kimi_k3": (
        "<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>"
        '<|open|>tools<|sep|><|open|>call tool="write" index="1"<|sep|>'
        '<|open|>argument key="content" type="string"<|sep|>',
        "<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
    ),
    "glm45": (
        "<tool_call>write\n<arg_key>content</arg_key>\n<arg_value>",
        "</arg_value>\n</tool_call>",
    ),
    "glm47": (
        "</think><tool_call>write<arg_key>content</arg_key><arg_value>",
        "</arg_value></tool_call>",
    ),
    "gemma4": ('<|tool_call>call:write{content:<|"|>', '<|"|>}<tool_call|>'),
}

# toolwire format -> SGLang's `--tool-call-parser` name for the same format.
SGLANG_PARSERS: dict[str, str] = {
    "hermes": "hermes",
    "qwen3_xml": "qwen3_coder",
    "llama3_json": "llama3",
    "pythonic": "pythonic",
    "mistral_v3": "mistral",
    "mistral_v11": "mistral",
    "harmony": "gpt-oss",
    "deepseek_v3": "deepseekv3",
    "deepseek_v31": "deepseekv31",
    "deepseek_v32": "deepseekv32",
    "deepseek_v4": "deepseekv4",
    "deepseek_v41": "deepseekv41",
    "kimi_k2": "kimi_k2",
    "kimi_k2_thinking": "kimi_k2",
    "kimi_k3": "kimi_k3",
    "glm45": "glm45",
    "glm47": "glm47",
    "gemma4": "gemma4",
}
SGLANG_DIR = HERE / ".sglang-parsers"
SGLANG_PACKAGE = "llm-router-utils"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write",
            "parameters": {"type": "object", "properties": {"content": {"type": "string"}}},
        },
    }
]
WRITE_FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}
WRITE_FILE_TOOLS = [
    {"type": "function", "function": {"name": HERMES_TOOL, "parameters": WRITE_FILE_SCHEMA}}
]


def _deltas(text: str, size: int = DELTA) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _payload(size: int) -> str:
    return (PROSE * (size // len(PROSE) + 1))[:size]


def _call_text(fmt: str, size: int) -> str:
    opener, closer = OPENERS[fmt]
    return opener + _payload(size) + closer


def _call_deltas(fmt: str, size: int, *, whole_markers: bool = False) -> list[str]:
    """The call in `DELTA`-character deltas; with `whole_markers`, the opener and the
    closer come in pieces that keep each special token whole, as a server's detokenizer
    hands them over (SGLang's streaming parsers miss or leak markers split across deltas)."""
    if not whole_markers:
        return _deltas(_call_text(fmt, size))
    opener, closer = OPENERS[fmt]
    return [*_tokens(opener), *_deltas(_payload(size)), *_tokens(closer)]


_SPECIAL = re.compile(r"(<\|[^|<>]*\|>|<｜[^｜<>]*｜>|<\|[a-z_]+>|<[a-z_]+\|>|\[[A-Z_/]+\])")


def _tokens(marker: str) -> list[str]:
    """`marker` cut before and after each special token (`<|...|>`, `<｜...｜>`, `[ARGS]`)."""
    return [part for part in _SPECIAL.split(marker) if part]


def _args_verdict(name: str | None, arguments: str, expected: dict[str, str], want: str) -> str:
    """'ok' when one call of `want` came back with `expected` arguments (string values
    compared without surrounding whitespace, which raw-text formats may trim)."""
    if name != want:
        return "NO CALL" if name is None else f"WRONG tool {name!r}"
    try:
        got = json.loads(arguments)
    except ValueError:
        return "WRONG: arguments are not JSON"
    if not isinstance(got, dict) or set(got) != set(expected):
        return "WRONG arguments"
    same = all(str(got[k]).strip() == v.strip() for k, v in expected.items())
    return "ok" if same else "WRONG argument value"


def _toolwire_verdict(events: Sequence[ParseEvent], expected: dict[str, str], want: str) -> str:
    calls = assemble(events).tool_calls
    if len(calls) != 1:
        return "NO CALL" if not calls else f"WRONG: {len(calls)} calls"
    return _args_verdict(calls[0].name, calls[0].arguments_json, expected, want)


def _mark(value: float, target: float) -> str:
    return "✓" if value < target else "✗"


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], notes: str = "") -> None:
    """Print a left-aligned first column and right-aligned others, widths to fit."""
    cells = [[str(c) for c in header], *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        line = "  ".join(
            c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)
        )
        print(line.rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    if notes:
        print(notes)
    print()


# --- 1. the 128 KB argument in 1-character deltas ------------------------------------------


@dataclass
class Timing:
    best_ms: float
    median_ms: float
    verdict: str


def _expected_big() -> dict[str, str]:
    return {"path": HERMES_PATH, "content": hermes_argument(BIG_KB)}


def parser_alone_1char(repeats: int) -> Timing:
    """`parser_for(format="hermes")` fed the 128 KB Hermes text one character at a time."""
    deltas = list(hermes_text(BIG_KB))
    times = []
    events: list[ParseEvent] = []
    for _ in range(repeats):
        parser = parser_for("bench", WRITE_FILE_TOOLS, format="hermes")
        events = []
        t0 = time.process_time()
        for d in deltas:
            events += parser.feed(d)
        events += parser.finish()
        times.append(time.process_time() - t0)
    verdict = _toolwire_verdict(events, _expected_big(), HERMES_TOOL)
    return Timing(min(times) * 1000, statistics.median(times) * 1000, verdict)


def parsed_turn_1char(repeats: int) -> Timing:
    """The gateway's parse path: `ParsedTurn.feed(ModelContentDelta)` per character, `finish()`.

    The `ModelContentDelta`s are made beforehand: the upstream adapter makes them, not this path.
    """
    text = hermes_text(BIG_KB)
    tool = Tool(name=HERMES_TOOL, description="Write a text file.", input_schema=WRITE_FILE_SCHEMA)
    deltas = [ModelContentDelta(ch) for ch in text]
    final = ModelResponse(message=AssistantMessage(content=text), finish_reason="stop")
    times = []
    response: ModelResponse | None = None
    for _ in range(repeats):
        turn = ParsedTurn("bench", "hermes", [tool])
        out: list[ModelStreamEvent] = []
        t0 = time.process_time()
        for d in deltas:
            out += turn.feed(d)
        last, response = turn.finish(final)
        out += last
        times.append(time.process_time() - t0)
    assert response is not None
    calls = response.message.tool_calls
    if len(calls) != 1:
        verdict = "NO CALL" if not calls else f"WRONG: {len(calls)} calls"
    else:
        verdict = _args_verdict(calls[0].name, calls[0].arguments, _expected_big(), HERMES_TOOL)
    return Timing(min(times) * 1000, statistics.median(times) * 1000, verdict)


def wire_decode_1char(repeats: int) -> Timing | str:
    """What the gateway does per upstream event before its parser, in-process (no HTTP):
    the SSE body of the fake upstream's 128 KB answer (one character per event), read in
    64 KB pieces through `read_deltas`, the function `OpenAIChatModel.stream` calls per
    read (`SSEDecoder`, `orjson.loads` per event, `ChatStreamAssembler`, the deltas of the
    read joined)."""
    try:
        import orjson

        from gateway_fake_upstream import _chunk_event
        from toolwire.models.openai import read_deltas
        from toolwire.models.openai_wire import ChatStreamAssembler
        from toolwire.models.sse import SSEDecoder
    except ImportError as exc:
        return f"not measured: {exc}"
    text = hermes_text(BIG_KB)
    model = "fake-hermes"
    events = [_chunk_event(model, {"role": "assistant", "content": ""}, None)]
    events += [_chunk_event(model, {"content": ch}, None) for ch in text]
    events.append(_chunk_event(model, {}, "stop"))
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    del events
    pieces = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    times = []
    content: list[str] = []
    for _ in range(repeats):
        decoder = SSEDecoder()
        assembler = ChatStreamAssembler(None)
        content = []
        t0 = time.process_time()
        for piece in pieces:
            batch, _ = read_deltas(piece, decoder, assembler)
            for delta in batch:
                if isinstance(delta, ModelContentDelta):
                    content.append(delta.text)
        times.append(time.process_time() - t0)
    verdict = "ok" if "".join(content) == text else "WRONG content"
    return Timing(min(times) * 1000, statistics.median(times) * 1000, verdict)


def gateway_1char(runs: int) -> Timing | str:
    """`toolwire serve` streaming the 128 KB call from the fake upstream, one character
    per SSE chunk; the gateway process tree's CPU per request (bench_gateway.py's setup)."""
    from bench_gateway import (
        BenchError,
        LoadGen,
        Processes,
        run_hermes,
        start_toolwire,
        start_upstream,
    )

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir, pin=(os.cpu_count() or 1) >= 2)
        try:
            _, port = start_upstream(procs, hermes_kb=BIG_KB)
            target = start_toolwire(procs, workdir, port)
            gen = LoadGen(procs)
            opts = argparse.Namespace(hermes_runs=runs, hermes_kb=BIG_KB)
            result = run_hermes(gen, target, opts, workdir)
            gen.quit()
        except (BenchError, OSError) as exc:
            return f"not measured: {exc}"
        finally:
            procs.stop_all()
    if not result.cpu_ms:
        return f"not measured: {result.verdict}"
    verdict = "ok" if result.verdict.startswith("argument intact") else result.verdict
    wall = statistics.median(result.wall_ms)
    cpu = result.cpu_ms
    return Timing(min(cpu), statistics.median(cpu), f"{verdict}; wall {wall:.0f} ms")


def report_big(opts: argparse.Namespace) -> None:
    repeats = 3 if opts.quick else 7
    print(
        f"1. One {BIG_KB} KB string argument (Hermes, with quotes and newlines) in 1-character "
        f"deltas: total CPU ms (best / median of {repeats}, gc on)"
    )
    rows: list[list[object]] = []
    for label, timing, target in (
        ("parser_for(hermes) alone", parser_alone_1char(repeats), PARSER_TARGET_MS),
        ("ParsedTurn feed + finish", parsed_turn_1char(repeats), TURN_TARGET_MS),
    ):
        rows.append(
            [
                label,
                f"{timing.best_ms:.1f}",
                f"{timing.median_ms:.1f}",
                f"< {target:.0f}",
                _mark(timing.median_ms, target),
                timing.verdict,
            ]
        )
    wire = wire_decode_1char(repeats)
    if isinstance(wire, Timing):
        rows.append(
            [
                "gateway upstream decode, no HTTP (*)",
                f"{wire.best_ms:.1f}",
                f"{wire.median_ms:.1f}",
                "",
                "",
                wire.verdict,
            ]
        )
    else:
        rows.append(["gateway upstream decode, no HTTP (*)", "—", "—", "", "", wire])
    if opts.gateway:
        runs = 2 if opts.quick else 3
        gateway = gateway_1char(runs)
        if isinstance(gateway, Timing):
            rows.append(
                [
                    f"toolwire serve, gateway CPU ({runs} requests)",
                    f"{gateway.best_ms:.0f}",
                    f"{gateway.median_ms:.0f}",
                    f"< {GATEWAY_TARGET_MS:.0f}",
                    _mark(gateway.median_ms, GATEWAY_TARGET_MS),
                    gateway.verdict,
                ]
            )
        else:
            rows.append(["toolwire serve, gateway CPU", "—", "—", "", "", gateway])
    else:
        rows.append(["toolwire serve, gateway CPU", "—", "—", "", "", "skipped (--no-gateway)"])
    _table(
        ["path", "best ms", "median ms", "target", "met", "result"],
        rows,
        "(*) SSEDecoder, orjson.loads and ChatStreamAssembler.feed per upstream event, then "
        "the deltas of each 64 KB read\n    coalesced: the gateway's work before ParsedTurn, "
        "which then gets a few hundred deltas, not one per character.",
    )


# --- 2. linear growth ----------------------------------------------------------------------


def stream_seconds(
    fmt: str, size: int, *, repeats: int = 5, whole_markers: bool = False
) -> tuple[float, str]:
    """CPU time to stream one call whose argument string is `size` characters, in
    `DELTA`-character deltas, and whether the call came back intact.

    CPU time of this process, not wall time: on a shared machine the scheduler's pauses
    would otherwise swamp the growth ratio this is meant to show.
    """
    deltas = _call_deltas(fmt, size, whole_markers=whole_markers)
    best = float("inf")
    events: list[ParseEvent] = []
    for _ in range(repeats):  # best of n: the machine is shared, noise only ever adds time
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
    return best, _toolwire_verdict(events, {"content": _payload(size)}, "write")


def report_growth(formats: Sequence[str], opts: argparse.Namespace) -> None:
    repeats = 2 if opts.quick else 5
    print(
        f"2. Linear growth: one call, string argument of {', '.join(map(str, GROWTH_KB))} KB "
        f"in {DELTA}-character deltas; CPU ms (best of {repeats}, gc off) and µs per KB"
    )
    rows = []
    for fmt in formats:
        ms: list[float] = []
        verdicts = set()
        for kb in GROWTH_KB:
            seconds, verdict = stream_seconds(fmt, kb * 1024, repeats=repeats)
            ms.append(seconds * 1000)
            verdicts.add(verdict)
        per_kb = [m * 1000 / kb for m, kb in zip(ms, GROWTH_KB, strict=True)]
        rows.append(
            [
                fmt,
                *(f"{m:.1f}" for m in ms),
                f"{per_kb[0]:.0f}",
                f"{per_kb[-1]:.0f}",
                f"{per_kb[-1] / per_kb[0]:.2f}",
                ", ".join(sorted(verdicts)),
            ]
        )
    _table(
        [
            "format",
            *(f"{kb} KB ms" for kb in GROWTH_KB),
            f"µs/KB @{GROWTH_KB[0]}",
            f"µs/KB @{GROWTH_KB[-1]}",
            f"ratio {GROWTH_KB[-1]}/{GROWTH_KB[0]}",
            "result",
        ],
        rows,
        "ratio: µs per KB at the largest size over µs per KB at the smallest (1 = linear).",
    )


ESCAPES_KB = (16, 256)


def escapes_seconds(fmt: str, size: int, *, repeats: int) -> tuple[float, str]:
    """CPU time to parse, whole, one call whose argument is `size` characters of `\\n`
    escapes, and whether it came back intact (N newlines, or the raw text in the formats
    whose values are raw)."""
    opener, closer = OPENERS[fmt]
    raw = "\\n" * (size // 2)
    text = opener + raw + closer
    best = float("inf")
    out = None
    for _ in range(repeats):
        parser = parser_for("bench", TOOLS, format=fmt)
        t0 = time.process_time()
        events = parser.feed(text) + parser.finish()
        best = min(best, time.process_time() - t0)
        out = assemble(events)
    assert out is not None
    ok = [c.arguments.get("content") for c in out.tool_calls] in (["\n" * (size // 2)], [raw])
    return best, "ok" if ok else "WRONG"


def report_escapes(formats: Sequence[str], opts: argparse.Namespace) -> None:
    repeats = 2 if opts.quick else 3
    print(
        f"2b. Linear growth, whole text: an argument of {' and '.join(map(str, ESCAPES_KB))} KB "
        f"of escapes only; CPU ms (best of {repeats})"
    )
    rows = []
    for fmt in formats:
        runs = [escapes_seconds(fmt, kb * 1024, repeats=repeats) for kb in ESCAPES_KB]
        per_kb = [s * 1e6 / kb for (s, _), kb in zip(runs, ESCAPES_KB, strict=True)]
        rows.append(
            [
                fmt,
                *(f"{s * 1000:.1f}" for s, _ in runs),
                f"{per_kb[-1] / per_kb[0]:.2f}",
                ", ".join(sorted({v for _, v in runs})),
            ]
        )
    _table(
        [
            "format",
            *(f"{kb} KB ms" for kb in ESCAPES_KB),
            f"ratio {ESCAPES_KB[-1]}/{ESCAPES_KB[0]}",
            "result",
        ],
        rows,
        "ratio: µs per KB at the largest size over µs per KB at the smallest (1 = linear).",
    )


# --- 3. cost of one feed() -----------------------------------------------------------------


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


def report_feed(formats: Sequence[str]) -> None:
    print(
        f"3. One feed() of a {DELTA}-character delta: median µs over batches of 200 "
        f"(32 000 characters of prose; target < {FEED_TARGET_US:.0f} µs)"
    )
    rows = []
    for fmt in formats:
        opener, _ = OPENERS[fmt]
        content_us = median_feed_us(fmt, "", _payload(32_000))
        args_us = median_feed_us(fmt, opener, _payload(32_000))
        worst = max(content_us, args_us)
        rows.append([fmt, f"{content_us:.2f}", f"{args_us:.2f}", _mark(worst, FEED_TARGET_US)])
    _table(["format", "in content µs", "in arguments µs", "met"], rows)


# --- 4. other parsers ----------------------------------------------------------------------


SglangFactory = Callable[[str], Any]


def sglang_factory() -> SglangFactory | str:
    """A maker of SGLang `FunctionCallParser`s for the `write` tool, or why there is none."""
    if SGLANG_DIR.is_dir() and str(SGLANG_DIR) not in sys.path:
        sys.path.insert(0, str(SGLANG_DIR))
    try:
        from llm_router_utils.sglang.srt.entrypoints.openai.protocol import (
            Tool as SglangTool,
        )
        from llm_router_utils.sglang.srt.function_call.function_call_parser import (
            FunctionCallParser,
        )
    except ImportError as exc:
        return f"SGLang's parsers are not installed ({exc}); run benchmarks/setup_sglang_parsers.sh"
    # Its parsers log an error for every output they cannot parse; keep the table readable.
    logging.getLogger("llm_router_utils").setLevel(logging.CRITICAL)
    tools = [SglangTool.model_validate(t) for t in TOOLS]

    def make(name: str) -> Any:
        return FunctionCallParser(tools, name)

    return make


def _sglang_version() -> str:
    dist = next(SGLANG_DIR.glob("llm_router_utils-*.dist-info"), None)
    return dist.name.removesuffix(".dist-info").partition("-")[2] if dist else "?"


def _sglang_call(calls: Sequence[Any]) -> tuple[str | None, str]:
    """The first call's name and its concatenated argument deltas."""
    name: str | None = None
    args: list[str] = []
    for call in calls:
        if call.tool_index != 0:
            continue
        name = name or call.name
        args.append(call.parameters or "")
    return name, "".join(args)


def sglang_stream_seconds(make: SglangFactory, fmt: str, size: int) -> tuple[float, str]:
    """SGLang's `parse_stream_chunk` per delta, then `parse_stream_end`: one run."""
    deltas = _call_deltas(fmt, size, whole_markers=True)
    parser = make(SGLANG_PARSERS[fmt])
    calls: list[Any] = []
    t0 = time.process_time()
    try:
        for d in deltas:
            calls += parser.parse_stream_chunk(d)[1]
        calls += parser.parse_stream_end()[1]
    except Exception as exc:  # its parsers may raise on what they do not expect
        return time.process_time() - t0, f"raised {type(exc).__name__}"
    seconds = time.process_time() - t0
    name, args = _sglang_call(calls)
    return seconds, _args_verdict(name, args, {"content": _payload(size)}, "write")


def whole_seconds(fmt: str, size: int, make: SglangFactory) -> tuple[float, float, str, str]:
    """Whole-text parse of one output, best of 3 each: toolwire's `feed(text)` + `finish()`
    and SGLang's `parse_non_stream`."""
    text = _call_text(fmt, size)
    expected = {"content": _payload(size)}
    tw_best = sg_best = float("inf")
    tw_events: list[ParseEvent] = []
    sg_verdict = ""
    for _ in range(3):
        parser = parser_for("bench", TOOLS, format=fmt)
        t0 = time.process_time()
        tw_events = parser.feed(text) + parser.finish()
        tw_best = min(tw_best, time.process_time() - t0)
        sg = make(SGLANG_PARSERS[fmt])
        t0 = time.process_time()
        try:
            _, calls = sg.parse_non_stream(text)
        except Exception as exc:
            sg_best = min(sg_best, time.process_time() - t0)
            sg_verdict = f"raised {type(exc).__name__}"
            continue
        sg_best = min(sg_best, time.process_time() - t0)
        name, args = _sglang_call(calls)
        sg_verdict = _args_verdict(name, args, expected, "write")
    return tw_best, sg_best, _toolwire_verdict(tw_events, expected, "write"), sg_verdict


def _ratio(ours: float, theirs: float) -> str:
    if theirs <= 0 or math.isinf(theirs):
        return "—"
    value = ours / theirs
    if value < 0.01:  # "1/2000" reads better than 0.000
        return f"1/{1 / value:.0f}" if value > 0 else "—"
    return f"{value:.3f}" if value < 0.1 else f"{value:.2f}"


def report_sglang(formats: Sequence[str], opts: argparse.Namespace) -> None:
    print("4. Side by side with another parser")
    print(
        "   canitoolcall has no parser of its own (its adapters drive vLLM, SGLang, llama.cpp,"
        "\n   Ollama or transformers in per-engine virtualenvs; none is installed here), so:"
    )
    make = sglang_factory()
    if isinstance(make, str):
        print(f"   {make}\n")
        return
    supported = [f for f in formats if f in SGLANG_PARSERS]
    others = [f for f in formats if f not in SGLANG_PARSERS]
    sizes = [4] if opts.quick else [4, 16]
    budget = 4.0  # s: an SGLang run over this at 4 KB skips the larger size (quadratic)
    print(
        f"   SGLang's FunctionCallParser ({SGLANG_PACKAGE} {_sglang_version()}), streaming: "
        f"{'/'.join(map(str, sizes))} KB argument in {DELTA}-character deltas, special "
        "tokens of the call's\n   opening and closing markers whole (CPU ms; toolwire best of "
        "3, SGLang one run); whole text: "
        f"{BIG_KB} KB output in one piece (best of 3 each). ratio = toolwire / SGLang."
    )
    rows = []
    for fmt in supported:
        row: list[object] = [fmt, SGLANG_PARSERS[fmt]]
        verdicts = set()
        skip = False
        for kb in sizes:
            if skip:
                row += ["—", "skipped", "—"]
                continue
            tw, tw_verdict = stream_seconds(fmt, kb * 1024, repeats=3, whole_markers=True)
            sg, sg_verdict = sglang_stream_seconds(make, fmt, kb * 1024)
            skip = sg > budget
            verdicts.add(f"{kb} KB stream: toolwire {tw_verdict}")
            verdicts.add(f"{kb} KB stream: sglang {sg_verdict}")
            row += [f"{tw * 1000:.1f}", f"{sg * 1000:.0f}", _ratio(tw, sg)]
        tw_whole, sg_whole, tw_verdict, sg_verdict = whole_seconds(fmt, BIG_KB * 1024, make)
        verdicts.add(f"whole: toolwire {tw_verdict}")
        verdicts.add(f"whole: sglang {sg_verdict}")
        row += [f"{tw_whole * 1000:.2f}", f"{sg_whole * 1000:.2f}", _ratio(tw_whole, sg_whole)]
        bad = sorted(v for v in verdicts if not v.endswith(" ok"))
        row.append("; ".join(bad) if bad else "ok")
        rows.append(row)
    header = ["format", "sglang parser"]
    for kb in sizes:
        header += [f"tw {kb} KB ms", f"sg {kb} KB ms", "ratio"]
    header += [f"tw whole {BIG_KB} KB ms", f"sg whole {BIG_KB} KB ms", "ratio", "result"]
    notes = (
        "SGLang's JSON-argument parsers (hermes, llama3, mistral, ...) re-parse their whole "
        "buffer with partial-json-parser\non every delta: their streaming cost grows with the "
        f"square of the size, so {BIG_KB} KB in 1-character deltas (section 1)\nwould take "
        "them many minutes, and is not run."
    )
    if others:
        notes += f"\nNo SGLang parser for: {', '.join(others)}."
    _table(header, rows, notes)


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


def report_naive(opts: argparse.Namespace) -> None:
    sizes = [4 * 1024, 16 * 1024] if opts.quick else [4 * 1024, 16 * 1024, 64 * 1024]
    print(
        "5. Naive: partial-json-parser on the accumulated arguments at every delta "
        f"({DELTA}-character deltas; CPU ms)"
    )
    tw = [stream_seconds("hermes", s)[0] for s in sizes]
    naive = [naive_seconds(s) for s in sizes]
    _table(
        ["approach", *(f"{s // 1024} KB ms" for s in sizes)],
        [
            ["toolwire hermes", *(f"{t * 1000:.1f}" for t in tw)],
            ["naive re-parse", *(f"{t * 1000:.1f}" for t in naive)],
            ["ratio toolwire/naive", *(_ratio(a, b) for a, b in zip(tw, naive, strict=True))],
        ],
    )


def main(argv: list[str]) -> None:
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    cli.add_argument("--quick", action="store_true", help="fewer repeats, smaller comparisons")
    cli.add_argument(
        "--no-gateway", dest="gateway", action="store_false", help="skip the toolwire serve run"
    )
    cli.add_argument("formats", nargs="*", metavar="FORMAT", help="default: every format")
    opts = cli.parse_args(argv)
    unknown = [f for f in opts.formats if f not in OPENERS]
    if unknown:
        cli.error(f"unknown format(s) {', '.join(unknown)}; known: {', '.join(OPENERS)}")
    missing = [f for f in FORMATS if f not in OPENERS]
    if missing:
        print(f"(no benchmark input for: {', '.join(missing)})\n")
    formats: list[str] = opts.formats or [f for f in FORMATS if f in OPENERS]
    started = time.monotonic()
    mode = ", --quick" if opts.quick else ""
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs{mode}\n")
    report_big(opts)
    report_growth(formats, opts)
    report_escapes(formats, opts)
    report_feed(formats)
    report_sglang(formats, opts)
    report_naive(opts)
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
