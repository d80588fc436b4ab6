"""Looking at processes the tests started: is one still running, is its port open."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

__all__ = ["alive", "wait_for_port"]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended but not yet reaped, does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_port(port: int, proc: subprocess.Popen[bytes], seconds: float = 20) -> None:
    """Wait until something accepts on 127.0.0.1:`port`, failing if `proc` exits first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"the server exited with {proc.returncode}") from None
            time.sleep(0.05)
    raise AssertionError(f"nothing accepted on port {port} within {seconds} s")
