"""Approval round trip through the gateway, per store backend, and the store's cost on
requests without server tools.

Run: `python benchmarks/bench_approvals.py [--rounds 200] [--redis redis://127.0.0.1:6379/15]`
(prints figures; no assertions).

1. Round trip: `POST /v1/chat/completions` (a destructive server tool pauses the run) →
   `POST /v1/approvals/{id}` → `POST /v1/runs/{id}/resume` → the answer. Median and p95
   in ms for `memory`, `sqlite` (a file in a temporary directory), `redis` and `postgres`
   (a schema of its own), each
   through a real uvicorn socket with the offline model (no upstream network).
2. Requests without server tools: median ms per chat request of a gateway whose store is
   `memory` against one whose store is an unreachable Redis — side by side, alternating
   rounds. The figures match because that path never touches the store.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from toolwire.server import GatewayConfig, create_app

TOOLS = '''
from toolwire import tool


@tool(effects="destructive")
def delete_application(app_name: str) -> str:
    """Delete an application by name."""
    return f"deleted {app_name}"
'''
ASK = {
    "model": "toolwire-offline",
    "messages": [{"role": "user", "content": "Delete the application demo-app"}],
}
HELLO = {"model": "toolwire-offline", "messages": [{"role": "user", "content": "Hello there"}]}


@contextlib.contextmanager
def serve(config: GatewayConfig) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(config), log_level="error", lifespan="on", access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the gateway did not start")
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def round_trip(http: httpx.Client) -> float:
    start = time.perf_counter()
    paused = http.post("/v1/chat/completions", json=ASK).json()["toolwire"]
    approval = paused["pending_approvals"][0]["id"]
    decided = http.post(f"/v1/approvals/{approval}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    answer = http.post(f"/v1/runs/{paused['run_id']}/resume")
    assert answer.status_code == 200, answer.text
    return (time.perf_counter() - start) * 1000


def bench_round_trips(stores: dict[str, str], tools: Path, rounds: int) -> None:
    print(f"1. approval round trip (chat → approve → resume → answer), {rounds} rounds")
    print(f"   {'store':<8} {'median ms':>10} {'p95 ms':>8}")
    for name, url in stores.items():
        config = GatewayConfig.model_validate(
            {"server_tools": {"modules": [str(tools)]}, "store": url}
        )
        try:
            with serve(config) as base, httpx.Client(base_url=base, timeout=30) as http:
                for _ in range(10):
                    round_trip(http)
                times = sorted(round_trip(http) for _ in range(rounds))
        except Exception as exc:  # a backend that is not reachable here
            print(f"   {name:<8} skipped: {' '.join(str(exc).split())[:100]}")
            continue
        p95 = times[int(len(times) * 0.95) - 1]
        print(f"   {name:<8} {statistics.median(times):>10.2f} {p95:>8.2f}")


def bench_no_server_tools(rounds: int) -> None:
    print(f"\n2. chat requests without server tools, {rounds} rounds each, alternating")
    configs = {
        "store: memory": GatewayConfig.model_validate({"store": "memory"}),
        "store: unreachable Redis": GatewayConfig.model_validate(
            {"store": "redis://127.0.0.1:1/0"}
        ),
    }
    with contextlib.ExitStack() as stack:
        clients: dict[str, httpx.Client] = {}
        for name, config in configs.items():
            base = stack.enter_context(serve(config))
            clients[name] = stack.enter_context(httpx.Client(base_url=base, timeout=30))
        times: dict[str, list[float]] = {name: [] for name in clients}
        for i in range(rounds + 20):
            for name, http in clients.items():
                start = time.perf_counter()
                response = http.post("/v1/chat/completions", json=HELLO)
                elapsed = (time.perf_counter() - start) * 1000
                assert response.status_code == 200, response.text
                if i >= 20:
                    times[name].append(elapsed)
    base_median = statistics.median(times["store: memory"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"   {name:<26} median {median:6.3f} ms  ({median / base_median:4.2f}x)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tools = Path(tmp) / "bench_approval_tools.py"
        tools.write_text(TOOLS)
        prefix = f"tw-bench-{uuid.uuid4().hex[:8]}:"
        schema = f"tw_bench_{uuid.uuid4().hex[:8]}"
        stores: dict[str, Any] = {
            "memory": "memory",
            "sqlite": f"sqlite:///{Path(tmp) / 'state.db'}",
            "redis": f"{args.redis}?prefix={prefix}&allow_volatile=true",
            "postgres": f"{args.postgres}?schema={schema}",
        }
        bench_round_trips(stores, tools, args.rounds)
        _clean_redis(args.redis, prefix)
        _drop_schema(args.postgres, schema)
    bench_no_server_tools(args.rounds)


def _drop_schema(url: str, schema: str) -> None:
    try:
        import psycopg
    except ModuleNotFoundError:
        return
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except psycopg.Error:
        pass


def _clean_redis(url: str, prefix: str) -> None:
    try:
        import redis
    except ModuleNotFoundError:
        return
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        pass
    finally:
        client.close()


if __name__ == "__main__":
    main(sys.argv[1:])
