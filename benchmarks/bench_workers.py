"""Every core (issue 29): requests/s of `toolwire serve --workers auto` against one worker.

Run: `python benchmarks/bench_workers.py [--rounds 3] [--duration 4] [--concurrency 32]
[--loadgen wrk|python] [--upstream raw|nginx] [--asyncio-mock] [--before OTHER/src]`
(prints figures; no assertions). `--loadgen wrk` needs Debian's `wrk` (`apt-get install
wrk`), `--upstream nginx` Debian's `nginx-light`.

On a machine whose cores are all the gateway's, two workers would serve twice what one
does. Here the load generator and the upstream share the two cores, and whatever they
burn per request is taken from the second worker. With G the gateway's CPU per request
and O the others', one worker serves at most 1 / G and two cores 2 / (G + O): the ratio
cannot pass 2G / (G + O). So the others are made as cheap as they come: wrk (C, epoll)
instead of the project's raw-asyncio load generator (`--loadgen python`), and the raw
fake upstream on uvloop (`--asyncio-mock`: on asyncio's own loop, 0.041-0.048 ms of CPU
per request against uvloop's 0.027-0.040 at concurrency 32). `--upstream nginx` serves the
raw fake's two answers (the completion, and the 20-event stream written at once, chosen by
the request's `accept` header, as the gateway sends it) from nginx's `return`: C, one
process, 0.05-0.06 ms of CPU per request on a VM whose system calls are slow (the raw
fake's 0.07-0.08 on the same VM), so that the bound is mostly the gateway's and wrk's.

Each round measures, for each tree, `--workers 1` then `--workers auto`, non-streaming
and 20-chunk streaming requests through a `native` route with the default access log
(text to a file) and the SQLite store: an untimed warm-up window (a worker's pool grows
and its caches fill), then one timed window. Nothing is pinned: one worker gets a core
of its own from the scheduler, and `auto` gets both. It prints each round's requests/s
and medians, the CPU per request of the gateway (all its processes) and of the upstream
(from /proc), the ratio auto / 1 with its spread over the rounds, and the bound above.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_gateway import (
    GATEWAY_KEY,
    WEATHER_TOOL,
    BenchError,
    LoadGen,
    Proc,
    Processes,
    Target,
    chat_body,
    cpu_seconds,
    free_port,
    start_upstream,
    wait_http_ok,
)
from bench_hot_path import measure_window, start_gateway
from gateway_fake_upstream import build_responses, unframe

_WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {key}"
wrk.body = {body}
"""


def _wrk(
    target: Target, body: str, concurrency: int, duration: float, workdir: Path
) -> tuple[int, float]:
    """The requests wrk sent and their rate per second; any answer but 200 is an error.
    (Its CPU is this process's reaped children's: `resource.RUSAGE_CHILDREN`.)"""
    script = workdir / "post.lua"
    script.write_text(_WRK_SCRIPT.format(key=GATEWAY_KEY, body=json.dumps(body)))
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{max(1, round(duration))}s",  # wrk takes whole seconds
            "--timeout",
            "10s",
            "-s",
            str(script),
            f"http://127.0.0.1:{target.port}{target.path}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    if bad or errors:
        raise BenchError(f"wrk against {target.name} met errors:\n{out}")
    count = re.search(r"(\d+) requests in", out)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if count is None or rate is None:
        raise BenchError(f"wrk printed no count or rate:\n{out}")
    return int(count.group(1)), float(rate.group(1))


_NGINX_CONF = """
worker_processes 1;
master_process off;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    client_body_temp_path {workdir};
    server {{
        listen 127.0.0.1:{port};
        location / {{
            if ($http_accept ~ event-stream) {{ rewrite ^ /stream last; }}
            default_type application/json;
            return 200 '{plain}';
        }}
        location = /stream {{
            internal;
            default_type text/event-stream;
            return 200 '{stream}';
        }}
    }}
}}
"""


def _nginx_text(body: bytes) -> str:
    """A body as the inside of a single-quoted nginx string."""
    text = body.decode()
    if "'" in text or "\\" in text:
        raise BenchError("the fake's answers cannot be put into nginx's configuration as they are")
    return text.replace("\n", "\\n")


def start_nginx(procs: Processes, workdir: Path) -> tuple[Proc, int]:
    """nginx answering the raw fake's completion and stream (see the module's docstring)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise SystemExit("nginx is not installed (Debian: apt-get install nginx-light)")
    answers = build_responses(hermes_kb=1)
    plain, stream = (b"".join(unframe(answers[name])[2]) for name in ("plain", "stream"))
    port = free_port()
    conf = workdir / "nginx.conf"
    conf.write_text(
        _NGINX_CONF.format(
            workdir=workdir, port=port, plain=_nginx_text(plain), stream=_nginx_text(stream)
        )
    )
    proc = procs.start("nginx", [nginx, "-p", str(workdir), "-c", str(conf)])
    wait_http_ok(proc, f"http://127.0.0.1:{port}/v1/models", timeout=10)
    return proc, port


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _rate(
    gen: LoadGen | None,
    target: Target,
    body: str,
    stream: bool,
    seconds: float,
    opts: argparse.Namespace,
    workdir: Path,
) -> tuple[int, float]:
    """The requests sent over `seconds` at `--concurrency`, and their rate per second, by
    wrk or by the Python load generator."""
    if gen is None:
        return _wrk(target, body, opts.concurrency, seconds, workdir)
    result = measure_window(gen, target, body, stream, opts.concurrency, 10**9, seconds, None)
    return int(result["count"]), result["count"] / result["elapsed"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--loadgen", choices=("wrk", "python"), default="wrk")
    parser.add_argument("--upstream", choices=("raw", "nginx"), default="raw")
    parser.add_argument(
        "--asyncio-mock",
        dest="uvloop",
        action="store_false",
        help="the raw fake upstream on asyncio's own loop instead of uvloop",
    )
    parser.add_argument("--before", type=Path, help="another checkout's src, run side by side")
    opts = parser.parse_args()
    if opts.loadgen == "wrk" and shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk); or --loadgen python")
    variants: list[tuple[str, Path | None]] = [("now", None)]
    if opts.before is not None:
        variants.insert(0, ("before", opts.before.absolute()))
    rates: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="toolwire-workers-") as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir, pin=False)
        try:
            if opts.upstream == "nginx":
                upstream, upstream_port = start_nginx(procs, workdir)
            else:
                upstream, upstream_port = start_upstream(procs, hermes_kb=1, uvloop=opts.uvloop)
            gen = LoadGen(procs) if opts.loadgen == "python" else None
            for rnd in range(opts.rounds):
                for variant, src in variants:
                    for workers in (1, "auto"):
                        gateway, pid = start_gateway(
                            procs,
                            workdir,
                            upstream_port,
                            workers=workers,
                            tools=False,
                            log="text-file",
                            src=src,
                            label=f"{variant}-r{rnd}",
                        )
                        for stream in (False, True):
                            body = chat_body("bench-model", stream=stream, tools=[WEATHER_TOOL])
                            name = f"{variant}, --workers {workers}, " + (
                                "stream" if stream else "non-stream"
                            )

                            args = (gen, gateway, body, stream)
                            _rate(*args, min(2.0, opts.duration), opts, workdir)
                            before_gw, before_up = cpu_seconds(pid), cpu_seconds(upstream.pid)
                            before_wrk = _children_cpu()
                            count, rate = _rate(*args, opts.duration, opts, workdir)
                            used_gw = cpu_seconds(pid) - before_gw
                            used_up = cpu_seconds(upstream.pid) - before_up
                            used_wrk = _children_cpu() - before_wrk
                            if gen is None:
                                cpu.setdefault(name + ", wrk", []).append(used_wrk / count * 1e3)
                            rates.setdefault(name, []).append(rate)
                            cpu.setdefault(name + ", gateway", []).append(used_gw / count * 1e3)
                            cpu.setdefault(name + ", upstream", []).append(used_up / count * 1e3)
                        assert gateway.proc is not None
                        gateway.proc.stop()
                        procs.started.remove(gateway.proc)
                print(f"round {rnd + 1}/{opts.rounds} done", file=sys.stderr, flush=True)
            if gen is not None:
                gen.quit()
        finally:
            procs.stop_all()
    report(rates, cpu, variants, opts)


def report(
    rates: dict[str, list[float]],
    cpu: dict[str, list[float]],
    variants: list[tuple[str, Path | None]],
    opts: argparse.Namespace,
) -> None:
    print(
        f"\nconcurrency {opts.concurrency}, load generator {opts.loadgen}, upstream "
        + ("nginx" if opts.upstream == "nginx" else "the raw fake")
        + ("" if opts.upstream == "nginx" else f" on {'uvloop' if opts.uvloop else 'asyncio'}")
        + ", "
        f"text access log to a file; {opts.rounds} rounds of {opts.duration:g} s; requests/s "
        "(each round), and CPU ms per request (median)\n"
    )
    for name, values in rates.items():
        each = ", ".join(f"{v:,.0f}" for v in values)
        gw = statistics.median(cpu[name + ", gateway"])
        up = statistics.median(cpu[name + ", upstream"])
        wrk = cpu.get(name + ", wrk")
        print(
            f"{name:<34} {statistics.median(values):>8,.0f}  ({each})  "
            f"gateway {gw:.3f} ms, upstream {up:.3f} ms"
            + (f", wrk {statistics.median(wrk):.3f} ms" if wrk else "")
        )
    print()
    for variant, _ in variants:
        for kind in ("non-stream", "stream"):
            one = rates[f"{variant}, --workers 1, {kind}"]
            auto = rates[f"{variant}, --workers auto, {kind}"]
            ratios = [a / o for a, o in zip(auto, one, strict=True)]
            auto_name = f"{variant}, --workers auto, {kind}"
            gw = statistics.median(cpu[f"{variant}, --workers 1, {kind}, gateway"])
            others = statistics.median(cpu[auto_name + ", upstream"]) + statistics.median(
                cpu.get(auto_name + ", wrk", [0.0])
            )
            print(
                f"{variant}: --workers auto / 1, {kind}: {statistics.median(ratios):.2f} "
                f"(rounds {min(ratios):.2f}–{max(ratios):.2f}); the bound 2G / (G + O): "
                f"{2 * gw / (gw + others):.2f} (O: the upstream"
                + (", wrk)" if opts.loadgen == "wrk" else "; the load generator not counted)")
            )


if __name__ == "__main__":
    main()
