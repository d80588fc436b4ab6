"""The gateway's hot path (issue 15): what toolwire adds per request, per stream, per
server-tool round trip, and what one and two worker processes serve.

Run: `python benchmarks/bench_hot_path.py [--rounds 3] [--requests 1000] [--duration 4]`
(prints figures; no assertions). It reuses `bench_gateway.py`'s processes: the instant
fake OpenAI-compatible upstream (raw asyncio, a few µs per request), the raw-asyncio load
generator, and `toolwire serve` pinned to CPU 0 with the others on CPU 1 (2+ cores).

At concurrency 1, rounds alternating the scenarios:

- non-streaming and 20-chunk streaming, direct and through toolwire in `native` mode;
- the same stream through a `parse:hermes` route (the parser reads all the content);
- a second gateway with the `lookup` server tool: a request whose model calls no tool
  (the agent path's fixed cost), and a server-tool round trip (the model calls `lookup`,
  the gateway runs it and asks the model again: two upstream calls).

For each: p50 latency (TTFB for streams), added over direct, and the gateway's CPU per
request (utime + stime from /proc around each window; the least noisy figure). Then
requests/s at concurrency 32 with `--workers 1` and `--workers 2` (SQLite store), each
for `--duration` seconds; with two workers the gateway has both cores (shared with the
upstream and the load generator), so that figure is what one 2-core machine serves.
Last, the same at concurrency 32 with one worker against an upstream that burns
`--upstream-cost-ms` (0.3) ms of CPU per request, as the mock of the issue's baseline did:
the instant fake answers in a few µs, so "half of direct" only means something against an
upstream that does some work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_gateway import (
    GATEWAY_KEY,
    GATEWAY_KEY_ENV,
    UPSTREAM_KEY_ENV,
    WEATHER_TOOL,
    BenchError,
    LoadGen,
    Processes,
    Target,
    chat_body,
    cpu_seconds,
    free_port,
    start_upstream,
    wait_http_ok,
)

TOOLS = '''
from toolwire import tool


@tool
async def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"key": key, "value": key.upper()}
'''


def start_gateway(
    procs: Processes, workdir: Path, upstream_port: int, *, workers: int, tools: bool
) -> tuple[Target, int]:
    """`toolwire serve` with the `lookup` server tool (`tools`) or with none."""
    (workdir / "bench_hot_tools.py").write_text(TOOLS)
    name = f"toolwire-{'tools' if tools else 'plain'}-{workers}"
    config = workdir / f"{name}.yaml"
    server_tools = f"server_tools:\n  modules: [{workdir / 'bench_hot_tools.py'}]\n"
    config.write_text(
        "upstream:\n"
        "  kind: openai\n"
        f"  base_url: http://127.0.0.1:{upstream_port}/v1\n"
        f"  api_key_env: {UPSTREAM_KEY_ENV}\n"
        "  retries: 0\n"
        "  models:\n"
        "    bench-model: fake-model\n"
        "    bench-parse:\n"
        "      model: fake-parse\n"
        '      tool_calls: "parse:hermes"\n'
        "    bench-tools: fake-tools\n"
        + (server_tools if tools else "")
        + f"store: sqlite:///{workdir / f'{name}.db'}\n"
        "keys:\n"
        "  - name: bench\n"
        f"    env: {GATEWAY_KEY_ENV}\n"
    )
    port = free_port()
    target = Target(name=name, port=port, path="/v1/chat/completions", model="bench-model")
    target.proc = procs.start(
        name,
        [
            sys.executable,
            "-m",
            "toolwire.cli.main",
            "serve",
            "-c",
            str(config),
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--no-access-log",
        ],
        env={
            UPSTREAM_KEY_ENV: "bench-upstream-key",
            GATEWAY_KEY_ENV: GATEWAY_KEY,
            "TOOLWIRE_LOG_LEVEL": "warning",
            "NO_COLOR": "1",
        },
        cpus={0} if workers == 1 else {0, 1},
    )
    wait_http_ok(target.proc, f"http://127.0.0.1:{port}/healthz", timeout=60)
    return target, target.proc.pid


SERVER_TOOLS_NO_CALL = "server tools, none called"
ROUND_TRIP = "server tool round trip"
Scenario = tuple[str, Target, str, bool, int]
"""name, target, body, stream, the pid whose CPU is measured."""


def run(opts: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir, pin=opts.pin)
        try:
            upstream, upstream_port = start_upstream(procs, hermes_kb=1)
            gateway, pid = start_gateway(procs, workdir, upstream_port, workers=1, tools=False)
            agent, agent_pid = start_gateway(procs, workdir, upstream_port, workers=1, tools=True)
            gen = LoadGen(procs)
            direct = Target(
                name="direct", port=upstream_port, path="/v1/chat/completions", model="fake-model"
            )

            def body(model: str, stream: bool) -> str:
                return chat_body(model, stream=stream, tools=[WEATHER_TOOL])

            scenarios: list[Scenario] = [
                ("direct, non-stream", direct, body("fake-model", False), False, upstream.pid),
                ("native, non-stream", gateway, body("bench-model", False), False, pid),
                ("direct, stream", direct, body("fake-model", True), True, upstream.pid),
                ("native, stream", gateway, body("bench-model", True), True, pid),
                ("parse:hermes, stream", gateway, body("bench-parse", True), True, pid),
                (SERVER_TOOLS_NO_CALL, agent, body("bench-model", False), False, agent_pid),
                (ROUND_TRIP, agent, body("bench-tools", False), False, agent_pid),
            ]
            latency: dict[str, list[float]] = {s[0]: [] for s in scenarios}
            cpu: dict[str, list[float]] = {s[0]: [] for s in scenarios}
            for _ in range(opts.rounds):
                for name, target, text, stream, measured in scenarios:
                    result = _window(gen, target, text, stream, 1, opts.requests, 60.0, measured)
                    key = "ttfb" if stream else "latency"
                    latency[name] += [x * 1000 for x in result[key]]
                    cpu[name].append(result["cpu_ms"])
            rates = {1: _rates(gen, gateway, direct, opts)}
            for started in (gateway, agent):
                assert started.proc is not None
                started.proc.stop()
                procs.started.remove(started.proc)
            two, _ = start_gateway(procs, workdir, upstream_port, workers=2, tools=False)
            rates[2] = _rates(gen, two, direct, opts)
            assert two.proc is not None
            two.proc.stop()
            procs.started.remove(two.proc)
            working = _working_upstream(procs, workdir, gen, opts) if opts.upstream_cost_ms else {}
            gen.quit()
        finally:
            procs.stop_all()
    report(latency, cpu, rates, opts)
    if working:
        print(
            f"\nagainst an upstream that burns {opts.upstream_cost_ms:g} ms of CPU per request "
            "(like the issue's mock), concurrency 32, --workers 1, requests/s"
        )
        for kind in ("non-stream", "stream"):
            d, t = working[f"direct, {kind}"], working[f"toolwire, {kind}"]
            print(f"{kind:<11} direct {d:>7.0f}   toolwire {t:>7.0f}   ratio {t / d:.2f}")


def _working_upstream(
    procs: Processes, workdir: Path, gen: LoadGen, opts: argparse.Namespace
) -> dict[str, float]:
    """Requests/s, direct and through one worker, against an upstream that does some work:
    with the instant upstream, "direct" measures only how fast a raw-asyncio loop answers."""
    _, port = start_upstream(procs, hermes_kb=1, cost_ms=opts.upstream_cost_ms)
    gateway, _ = start_gateway(procs, workdir, port, workers=1, tools=False)
    direct = Target(name="direct", port=port, path="/v1/chat/completions", model="fake-model")
    return _rates(gen, gateway, direct, opts)


def _window(
    gen: LoadGen,
    target: Target,
    body: str,
    stream: bool,
    concurrency: int,
    requests: int,
    duration: float,
    pid: int | None,
) -> dict[str, Any]:
    """One measured window; `cpu_ms` is `pid`'s CPU (its process tree) per request."""
    gen.prepare(
        target,
        body,
        stream=stream,
        concurrency=concurrency,
        requests=requests,
        duration=duration,
        warmup=50 if concurrency == 1 else concurrency,
    )
    before = cpu_seconds(pid) if pid is not None else 0.0
    result = gen.go()
    after = cpu_seconds(pid) if pid is not None else 0.0
    if result["errors"]:
        raise BenchError(f"{target.name} {target.model}: {result['first_error']}")
    result["cpu_ms"] = (after - before) * 1000 / max(1, result["count"])
    return result


def _rates(
    gen: LoadGen, gateway: Target, direct: Target, opts: argparse.Namespace
) -> dict[str, float]:
    out: dict[str, float] = {}
    for label, target, model in (
        ("direct", direct, "fake-model"),
        ("toolwire", gateway, "bench-model"),
    ):
        for stream in (False, True):
            text = chat_body(model, stream=stream, tools=[WEATHER_TOOL])
            result = _window(gen, target, text, stream, 32, 10**9, opts.duration, None)
            out[f"{label}, {'stream' if stream else 'non-stream'}"] = (
                result["count"] / result["elapsed"]
            )
    return out


def report(
    latency: dict[str, list[float]],
    cpu: dict[str, list[float]],
    rates: dict[int, dict[str, float]],
    opts: argparse.Namespace,
) -> None:
    p50 = {name: statistics.median(values) for name, values in latency.items() if values}
    p99 = {
        name: statistics.quantiles(values, n=100)[98]
        for name, values in latency.items()
        if len(values) >= 2
    }
    cpu50 = {name: statistics.median(values) for name, values in cpu.items() if values}
    print(
        f"\nconcurrency 1, {opts.rounds} rounds × {opts.requests} requests, medians "
        "(stream latency = time to the first data line)\n"
    )
    print(
        f"{'scenario':<26} {'p50 ms':>8} {'added ms':>9} {'p99 ms':>8} {'added ms':>9} "
        f"{'gateway CPU ms/req':>19}"
    )
    base = {"non-stream": p50.get("direct, non-stream"), "stream": p50.get("direct, stream")}
    base99 = {"non-stream": p99.get("direct, non-stream"), "stream": p99.get("direct, stream")}
    for name, value in p50.items():
        kind = "stream" if name.endswith("stream") and "non" not in name else "non-stream"
        direct = name.startswith("direct")
        added = "" if direct else f"{value - (base[kind] or 0):+.3f}"
        tail = p99.get(name, float("nan"))
        added99 = "" if direct else f"{tail - (base99[kind] or 0):+.3f}"
        gateway_cpu = "" if direct else f"{cpu50.get(name, float('nan')):.3f}"
        print(f"{name:<26} {value:>8.3f} {added:>9} {tail:>8.3f} {added99:>9} {gateway_cpu:>19}")
    plain = cpu50.get("native, non-stream")
    agent = cpu50.get(SERVER_TOOLS_NO_CALL)
    loop = cpu50.get(ROUND_TRIP)
    if plain is not None and agent is not None and loop is not None:
        print(
            f"\nwith server tools configured, a request that calls none costs "
            f"{agent - plain:+.3f} ms of gateway CPU (the agent path: run id, tool list, "
            f"the loop's first turn)\none server-tool round trip, all-in (a second "
            f"upstream call + the tool + the loop): {loop - agent:.3f} ms of gateway CPU"
        )
    print(f"\nconcurrency 32, {opts.duration:.0f} s each, requests/s")
    print(f"{'':<22} {'--workers 1':>12} {'--workers 2':>12}")
    for key in rates[1]:
        one, two = rates[1][key], rates[2].get(key, float("nan"))
        print(f"{key:<22} {one:>12.0f} {two:>12.0f}")
    for kind in ("non-stream", "stream"):
        d = rates[1][f"direct, {kind}"]
        print(
            f"toolwire / direct, {kind}: {rates[1][f'toolwire, {kind}'] / d:.3f} (1 worker), "
            f"{rates[2][f'toolwire, {kind}'] / rates[2][f'direct, {kind}']:.3f} (2 workers)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument(
        "--upstream-cost-ms",
        type=float,
        default=0.3,
        help="CPU per request of the working upstream of the last table (0: skip it)",
    )
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
