"""Routing with real processes: two model servers behind one `toolwire serve`, one of them
killed (SIGKILL) while clients keep sending; no client sees an error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from served import ServeProcess

FAKE_UPSTREAM = Path(__file__).parents[3] / "benchmarks" / "gateway_fake_upstream.py"


class Upstream:
    """`benchmarks/gateway_fake_upstream.py` as a process: a cheap OpenAI-shaped server."""

    def __init__(self, cost_ms: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE_UPSTREAM), "--cost-ms", str(cost_ms), "--hermes-kb", "1"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("listening on "), line
        self.base_url = f"http://127.0.0.1:{int(line.split()[-1])}/v1"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def upstreams() -> Iterator[tuple[Upstream, Upstream]]:
    pair = (Upstream(cost_ms=2), Upstream(cost_ms=2))
    yield pair
    for upstream in pair:
        upstream.kill()


def test_killing_a_deployment_under_load_costs_no_client_error(
    upstreams: tuple[Upstream, Upstream], tmp_path: Path
) -> None:
    a, b = upstreams
    config = {
        "upstreams": {
            "a": {"kind": "openai", "base_url": a.base_url, "retries": 0, "timeout": 5},
            "b": {"kind": "openai", "base_url": b.base_url, "retries": 0, "timeout": 5},
        },
        "models": {
            "fake-model": {
                "deployments": [
                    {"upstream": "a", "model": "fake-model"},
                    {"upstream": "b", "model": "fake-model"},
                ]
            }
        },
        "routing": {"cooldown": {"failures": 1, "seconds": 60}},
        "store": "memory",
    }
    path = tmp_path / "toolwire.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": ":".join(sys.path)}
    gateway = ServeProcess(path, env)
    outcomes: list[int | str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(stream: bool) -> None:
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
        with httpx.Client(base_url=gateway.url, timeout=10) as http:
            while not stop.is_set():
                try:
                    with http.stream(
                        "POST", "/v1/chat/completions", json={**body, "stream": stream}
                    ) as r:
                        text = r.read().decode()
                        ok = r.status_code == 200 and (
                            "[DONE]" in text if stream else "choices" in text
                        )
                        outcome: int | str = (
                            r.status_code if ok else f"{r.status_code}: {text[:200]}"
                        )
                except httpx.HTTPError as exc:
                    outcome = f"transport: {exc!r}"
                with lock:
                    outcomes.append(outcome)

    threads = [threading.Thread(target=client, args=(i % 2 == 0,)) for i in range(6)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        before = len(outcomes)
        a.kill()
        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join(timeout=15)
    finally:
        stop.set()
        gateway.stop()
    failures = [o for o in outcomes if o != 200]
    assert failures == []
    # Load went on after the kill, all of it on b.
    assert before > 20
    assert len(outcomes) - before > 20
    log = "".join(gateway.output)
    assert "deployment a/fake-model failed" in log
