"""Many concurrent streams with a server tool in the loop, bounded in time.

Run: `python benchmarks/bench_load.py [--streams 1000] [--rounds 4]` (prints figures; no
assertions). Processes as in `bench_gateway.py`: the instant fake upstream (its `tools`
model calls the server tool `lookup` once, then answers), the raw-asyncio load generator,
and `toolwire serve` with one worker and `lookup` as a server tool. Each round opens
`--streams` connections at once and sends one streamed chat request on each: model turn
→ `lookup` runs in the gateway → model turn → answer.

Printed: streams completed and failed, latency p50 / p99 (request to the end of the
stream), and the gateway's RSS idle, at the peak under load, and after.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_gateway import (
    GATEWAY_KEY,
    GATEWAY_KEY_ENV,
    UPSTREAM_KEY_ENV,
    BenchError,
    LoadGen,
    Processes,
    Target,
    chat_body,
    free_port,
    percentile,
    rss_mb,
    rss_peak,
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


def start_gateway(procs: Processes, workdir: Path, upstream_port: int) -> Target:
    (workdir / "bench_load_tools.py").write_text(TOOLS)
    config = workdir / "toolwire-load.yaml"
    config.write_text(
        "upstream:\n"
        "  kind: openai\n"
        f"  base_url: http://127.0.0.1:{upstream_port}/v1\n"
        f"  api_key_env: {UPSTREAM_KEY_ENV}\n"
        "  retries: 0\n"
        "  models:\n"
        "    bench-tools: fake-tools\n"
        "server_tools:\n"
        f"  modules: [{workdir / 'bench_load_tools.py'}]\n"
        "store: memory\n"
        "keys:\n"
        "  - name: bench\n"
        f"    env: {GATEWAY_KEY_ENV}\n"
    )
    port = free_port()
    target = Target(name="toolwire", port=port, path="/v1/chat/completions", model="bench-tools")
    target.proc = procs.start(
        "toolwire",
        [
            sys.executable,
            "-m",
            "toolwire.cli.main",
            "serve",
            "-c",
            str(config),
            "--port",
            str(port),
        ],
        env={
            UPSTREAM_KEY_ENV: "bench-upstream-key",
            GATEWAY_KEY_ENV: GATEWAY_KEY,
            "TOOLWIRE_LOG_LEVEL": "warning",
            "NO_COLOR": "1",
        },
        cpus={0},
    )
    wait_http_ok(target.proc, f"http://127.0.0.1:{port}/healthz", timeout=30)
    return target


def run(opts: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir, pin=opts.pin)
        try:
            _, upstream_port = start_upstream(procs, hermes_kb=1)
            target = start_gateway(procs, workdir, upstream_port)
            assert target.proc is not None
            pid = target.proc.pid
            gen = LoadGen(procs)
            body = chat_body(target.model, stream=True, tools=[])
            idle = rss_mb(pid)
            peak = [0.0]
            latencies: list[float] = []
            done = failed = 0
            first_error = None
            started = time.monotonic()
            sample = workdir / "one_stream.txt"
            for _ in range(opts.rounds):
                gen.prepare(
                    target,
                    body,
                    stream=True,
                    concurrency=opts.streams,
                    requests=opts.streams,
                    duration=opts.duration,
                    warmup=0,
                    save_body=str(sample),
                )
                with rss_peak(pid, lambda value: peak.__setitem__(0, max(peak[0], value))):
                    result = gen.go()
                done += result["count"]
                failed += result["errors"]
                first_error = first_error or result["first_error"]
                latencies += [x * 1000 for x in result["latency"]]
            elapsed = time.monotonic() - started
            # Proof that the loop really ran the tool: one stream's tool_result chunk.
            tool_ran = sample.exists() and '"type":"tool_result"' in sample.read_text()
            time.sleep(1.0)
            after = rss_mb(pid)
            gen.quit()
        finally:
            procs.stop_all()
    total = opts.rounds * opts.streams
    print(
        f"{opts.streams} concurrent streams x {opts.rounds} rounds, a server tool in the loop "
        f"(model turn, tool, model turn), one worker, {elapsed:.1f} s in all\n"
    )
    print(f"completed     {done - failed}/{total}   failed {failed}")
    print(f"tool ran      {'yes (a tool_result chunk in a saved stream)' if tool_ran else 'NO'}")
    if first_error:
        print(f"first error   {first_error}")
    if latencies:
        print(
            f"latency       p50 {statistics.median(latencies):.0f} ms   "
            f"p99 {percentile(latencies, 99):.0f} ms"
        )
    print(f"gateway RSS   idle {idle:.0f} MB   peak {peak[0]:.0f} MB   after {after:.0f} MB")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--duration", type=float, default=120.0, help="cap per round, seconds")
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    opts = parser.parse_args(argv)
    try:
        run(opts)
    except BenchError as exc:
        sys.exit(f"benchmark failed: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
