"""Gateway overhead: direct vs. through `toolwire serve` vs. through the LiteLLM proxy.

Run: `python benchmarks/bench_gateway.py [--quick]` (prints figures; no assertions).
`--quick` takes about a minute; the full run a few minutes. LiteLLM is optional: install
it with `bash benchmarks/setup_litellm.sh` (its own virtualenv, benchmarks/.venv-litellm).

Processes, all started here and always stopped at the end:
- an instant fake OpenAI-compatible upstream (`gateway_fake_upstream.py`, raw asyncio);
- the load generator (`gateway_loadgen.py`, raw asyncio HTTP/1.1 keep-alive);
- `toolwire serve` with one worker, upstream `kind: openai` pointing at the fake;
- `litellm` with one worker, callbacks and retries off, the same upstream.

Rounds alternate the targets (direct, toolwire, litellm, direct, ...); each round runs,
per target: concurrency 1 non-streaming (latency p50/p99), concurrency 1 streaming (time
to the first `data:` line and total), concurrency 32 non-streaming and streaming
(requests/s). Gateway CPU per request comes from /proc/<pid>/stat (utime+stime of the
gateway's process tree) read just before and after each measured window; RSS from
/proc/<pid>/status (VmRSS) idle, after every round and at the peak during the load.
Start-up is spawn → first 200 on the health URL. Finally, toolwire only: one streamed
`parse:hermes` answer whose 128 KB tool argument arrives in 1-character deltas, with the
gateway CPU it took and a check that the client got the whole argument back.

With `--pin` (the default on 2+ cores) the gateway runs on CPU 0 and the fake upstream and
the load generator on CPU 1, so the three do not fight over one core.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import secrets
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
DEFAULT_LITELLM_VENV = HERE / ".venv-litellm"
UPSTREAM_KEY_ENV = "BENCH_UPSTREAM_KEY"
GATEWAY_KEY_ENV = "BENCH_GATEWAY_KEY"
# Both gateways check a bearer key, as in production (LiteLLM refuses to start without one).
GATEWAY_KEY = "sk-bench-" + secrets.token_hex(24)
CLK_TCK = os.sysconf("SC_CLK_TCK")

# (name, stream, concurrency)
SCENARIOS: tuple[tuple[str, bool, int], ...] = (
    ("c1", False, 1),
    ("c1s", True, 1),
    ("c32", False, 32),
    ("c32s", True, 32),
)
SCENARIO_LABEL = {
    "c1": "c=1 non-stream",
    "c1s": "c=1 stream",
    "c32": "c=32 non-stream",
    "c32s": "c=32 stream",
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WRITE_FILE_TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a text file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}


class BenchError(RuntimeError):
    """A process did not start or a measurement could not run; the message says why."""


# --- processes -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (a worker manager may fork its server)."""
    tree = _children()
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(tree.get(current, []))
    return found


def cpu_seconds(pid: int) -> float:
    """CPU time of the process tree: every live thread's from /proc/<pid>/task/*/schedstat
    (nanoseconds: a window of a few hundred requests is not rounded to 10 ms ticks), plus
    the children the root already reaped (utime+stime ticks)."""
    total_ns = 0
    reaped = 0
    for member in process_tree(pid):
        try:
            tasks = os.listdir(f"/proc/{member}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                total_ns += int(
                    Path(f"/proc/{member}/task/{task}/schedstat").read_text().split()[0]
                )
            except (OSError, ValueError, IndexError):
                continue
        if member == pid:
            try:
                fields = Path(f"/proc/{member}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            reaped = int(fields[13]) + int(fields[14])
    return total_ns / 1e9 + reaped / CLK_TCK


def rss_mb(pid: int) -> float:
    """VmRSS of the process tree, in MB."""
    total_kb = 0
    for member in process_tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total_kb += int(line.split()[1])
                break
    return total_kb / 1024


@dataclass(kw_only=True)
class Proc:
    """A started process with its log file; `stop()` kills its whole process group."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=8)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=5)
        # Anything the process left behind in its group (workers whose parent died first).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)


class Processes:
    """Every process started here; `stop_all()` runs in a `finally`."""

    def __init__(self, logdir: Path, pin: bool) -> None:
        self.logdir = logdir
        self.pin = pin
        self.started: list[Proc] = []

    def start(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cpus: set[int] | None = None,
        stdout_pipe: bool = False,
        stdin_pipe: bool = False,
        stdin: Any = None,
        stderr_pipe: bool = False,
    ) -> Proc:
        log = self.logdir / f"{name}.log"
        with log.open("ab") as out:
            affinity = cpus if self.pin else None

            def before_exec() -> None:
                if affinity is not None:
                    os.sched_setaffinity(0, affinity)

            popen = subprocess.Popen(
                argv,
                stdin=stdin
                if stdin is not None
                else (subprocess.PIPE if stdin_pipe else subprocess.DEVNULL),
                stdout=subprocess.PIPE if stdout_pipe else out,
                stderr=subprocess.PIPE if stderr_pipe else out,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # its own process group, killed as a whole
                preexec_fn=before_exec,
                cwd=self.logdir,
            )
        proc = Proc(name=name, popen=popen, log=log)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            with contextlib.suppress(Exception):
                proc.stop()
        self.started.clear()


def wait_http_ok(proc: Proc, url: str, timeout: float) -> float:
    """Poll `url` until it answers 200; return the time since the process was spawned."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0) as http:
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise BenchError(
                    f"{proc.name} exited with code {proc.popen.returncode} before it "
                    f"answered {url}.\n--- last lines of {proc.log} ---\n{proc.log_tail()}"
                )
            try:
                if http.get(url).status_code == 200:
                    return time.monotonic()
            except httpx.TransportError:
                pass
            time.sleep(0.003)
    raise BenchError(
        f"{proc.name} did not answer 200 on {url} within {timeout:.0f} s.\n"
        f"--- last lines of {proc.log} ---\n{proc.log_tail()}"
    )


# --- targets ---------------------------------------------------------------------------


@dataclass(kw_only=True)
class Target:
    """Where the load goes: `direct`, `toolwire` or `litellm`."""

    name: str
    port: int
    path: str
    model: str
    proc: Proc | None = None  # the gateway; None for direct
    startup_s: float | None = None
    unavailable: str | None = None  # why there are no figures ("n/a (...)")
    rss_idle: float | None = None
    rss_rounds: list[float] = field(default_factory=list)
    rss_peak: float = 0.0
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    errors: int = 0
    first_error: str | None = None


def chat_body(model: str, *, stream: bool, tools: list[dict[str, Any]]) -> str:
    return json.dumps(
        {
            "model": model,
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is the weather in Paris today?"},
            ],
            "tools": tools,
            "max_tokens": 256,
            "stream": stream,
        }
    )


def start_listening(
    procs: Processes,
    name: str,
    argv: list[str],
    *,
    cpus: set[int] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[Proc, int]:
    """A program of these benchmarks that prints `listening on <port>` once it accepts
    connections (the fake upstream, the floor proxy), and that port."""
    proc = procs.start(name, argv, cpus=cpus, env=env, stdout_pipe=True)
    assert proc.popen.stdout is not None
    line = proc.popen.stdout.readline().decode()
    if not line.startswith("listening on "):
        raise BenchError(f"{name} did not start:\n{proc.log_tail()}")
    return proc, int(line.split()[-1])


def start_upstream(
    procs: Processes,
    hermes_kb: int,
    cost_ms: float = 0.0,
    *,
    starlette: bool = False,
    uvloop: bool = False,
) -> tuple[Proc, int]:
    """The fake upstream: raw asyncio (on uvloop with `uvloop`), or with `starlette` the
    same answers from a Starlette app under uvicorn (see `gateway_fake_upstream.py`)."""
    name = "fake_upstream" if not cost_ms else f"fake_upstream_{cost_ms:g}ms"
    return start_listening(
        procs,
        name + ("_starlette" if starlette else ""),
        [
            sys.executable,
            str(HERE / "gateway_fake_upstream.py"),
            "--hermes-kb",
            str(hermes_kb),
            "--cost-ms",
            str(cost_ms),
            *(["--starlette"] if starlette else []),
            *(["--uvloop"] if uvloop else []),
        ],
        cpus={1},
    )


def start_toolwire(procs: Processes, workdir: Path, upstream_port: int) -> Target:
    config = workdir / "toolwire-bench.yaml"
    config.write_text(
        "upstream:\n"
        "  kind: openai\n"
        f"  base_url: http://127.0.0.1:{upstream_port}/v1\n"
        f"  api_key_env: {UPSTREAM_KEY_ENV}\n"
        "  tool_calls: native\n"
        "  retries: 0\n"
        "  models:\n"
        "    bench-model: fake-model\n"
        "    bench-hermes:\n"
        "      model: fake-hermes\n"
        '      tool_calls: "parse:hermes"\n'
        "    bench-hermes-warm:\n"
        "      model: fake-hermes-warm\n"
        '      tool_calls: "parse:hermes"\n'
        "keys:\n"
        "  - name: bench\n"
        f"    env: {GATEWAY_KEY_ENV}\n"
    )
    port = free_port()
    target = Target(name="toolwire", port=port, path="/v1/chat/completions", model="bench-model")
    toolwire = Path(sys.executable).with_name("toolwire")
    argv = [str(toolwire)] if toolwire.exists() else [sys.executable, "-m", "toolwire.cli.main"]
    spawned = time.monotonic()
    target.proc = procs.start(
        "toolwire",
        [*argv, "serve", "--config", str(config), "--port", str(port)],
        env={
            UPSTREAM_KEY_ENV: "bench-upstream-key",
            GATEWAY_KEY_ENV: GATEWAY_KEY,
            "TOOLWIRE_LOG_LEVEL": "warning",  # no access log line per request
            "NO_COLOR": "1",
            "COLUMNS": "200",
        },
        cpus={0},
    )
    ready = wait_http_ok(target.proc, f"http://127.0.0.1:{port}/healthz", timeout=30)
    target.startup_s = ready - spawned
    return target


def litellm_version(venv: Path) -> str | None:
    python = venv / "bin" / "python"
    if not (venv / "bin" / "litellm").exists() or not python.exists():
        return None
    found = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() or None


def start_litellm(procs: Processes, workdir: Path, upstream_port: int, venv: Path) -> Target:
    config = workdir / "litellm-bench.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: bench-model\n"
        "    litellm_params:\n"
        "      model: openai/fake-model\n"
        f"      api_base: http://127.0.0.1:{upstream_port}/v1\n"
        f"      api_key: os.environ/{UPSTREAM_KEY_ENV}\n"
        "litellm_settings:\n"
        "  num_retries: 0\n"
        "  request_timeout: 120\n"
        "  callbacks: []\n"
        "  success_callback: []\n"
        "  failure_callback: []\n"
        "  telemetry: false\n"
        "router_settings:\n"
        "  num_retries: 0\n"
        "general_settings:\n"
        "  disable_spend_logs: true\n"
        "  disable_error_logs: true\n"
    )
    # Same as toolwire: no access log line per request.
    log_config = workdir / "litellm-logging.json"
    log_config.write_text(
        json.dumps(
            {
                "version": 1,
                "disable_existing_loggers": False,
                "handlers": {
                    "err": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
                },
                "root": {"level": "WARNING", "handlers": ["err"]},
                "loggers": {
                    "uvicorn.access": {"level": "WARNING", "handlers": [], "propagate": False}
                },
            }
        )
    )
    port = free_port()
    target = Target(name="litellm", port=port, path="/v1/chat/completions", model="bench-model")
    spawned = time.monotonic()
    target.proc = procs.start(
        "litellm",
        [
            str(venv / "bin" / "litellm"),
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num_workers",
            "1",
            "--log_config",
            str(log_config),
        ],
        env={
            UPSTREAM_KEY_ENV: "bench-upstream-key",
            "LITELLM_MASTER_KEY": GATEWAY_KEY,
            "LITELLM_LOG": "ERROR",
            "LITELLM_TELEMETRY": "False",
            "NO_DOCS": "True",
        },
        cpus={0},
    )
    ready = wait_http_ok(target.proc, f"http://127.0.0.1:{port}/health/liveliness", timeout=120)
    target.startup_s = ready - spawned
    return target


def probe_chat(target: Target) -> str | None:
    """One request by hand; None if it answered 200, else why the target has no figures."""
    url = f"http://127.0.0.1:{target.port}{target.path}"
    body = chat_body(target.model, stream=False, tools=[WEATHER_TOOL])
    try:
        answer = httpx.post(
            url,
            content=body,
            headers={"content-type": "application/json", "authorization": f"Bearer {GATEWAY_KEY}"},
            timeout=60,
        )
    except httpx.HTTPError as exc:
        return f"n/a ({type(exc).__name__}: {exc})"
    if answer.status_code == 404:
        return "n/a (endpoint missing)"
    if answer.status_code != 200:
        return f"n/a (HTTP {answer.status_code}: {answer.text[:200]})"
    return None


# --- load generator --------------------------------------------------------------------


class LoadGen:
    """The load generator process, driven by JSON lines."""

    def __init__(self, procs: Processes) -> None:
        self.proc = procs.start(
            "loadgen",
            [sys.executable, str(HERE / "gateway_loadgen.py")],
            cpus={1},
            stdout_pipe=True,
            stdin_pipe=True,
        )

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self.proc.popen.stdin
        assert stdin is not None
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()

    def _receive(self) -> dict[str, Any]:
        stdout = self.proc.popen.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise BenchError(f"the load generator exited:\n{self.proc.log_tail()}")
        reply: dict[str, Any] = json.loads(line)
        if reply.get("event") == "error":
            raise BenchError(f"load generator: {reply['message']}")
        return reply

    def prepare(
        self,
        target: Target,
        body: str,
        *,
        stream: bool,
        concurrency: int,
        requests: int,
        duration: float,
        warmup: int,
        save_body: str | None = None,
    ) -> None:
        self._send(
            {
                "op": "prepare",
                "host": "127.0.0.1",
                "port": target.port,
                "path": target.path,
                "key": GATEWAY_KEY,
                "body": body,
                "stream": stream,
                "concurrency": concurrency,
                "requests": requests,
                "duration": duration,
                "warmup": warmup,
                "save_body": save_body,
            }
        )
        self._receive()

    def go(self) -> dict[str, Any]:
        self._send({"op": "go"})
        return self._receive()

    def quit(self) -> None:
        with contextlib.suppress(OSError):
            self._send({"op": "quit"})


@contextlib.contextmanager
def rss_peak(pid: int | None, on_peak: Callable[[float], None]) -> Iterator[None]:
    """Sample the RSS of `pid`'s tree every 50 ms while the block runs."""
    if pid is None:
        yield
        return
    stop = threading.Event()
    peak = [0.0]

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            stop.wait(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        on_peak(peak[0])


def measure(
    gen: LoadGen,
    target: Target,
    measured_pid: int,
    scenario: str,
    stream: bool,
    concurrency: int,
    opts: argparse.Namespace,
) -> dict[str, Any]:
    body = chat_body(target.model, stream=stream, tools=[WEATHER_TOOL])
    gen.prepare(
        target,
        body,
        stream=stream,
        concurrency=concurrency,
        requests=opts.c1_requests if concurrency == 1 else 10**9,
        duration=opts.duration,
        warmup=opts.warmup if concurrency == 1 else concurrency,
    )
    gateway_pid = target.proc.pid if target.proc else None

    def keep_peak(value: float) -> None:
        target.rss_peak = max(target.rss_peak, value)

    with rss_peak(gateway_pid, keep_peak):
        cpu_before = cpu_seconds(measured_pid)
        result = gen.go()
        cpu_after = cpu_seconds(measured_pid)
    result["cpu"] = cpu_after - cpu_before
    result["scenario"] = scenario
    if result["errors"]:
        target.errors += result["errors"]
        target.first_error = target.first_error or result["first_error"]
    return result


# --- figures ---------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def pooled(target: Target, scenario: str, key: str) -> list[float]:
    return [v for run in target.runs.get(scenario, []) for v in run[key]]


def rps(target: Target, scenario: str) -> float | None:
    runs = target.runs.get(scenario, [])
    rates = [run["count"] / run["elapsed"] for run in runs if run["elapsed"] > 0]
    return statistics.median(rates) if rates else None


def cpu_ms_per_request(target: Target, scenario: str) -> float | None:
    runs = target.runs.get(scenario, [])
    count = sum(run["count"] for run in runs)
    return 1000 * sum(run["cpu"] for run in runs) / count if count else None


def ms(value: float | None, digits: int = 2) -> str:
    return "—" if value is None or value != value else f"{value * 1000:.{digits}f}"


def check(met: bool | None) -> str:
    return "" if met is None else (" ✓" if met else " ✗")


@dataclass(kw_only=True)
class Hermes:
    cpu_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    verdict: str = "not run"


def run_hermes(gen: LoadGen, target: Target, opts: argparse.Namespace, workdir: Path) -> Hermes:
    """Stream the 128 KB Hermes call through toolwire, one request at a time."""
    from gateway_fake_upstream import HERMES_TOOL, hermes_argument

    out = Hermes()
    assert target.proc is not None
    saved = workdir / "hermes-response.txt"
    hermes = Target(name="toolwire", port=target.port, path=target.path, model="bench-hermes")
    # Warm the parse path on a 1 KB argument, then measure the 128 KB one.
    warm = Target(name="toolwire", port=target.port, path=target.path, model="bench-hermes-warm")
    body = chat_body(warm.model, stream=True, tools=[WRITE_FILE_TOOL])
    gen.prepare(warm, body, stream=True, concurrency=1, requests=3, duration=30, warmup=3)
    gen.go()
    body = chat_body("bench-hermes", stream=True, tools=[WRITE_FILE_TOOL])
    gen.prepare(
        hermes,
        body,
        stream=True,
        concurrency=1,
        requests=1,
        duration=120,
        warmup=0,
        save_body=str(saved),
    )
    for _ in range(opts.hermes_runs):
        before = cpu_seconds(target.proc.pid)
        result = gen.go()
        after = cpu_seconds(target.proc.pid)
        if result["errors"]:
            out.verdict = f"error: {result['first_error']}"
            return out
        out.cpu_ms.append((after - before) * 1000)
        out.wall_ms.append(result["latency"][0] * 1000)
    # What the client got back must be the whole call, argument intact.
    name, arguments = "", []
    for line in saved.read_text().splitlines():
        if not line.startswith("data: {"):
            continue
        for choice in json.loads(line[6:]).get("choices", []):
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                function = call.get("function") or {}
                name += function.get("name") or ""
                arguments.append(function.get("arguments") or "")
    try:
        parsed = json.loads("".join(arguments))
    except json.JSONDecodeError:
        parsed = None
    expected = hermes_argument(opts.hermes_kb)
    deltas = sum(1 for a in arguments if a)
    if name == HERMES_TOOL and isinstance(parsed, dict) and parsed.get("content") == expected:
        out.verdict = (
            f"argument intact, sent to the client in {deltas} delta{'' if deltas == 1 else 's'}"
        )
    else:
        out.verdict = f"WRONG: tool {name!r}, {len(''.join(arguments))} argument characters"
    return out


def print_round_line(rnd: int, target: Target, result: dict[str, Any]) -> None:
    lat = result["latency"]
    line = (
        f"  round {rnd} {target.name:<9} {SCENARIO_LABEL[result['scenario']]:<16}"
        f"{result['count']:>7} req  {result['count'] / max(result['elapsed'], 1e-9):8.0f}/s"
        f"  p50 {ms(percentile(lat, 50))} ms  p99 {ms(percentile(lat, 99))} ms"
    )
    if result["scenario"].endswith("s"):
        line += f"  ttfb p50 {ms(percentile(result['ttfb'], 50))} ms"
    if result["count"]:
        who = "upstream" if target.proc is None else "gateway"
        line += f"  {who} CPU {result['cpu'] * 1000 / result['count']:.2f} ms/req"
    if result["errors"]:
        line += f"  ERRORS {result['errors']} ({result['first_error']})"
    print(line, flush=True)


def build_table(
    targets: dict[str, Target],
    hermes: Hermes | None,
    opts: argparse.Namespace,
    command: str,
    versions: str,
) -> str:
    direct = targets["direct"]
    names: list[str] = [n for n in ("direct", "toolwire", "litellm") if n in targets]
    header = {"direct": "direct", "toolwire": "toolwire", "litellm": "LiteLLM"}

    def cell(name: str, render: Callable[[Target], str], always: bool) -> str:
        target = targets[name]
        if target.unavailable and not (always and target.proc is not None):
            return target.unavailable
        return render(target)

    rows: list[tuple[str, dict[str, str], str]] = []

    def row(
        label: str,
        render: Callable[[Target], str],
        target_text: str = "",
        only: tuple[str, ...] | None = None,
        always: bool = False,
    ) -> None:
        # `always`: figures that exist without the chat endpoint (start-up, idle RSS).
        cells = {n: (cell(n, render, always) if only is None or n in only else "—") for n in names}
        rows.append((label, cells, target_text))

    def lat(scenario: str, key: str, q: float) -> Callable[[Target], str]:
        return lambda t: ms(percentile(pooled(t, scenario, key), q))

    def added(scenario: str, key: str, q: float) -> Callable[[Target], str]:
        base = percentile(pooled(direct, scenario, key), q)
        return lambda t: f"+{ms(percentile(pooled(t, scenario, key), q) - base)}"

    tw = targets.get("toolwire")
    tw_ok = tw is not None and not tw.unavailable

    def tw_added(scenario: str, key: str, q: float) -> float | None:
        if not tw_ok or tw is None:
            return None
        return percentile(pooled(tw, scenario, key), q) - percentile(
            pooled(direct, scenario, key), q
        )

    gateways = ("toolwire", "litellm")
    row(
        "c=1 non-stream latency p50 / p99 (ms)",
        lambda t: f"{lat('c1', 'latency', 50)(t)} / {lat('c1', 'latency', 99)(t)}",
    )
    a50, a99 = tw_added("c1", "latency", 50), tw_added("c1", "latency", 99)
    row(
        "added vs direct, p50 / p99 (ms)",
        lambda t: f"{added('c1', 'latency', 50)(t)} / {added('c1', 'latency', 99)(t)}",
        "< 1 / < 3" + check(None if a50 is None or a99 is None else a50 < 1e-3 and a99 < 3e-3),
        only=gateways,
    )
    row("c=1 stream, time to first `data:` p50 (ms)", lat("c1s", "ttfb", 50))
    t50 = tw_added("c1s", "ttfb", 50)
    row(
        "TTFB added vs direct, p50 (ms)",
        added("c1s", "ttfb", 50),
        "< 2" + check(None if t50 is None else t50 < 2e-3),
        only=gateways,
    )
    row(
        "c=1 stream, 20 chunks total p50 / p99 (ms)",
        lambda t: f"{lat('c1s', 'latency', 50)(t)} / {lat('c1s', 'latency', 99)(t)}",
    )

    lite = targets.get("litellm")
    lite_ok = lite is not None and not lite.unavailable

    def ratio(scenario: str) -> float | None:
        if not (tw_ok and lite_ok and tw and lite):
            return None
        a, b = rps(tw, scenario), rps(lite, scenario)
        return a / b if a and b else None

    def rate(scenario: str) -> Callable[[Target], str]:
        def render(t: Target) -> str:
            value = rps(t, scenario)
            return "—" if value is None else f"{value:.0f}"

        return render

    r1, r2 = ratio("c32"), ratio("c32s")
    row("c=32 non-stream, requests/s", rate("c32"))
    row("c=32 stream, streams/s", rate("c32s"))
    ratio_text = "n/a" if r1 is None or r2 is None else f"{r1:.1f}× / {r2:.1f}×"
    rows.append(
        (
            "toolwire / LiteLLM, requests/s (non-stream / stream)",
            {n: (ratio_text if n == "toolwire" else "—") for n in names},
            "≥ 10× / ≥ 10×" + check(None if r1 is None or r2 is None else r1 >= 10 and r2 >= 10),
        )
    )

    def cpu(scenario: str) -> Callable[[Target], str]:
        def render(t: Target) -> str:
            value = cpu_ms_per_request(t, scenario)
            text = "—" if value is None else f"{value:.2f}"
            return f"({text} upstream)" if t.proc is None else text

        return render

    row("CPU ms per request, c=1 non-stream", cpu("c1"))
    row("CPU ms per request, c=32 non-stream", cpu("c32"))
    row("CPU ms per 20-chunk stream, c=32", cpu("c32s"))

    def rss_idle(t: Target) -> str:
        return "—" if t.rss_idle is None else f"{t.rss_idle:.0f}"

    def rss_rounds(t: Target) -> str:
        return " → ".join(f"{v:.0f}" for v in t.rss_rounds) or "—"

    def rss_load(t: Target) -> str:
        return f"{t.rss_peak:.0f}" if t.rss_peak else "—"

    tw_rss = None
    if tw_ok and tw is not None and tw.rss_idle is not None:
        tw_rss = max([tw.rss_idle, tw.rss_peak, *tw.rss_rounds]) < 100
    row("RSS MB idle", rss_idle, "< 100", only=gateways, always=True)
    flat = None
    if tw_ok and tw is not None and len(tw.rss_rounds) >= 2:
        # Flat: the last round holds no more than the first plus a little noise.
        flat = tw.rss_rounds[-1] - tw.rss_rounds[0] <= max(3.0, 0.05 * tw.rss_rounds[0])
    row("RSS MB after each round", rss_rounds, "flat" + check(flat), only=gateways)
    row("RSS MB peak under load", rss_load, "< 100" + check(tw_rss), only=gateways)
    tw_start = tw.startup_s if tw is not None and tw.startup_s is not None else None
    row(
        "start-up, spawn → first health 200 (s)",
        lambda t: "—" if t.startup_s is None else f"{t.startup_s:.2f}",
        "< 1" + check(None if tw_start is None else tw_start < 1),
        only=gateways,
        always=True,
    )

    hermes_text = "—"
    hermes_met: bool | None = None
    if hermes is not None and hermes.cpu_ms:
        value = statistics.median(hermes.cpu_ms)
        hermes_text = (
            f"{value:.0f} (wall {statistics.median(hermes.wall_ms):.0f} ms; {hermes.verdict})"
        )
        hermes_met = value < 300
    elif hermes is not None:
        hermes_text = hermes.verdict
    elif tw is not None and tw.unavailable:
        hermes_text = tw.unavailable
    rows.append(
        (
            f"`parse:hermes` {opts.hermes_kb} KB argument, 1-char deltas: gateway CPU ms",
            {n: (hermes_text if n == "toolwire" else "—") for n in names},
            "< 300" + check(hermes_met),
        )
    )

    lines = [
        f"`{command}`",
        "",
        versions,
        "",
        "| measurement | " + " | ".join(header[n] for n in names) + " | target (toolwire) |",
        "|---|" + "---:|" * len(names) + "---|",
    ]
    for label, cells, target_text in rows:
        lines.append(f"| {label} | " + " | ".join(cells[n] for n in names) + f" | {target_text} |")
    notes = [
        f"{t.name}: {t.errors} failed responses during the runs (first: {t.first_error})"
        for t in targets.values()
        if t.errors
    ]
    for name in ("toolwire", "litellm"):
        gateway = targets.get(name)
        if gateway is None or gateway.unavailable:
            continue
        wall = percentile(pooled(gateway, "c1", "latency"), 50) - percentile(
            pooled(direct, "c1", "latency"), 50
        )
        cpu_each = cpu_ms_per_request(gateway, "c1")
        if cpu_each is not None and wall * 1000 > max(20.0, 4 * cpu_each):
            notes.append(
                f"{header[name]}: c=1 adds {wall * 1000:.1f} ms p50 but uses only "
                f"{cpu_each:.2f} ms CPU per request: it waits rather than computes — e.g. "
                "Nagle + delayed ACK (a listening socket without TCP_NODELAY), or a busy CPU"
            )
    if notes:
        lines += ["", *(f"- {n}" for n in notes)]
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Gateway overhead: direct vs. toolwire vs. the LiteLLM proxy."
    )
    parser.add_argument("--quick", action="store_true", help="2 short rounds (~1 minute)")
    parser.add_argument(
        "--rounds", type=int, help="rounds of alternating targets (default 4; quick 2)"
    )
    parser.add_argument(
        "--duration", type=float, help="seconds per measurement at most (default 4; quick 1)"
    )
    parser.add_argument(
        "--c1-requests",
        type=int,
        help="requests per c=1 measurement at most (default 4000; quick 1500)",
    )
    parser.add_argument("--warmup", type=int, default=50, help="warm-up requests before c=1 runs")
    parser.add_argument(
        "--targets",
        default="direct,toolwire,litellm",
        help="comma-separated subset of direct,toolwire,litellm",
    )
    parser.add_argument(
        "--litellm-venv",
        type=Path,
        default=DEFAULT_LITELLM_VENV,
        help="virtualenv with litellm[proxy] (default: benchmarks/.venv-litellm)",
    )
    parser.add_argument("--hermes-kb", type=int, default=128)
    parser.add_argument(
        "--hermes-runs", type=int, help="parse:hermes requests (default 3; quick 1)"
    )
    pin = parser.add_mutually_exclusive_group()
    pin.add_argument(
        "--pin",
        dest="pin",
        action="store_true",
        default=None,
        help="gateway on CPU 0, upstream and load generator on CPU 1 (default on 2+ CPUs)",
    )
    pin.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the process logs (printed path)"
    )
    opts = parser.parse_args()
    opts.rounds = opts.rounds or (2 if opts.quick else 4)
    opts.duration = opts.duration or (1.0 if opts.quick else 4.0)
    opts.c1_requests = opts.c1_requests or (1500 if opts.quick else 4000)
    opts.hermes_runs = opts.hermes_runs or (1 if opts.quick else 3)
    if opts.pin is None:
        opts.pin = len(os.sched_getaffinity(0)) >= 2 and {0, 1} <= os.sched_getaffinity(0)
    opts.targets = [t.strip() for t in opts.targets.split(",") if t.strip()]
    unknown = set(opts.targets) - {"direct", "toolwire", "litellm"}
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; use direct, toolwire, litellm")
    if "direct" not in opts.targets:
        opts.targets.insert(0, "direct")  # the baseline every "added" figure needs
    return opts


def main() -> int:
    opts = parse_args()
    command = "python " + shlex.join(
        [os.path.relpath(sys.argv[0]) if Path(sys.argv[0]).exists() else sys.argv[0], *sys.argv[1:]]
    )
    # SIGTERM (e.g. a timeout) should still run the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    procs = Processes(workdir, opts.pin)
    targets: dict[str, Target] = {}
    hermes: Hermes | None = None
    started = time.monotonic()
    lite_version = litellm_version(opts.litellm_venv) if "litellm" in opts.targets else None
    try:
        tw_version: str | None = importlib.metadata.version("toolwire")
    except importlib.metadata.PackageNotFoundError:
        tw_version = None
    print(f"$ {command}")
    print(
        f"logs and configs: {workdir}; pinning: {'on' if opts.pin else 'off'}; "
        f"{opts.rounds} rounds, ≤ {opts.duration:g} s per measurement",
        flush=True,
    )
    try:
        upstream, upstream_port = start_upstream(procs, opts.hermes_kb)
        targets["direct"] = Target(
            name="direct", port=upstream_port, path="/v1/chat/completions", model="fake-model"
        )
        if "toolwire" in opts.targets:
            if tw_version is None:
                targets["toolwire"] = Target(
                    name="toolwire",
                    port=0,
                    path="",
                    model="",
                    unavailable="n/a (toolwire not importable)",
                )
            else:
                target = start_toolwire(procs, workdir, upstream_port)
                assert target.proc is not None
                time.sleep(0.3)
                target.rss_idle = rss_mb(target.proc.pid)
                target.unavailable = probe_chat(target)
                targets["toolwire"] = target
                print(
                    f"toolwire {tw_version}: ready in {target.startup_s:.2f} s, "
                    f"idle RSS {target.rss_idle:.0f} MB"
                    + (f" — {target.unavailable}" if target.unavailable else ""),
                    flush=True,
                )
        if "litellm" in opts.targets:
            if lite_version is None:
                print(
                    f"LiteLLM is not installed in {opts.litellm_venv}; its rows are n/a.\n"
                    "  Install it with: bash benchmarks/setup_litellm.sh "
                    "(creates benchmarks/.venv-litellm with pip install 'litellm[proxy]')",
                    flush=True,
                )
                targets["litellm"] = Target(
                    name="litellm", port=0, path="", model="", unavailable="n/a (not installed)"
                )
            else:
                target = start_litellm(procs, workdir, upstream_port, opts.litellm_venv)
                assert target.proc is not None
                time.sleep(0.3)
                target.rss_idle = rss_mb(target.proc.pid)
                target.unavailable = probe_chat(target)
                targets["litellm"] = target
                print(
                    f"LiteLLM {lite_version}: ready in {target.startup_s:.2f} s, "
                    f"idle RSS {target.rss_idle:.0f} MB"
                    + (f" — {target.unavailable}" if target.unavailable else ""),
                    flush=True,
                )

        gen = LoadGen(procs)
        order = [targets[n] for n in ("direct", "toolwire", "litellm") if n in targets]
        for rnd in range(1, opts.rounds + 1):
            for target in order:
                if target.unavailable:
                    continue
                measured = target.proc.pid if target.proc else upstream.pid
                for scenario, stream, concurrency in SCENARIOS:
                    result = measure(gen, target, measured, scenario, stream, concurrency, opts)
                    target.runs.setdefault(scenario, []).append(result)
                    print_round_line(rnd, target, result)
                if target.proc is not None:
                    target.rss_rounds.append(rss_mb(target.proc.pid))
        tw = targets.get("toolwire")
        if tw is not None and not tw.unavailable:
            print("parse:hermes through toolwire ...", flush=True)
            hermes = run_hermes(gen, tw, opts, workdir)
            print(
                f"  gateway CPU {', '.join(f'{v:.0f}' for v in hermes.cpu_ms)} ms; "
                f"{hermes.verdict}",
                flush=True,
            )
        gen.quit()
    except BenchError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop_all()
        if not opts.keep_logs:
            for path in sorted(workdir.iterdir(), reverse=True):
                with contextlib.suppress(OSError):
                    path.unlink()
            with contextlib.suppress(OSError):
                workdir.rmdir()

    versions = (
        f"{datetime.date.today().isoformat()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs (pinning {'on' if opts.pin else 'off'}), "
        f"toolwire {tw_version or 'n/a'}, LiteLLM {lite_version or 'not installed'}, "
        f"{opts.rounds} alternating rounds, ≤ {opts.duration:g} s per measurement; "
        f"total {time.monotonic() - started:.0f} s"
    )
    print()
    print(build_table(targets, hermes, opts, command, versions))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
