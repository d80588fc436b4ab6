"""The real model servers of the end-to-end suite, and `toolwire serve` in front of them.

The engines and the model are built (or found) by `scripts/e2e_engines.py`, once per
machine; here they are started on free loopback ports and stopped by their PID. The
benchmark `benchmarks/bench_engines.py` uses the same helpers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import toolwire

__all__ = [
    "BUILD_SCRIPT",
    "TEMPLATE",
    "EngineProcess",
    "Engines",
    "GatewayProcess",
    "find_engines",
    "llama_cpp_python_server",
    "llama_server",
]

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "e2e_engines.py"
TEMPLATE = Path(__file__).with_name("smollm2_hermes.jinja")
"""SmolLM2's template has no tool section; llama-server gets this Hermes-style one."""

THREADS = "2"
"""Threads per engine: the CI machines have 2 cores, shared."""
CONTEXT = "4096"


@dataclass(frozen=True, slots=True, kw_only=True)
class Engines:
    """What `scripts/e2e_engines.py` built."""

    model: Path
    llama_server: Path
    llama_cpp_python: Path
    """The Python of the virtualenv llama-cpp-python's server is installed in."""


def find_engines(*, build: bool) -> tuple[Engines, list[str], str]:
    """Where the engines are; when some are missing, build them (`build`) or say how.

    Returns:
        The paths, what is still missing, and the advice for a skip: the command that
        builds it and how long it takes.
    """
    action = "build" if build else "find"
    done = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), action],
        stdout=subprocess.PIPE,
        # A build's progress goes to the terminal (pytest -s) or the captured output.
        stderr=None if build else subprocess.DEVNULL,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT} {action} failed ({done.returncode}): {done.stdout}")
    found = json.loads(done.stdout)
    engines = Engines(
        model=Path(found["model"]),
        llama_server=Path(found["llama_server"]),
        llama_cpp_python=Path(found["llama_cpp_python"]),
    )
    advice = (
        f"run `{found['build_command']}` once ({found['build_time']}; cached in "
        "~/.cache/toolwire-e2e)"
    )
    return engines, found["missing"], advice


def temp_file(prefix: str, suffix: str) -> Path:
    """A new empty file in the temporary directory (its descriptor closed)."""
    fd, name = tempfile.mkstemp(prefix=f"toolwire-e2e-{prefix}-", suffix=suffix)
    os.close(fd)
    return Path(name)


def free_port() -> int:
    """A port nothing listens on now (the engine binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class EngineProcess:
    """A model server subprocess on 127.0.0.1; `stop()` ends it by its PID.

    Its output goes to a log file, shown when it fails to start and removed when it stops.

    Args:
        name: For messages.
        command: The command, given the port to listen on.
        ready: The path that answers 200 once the model is loaded.
        files: Files of its own (a config) to remove when it stops.
        timeout: Seconds to wait for `ready`.
    """

    def __init__(
        self,
        name: str,
        command: Callable[[int], list[str]],
        ready: str,
        *,
        files: Sequence[Path] = (),
        timeout: float = 120,
    ) -> None:
        self.name = name
        self.log = temp_file(name, ".log")
        self._files = [self.log, *files]
        self.timed_out = False
        # A port taken between `free_port` and the bind: try another one.
        for _ in range(3):
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            with self.log.open("wb") as out:
                self.proc = subprocess.Popen(
                    command(self.port), stdout=out, stderr=subprocess.STDOUT
                )
            if self._wait_ready(ready, timeout):
                return
            if "address already in use" not in self.log.read_text(errors="replace").lower():
                break
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        self._files.remove(self.log)  # kept: the error names it
        code = self.proc.poll()
        self.stop()
        if code is None or self.timed_out:
            how = f"did not answer {ready} within {timeout:g} s"
        elif code < 0:
            # A signal: a CPU feature the build assumed and this machine lacks (SIGILL),
            # or one the OS does not enable (AMX: a SIGSEGV), shows as nothing in the log.
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        raise RuntimeError(f"{name} did not start: it {how} (log {self.log}):\n{tail}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_ready(self, path: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                with contextlib.suppress(httpx.TransportError):
                    if http.get(self.url + path).status_code == 200:
                        return True
                time.sleep(0.1)
        self._end()  # its log stays, for the error to show
        self.timed_out = True
        return False

    def stop(self) -> None:
        """SIGTERM to the PID, SIGKILL if it is still there after 10 s; then its files go."""
        self._end()
        for path in self._files:
            path.unlink(missing_ok=True)

    def _end(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def llama_server(engines: Engines, *extra: str) -> EngineProcess:
    """llama.cpp's `llama-server` with SmolLM2 and the Hermes template, one slot."""

    def command(port: int) -> list[str]:
        return [
            str(engines.llama_server),
            "--model",
            str(engines.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--jinja",
            "--chat-template-file",
            str(TEMPLATE),
            "--ctx-size",
            CONTEXT,
            "--parallel",
            "1",
            "--threads",
            THREADS,
            "--slots",
            *extra,
        ]

    return EngineProcess("llama-server", command, "/health")


LLAMA_CPP_PYTHON_MODELS = {
    "smollm2-fc": "chatml-function-calling",
    "smollm2-chatml": "chatml",
}
"""llama-cpp-python's model aliases: its native tool calls (`chatml-function-calling`),
and plain ChatML, which writes calls as text only (for `parse:` mode)."""


def llama_cpp_python_server(engines: Engines) -> EngineProcess:
    """llama-cpp-python's OpenAI-compatible server, SmolLM2 under two chat formats."""
    config = temp_file("llama-cpp-python", ".json")

    def command(port: int) -> list[str]:
        models = [
            {
                "model": str(engines.model),
                "model_alias": alias,
                "chat_format": chat_format,
                "n_ctx": int(CONTEXT),
                "n_threads": int(THREADS),
                "verbose": False,
            }
            for alias, chat_format in LLAMA_CPP_PYTHON_MODELS.items()
        ]
        config.write_text(json.dumps({"host": "127.0.0.1", "port": port, "models": models}))
        server = [str(engines.llama_cpp_python), "-m", "llama_cpp.server"]
        return [*server, "--config_file", str(config)]

    return EngineProcess("llama-cpp-python", command, "/v1/models", files=[config])


class GatewayProcess:
    """`toolwire serve` as a subprocess with a config of its own, on a free port.

    Args:
        config: The gateway config (written to a file as JSON, which is YAML).
        env: Extra environment variables.
    """

    def __init__(self, config: dict[str, Any], env: dict[str, str] | None = None) -> None:
        self.config_file = temp_file("gateway", ".yaml")
        self.config_file.write_text(json.dumps({"store": "memory", **config}))
        source = str(Path(toolwire.__file__).resolve().parents[1])
        path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
        environ = {**os.environ, "PYTHONPATH": path, "TOOLWIRE_LOG_LEVEL": "warning", **(env or {})}
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "toolwire.cli.main", "serve"),
                *("-c", str(self.config_file), "--port", "0", "--no-access-log"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environ,
        )
        assert self.proc.stdout is not None
        self.output: list[str] = []
        for line in self.proc.stdout:
            self.output.append(line)
            match = re.search(r"listening on (http://\S+)/v1", line)
            if match:
                self.url = match.group(1)
                break
        else:
            raise RuntimeError("toolwire serve did not start:\n" + "".join(self.output))
        # Keep reading its output so the pipe never fills up.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.config_file.unlink(missing_ok=True)


def upstream(server: EngineProcess, models: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The gateway's `upstream` section for `server` (a route per public model id)."""
    return {"kind": "openai", "base_url": f"{server.url}/v1", "models": models, **extra}
