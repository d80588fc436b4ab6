"""The gateway's CPU for a `parse:hermes` stream of tiny events, in-process, no sockets.

Run: `python benchmarks/bench_sse_decode.py [--kb 128] [--runs 31] [--src PATH] [--once]`
(prints figures; no assertions).

The upstream is `gateway_fake_upstream.py`'s `hermes` answer: a Hermes tool call whose
128 KB string argument streams in 1-character chunks, one SSE event each (about 137 000
events, 22 MB), then a finish chunk and `data: [DONE]`. The body is cut into 64 KB pieces
(`--piece`), what the HTTP transport hands on per read when the upstream wrote everything
at once, and served by an `httpx.MockTransport` to a real `OpenAIChatModel`. Stages, each
timed on its own (CPU time, `time.process_time`, gc on as in a server), `--runs` times:

- `decode`: `OpenAIChatModel.stream` alone (SSE framing, the JSON of each event, the
  assembler; `join_deltas=True` as on a `parse:` route), every event consumed;
- `parse`: `ParsedTurn` (the hermes parser) fed the deltas `decode` yields, then `finish`;
- `route`: `ParsingModel(OpenAIChatModel, "hermes").stream`, what the gateway runs for a
  `parse:hermes` route (both of the above, and the async generators between them).

Figures: median, min, max and the interquartile range in ms. The machine may be busy, so
take the median of many runs; `--once` runs the `route` stage once after one warm-up, for
an instruction count under callgrind:

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
        python benchmarks/bench_sse_decode.py --once
    callgrind_annotate /tmp/cg.out | head

`--src /work/main/src` imports toolwire from another checkout (before / after, same
benchmark).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STAGES = ("decode", "parse", "route")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=int, default=128, help="size of the streamed argument (KB)")
    ap.add_argument("--runs", type=int, default=31, help="timed runs per stage")
    ap.add_argument("--piece", type=int, default=64 * 1024, help="bytes per transport read")
    ap.add_argument("--src", type=Path, default=HERE.parent / "src", help="toolwire's src")
    ap.add_argument("--stage", choices=STAGES, action="append", help="stages to run (all)")
    ap.add_argument("--once", action="store_true", help="one warm-up and one route run")
    opts = ap.parse_args()
    sys.path.insert(0, str(opts.src.resolve()))
    sys.path.insert(0, str(HERE))
    Bench(opts).run()


class Bench:
    def __init__(self, opts: argparse.Namespace) -> None:
        from gateway_fake_upstream import hermes_argument

        self.opts = opts
        self.body = stream_body(opts.kb)
        step = opts.piece
        self.pieces = [self.body[i : i + step] for i in range(0, len(self.body), step)]
        self.expected = hermes_argument(opts.kb)
        self.loop = asyncio.new_event_loop()

    def run(self) -> None:
        import toolwire

        opts = self.opts
        events = self.body.count(b"\n\n")
        print(f"toolwire from {Path(toolwire.__file__).parent}")
        print(
            f"stream: {events} events, {len(self.body) / 1e6:.1f} MB, "
            f"{len(self.pieces)} pieces of {opts.piece} B; argument {opts.kb} KB",
            flush=True,
        )
        if opts.once:
            self.loop.run_until_complete(self.route())
            start = time.process_time()
            self.loop.run_until_complete(self.route())
            print(f"route once: {(time.process_time() - start) * 1e3:.1f} ms")
            return
        deltas = self.loop.run_until_complete(self.decode())
        print(f"decode yields {len(deltas) - 1} deltas (and the response)")
        self.check()
        stages: dict[str, Callable[[], Coroutine[Any, Any, Any]]] = {
            "decode": self.decode,
            "parse": lambda: self.parse(deltas),
            "route": self.route,
        }
        for name in opts.stage or STAGES:
            self.time(name, stages[name])

    def time(self, name: str, run: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        for _ in range(3):  # warm-up: imports, regexes, caches
            self.loop.run_until_complete(run())
        times = []
        for _ in range(self.opts.runs):
            gc.collect()
            start = time.process_time()
            self.loop.run_until_complete(run())
            times.append((time.process_time() - start) * 1e3)
        q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
        print(
            f"{name:>7}: median {statistics.median(times):7.1f} ms   min {min(times):7.1f}"
            f"   max {max(times):7.1f}   IQR {q[0]:.1f}–{q[2]:.1f}   ({len(times)} runs)"
        )

    def model(self) -> Any:
        import httpx

        from toolwire.models import OpenAIChatModel

        pieces = self.pieces

        class Body(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                for piece in pieces:
                    yield piece

        def handler(request: httpx.Request) -> httpx.Response:
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, headers=headers, stream=Body())

        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        return OpenAIChatModel(
            "http://upstream.test/v1", None, "fake-hermes", http_client=client, retries=0
        )

    def request(self) -> tuple[list[Any], list[Any]]:
        from gateway_fake_upstream import HERMES_TOOL
        from toolwire.models.messages import UserMessage
        from toolwire.tools.tool import Tool

        tool = Tool(
            name=HERMES_TOOL,
            description="Write a file.",
            input_schema={
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        )
        return [UserMessage(content="write the notes")], [tool]

    async def decode(self) -> list[Any]:
        messages, tools = self.request()
        return [event async for event in self.model().stream(messages, tools)]

    async def parse(self, deltas: list[Any]) -> Any:
        from toolwire.models.parsed import ParsedTurn

        _, tools = self.request()
        turn = ParsedTurn("fake-hermes", "hermes", tools)
        feed = turn.feed
        for delta in deltas[:-1]:
            feed(delta)
        return turn.finish(deltas[-1])

    async def route(self) -> list[Any]:
        from toolwire.models.parsed import ParsingModel

        messages, tools = self.request()
        model = ParsingModel(self.model(), "hermes")
        return [event async for event in model.stream(messages, tools)]

    def check(self) -> None:
        """Print whether the route returns the call the upstream wrote (not an assertion:
        a benchmark of a broken build says so and goes on)."""
        final = self.loop.run_until_complete(self.route())[-1]
        calls = final.message.tool_calls
        ok = len(calls) == 1 and json.loads(calls[0].arguments)["content"] == self.expected
        print(f"route answer: {'the expected call' if ok else 'NOT the expected call!'}")


def stream_body(kb: int) -> bytes:
    """The SSE body `gateway_fake_upstream.py` serves for a `hermes` model (without the
    HTTP chunked framing, which the transport removes)."""
    from gateway_fake_upstream import _chunk_event, hermes_text

    model = "fake-hermes"
    events = [_chunk_event(model, {"role": "assistant", "content": ""}, None)]
    events += [_chunk_event(model, {"content": ch}, None) for ch in hermes_text(kb)]
    events.append(_chunk_event(model, {}, "stop"))
    parts = [b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n" for e in events]
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


if __name__ == "__main__":
    main()
