"""The cost of each front door: Chat Completions, Anthropic Messages and OpenAI Responses
through one `toolwire serve`, side by side with the fake upstream called directly.

Run: `python benchmarks/bench_front_doors.py [--rounds 5] [--requests 2000]` (prints
figures; no assertions). It reuses `bench_gateway.py`'s processes: the instant fake
OpenAI-compatible upstream, the raw-asyncio load generator and `toolwire serve` (one
worker, pinned to CPU 0 with the others on CPU 1 on 2+ cores).

Per endpoint, concurrency 1, non-streaming, the same question and one client tool in each
protocol's own shape: p50 latency, p50 added over calling the upstream directly, and the
gateway's CPU per request (utime + stime from /proc, read around each measured window).
Rounds alternate the endpoints so drift hits them alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_gateway import (
    WEATHER_TOOL,
    BenchError,
    LoadGen,
    Processes,
    Target,
    chat_body,
    cpu_seconds,
    start_toolwire,
    start_upstream,
)

QUESTION = "What is the weather in Paris today?"


def messages_body(model: str) -> str:
    function = WEATHER_TOOL["function"]
    assert isinstance(function, dict)
    return json.dumps(
        {
            "model": model,
            "max_tokens": 256,
            "system": "You are a helpful assistant.",
            "messages": [{"role": "user", "content": QUESTION}],
            "tools": [
                {
                    "name": function["name"],
                    "description": function["description"],
                    "input_schema": function["parameters"],
                }
            ],
        }
    )


def responses_body(model: str) -> str:
    function = WEATHER_TOOL["function"]
    assert isinstance(function, dict)
    return json.dumps(
        {
            "model": model,
            "instructions": "You are a helpful assistant.",
            "input": QUESTION,
            "tools": [{"type": "function", **function}],
            "max_output_tokens": 256,
            "store": False,
        }
    )


def run(opts: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir, pin=opts.pin)
        try:
            upstream, upstream_port = start_upstream(procs, hermes_kb=1)
            gateway = start_toolwire(procs, workdir, upstream_port)
            gen = LoadGen(procs)
            assert gateway.proc is not None
            endpoints: list[tuple[str, Target, str, int | None]] = [
                (
                    "direct (upstream)",
                    Target(
                        name="direct",
                        port=upstream_port,
                        path="/v1/chat/completions",
                        model="fake-model",
                    ),
                    chat_body("fake-model", stream=False, tools=[WEATHER_TOOL]),
                    upstream.pid,
                ),
                (
                    "/v1/chat/completions",
                    gateway,
                    chat_body(gateway.model, stream=False, tools=[WEATHER_TOOL]),
                    gateway.proc.pid,
                ),
                (
                    "/v1/messages",
                    Target(name="messages", port=gateway.port, path="/v1/messages", model=""),
                    messages_body(gateway.model),
                    gateway.proc.pid,
                ),
                (
                    "/v1/responses",
                    Target(name="responses", port=gateway.port, path="/v1/responses", model=""),
                    responses_body(gateway.model),
                    gateway.proc.pid,
                ),
            ]
            latency: dict[str, list[float]] = {name: [] for name, *_ in endpoints}
            cpu: dict[str, list[float]] = {name: [] for name, *_ in endpoints}
            for _ in range(opts.rounds):
                for name, target, body, pid in endpoints:
                    gen.prepare(
                        target,
                        body,
                        stream=False,
                        concurrency=1,
                        requests=opts.requests,
                        duration=60.0,
                        warmup=50,
                    )
                    before = cpu_seconds(pid) if pid is not None else 0.0
                    result = gen.go()
                    after = cpu_seconds(pid) if pid is not None else 0.0
                    if result["errors"]:
                        raise BenchError(f"{name}: {result['first_error']}")
                    latency[name] += [x * 1000 for x in result["latency"]]
                    cpu[name].append((after - before) * 1000 / result["count"])
            gen.quit()
        finally:
            procs.stop_all()
    report(latency, cpu, opts)


def report(latency: dict[str, list[float]], cpu: dict[str, list[float]], opts: Any) -> None:
    direct = statistics.median(latency["direct (upstream)"])
    chat_cpu = statistics.median(cpu["/v1/chat/completions"])
    print(
        f"front doors, concurrency 1, non-streaming, {opts.rounds} rounds x "
        f"{opts.requests} requests each\n"
    )
    print(
        f"{'endpoint':<22} {'p50 ms':>8} {'added ms':>9} {'CPU ms/req':>11} "
        f"{'(of)':<9} {'CPU vs chat':>11}"
    )
    for name, values in latency.items():
        p50 = statistics.median(values)
        cpu_ms = statistics.median(cpu[name])
        direct_row = name.startswith("direct")
        added = "" if direct_row else f"{p50 - direct:+.3f}"
        ratio = "" if direct_row else f"{cpu_ms / chat_cpu:.2f}x"
        who = "upstream" if direct_row else "gateway"
        print(f"{name:<22} {p50:8.3f} {added:>9} {cpu_ms:11.3f} {who:<9} {ratio:>11}")
    print(
        "\nCPU is read from /proc in clock ticks (10 ms): use enough requests per round "
        "(--requests) for the per-request figure to be exact to a few µs."
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    opts = parser.parse_args(argv)
    try:
        run(opts)
    except BenchError as exc:
        sys.exit(f"benchmark failed: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
