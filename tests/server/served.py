"""`toolwire serve` as a real subprocess, for tests of what only a process shows:
signals, crashes, workers, the socket."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

__all__ = ["ServeProcess"]


class ServeProcess:
    """`toolwire serve` as a subprocess; `kill()` is SIGKILL, as a crash."""

    def __init__(self, config: Path, env: dict[str, str], *extra: str) -> None:
        command = ["serve", "-c", str(config), "--port", "0", *extra]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolwire.cli.main", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        seen: list[str] = []
        for line in self.proc.stdout:
            seen.append(line)
            match = re.search(r"listening on (http://\S+)/v1", line)
            if match:
                self.url = match.group(1)
                break
        else:
            raise AssertionError("toolwire serve did not start:\n" + "".join(seen))
        # Keep reading the output so the pipe never fills up.
        self.output: list[str] = seen
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()
        with httpx.Client(timeout=5) as http:
            for _ in range(500):
                with contextlib.suppress(httpx.TransportError):
                    if http.get(f"{self.url}/healthz").status_code == 200:
                        return
                threading.Event().wait(0.01)
        raise AssertionError("toolwire serve never answered /healthz")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=15)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self._close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
        self._close()

    def _close(self) -> None:
        self.proc.wait(timeout=10)
        self._drain.join(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
