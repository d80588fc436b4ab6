"""Instructions per request of `toolwire serve` under callgrind: a repeatable figure on a
noisy machine (CPU time per request moves ±10% from one window to the next when other
work shares the cores; instruction counts move by well under 1%).

Run: `python benchmarks/bench_instructions.py [--requests 300] [--before /work/main/src]
[--mock raw|starlette] [--store memory|sqlite] [--floor]` (needs `valgrind`; prints figures, no
assertions; `--store sqlite` counts a stored response's commit, the SQLite library's
instructions included, but not the system calls it makes). Each variant
is `toolwire serve` (one worker, the instant fake upstream of `bench_gateway.py`, no
pinning) under `valgrind --tool=callgrind --instr-atstart=no`; after a warm-up,
collection is switched on (`callgrind_control -i on`) around `--requests` sequential
requests of each scenario, and the instructions of the gateway's process (all its
threads) are divided by the requests. Under valgrind the gateway runs ~50× slower, so
only the counts mean anything.

With `--mock starlette` the upstream is the Starlette mock the issue-29 ratios are
against, and the mock itself is counted the same way (direct requests, non-stream and
stream), so each gateway figure is also printed as a multiple of the mock's own
instructions: the user-space half of the CPU ratio (callgrind sees no kernel time).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench_gateway import (
    GATEWAY_KEY,
    GATEWAY_KEY_ENV,
    HERE,
    UPSTREAM_KEY_ENV,
    WEATHER_TOOL,
    Processes,
    chat_body,
    free_port,
    start_listening,
    start_upstream,
    wait_http_ok,
)
from bench_hot_path import LOG_MODES, door_body

SCENARIOS = {
    "chat": (
        "/v1/chat/completions",
        lambda: chat_body("bench-model", stream=False, tools=[WEATHER_TOOL]),
    ),
    "chat stream": (
        "/v1/chat/completions",
        lambda: chat_body("bench-model", stream=True, tools=[WEATHER_TOOL]),
    ),
    "messages": ("/v1/messages", lambda: door_body("messages", "bench-model")),
    "responses": ("/v1/responses", lambda: door_body("responses", "bench-model")),
    "unstored": ("/v1/responses", lambda: door_body("responses-unstored", "bench-model")),
}


def _config(workdir: Path, upstream_port: int, store: str) -> Path:
    config = workdir / "toolwire-cg.yaml"
    # One file per gateway: a variant never starts on another's rows.
    kept = f"sqlite:///{workdir / f'cg-{time.monotonic_ns()}.db'}" if store == "sqlite" else store
    config.write_text(
        "upstream:\n"
        "  kind: openai\n"
        f"  base_url: http://127.0.0.1:{upstream_port}/v1\n"
        f"  api_key_env: {UPSTREAM_KEY_ENV}\n"
        "  retries: 0\n"
        "  models:\n"
        "    bench-model: fake-model\n"
        f"store: {kept}\n"
        "keys:\n"
        "  - name: bench\n"
        f"    env: {GATEWAY_KEY_ENV}\n"
    )
    return config


def _total(out: str) -> int:
    """The summed `Ir` of every callgrind dump named `out` (one per thread)."""
    total = 0
    for dump in Path(out).parent.glob(Path(out).name + "*"):
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith("totals:"):  # at the end; `summary:` at the top reads 0
                total += int(line.split()[1])
    return total


def _control(*args: object) -> None:
    subprocess.run(["callgrind_control", *map(str, args)], check=True, capture_output=True)


def _callgrind(out: Path) -> list[str]:
    """valgrind's command line before the program: collection off until switched on."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        f"--callgrind-out-file={out}",
    ]


def _counted(
    pid: int,
    out: Path,
    requests: int,
    http: httpx.Client,
    post: tuple[str, str, dict[str, str]],
    *,
    settle: float = 0.0,
) -> float:
    """Instructions per request of process `pid` (under callgrind, dumping to `out`) for
    `post` (path, body, headers): 30 warm-up requests, then `requests` counted ones,
    `settle` seconds included after."""
    path, body, headers = post
    for _ in range(30):
        http.post(path, content=body, headers=headers).raise_for_status()
    _control("-z", pid)
    _control("-i", "on", pid)
    for _ in range(requests):
        http.post(path, content=body, headers=headers).raise_for_status()
    time.sleep(settle)
    _control("-i", "off", pid)
    for stale in out.parent.glob(out.name + "*"):
        stale.unlink()
    _control("-d", pid)
    return _total(str(out)) / requests


def measure(
    src: Path | None,
    log: str,
    workdir: Path,
    upstream_port: int,
    requests: int,
    label: str,
    store: str,
) -> dict[str, float]:
    port = free_port()
    out = workdir / f"cg-{label}-{log}.out"
    env = {
        UPSTREAM_KEY_ENV: "bench-upstream-key",
        GATEWAY_KEY_ENV: GATEWAY_KEY,
        "TOOLWIRE_LOG_LEVEL": "warning" if log == "off" else "info",
        "NO_COLOR": "1",
        "PYTHONMALLOC": "malloc",
    }
    if src is not None:
        env["PYTHONPATH"] = str(src)
    logging_args = ["--no-access-log"] if log == "off" else ["--log-format", log.partition("-")[0]]
    procs = Processes(workdir, pin=False)
    gateway = procs.start(
        f"cg-{label}-{log}",
        [
            *_callgrind(out),
            sys.executable,
            "-m",
            "toolwire.cli.main",
            "serve",
            "-c",
            str(_config(workdir, upstream_port, store)),
            "--port",
            str(port),
            *logging_args,
        ],
        env=env,
    )
    figures: dict[str, float] = {}
    try:
        wait_http_ok(gateway, f"http://127.0.0.1:{port}/healthz", timeout=300)
        headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "Content-Type": "application/json"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            for name, (path, body) in SCENARIOS.items():
                text = body()
                figures[name] = _counted(
                    gateway.pid,
                    out,
                    requests,
                    http,
                    (path, text, headers),
                    settle=0.3,  # the log writer's batch, counted with its requests
                )
    finally:
        procs.stop_all()

    return figures


def measure_direct(workdir: Path, name: str, program: list[str], requests: int) -> dict[str, float]:
    """The instructions per direct chat request, non-stream and stream, of `program` (a
    script of these benchmarks and its arguments, which prints `listening on <port>`)."""
    out = workdir / f"cg-{name}.out"
    procs = Processes(workdir, pin=False)
    argv = [*_callgrind(out), sys.executable, *program]
    proc, port = start_listening(procs, f"cg-{name}", argv, env={"PYTHONMALLOC": "malloc"})
    figures: dict[str, float] = {}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            for scenario, stream in (("chat", False), ("chat stream", True)):
                text = chat_body("fake-model", stream=stream, tools=[WEATHER_TOOL])
                post = ("/v1/chat/completions", text, {})
                figures[scenario] = _counted(proc.pid, out, requests, http, post)
    finally:
        procs.stop_all()
    return figures


def measure_mock(workdir: Path, requests: int) -> dict[str, float]:
    """The Starlette mock's own instructions per direct request, non-stream and stream."""
    mock = [str(HERE / "gateway_fake_upstream.py"), "--starlette", "--hermes-kb", "1"]
    return measure_direct(workdir, "mock", mock, requests)


def measure_floor(workdir: Path, upstream_port: int, requests: int) -> dict[str, float]:
    """`floor_proxy.py`'s instructions per request in front of the upstream, non-stream
    and stream: the least a Python process does to relay them."""
    floor = [str(HERE / "floor_proxy.py"), "--upstream-port", str(upstream_port)]
    return measure_direct(workdir, "floor", floor, requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--before", help="src directory of a checkout to count beside this one")
    parser.add_argument("--logs", default="off,text-file,json-file")
    parser.add_argument(
        "--mock",
        choices=["raw", "starlette"],
        default="raw",
        help="the upstream; with starlette the mock's own instructions are counted too",
    )
    parser.add_argument(
        "--store",
        choices=["memory", "sqlite"],
        default="memory",
        help="the gateway's store: sqlite counts what a stored response's commit costs",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also count floor_proxy.py (the least a Python process does to relay a request)",
    )
    opts = parser.parse_args()
    variants: list[tuple[str, Path | None]] = [("hot", None)]
    if opts.before:
        variants.insert(0, ("before", Path(opts.before)))
    logs = [m for m in opts.logs.split(",") if m in LOG_MODES and not m.endswith("pipe")]
    results: dict[tuple[str, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir, pin=False)
        try:
            _, port = start_upstream(procs, hermes_kb=1, starlette=opts.mock == "starlette")
            for variant, src in variants:
                for log in logs:
                    results[variant, log] = measure(
                        src, log, workdir, port, opts.requests, variant, opts.store
                    )
                    counts = {k: round(v) for k, v in results[variant, log].items()}
                    print(variant, log, json.dumps(counts), file=sys.stderr, flush=True)
            floor = measure_floor(workdir, port, opts.requests) if opts.floor else None
        finally:
            procs.stop_all()
        mock = measure_mock(workdir, opts.requests) if opts.mock == "starlette" else None
    print(f"\ninstructions per request (thousands), callgrind, {opts.requests} requests each")
    names = list(SCENARIOS)
    print(f"{'variant':<8} {'log':<10} " + " ".join(f"{n:>12}" for n in names))
    for (variant, log), figures in results.items():
        print(f"{variant:<8} {log:<10} " + " ".join(f"{figures[n] / 1000:>12.1f}" for n in names))
    if mock is not None:
        print(
            f"{'mock':<8} {'-':<10} {mock['chat'] / 1000:>12.1f} "
            f"{mock['chat stream'] / 1000:>12.1f}   (the Starlette mock answering directly)"
        )
        for (variant, log), figures in results.items():
            print(
                f"{variant} {log}: × the mock's own instructions: "
                f"chat {figures['chat'] / mock['chat']:.2f}, "
                f"chat stream {figures['chat stream'] / mock['chat stream']:.2f}"
            )
    if floor is not None:
        print(
            f"{'floor':<8} {'-':<10} {floor['chat'] / 1000:>12.1f} "
            f"{floor['chat stream'] / 1000:>12.1f}   (floor_proxy.py relaying them)"
        )
        if mock is not None:
            print(
                f"floor: × the mock's own instructions: chat {floor['chat'] / mock['chat']:.2f}, "
                f"chat stream {floor['chat stream'] / mock['chat stream']:.2f}"
            )
    for variant, _ in variants:
        off = results.get((variant, "off"))
        if off is None:
            continue
        for log in logs:
            if log != "off":
                cost = results[variant, log]["chat"] - off["chat"]
                print(
                    f"{variant}: the access log ({log}): {cost / 1000:+.1f}k instructions/request"
                )


if __name__ == "__main__":
    main()
