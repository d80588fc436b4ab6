"""Routing (issue 25): what a `RoutedModel` adds per request, and how long failover from a
dead deployment takes.

Run: `python benchmarks/bench_routing.py [--rounds 3] [--calls 50000] [--requests 300]`
(prints figures; no assertions).

1. **Added cost**: an instant in-process model called directly, and through a
   `RoutedModel` over two deployments of it, for each strategy, `complete` and `stream`
   (the stream of one event); the difference per call is what routing adds to the hot
   path (picking a deployment, in-flight counts, the answer's bookkeeping).
2. **Failover**: real HTTP. `gateway_fake_upstream.py` (a process) is deployment B;
   deployment A is a port nobody listens on (a killed model server: connection refused),
   weighted so it is always tried first and never cooled down. The time of a request
   that fails over A → B, against one sent to B alone, both with `OpenAIChatModel`
   (retries 0) on one pooled client.

Each figure: the median of `--rounds` rounds, with the spread (min–max) of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from toolwire.models.base import Model, ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.messages import AssistantMessage, Message, UserMessage
from toolwire.models.openai import OpenAIChatModel
from toolwire.models.relay_http import pooled_client
from toolwire.server.upstreams.routing import Deployment, Pool, RoutedModel, Strategy
from toolwire.tools.tool import Tool

HERE = Path(__file__).parent


class Instant:
    """A model that answers at once: what is measured is everything around it."""

    name = "instant"

    def __init__(self) -> None:
        self._answer = ModelResponse(message=AssistantMessage(content="ok"))

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        return self._answer

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        yield self._answer


def _routed(strategy: Strategy) -> RoutedModel:
    pool = Pool(
        "bench",
        [Deployment("a", "m", Instant()), Deployment("b", "m", Instant(), weight=2)],
        strategy=strategy,
    )
    return RoutedModel("bench", [pool])


async def _per_call(model: Model, calls: int, stream: bool) -> float:
    messages = [UserMessage(content="hi")]
    started = time.perf_counter()
    if stream:
        for _ in range(calls):
            async for _event in model.stream(messages, ()):
                pass
    else:
        for _ in range(calls):
            await model.complete(messages, ())
    return (time.perf_counter() - started) / calls


def _figure(values: list[float], scale: float, unit: str) -> str:
    scaled = [v * scale for v in values]
    return f"{statistics.median(scaled):8.2f} {unit}  (spread {min(scaled):.2f}–{max(scaled):.2f})"


async def added_cost(rounds: int, calls: int) -> None:
    print(f"routing's added cost per call ({calls} calls a round, {rounds} rounds)")
    for stream in (False, True):
        kind = "stream  " if stream else "complete"
        for strategy in ("least_busy", "weighted_round_robin", "latency"):
            added: list[float] = []
            for _ in range(rounds):
                direct = await _per_call(Instant(), calls, stream)
                routed = await _per_call(_routed(strategy), calls, stream)  # type: ignore[arg-type]
                added.append(routed - direct)
            print(f"  {kind} {strategy:21} +{_figure(added, 1e6, 'µs')}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _start_upstream() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "gateway_fake_upstream.py"), "--hermes-kb", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        raise SystemExit(f"the fake upstream did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[-1])}/v1"


async def _timed(call: Callable[[], Coroutine[Any, Any, Any]], requests: int) -> float:
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def failover(rounds: int, requests: int) -> None:
    proc, live_url = _start_upstream()
    dead_url = f"http://127.0.0.1:{_free_port()}/v1"
    client = pooled_client(timeout=5)
    try:

        def model(url: str) -> OpenAIChatModel:
            return OpenAIChatModel(url, "k", "fake-model", retries=0, http_client=client)

        healthy = model(live_url)
        pool = Pool(
            "bench",
            [
                Deployment("dead", "m", model(dead_url), weight=1000),
                Deployment("live", "m", model(live_url), weight=1),
            ],
            strategy="weighted_round_robin",
            cooldown_failures=10**9,  # never left out: every request pays the failover
        )
        routed = RoutedModel("bench", [pool])
        messages = [UserMessage(content="hi")]
        await healthy.complete(messages, ())  # warm the pool's connection
        direct: list[float] = []
        switched: list[float] = []
        for _ in range(rounds):
            direct.append(await _timed(lambda: healthy.complete(messages, ()), requests))
            switched.append(await _timed(lambda: routed.complete(messages, ()), requests))
        print(
            f"\nfailover from a dead deployment (connection refused), {requests} requests a round"
        )
        print(f"  direct to the live one        {_figure(direct, 1e3, 'ms')}")
        print(f"  dead first, then the live one {_figure(switched, 1e3, 'ms')}")
        added = [s - d for s, d in zip(switched, direct, strict=True)]
        print(f"  failover adds                +{_figure(added, 1e3, 'ms')}")
    finally:
        await client.aclose()
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def main() -> None:
    # One warning per failover would be the whole output.
    logging.getLogger("toolwire.server.upstreams.routing").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(added_cost(args.rounds, args.calls))
    asyncio.run(failover(args.rounds, args.requests))


if __name__ == "__main__":
    main()
