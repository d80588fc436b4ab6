"""Agent loop overhead per iteration: toolwire vs the OpenAI Agents SDK vs Pydantic AI.

The same scenario in each library, with each library's own fake model: the model calls a
trivial tool once per turn for N turns, then answers. Nothing waits on I/O, so the wall
time of a run divided by its N + 1 model turns is the loop's own cost per iteration
(building requests, dispatching and validating the tool call, recording the result).

Each round builds a fresh scripted model (outside the timed region) and times one run;
the table shows the median over rounds. Run it with

    python benchmarks/bench_agent.py [--turns 10] [--rounds 300]

It needs the `bench` extra: `pip install -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

Runner = Callable[[], Awaitable[Any]]
"""Runs the scenario once; returns whatever the library returns (checked by the caller)."""
Setup = Callable[[int], Runner]
"""Prepares one round for N tool turns; only the returned coroutine function is timed."""


def sync_echo(x: int) -> int:
    """Return x unchanged."""
    return x


async def async_echo(x: int) -> int:
    """Return x unchanged."""
    return x


# Every library names a tool after its function; the scripts call `echo_value`.
sync_echo.__name__ = sync_echo.__qualname__ = "echo_value"
async_echo.__name__ = async_echo.__qualname__ = "echo_value"


# --- toolwire -----------------------------------------------------------------------------


def toolwire_setup(fn: Callable[..., Any], stream: bool) -> Setup:
    from toolwire.agent import Agent
    from toolwire.models import AssistantMessage, ScriptedModel
    from toolwire.tools import ToolCall, tool

    model = ScriptedModel()
    agents: dict[int, Agent] = {}

    def setup(turns: int) -> Runner:
        script: list[Any] = [
            AssistantMessage(
                tool_calls=(ToolCall(id=f"call_{i}", name="echo_value", arguments='{"x": 1}'),)
            )
            for i in range(turns)
        ]
        script.append("done")
        model.enqueue(*script)
        agent = agents.get(turns)
        if agent is None:
            agent = agents[turns] = Agent(model, [tool(fn)], max_iterations=turns + 1)

        async def run() -> str:
            if stream:
                output = ""
                async for event in agent.run_stream("go"):
                    if event.type == "done":
                        assert event.error is None, event.error
                        output = event.result.output
                return output
            result = await agent.run("go")
            assert result.status == "completed", result.status
            return result.output

        return run

    return setup


# --- OpenAI Agents SDK --------------------------------------------------------------------


def openai_agents_setup(fn: Callable[..., Any]) -> Setup:
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    set_tracing_disabled(True)
    model = ScriptedModel()
    agent = Agent(name="bench", model=model, tools=[function_tool(fn)])

    def setup(turns: int) -> Runner:
        steps: list[Any] = [
            [function_call("echo_value", '{"x": 1}', call_id=f"call_{i}")] for i in range(turns)
        ]
        steps.append([assistant_message("done")])
        model.extend(steps)

        async def run() -> str:
            result = await Runner.run(agent, "go", max_turns=turns + 1)
            return str(result.final_output)

        return run

    return setup


# --- Pydantic AI --------------------------------------------------------------------------


def pydantic_ai_setup(fn: Callable[..., Any]) -> Setup:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    script: list[ModelResponse] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return script.pop(0)

    agent = Agent(FunctionModel(respond), tools=[fn])

    def setup(turns: int) -> Runner:
        script[:] = [
            ModelResponse(parts=[ToolCallPart("echo_value", '{"x": 1}', tool_call_id=f"call_{i}")])
            for i in range(turns)
        ]
        script.append(ModelResponse(parts=[TextPart("done")]))

        async def run() -> str:
            result = await agent.run("go")
            return result.output

        return run

    return setup


# --- measuring ----------------------------------------------------------------------------


async def measure(setup: Setup, turns: int, rounds: int, warmup: int) -> list[float]:
    """Per-iteration times in microseconds, one per timed round."""
    per_iteration: list[float] = []
    for i in range(warmup + rounds):
        run = setup(turns)
        gc.collect()
        start = time.perf_counter()
        output = await run()
        elapsed = time.perf_counter() - start
        assert output == "done", output
        if i >= warmup:
            per_iteration.append(elapsed / (turns + 1) * 1e6)
    return per_iteration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10, help="tool-calling turns per run")
    parser.add_argument("--rounds", type=int, default=300, help="timed runs per library")
    parser.add_argument("--warmup", type=int, default=30, help="untimed runs first")
    args = parser.parse_args()

    print(
        f"Agent loop overhead per iteration: {args.turns} tool turns + 1 answer per run, "
        f"median of {args.rounds} runs ({args.warmup} warm-up); agents built once, "
        "each run replays a fresh script."
    )
    for title, fn in (
        ("async tool (the loop's own cost)", async_echo),
        ("sync tool (each library runs it in a worker thread)", sync_echo),
    ):
        scenario(title, fn, args)


def scenario(title: str, fn: Callable[..., Any], args: argparse.Namespace) -> None:
    contenders: list[tuple[str, Callable[[], Setup]]] = [
        ("toolwire Agent.run", lambda: toolwire_setup(fn, stream=False)),
        ("toolwire Agent.run_stream", lambda: toolwire_setup(fn, stream=True)),
        ("OpenAI Agents SDK Runner.run", lambda: openai_agents_setup(fn)),
        ("Pydantic AI Agent.run", lambda: pydantic_ai_setup(fn)),
    ]
    medians: dict[str, float] = {}
    print(f"\n{title}")
    print(f"{'library':<32} {'median µs/iter':>15} {'p10':>9} {'p90':>9}")
    print("-" * 68)
    for label, make in contenders:
        try:
            setup = make()
        except ImportError as exc:
            print(f"{label:<32} {'skipped':>15}  ({exc.name} missing: pip install -e '.[bench]')")
            continue
        times = asyncio.run(measure(setup, args.turns, args.rounds, args.warmup))
        deciles = statistics.quantiles(times, n=10)
        medians[label] = statistics.median(times)
        print(f"{label:<32} {medians[label]:>15.1f} {deciles[0]:>9.1f} {deciles[-1]:>9.1f}")

    ours = medians.get("toolwire Agent.run")
    others = [v for k, v in medians.items() if not k.startswith("toolwire")]
    if ours is not None and others:
        best = min(others)
        verdict = "met" if ours / best <= 0.5 else "NOT met"
        print(
            f"toolwire / best other = {ours:.1f} / {best:.1f} µs = {ours / best:.2f} "
            f"(target ≤ 0.50: {verdict})"
        )


if __name__ == "__main__":
    main()
