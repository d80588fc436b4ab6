"""Follow one request through the gateway and count the files its trail passes.

    .venv/bin/python scripts/walk.py [--door chat|responses|messages] [--stream] [--show]

A request whose model calls one server tool (`add`) and then answers, sent in-process to
a real gateway app. The trail is every toolwire call that receives the request or
something it became (the HTTP request, what the door read of it, the run, the model's
answer, the tool call, the tool's result, the events, the bytes) as an argument *and
passes it on* to another such call, in the order they are entered, plus the tool itself.
Leaf helpers that only look at it (a check, a formatter) are not on the trail.

A *stay* is each time the trail enters a file; a *return* is a stay in a file the trail
had already left. Fewer of both means a reader finds a request's whole life in fewer
places.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import toolwire
from toolwire import AssistantMessage
from toolwire.models.scripted import ScriptedModel
from toolwire.server import GatewayConfig, create_app
from toolwire.tools import ToolCall

SRC = str(Path(toolwire.__file__).resolve().parent) + "/"
TOOLS = str(Path(__file__).resolve().parent / "walk_tools.py")

BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": (
        "/v1/chat/completions",
        {"model": "toolwire-offline", "messages": [{"role": "user", "content": "2+3?"}]},
    ),
    "responses": ("/v1/responses", {"model": "toolwire-offline", "input": "2+3?"}),
    "messages": (
        "/v1/messages",
        {
            "model": "toolwire-offline",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "2+3?"}],
        },
    ),
}


@dataclass(eq=False)
class Step:
    file: str
    name: str
    parent: Step | None
    children: int = 0


@dataclass
class Tracer:
    lineage: dict[int, object] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    frames: dict[int, Step] = field(default_factory=dict)
    live: list[types.FrameType] = field(default_factory=list)

    def join(self, value: object, depth: int = 3) -> None:
        if id(value) in self.lineage or value is None or isinstance(value, (bool, int, float)):
            return
        self.lineage[id(value)] = value
        if depth == 0 or isinstance(value, (str, bytes)):
            return
        for inner in _parts(value):
            self.join(inner, depth - 1)

    def touches(self, value: object) -> bool:
        if id(value) in self.lineage:
            return True
        if isinstance(value, (str, bytes, int, float, bool)) or value is None:
            return False
        return any(id(inner) in self.lineage for inner in _parts(value))

    def profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        file = frame.f_code.co_filename
        if not (file.startswith(SRC) or file == TOOLS):
            return
        if event == "call":
            if id(frame) in self.frames:
                return  # a generator or coroutine resumed
            code = frame.f_code
            count = code.co_argcount + code.co_kwonlyargcount
            names = code.co_varnames[:count]
            values = [frame.f_locals.get(n) for n in names]
            for value in values:
                if type(value).__name__ == "Request" and not self.lineage:
                    self.join(value, 0)
            if "scope" in names:
                return  # ASGI middleware around the route, not on its trail
            if any(
                isinstance(v, dict) and str(v.get("type", "")).startswith("http.") for v in values
            ):
                return  # ASGI plumbing passing the answer's bytes on (middleware sends)
            if not any(self.touches(v) for v in values):
                return
            parent = None
            back = frame.f_back
            while back is not None:
                parent = self.frames.get(id(back))
                if parent is not None:
                    break
                back = back.f_back
            step = Step(
                file.removeprefix(SRC) if file != TOOLS else "<tool>", code.co_qualname, parent
            )
            if parent is not None:
                parent.children += 1
            self.steps.append(step)
            self.frames[id(frame)] = step
            self.live.append(frame)  # keeps ids unique while the request runs
        elif event == "return" and id(frame) in self.frames:
            self.join(arg)


def _parts(value: object) -> list[object]:
    if isinstance(value, (tuple, list, set, frozenset)):
        return list(value)[:64]
    if isinstance(value, dict):
        return list(value.values())[:64]
    slots = getattr(type(value), "__slots__", ())
    out = [getattr(value, s, None) for s in slots if isinstance(s, str)]
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict):
        out.extend(list(attrs.values())[:64])
    return out


async def _walk(door: str, stream: bool) -> list[Step]:
    config = GatewayConfig.model_validate({"server_tools": {"modules": [TOOLS]}})
    app = create_app(config, access_log=False)
    gateway = app.state.gateway
    call = ToolCall(id="call_1", name="add", arguments='{"a": 2, "b": 3}')
    for agent in gateway.agents.values():
        agent.model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "5"], name="gpt")
    path, body = BODIES[door]
    tracer = Tracer()
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as h,
    ):
        await gateway.ready()
        sys.setprofile(tracer.profile)
        try:
            response = await h.post(path, json={**body, "stream": stream})
        finally:
            sys.setprofile(None)
    if response.status_code != 200 or "5" not in response.text:
        raise SystemExit(f"the request failed: {response.status_code} {response.text[:300]}")
    return [s for s in tracer.steps if s.children or s.file == "<tool>"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--door", choices=sorted(BODIES), default="chat")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--show", action="store_true", help="print the trail")
    args = parser.parse_args()
    trail = asyncio.run(_walk(args.door, args.stream))
    name = f"{args.door}{' (stream)' if args.stream else ''}"
    _count(f"{name}, every file", [(s.file, s.name) for s in trail], args.show)
    # The gateway's own part: below it, the runtime (agent, runner, tools, store) is one
    # place, as the layers of DESIGN.md draw it.
    gateway = [(s.file if s.file.startswith("server/") else RUNTIME, s.name) for s in trail]
    _count(f"{name}, the gateway (runtime as one)", gateway, args.show)


RUNTIME = "runtime: agent → runner → tool"


def _count(title: str, trail: list[tuple[str, str]], show: bool) -> None:
    stays: list[str] = []
    for file, name in trail:
        if not stays or stays[-1] != file:
            stays.append(file)
            if show:
                print(f"{len(stays):3}  {file:55} {name}")
    returns = sum(1 for i, f in enumerate(stays) if f in stays[:i])
    print(f"{title}: {len(stays)} stays in {len(set(stays))} files, {returns} returns")


if __name__ == "__main__":
    main()
