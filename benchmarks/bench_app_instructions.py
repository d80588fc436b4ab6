"""Instructions per request of the gateway app itself, in-process, through each door,
counted by callgrind: a repeatable figure on a noisy machine (wall-clock and CPU time
vary with whatever else runs; instruction counts do not). `bench_instructions.py`
counts a whole `toolwire serve` (server, access log, upstream client); this counts the
app's own code, to compare two trees' doors and session side by side.

Run: `python benchmarks/bench_app_instructions.py [--requests 200] [--tree NAME=SRC ...]`
(prints figures; no assertions; needs valgrind). Each tree is a `src` directory (default:
this checkout's); give two to compare, e.g. `--tree before=/tmp/old/src --tree
after=src`. Per tree and scenario it runs the gateway app in-process twice under
`valgrind --tool=callgrind` (once with no request, once with `--requests`) and prints
(instructions of the second − the first) / requests: what one request costs the
gateway's Python code, from the ASGI call to the last body byte, with the offline model
(no socket, no upstream) and, for the agent path, a scripted model that calls the
`add` server tool once. Two scenarios are issue 29's server-tool pair as
`bench_hot_path.py` runs it: one gateway with the async `lookup` server tool, whose model
calls no tool, then calls `lookup` once (their difference is the round trip's own cost).
The `native` scenarios send `bench_hot_path.py`'s body through a `native` route to the raw fake
upstream (started here, in its own process, not counted): the pass-through path with the
gateway's own HTTP client, without the server and the access log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_hot_path import door_body

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "scripts" / "walk_tools.py"
MODEL = "toolwire-offline"

LOOKUP_TOOLS = ROOT / "benchmarks" / "bench_lookup_tools.py"
"""`bench_hot_path.py`'s server tool."""


def _door_body(door: str) -> dict[str, Any]:
    """`bench_hot_path.py`'s request body for `door`, without its model."""
    body: dict[str, Any] = json.loads(door_body(door, ""))
    del body["model"]
    return body


UPSTREAM_ENV = "TOOLWIRE_BENCH_UPSTREAM_PORT"

SCENARIOS: dict[str, tuple[str, dict[str, Any], str]] = {
    # name: (path, body, server tools: "" none, "add" called once, "lookup" / "lookup none"
    # the lookup tool called once / never)
    "chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, ""),
    "chat stream": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "stream": True},
        "",
    ),
    "messages": (
        "/v1/messages",
        {"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
        "",
    ),
    "responses": ("/v1/responses", {"input": "hi", "store": False}, ""),
    # The default, store: true: the response is kept (in the SQLite store) before it is sent.
    "responses stored": ("/v1/responses", {"input": "hi"}, ""),
    "chat, server tool": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "2+3?"}]},
        "add",
    ),
    "server tools, none called": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "look up abc"}]},
        "lookup none",
    ),
    "server tool round trip": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "look up abc"}]},
        "lookup",
    ),
    # A `native` route to the raw fake upstream of `bench_gateway.py` (its own process,
    # not counted): the pass-through path `bench_hot_path.py` measures, with its body.
    "native chat": ("/v1/chat/completions", _door_body("chat"), "native"),
    "native responses stored": ("/v1/responses", _door_body("responses"), "native"),
    "native responses unstored": (
        "/v1/responses",
        _door_body("responses-unstored"),
        "native",
    ),
}


# --- inside valgrind ----------------------------------------------------------------------


async def _requests(scenario: str, count: int) -> None:
    import orjson

    from toolwire import AssistantMessage
    from toolwire.models.scripted import ScriptedModel
    from toolwire.server import GatewayConfig, create_app
    from toolwire.tools import ToolCall

    path, body, tools = SCENARIOS[scenario]
    workdir = Path(tempfile.mkdtemp())
    config: dict[str, Any] = {"store": f"sqlite:///{workdir}/state.db"}
    model = MODEL
    if tools == "native":
        model = "bench-model"
        config["upstream"] = {
            "kind": "openai",
            "base_url": f"http://127.0.0.1:{os.environ[UPSTREAM_ENV]}/v1",
            "retries": 0,
            "models": {model: "fake-model"},
        }
        tools = ""
    elif tools == "add":
        config["server_tools"] = {"modules": [str(TOOLS)]}
    elif tools:
        config["server_tools"] = {"modules": [str(LOOKUP_TOOLS)]}
    app = create_app(GatewayConfig.model_validate(config), access_log=False)
    gateway = app.state.gateway
    raw = orjson.dumps({"model": model, **body})
    if tools == "add":
        call = ToolCall(id="call_1", name="add", arguments='{"a": 2, "b": 3}')
    else:
        call = ToolCall(id="call_1", name="lookup", arguments='{"key": "abc"}')
    turns: list[AssistantMessage | str] = (
        [] if tools == "lookup none" else [AssistantMessage(tool_calls=(call,))]
    )

    async def one() -> None:
        if tools:
            for agent in gateway.agents.values():
                agent.model = ScriptedModel([*turns, "5"])
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # the client stays connected (as uvicorn waits)
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        status = 0

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"bench"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
            ],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        await app(scope, receive, send)
        if status != 200:
            raise SystemExit(f"{scenario}: status {status}")

    async with app.router.lifespan_context(app):
        await one()  # warm: imports, caches, the first store write
        for _ in range(count):
            await one()


def _inner(scenario: str, count: int) -> None:
    asyncio.run(_requests(scenario, count))


# --- outside ------------------------------------------------------------------------------


def _instructions(src: str, scenario: str, count: int) -> int:
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        env = {**os.environ, "PYTHONPATH": src, "PYTHONHASHSEED": "0"}
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                f"--log-file={log.name}",
                sys.executable,
                __file__,
                "--inner",
                scenario,
                str(count),
            ],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        found = re.search(r"Collected : (\d+)", log.read())
    if found is None:
        raise SystemExit("valgrind printed no instruction count")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--inner":
        _inner(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--tree", action="append", default=[], help="NAME=SRC (repeatable)")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    trees = [t.split("=", 1) for t in args.tree] or [["this", str(ROOT / "src")]]
    scenarios = args.scenario or list(SCENARIOS)
    print(f"instructions per request (callgrind, {args.requests} requests, in-process ASGI)")
    print(f"{'scenario':24}" + "".join(f"{name:>14}" for name, _ in trees))
    with tempfile.TemporaryDirectory(prefix="toolwire-app-instr-") as workdir:
        procs = None
        if any(SCENARIOS[s][2] == "native" for s in scenarios):
            from bench_gateway import Processes, start_upstream

            procs = Processes(Path(workdir), pin=False)
            _, port = start_upstream(procs, hermes_kb=1)
            os.environ[UPSTREAM_ENV] = str(port)
        try:
            for scenario in scenarios:
                row = []
                for _, src in trees:
                    base = _instructions(src, scenario, 0)
                    full = _instructions(src, scenario, args.requests)
                    row.append((full - base) / args.requests)
                ratio = f"   {row[-1] / row[0]:.3f}x" if len(row) > 1 else ""
                print(f"{scenario:24}" + "".join(f"{r:>14,.0f}" for r in row) + ratio, flush=True)
        finally:
            if procs is not None:
                procs.stop_all()


if __name__ == "__main__":
    main()
