"""A real model, direct and through toolwire: tokens per second and time to first token.

llama.cpp's `llama-server` with SmolLM2-135M (built by `scripts/e2e_engines.py build`),
and `toolwire serve` in front of it. Each round sends the same streamed request straight
to llama-server and through each of the gateway's chat doors (Chat Completions,
Responses, Messages), in turn, so drift in the machine's load touches all of them alike;
the prompt is the same every time, so llama-server's prompt cache leaves only the model's
own first-token time, against which the gateway's share is measured at its most visible.
With `--fresh` each request's prompt starts with a number of its own, so the model reads
it anew, as it does a new conversation.

Run: .venv/bin/python benchmarks/bench_engines.py [--runs 3] [--rounds 10] [--tokens 64] [--fresh]
Prints, per run, the medians over its rounds; then the median and the spread (min-max)
of those over the runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))

from engine_processes import EngineProcess, GatewayProcess, find_engines, llama_server, upstream

PROMPT = "Write a long story about a dragon who learns to cook."
_nonces = itertools.count(random.randrange(10**6, 10**7))


@dataclass(slots=True)
class Sample:
    ttft: float
    """Seconds from sending the request to the first text delta."""
    rate: float
    """Tokens per second from the first text delta to the last (the token count is the
    usage the answer reports: the gateway may join deltas that arrive together)."""


def _events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[6:])


def _chat_text(event: dict[str, Any]) -> bool:
    choices = event.get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


def _responses_text(event: dict[str, Any]) -> bool:
    return event.get("type") == "response.output_text.delta"


def _messages_text(event: dict[str, Any]) -> bool:
    return event.get("type") == "content_block_delta"


def _output_tokens(event: dict[str, Any]) -> int | None:
    """The output token count an event reports, in any of the three protocols."""
    usage = event.get("usage") or (event.get("response") or {}).get("usage")
    if not isinstance(usage, dict):
        return None
    count = usage.get("completion_tokens", usage.get("output_tokens"))
    return count if isinstance(count, int) else None


def measure(
    http: httpx.Client, url: str, body: dict[str, Any], is_text: Callable[[dict[str, Any]], bool]
) -> Sample:
    started = time.perf_counter()
    first = last = 0.0
    tokens = 0
    with http.stream("POST", url, json=body) as response:
        response.raise_for_status()
        for event in _events(response):
            if is_text(event):
                last = time.perf_counter()
                first = first or last
            tokens = _output_tokens(event) or tokens
    if tokens < 2 or last <= first:
        raise SystemExit(f"{url}: fewer than two tokens streamed; nothing to measure")
    # The first token's time is the TTFT; the rest came between the first and last delta.
    return Sample(ttft=first - started, rate=(tokens - 1) / (last - first))


def _fresh(body: dict[str, Any], nonce: int) -> dict[str, Any]:
    """`body` with a prompt that starts differently from every earlier one."""
    prompt = f"Request {nonce}. {PROMPT}"
    if "input" in body:
        return {**body, "input": prompt}
    return {**body, "messages": [{"role": "user", "content": prompt}]}


def one_run(
    engine: EngineProcess, gateway: GatewayProcess, rounds: int, tokens: int, fresh: bool
) -> dict[str, dict[str, float]]:
    # `ignore_eos` (llama-server's own field; the gateway passes unknown fields on) keeps
    # every answer at `tokens` tokens.
    messages = [{"role": "user", "content": PROMPT}]
    common = {"temperature": 0, "stream": True, "ignore_eos": True}
    usage = {"stream_options": {"include_usage": True}}
    paths: dict[str, tuple[str, dict[str, Any], Callable[[dict[str, Any]], bool]]] = {
        "direct": (
            f"{engine.url}/v1/chat/completions",
            {"model": "smollm2", "messages": messages, "max_tokens": tokens, **common, **usage},
            _chat_text,
        ),
        "chat": (
            f"{gateway.url}/v1/chat/completions",
            {"model": "smol", "messages": messages, "max_tokens": tokens, **common, **usage},
            _chat_text,
        ),
        "responses": (
            f"{gateway.url}/v1/responses",
            {"model": "smol", "input": PROMPT, "max_output_tokens": tokens, **common},
            _responses_text,
        ),
        "messages": (
            f"{gateway.url}/v1/messages",
            {"model": "smol", "messages": messages, "max_tokens": tokens, **common},
            _messages_text,
        ),
    }
    samples: dict[str, list[Sample]] = {name: [] for name in paths}
    with httpx.Client(timeout=120) as http:
        for url, body, is_text in paths.values():
            measure(http, url, body, is_text)  # warm: the prompt cache, the connections
        for _ in range(rounds):
            for name, (url, body, is_text) in paths.items():
                if fresh:
                    body = _fresh(body, next(_nonces))
                samples[name].append(measure(http, url, body, is_text))
    return {
        name: {
            "ttft_ms": statistics.median(s.ttft for s in got) * 1000,
            "tokens_per_s": statistics.median(s.rate for s in got),
        }
        for name, got in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--fresh", action="store_true", help="a new prompt every request")
    args = parser.parse_args()
    engines, missing, advice = find_engines(build=False)
    if "llama_server" in missing or "model" in missing:
        raise SystemExit(f"llama-server or the model is not built: {advice}")
    engine = llama_server(engines)
    gateway = GatewayProcess(
        {"upstream": upstream(engine, {"smol": "smollm2"}, engine="llama.cpp")}
    )
    try:
        runs = []
        for run in range(args.runs):
            result = one_run(engine, gateway, args.rounds, args.tokens, args.fresh)
            runs.append(result)
            direct = result["direct"]["ttft_ms"]
            print(
                f"run {run + 1}: "
                + ", ".join(
                    f"{name} {r['tokens_per_s']:.1f} tok/s ttft {r['ttft_ms']:.1f} ms"
                    + ("" if name == "direct" else f" ({r['ttft_ms'] - direct:+.1f})")
                    for name, r in result.items()
                ),
                flush=True,
            )
    finally:
        gateway.stop()
        engine.stop()
    prompts = "a new prompt each request" if args.fresh else "the same prompt (cached)"
    print(
        f"\n{args.runs} runs x {args.rounds} rounds, {args.tokens} tokens each, {prompts}; "
        "median [min-max]"
    )

    def summary(values: list[float], unit: str) -> str:
        return f"{statistics.median(values):.1f} {unit} [{min(values):.1f}-{max(values):.1f}]"

    for name in runs[0]:
        rate = summary([r[name]["tokens_per_s"] for r in runs], "tok/s")
        ttft = summary([r[name]["ttft_ms"] for r in runs], "ms")
        line = f"  {name:<9} {rate}   first token {ttft}"
        if name != "direct":
            added = [r[name]["ttft_ms"] - r["direct"]["ttft_ms"] for r in runs]
            line += f"   added by the gateway {summary(added, 'ms')}"
        print(line)


if __name__ == "__main__":
    main()
