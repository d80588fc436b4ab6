"""The gateway's hot path (issues 15 and 29): what toolwire adds per request, per stream,
per server-tool round trip, with the access log off and on, per door, and what one and
two worker processes serve.

Run: `python benchmarks/bench_hot_path.py [--rounds 3] [--requests 1000] [--duration 4]
[--mock raw|starlette] [--before OTHER/src] [--floor]` (prints figures; no assertions). It reuses
`bench_gateway.py`'s processes: the fake OpenAI-compatible upstream (`--mock raw`: raw
asyncio, 0.015-0.05 ms of CPU per request, kernel included; `--mock starlette`: the same
answers from a Starlette app under uvicorn, the mock issue 29's ratios are against), the
raw-asyncio load generator, and `toolwire serve` pinned to CPU 0 with the others on CPU 1
(2+ cores). `--before` runs another checkout's gateway beside this one, in the same rounds.

At concurrency 1, rounds alternating the scenarios:

- non-streaming and 20-chunk streaming, direct and through toolwire in `native` mode;
- with `--floor`, the same through `floor_proxy.py`: the least a Python process does to
  relay them (parse, call the upstream, copy the answer back), measured as the gateway is;
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
the instant fake answers in tens of µs, so "half of direct" only means something against an
upstream that does some work.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench_gateway import (
    GATEWAY_KEY,
    GATEWAY_KEY_ENV,
    UPSTREAM_KEY_ENV,
    WEATHER_TOOL,
    BenchError,
    Hermes,
    LoadGen,
    Proc,
    Processes,
    Target,
    chat_body,
    cpu_seconds,
    free_port,
    run_hermes,
    start_listening,
    start_upstream,
    wait_http_ok,
)

LOOKUP_TOOLS = Path(__file__).with_name("bench_lookup_tools.py")
"""The `lookup` server tool."""
FLOOR_PROXY = Path(__file__).with_name("floor_proxy.py")
"""The least a Python process does to relay a request and its answer (`--floor`)."""


LOG_MODES = ("off", "text-file", "json-file", "text-pipe", "json-pipe")
"""How the access log is written: off (`--no-access-log`), or text / JSON lines on the
gateway's stderr, which is a file or a pipe (read by `cat` on CPU 1 into a file)."""


def start_gateway(
    procs: Processes,
    workdir: Path,
    upstream_port: int,
    *,
    workers: int | str,
    tools: bool,
    log: str = "off",
    src: Path | None = None,
    label: str = "",
) -> tuple[Target, int]:
    """`toolwire serve` with the `lookup` server tool (`tools`) or with none.

    Args:
        log: One of `LOG_MODES`.
        src: The `src` directory of the toolwire checkout to run (`PYTHONPATH`), e.g. main's
            for the figures before a change; `None` runs what this interpreter imports.
    """
    name = f"toolwire-{label or 'x'}-{'tools' if tools else 'plain'}-{workers}-{log}"
    config = workdir / f"{name}.yaml"
    server_tools = f"server_tools:\n  modules: [{LOOKUP_TOOLS}]\n"
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
        "    bench-hermes:\n"
        "      model: fake-hermes\n"
        '      tool_calls: "parse:hermes"\n'
        "    bench-hermes-warm:\n"
        "      model: fake-hermes-warm\n"
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
    logging_args = ["--no-access-log"] if log == "off" else ["--log-format", log.partition("-")[0]]
    env = {
        UPSTREAM_KEY_ENV: "bench-upstream-key",
        GATEWAY_KEY_ENV: GATEWAY_KEY,
        "TOOLWIRE_LOG_LEVEL": "warning" if log == "off" else "info",
        "NO_COLOR": "1",
    }
    if src is not None:
        env["PYTHONPATH"] = str(src)
    pipe = log.endswith("-pipe")
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
            *logging_args,
        ],
        env=env,
        cpus={0} if workers == 1 else {0, 1},
        stderr_pipe=pipe,
    )
    if pipe:
        # The reader of the pipe, as a log shipper would be: not in the gateway's tree.
        procs.start(name + "-reader", ["cat"], stdin=target.proc.popen.stderr, cpus={1})
        assert target.proc.popen.stderr is not None
        target.proc.popen.stderr.close()
    wait_http_ok(target.proc, f"http://127.0.0.1:{port}/healthz", timeout=60)
    if workers != 1 and log != "off" and not pipe:
        # The first worker up answers the probe; a load started before the others are
        # up keeps its connections on that one (seen: a first round at one worker's rate).
        count = len(os.sched_getaffinity(target.proc.pid)) if workers == "auto" else int(workers)
        _wait_for_workers(target.proc.log, count)
    return target, target.proc.pid


def _wait_for_workers(log: Path, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while log.read_bytes().count(b"Application startup complete") < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"{count} workers did not all start within {timeout:.0f} s: {log}")
        time.sleep(0.05)


def start_floor(procs: Processes, upstream_port: int) -> tuple[Proc, int]:
    """`floor_proxy.py` in front of the upstream, on the gateway's CPU when pinned."""
    argv = [sys.executable, str(FLOOR_PROXY), "--upstream-port", str(upstream_port)]
    return start_listening(procs, "floor_proxy", argv, cpus={0})


SERVER_TOOLS_NO_CALL = "server tools, none called"
ROUND_TRIP = "server tool round trip"


@dataclass
class Scenario:
    name: str
    target: Target
    body: str
    stream: bool
    pid: int
    """Whose CPU is measured: the gateway's, or the mock's for the direct rows."""


MESSAGES_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def door_body(door: str, model: str) -> str:
    """A non-streaming request of the same conversation on each front door."""
    question = "What is the weather in Paris today?"
    if door == "messages":
        return json.dumps(
            {
                "model": model,
                "max_tokens": 256,
                "system": "You are a helpful assistant.",
                "messages": [{"role": "user", "content": question}],
                "tools": [MESSAGES_TOOL],
            }
        )
    if door in ("responses", "responses-unstored"):
        function = WEATHER_TOOL["function"]
        assert isinstance(function, dict)
        body = {
            "model": model,
            "instructions": "You are a helpful assistant.",
            "input": question,
            "tools": [{"type": "function", **function}],
            "max_output_tokens": 256,
        }
        if door == "responses-unstored":
            body["store"] = False  # not kept for `previous_response_id`: no store write
        return json.dumps(body)
    return chat_body(model, stream=False, tools=[WEATHER_TOOL])


DOOR_PATHS = {
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
    "responses-unstored": "/v1/responses",
}
DOORS = ("messages", "responses", "responses-unstored")


def run(opts: argparse.Namespace) -> None:
    variants: list[tuple[str, Path | None]] = [("hot", None)]
    if opts.before:
        variants.insert(0, ("before", Path(opts.before)))
    logs = [m for m in opts.logs.split(",") if m]
    for mode in logs:
        if mode not in LOG_MODES:
            raise SystemExit(f"--logs: {mode!r} is not one of {', '.join(LOG_MODES)}")
    default_log = "text-file" if "text-file" in logs else logs[0]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir, pin=opts.pin)
        hermes: dict[str, Hermes] = {}
        rates: dict[str, dict[str, float]] = {}
        lost: dict[str, tuple[int, int]] = {}
        try:
            upstream, upstream_port = start_upstream(
                procs, hermes_kb=opts.hermes_kb, starlette=opts.mock == "starlette"
            )
            gen = LoadGen(procs)
            direct = Target(
                name="direct", port=upstream_port, path="/v1/chat/completions", model="fake-model"
            )

            def body(model: str, stream: bool) -> str:
                return chat_body(model, stream=stream, tools=[WEATHER_TOOL])

            scenarios = [
                Scenario(
                    "direct, non-stream", direct, body("fake-model", False), False, upstream.pid
                ),
                Scenario("direct, stream", direct, body("fake-model", True), True, upstream.pid),
            ]
            if opts.floor:
                floor, floor_port = start_floor(procs, upstream_port)
                at = Target(
                    name="floor", port=floor_port, path="/v1/chat/completions", model="fake-model"
                )
                scenarios += [
                    Scenario(
                        "floor proxy, non-stream", at, body("fake-model", False), False, floor.pid
                    ),
                    Scenario("floor proxy, stream", at, body("fake-model", True), True, floor.pid),
                ]
            plain: dict[tuple[str, str], Target] = {}
            for variant, src in variants:
                for log in logs:
                    gateway, pid = start_gateway(
                        procs,
                        workdir,
                        upstream_port,
                        workers=1,
                        tools=False,
                        log=log,
                        src=src,
                        label=variant,
                    )
                    plain[variant, log] = gateway
                    scenarios += [
                        Scenario(
                            f"{variant} {log}, non-stream",
                            gateway,
                            body("bench-model", False),
                            False,
                            pid,
                        ),
                        Scenario(
                            f"{variant} {log}, stream",
                            gateway,
                            body("bench-model", True),
                            True,
                            pid,
                        ),
                    ]
                gateway = plain[variant, default_log]
                assert gateway.proc is not None
                pid = gateway.proc.pid
                scenarios.append(
                    Scenario(
                        f"{variant} {default_log}, parse:hermes stream",
                        gateway,
                        body("bench-parse", True),
                        True,
                        pid,
                    )
                )
                for door in DOORS:
                    at = Target(
                        name=gateway.name,
                        port=gateway.port,
                        path=DOOR_PATHS[door],
                        model="bench-model",
                    )
                    scenarios.append(
                        Scenario(
                            f"{variant} {default_log}, /v1/{door}",
                            at,
                            door_body(door, "bench-model"),
                            False,
                            pid,
                        )
                    )
                agent, agent_pid = start_gateway(
                    procs,
                    workdir,
                    upstream_port,
                    workers=1,
                    tools=True,
                    log=default_log,
                    src=src,
                    label=variant,
                )
                scenarios += [
                    Scenario(
                        f"{variant} {default_log}, {SERVER_TOOLS_NO_CALL}",
                        agent,
                        body("bench-model", False),
                        False,
                        agent_pid,
                    ),
                    Scenario(
                        f"{variant} {default_log}, {ROUND_TRIP}",
                        agent,
                        body("bench-tools", False),
                        False,
                        agent_pid,
                    ),
                ]
            if opts.only:
                wanted = opts.only.split(",")
                scenarios = [
                    s
                    for s in scenarios
                    if s.name.startswith(("direct", "floor")) or any(w in s.name for w in wanted)
                ]
            latency: dict[str, list[float]] = {s.name: [] for s in scenarios}
            cpu: dict[str, list[float]] = {s.name: [] for s in scenarios}
            for rnd in range(opts.rounds):
                for s in scenarios:
                    result = measure_window(
                        gen, s.target, s.body, s.stream, 1, opts.requests, 60.0, s.pid, upstream.pid
                    )
                    key = "ttfb" if s.stream else "latency"
                    latency[s.name] += [x * 1000 for x in result[key]]
                    cpu[s.name].append(result["cpu_ms"])
                    if s.pid != upstream.pid:
                        chain = cpu.setdefault(f"{s.name} (upstream)", [])
                        chain.append(result["upstream_cpu_ms"])
                print(f"round {rnd + 1}/{opts.rounds} done", file=sys.stderr, flush=True)
            if opts.hermes_runs:
                for variant, _ in variants:
                    hermes[variant] = run_hermes(gen, plain[variant, default_log], opts, workdir)
            for proc in list(procs.started):
                if proc.name.startswith("toolwire-"):
                    proc.stop()
                    procs.started.remove(proc)
            if opts.duration:
                for variant, src in variants:
                    for workers in (1, "auto"):
                        two, _ = start_gateway(
                            procs,
                            workdir,
                            upstream_port,
                            workers=workers,
                            tools=False,
                            log=default_log,
                            src=src,
                            label=variant,
                        )
                        rates[f"{variant}, --workers {workers}"] = _rates(gen, two, direct, opts)
                        assert two.proc is not None
                        two.proc.stop()
                        procs.started.remove(two.proc)
            if opts.kill9:
                for variant, src in variants:
                    lost[variant] = _kill9(procs, workdir, upstream_port, src, variant, opts)
            working = _working_upstream(procs, workdir, gen, opts) if opts.upstream_cost_ms else {}
            gen.quit()
        finally:
            procs.stop_all()
    report(latency, cpu, rates, opts, variants, logs, default_log)
    for variant, found in hermes.items():
        spread = ", ".join(f"{v:.0f}" for v in found.cpu_ms)
        print(
            f"\n{variant}: parse:hermes, {opts.hermes_kb} KB argument in 1-character deltas: "
            f"gateway CPU ms per request {spread} (median "
            f"{statistics.median(found.cpu_ms) if found.cpu_ms else float('nan'):.0f}); "
            f"{found.verdict}"
        )
    for variant, (answered, logged) in lost.items():
        print(
            f"\n{variant}: kill -9 under load (text log to a file): {answered} requests "
            f"answered, {logged} access lines written: {answered - logged} lost"
        )
    if working:
        print(
            f"\nagainst an upstream that burns {opts.upstream_cost_ms:g} ms of CPU per request "
            "(like the issue's mock), concurrency 32, --workers 1, requests/s"
        )
        for kind in ("non-stream", "stream"):
            d, t = working[f"direct, {kind}"], working[f"toolwire, {kind}"]
            print(f"{kind:<11} direct {d:>7.0f}   toolwire {t:>7.0f}   ratio {t / d:.2f}")


def _kill9(
    procs: Processes,
    workdir: Path,
    upstream_port: int,
    src: Path | None,
    variant: str,
    opts: argparse.Namespace,
) -> tuple[int, int]:
    """Requests answered 200 before a `kill -9`, and the access lines the log holds for them.

    Four client threads keep requests going; the gateway is killed after `--kill9` seconds.
    """
    gateway, pid = start_gateway(
        procs,
        workdir,
        upstream_port,
        workers=1,
        tools=False,
        log="text-file",
        src=src,
        label=variant + "-kill9",
    )
    assert gateway.proc is not None
    answered: list[str] = []
    stop = threading.Event()
    text = chat_body("bench-model", stream=False, tools=[WEATHER_TOOL])

    def client() -> None:
        headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "Content-Type": "application/json"}
        with httpx.Client(base_url=f"http://127.0.0.1:{gateway.port}", timeout=5) as http:
            while not stop.is_set():
                try:
                    reply = http.post("/v1/chat/completions", content=text, headers=headers)
                except httpx.HTTPError:
                    return
                if reply.status_code == 200:
                    answered.append(reply.headers["x-request-id"])

    threads = [threading.Thread(target=client, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(opts.kill9)
    os.kill(pid, signal.SIGKILL)
    stop.set()
    for thread in threads:
        thread.join(10)
    gateway.proc.popen.wait(10)
    procs.started.remove(gateway.proc)
    log = gateway.proc.log.read_text(errors="replace")
    logged = sum(1 for rid in answered if f"request_id={rid} " in log)
    return len(answered), logged


def _working_upstream(
    procs: Processes, workdir: Path, gen: LoadGen, opts: argparse.Namespace
) -> dict[str, float]:
    """Requests/s, direct and through one worker, against an upstream that does some work:
    with the instant upstream, "direct" measures only how fast a raw-asyncio loop answers."""
    _, port = start_upstream(procs, hermes_kb=1, cost_ms=opts.upstream_cost_ms)
    gateway, _ = start_gateway(procs, workdir, port, workers=1, tools=False, label="working")
    direct = Target(name="direct", port=port, path="/v1/chat/completions", model="fake-model")
    return _rates(gen, gateway, direct, opts)


def measure_window(
    gen: LoadGen,
    target: Target,
    body: str,
    stream: bool,
    concurrency: int,
    requests: int,
    duration: float,
    pid: int | None,
    upstream: int | None = None,
) -> dict[str, Any]:
    """One measured window; `cpu_ms` is `pid`'s CPU (its process tree) per request, and
    `upstream_cpu_ms` the `upstream` process's in the same window."""
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
    up_before = cpu_seconds(upstream) if upstream is not None else 0.0
    result = gen.go()
    after = cpu_seconds(pid) if pid is not None else 0.0
    up_after = cpu_seconds(upstream) if upstream is not None else 0.0
    if result["errors"]:
        raise BenchError(f"{target.name} {target.model}: {result['first_error']}")
    result["cpu_ms"] = (after - before) * 1000 / max(1, result["count"])
    result["upstream_cpu_ms"] = (up_after - up_before) * 1000 / max(1, result["count"])
    return result


def _rates(
    gen: LoadGen, gateway: Target, direct: Target, opts: argparse.Namespace
) -> dict[str, float]:
    """Requests/s at concurrency 32: the median of three windows, after an untimed one (a
    worker's first seconds, its upstream pool growing and its caches filling, made
    `--workers 2` look 1.1× one worker when it was 1.7×)."""
    out: dict[str, float] = {}
    for label, target, model in (
        ("direct", direct, "fake-model"),
        ("toolwire", gateway, "bench-model"),
    ):
        for stream in (False, True):
            text = chat_body(model, stream=stream, tools=[WEATHER_TOOL])
            measure_window(gen, target, text, stream, 32, 10**9, min(2.0, opts.duration), None)
            rates = []
            for _ in range(3):
                result = measure_window(gen, target, text, stream, 32, 10**9, opts.duration, None)
                rates.append(result["count"] / result["elapsed"])
            out[f"{label}, {'stream' if stream else 'non-stream'}"] = statistics.median(rates)
            out[f"{label}, {'stream' if stream else 'non-stream'} spread"] = max(rates) - min(rates)
    return out


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}–{max(values):.3f}" if values else ""


def _pairs(cpu: dict[str, list[float]], name: str, against: str) -> list[float]:
    """`name`'s CPU over `against`'s, round by round.

    Rounds alternate the scenarios, so both of a pair ran seconds apart: a slow minute of
    a shared machine moves both, and their ratio less than either (on the VMs of issue
    29's later passes one scenario's rounds spread by ±20%)."""
    return [a / b for a, b in zip(cpu.get(name, []), cpu.get(against, []), strict=False) if b]


def _paired(cpu: dict[str, list[float]], name: str, against: str) -> float | None:
    """The median over rounds of `name`'s CPU over `against`'s in the same round."""
    pairs = _pairs(cpu, name, against)
    return statistics.median(pairs) if pairs else None


def report(
    latency: dict[str, list[float]],
    cpu: dict[str, list[float]],
    rates: dict[str, dict[str, float]],
    opts: argparse.Namespace,
    variants: list[tuple[str, Path | None]],
    logs: list[str],
    default_log: str,
) -> None:
    p50 = {name: statistics.median(values) for name, values in latency.items() if values}
    cpu50 = {name: statistics.median(values) for name, values in cpu.items() if values}
    print(
        f"\nconcurrency 1, {opts.rounds} rounds × {opts.requests} requests; p50 of all "
        "requests (stream: time to the first data line); CPU: median of the rounds' "
        "CPU per request, and the rounds' spread\n"
    )
    print(
        f"{'scenario':<46} {'p50 ms':>7} {'added':>7} {'CPU ms/req':>10} "
        f"{'spread':>13} {'× mock':>7} {'paired':>7} {'× chain':>8}"
    )
    mock = {
        "non-stream": cpu50.get("direct, non-stream"),
        "stream": cpu50.get("direct, stream"),
    }
    base = {"non-stream": p50.get("direct, non-stream"), "stream": p50.get("direct, stream")}
    for name, value in p50.items():
        kind = "stream" if name.endswith("stream") and "non-stream" not in name else "non-stream"
        direct = name.startswith("direct")
        added = "" if direct else f"{value - (base[kind] or 0):+.3f}"
        own = cpu50[name]
        ratio = "" if direct or not mock[kind] else f"{own / (mock[kind] or 1):.2f}"
        upstream = cpu50.get(f"{name} (upstream)")
        chain = f"{own / upstream:.2f}" if upstream else ""
        paired = None if direct else _paired(cpu, name, f"direct, {kind}")
        pair = f"{paired:.2f}" if paired is not None else ""
        print(
            f"{name:<46} {value:>7.3f} {added:>7} {own:>10.3f} {_spread(cpu[name]):>13} "
            f"{ratio:>7} {pair:>7} {chain:>8}"
        )
    print(
        "\n× mock: against the mock's CPU per request when the load generator calls it "
        "directly, and paired: the median of that ratio round by round; × chain: against "
        "the mock's CPU per request in the same window, serving "
        "the gateway's requests (at concurrency 1 it sleeps while the gateway works, and "
        "pays a wake-up per request; two upstream calls for a round trip)"
    )
    print("\nthe access log's CPU per request (log on − log off, medians), ms")
    for variant, _ in variants:
        off = cpu50.get(f"{variant} off, non-stream")
        if off is None:
            continue
        cells = []
        for log in logs:
            if log == "off":
                continue
            on = cpu50.get(f"{variant} {log}, non-stream")
            if on is not None:
                cells.append(f"{log} {on - off:+.3f}")
        print(f"{variant:<8} " + "   ".join(cells))
    print("\nper door (non-stream, CPU ms/req, and relative to /v1/chat/completions)")
    for variant, _ in variants:
        chat_name = f"{variant} {default_log}, non-stream"
        chat = cpu50.get(chat_name)
        cells = [f"chat {chat:.3f}" if chat else "chat —"]
        for door in DOORS:
            door_cpu = cpu50.get(f"{variant} {default_log}, /v1/{door}")
            paired = _paired(cpu, f"{variant} {default_log}, /v1/{door}", chat_name)
            if door_cpu is not None and chat and paired is not None:
                cells.append(
                    f"{door} {door_cpu:.3f} ({(door_cpu / chat - 1) * 100:+.0f}%, "
                    f"paired {(paired - 1) * 100:+.0f}%)"
                )
        print(f"{variant:<8} " + "   ".join(cells))
    if len(variants) > 1:
        print("\nhot ÷ before, CPU per request paired round by round (median; the rounds' range)")
        for name in cpu:
            if not name.startswith("hot ") or name.endswith("(upstream)"):
                continue
            pairs = _pairs(cpu, name, "before " + name.removeprefix("hot "))
            if pairs:
                print(
                    f"{name.removeprefix('hot '):<40} {statistics.median(pairs):.3f} "
                    f"({min(pairs):.3f}–{max(pairs):.3f})"
                )
    print("\nserver tools (gateway CPU ms/req; p50 ms)")
    for variant, _ in variants:
        plain = cpu50.get(f"{variant} {default_log}, non-stream")
        agent = cpu50.get(f"{variant} {default_log}, {SERVER_TOOLS_NO_CALL}")
        loop = cpu50.get(f"{variant} {default_log}, {ROUND_TRIP}")
        agent_p = p50.get(f"{variant} {default_log}, {SERVER_TOOLS_NO_CALL}")
        loop_p = p50.get(f"{variant} {default_log}, {ROUND_TRIP}")
        if plain is None or agent is None or loop is None or agent_p is None or loop_p is None:
            continue
        print(
            f"{variant:<8} none called {agent - plain:+.3f} CPU over a plain request; "
            f"round trip {loop - agent:+.3f} CPU, {loop_p - agent_p:+.3f} p50 beyond a "
            "request that calls none (includes the second upstream call)"
        )
    if rates:
        print(f"\nconcurrency 32, {opts.duration:.0f} s each, requests/s (log {default_log})")
        for key, values in rates.items():
            shown = "   ".join(
                f"{k} {v:.0f} ±{values.get(k + ' spread', 0) / 2:.0f}"
                for k, v in values.items()
                if not k.endswith("spread")
            )
            print(f"{key:<24} {shown}")
        for variant, _ in variants:
            one = rates.get(f"{variant}, --workers 1")
            auto = rates.get(f"{variant}, --workers auto")
            if one and auto:
                for kind in ("non-stream", "stream"):
                    k = f"toolwire, {kind}"
                    print(f"{variant} --workers auto / 1, {kind}: {auto[k] / one[k]:.2f}")
        if opts.mock == "starlette":
            # Seen: auto / 1 = 1.21 non-stream, 0.86 stream, with the mock at full load.
            print(
                "(with --mock starlette the mock, one Python worker, is what saturates at "
                "concurrency 32: bench_workers.py, with wrk and nginx, measures --workers)"
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
    parser.add_argument(
        "--before",
        help="src directory of a checkout to run beside this one (e.g. /work/main/src)",
    )
    parser.add_argument(
        "--logs",
        default=",".join(LOG_MODES),
        help=f"access log modes to measure, comma-separated ({', '.join(LOG_MODES)})",
    )
    parser.add_argument("--hermes-kb", type=int, default=128)
    parser.add_argument("--hermes-runs", type=int, default=3, help="0: skip it")
    parser.add_argument(
        "--kill9", type=float, default=2.0, help="seconds of load before a kill -9 (0: skip)"
    )
    parser.add_argument(
        "--mock",
        choices=["raw", "starlette"],
        default="raw",
        help="the upstream: raw asyncio (µs per request) or a Starlette app (the issue's)",
    )
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure floor_proxy.py: the least a Python process does to relay a "
        "request and its answer, the floor the gateway's ratios are set against",
    )
    parser.add_argument(
        "--only",
        default="",
        help="measure only the scenarios whose names contain one of these comma-separated "
        "words (and the direct ones), e.g. 'non-stream,/v1/responses'",
    )
    run(parser.parse_args())


if __name__ == "__main__":
    main()
