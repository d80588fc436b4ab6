"""One gateway over several model servers (`upstreams:` / `models:`): balancing, failover
before the first byte, cooldown, fallbacks across kinds with tools intact, and the one
error a client gets when everything failed. Real fake upstreams on loopback sockets,
driven through the official `openai` and `anthropic` SDKs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from e2e_chat_support import UPSTREAM_KEY_ENV, WEATHER_TOOL, live_gateway, post_chat, sdk, user
from live import LiveServer
from messages_support import sdk as anthropic_sdk
from server_support import config_with

from fakes.anthropic_server import FakeAnthropicServer, message, tool_use
from fakes.anthropic_server import error as anthropic_error
from fakes.anthropic_server import events as anthropic_events
from fakes.anthropic_server import sse as anthropic_sse
from fakes.openai_server import (
    FakeOpenAIServer,
    completion,
    delta,
    error,
    sse,
    tool_call,
)
from toolwire.models.base import ModelResponse
from toolwire.models.messages import AssistantMessage
from toolwire.models.scripted import ScriptedModel
from toolwire.server import parse_config
from toolwire.server.upstreams.routing import Deployment, Pool

HERMES = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


class Fakes:
    def __init__(self) -> None:
        self.a = FakeOpenAIServer()
        self.b = FakeOpenAIServer()
        self.native = FakeOpenAIServer()
        self.claude = FakeAnthropicServer()
        self.all = (self.a, self.b, self.native, self.claude)

    def config(self, **routing: Any) -> dict[str, Any]:
        common = {"retries": 0, "api_key_env": UPSTREAM_KEY_ENV}
        return {
            "upstreams": {
                "vllm-a": {"kind": "openai", "base_url": self.a.base_url, **common},
                "vllm-b": {"kind": "openai", "base_url": self.b.base_url, **common},
                "openai": {"kind": "openai", "base_url": self.native.base_url, **common},
                "claude": {"kind": "anthropic", "base_url": self.claude.base_url, **common},
            },
            "models": {
                "qwen3": {
                    "deployments": [
                        {"upstream": "vllm-a", "model": "Qwen/Qwen3-8B"},
                        {"upstream": "vllm-b", "model": "Qwen/Qwen3-8B"},
                    ],
                    "tool_calls": "parse:hermes",
                    "fallbacks": ["gpt-4o-mini", "claude"],
                    "context_window": 32_000,
                },
                "gpt-4o-mini": {
                    "upstream": "openai",
                    "model": "gpt-4o-mini",
                    "context_window": 16_000,
                },
                "claude": {
                    "upstream": "claude",
                    "model": "claude-sonnet-4-5",
                    "context_window": 200_000,
                },
            },
            "routing": {"cooldown": {"failures": 2, "seconds": 60}, **routing},
        }


@pytest.fixture(scope="module")
def _fakes() -> Iterator[Fakes]:
    fakes = Fakes()
    for f in fakes.all:
        f.__enter__()
    yield fakes
    for f in fakes.all:
        f.__exit__(None, None, None)


@pytest.fixture
def fakes(_fakes: Fakes) -> Iterator[Fakes]:
    for f in _fakes.all:
        f.reset()
        f.set_default(None)
    return _fakes


@pytest.fixture
def server(fakes: Fakes) -> Iterator[LiveServer]:
    # A gateway per test: cooldowns and in-flight counts are the gateway's own state.
    with live_gateway(config_with(**fakes.config())) as live:
        yield live


@pytest.fixture
def client(server: LiveServer) -> Iterator[openai.OpenAI]:
    with sdk(server) as c:
        yield c


@pytest.fixture
def messages_client(server: LiveServer) -> Iterator[anthropic.Anthropic]:
    with anthropic_sdk(server) as c:
        yield c


def _count(fake: Any) -> int:
    return len(fake.requests)


# --- configuration ---------------------------------------------------------------------


def _problems(text: str) -> list[str]:
    return [str(p) for p in parse_config(text, source="tw.yaml").problems]


def test_the_issue_example_is_valid_and_the_short_form_is_one_deployment() -> None:
    doc = parse_config(
        """
upstreams:
  vllm-a: {kind: openai, base_url: http://127.0.0.1:8001/v1}
  vllm-b: {kind: openai, base_url: http://127.0.0.1:8002/v1}
  openai: {kind: openai, base_url: https://api.openai.com/v1, api_key_env: OPENAI_API_KEY}
  claude: {kind: anthropic, api_key_env: ANTHROPIC_API_KEY}
models:
  qwen3:
    deployments:
      - {upstream: vllm-a, model: Qwen/Qwen3-8B, weight: 1}
      - {upstream: vllm-b, model: Qwen/Qwen3-8B, weight: 1}
    tool_calls: parse:hermes
    fallbacks: [gpt-4o-mini, claude]
  gpt-4o-mini: {upstream: openai, model: gpt-4o-mini}
  claude: {upstream: claude, model: claude-sonnet-4-5}
routing:
  strategy: least_busy
  cooldown: {failures: 3, seconds: 30}
"""
    )
    assert doc.ok, doc.problems
    assert doc.config is not None
    [only] = doc.config.models["claude"].deployments
    assert (only.upstream, only.model, only.weight) == ("claude", "claude-sonnet-4-5", 1)
    assert doc.config.models["qwen3"].fallbacks == ["gpt-4o-mini", "claude"]


def test_mixing_both_forms_says_how_to_convert() -> None:
    [problem] = _problems(
        "upstream: {kind: openai, models: {a: b}}\n"
        "upstreams: {x: {kind: openai}}\n"
        "models: {a: {upstream: x, model: m}}\n"
    )
    assert problem.startswith("tw.yaml:1: upstream: use either 'upstream:'")
    assert "upstreams: {main: ...}" in problem


def test_names_that_point_nowhere_are_located() -> None:
    problems = _problems(
        "upstreams:\n"
        "  a: {kind: openai}\n"
        "  c: {kind: anthropic, models: {x: y}}\n"
        "models:\n"
        "  m:\n"
        "    deployments:\n"
        "      - {upstream: a, model: x}\n"
        "      - {upstream: b, model: x}\n"
        "    fallbacks: [m, nope]\n"
        "  n: {upstream: c, model: z, tool_calls: 'parse:hermes'}\n"
        "routing: {strategy: random}\n"
    )
    assert problems == [
        "tw.yaml:11: routing.strategy: Input should be 'least_busy', 'weighted_round_robin' "
        "or 'latency' (got 'random')"
    ]
    problems = _problems(
        "upstreams:\n"
        "  a: {kind: openai}\n"
        "  c: {kind: anthropic, models: {x: y}}\n"
        "models:\n"
        "  m:\n"
        "    deployments:\n"
        "      - {upstream: a, model: x}\n"
        "      - {upstream: b, model: x}\n"
        "    fallbacks: [m, nope]\n"
        "  n: {upstream: c, model: z, tool_calls: 'parse:hermes'}\n"
    )
    assert problems[0].startswith("tw.yaml:3: upstreams.c.models: a named upstream has no")
    assert problems[1] == (
        "tw.yaml:8: models.m.deployments[1].upstream: no upstream named 'b' (upstreams: 'a', 'c')"
    )
    assert problems[2] == "tw.yaml:9: models.m.fallbacks[0]: a model is not its own fallback"
    assert problems[3].startswith("tw.yaml:9: models.m.fallbacks[1]: no model 'nope'")
    assert problems[4].startswith("tw.yaml:10: models.n.tool_calls: upstream 'c' is the Anthropic")
    assert len(problems) == 5


# --- the pool's decisions ---------------------------------------------------------------


def _deployment(name: str, weight: int = 1) -> Deployment:
    answer = ModelResponse(message=AssistantMessage(content="ok"))
    return Deployment(name, "m", ScriptedModel([answer], name=name), weight=weight)


def test_weighted_round_robin_is_smooth() -> None:
    a, b = _deployment("a", 3), _deployment("b", 1)
    pool = Pool("m", [a, b], strategy="weighted_round_robin")
    picks = [pool.order(0.0)[0].upstream for _ in range(8)]
    assert picks == ["a", "a", "b", "a"] * 2


def test_least_busy_prefers_the_fewest_in_flight_per_weight() -> None:
    a, b = _deployment("a", 2), _deployment("b", 1)
    pool = Pool("m", [a, b])
    a.in_flight, b.in_flight = 3, 1  # 1.5 per unit of weight against 1
    assert [d.upstream for d in pool.order(0.0)] == ["b", "a"]
    b.in_flight = 2
    assert [d.upstream for d in pool.order(0.0)] == ["a", "b"]


def test_cooldown_leaves_a_deployment_out_then_lets_one_request_probe() -> None:
    a, b = _deployment("a"), _deployment("b")
    pool = Pool("m", [a, b], cooldown_failures=2, cooldown_seconds=10)
    assert not pool.failed(a, 100.0)
    assert pool.failed(a, 100.0)
    assert pool.order(105.0) == [b]
    assert set(map(id, pool.order(111.0))) == {id(a), id(b)}
    pool.started(a, 111.0)  # the one trial request
    assert pool.order(111.5) == [b]
    assert pool.failed(a, 112.0)  # one failure of the trial is enough
    assert pool.order(115.0) == [b]
    pool.started(a, 123.0)
    pool.answered(a, 0.01)
    assert len(pool.order(123.5)) == 2


# --- failover and fallbacks through the gateway -----------------------------------------


def test_requests_are_shared_between_deployments(
    server: LiveServer, fakes: Fakes, client: openai.OpenAI
) -> None:
    for fake in (fakes.a, fakes.b):
        fake.set_default(completion("hi"))
    for _ in range(6):
        answer = client.chat.completions.create(model="qwen3", messages=user("hello"))
        assert answer.choices[0].message.content == "hi"
    assert (_count(fakes.a), _count(fakes.b)) == (3, 3)


def test_a_failing_deployment_costs_no_client_error_and_cools_down(
    server: LiveServer, fakes: Fakes, client: openai.OpenAI
) -> None:
    fakes.a.set_default(error(503, "overloaded", type="server_error"))
    fakes.b.set_default(completion("from b"))
    for _ in range(8):
        answer = client.chat.completions.create(model="qwen3", messages=user("hello"))
        assert answer.choices[0].message.content == "from b"
    # Two failures in a row (routing.cooldown.failures) and it is left out.
    assert _count(fakes.a) == 2
    assert _count(fakes.b) == 8
    assert _count(fakes.native) == 0


@pytest.mark.parametrize("stream", [False, True])
def test_a_429_model_is_answered_by_its_fallback(
    server: LiveServer, fakes: Fakes, stream: bool, client: openai.OpenAI
) -> None:
    for fake in (fakes.a, fakes.b):
        fake.set_default(error(429, "rate limited", type="rate_limit_error"))
    if stream:
        fakes.native.reply(
            sse([delta(content="from "), delta(content="gpt", finish_reason="stop")])
        )
    else:
        fakes.native.reply(completion("from gpt"))
    if stream:
        chunks = client.chat.completions.create(model="qwen3", messages=user("hi"), stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        answer = client.chat.completions.create(model="qwen3", messages=user("hi"))
        text = answer.choices[0].message.content or ""
        assert answer.model == "qwen3"
    assert text == "from gpt"
    assert (_count(fakes.a), _count(fakes.b), _count(fakes.native)) == (1, 1, 1)
    assert fakes.native.requests[0].json["model"] == "gpt-4o-mini"


def test_raw_text_model_falls_back_to_native_with_the_same_tools(
    server: LiveServer, fakes: Fakes, client: openai.OpenAI
) -> None:
    fakes.a.set_default(error(503, "down", type="server_error"))
    fakes.b.set_default(error(503, "down", type="server_error"))
    fakes.native.reply(
        completion(tool_calls=[tool_call("get_weather", {"city": "Paris"}, id="call_up1")]),
        completion("Sunny in Paris."),
    )
    first = client.chat.completions.create(
        model="qwen3", messages=user("weather?"), tools=[WEATHER_TOOL]
    )
    [call] = first.choices[0].message.tool_calls or []
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Paris"},
    )
    # The raw-text deployment and the native fallback were offered the same tools.
    for fake in (fakes.a, fakes.native):
        assert [t["function"]["name"] for t in fake.requests[0].json["tools"]] == ["get_weather"]
    second = client.chat.completions.create(
        model="qwen3",
        messages=[
            *user("weather?"),
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        tools=[WEATHER_TOOL],
    )
    assert second.choices[0].message.content == "Sunny in Paris."
    sent = fakes.native.requests[-1].json["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": call.id, "content": "sunny"}


def test_fallback_to_anthropic_keeps_tool_use_through_the_messages_door(
    fakes: Fakes, messages_client: anthropic.Anthropic
) -> None:
    for fake in (fakes.a, fakes.b, fakes.native):
        fake.set_default(error(500, "boom", type="server_error"))
    fakes.claude.reply(
        anthropic_sse(anthropic_events(tool_use("get_weather", {"city": "Paris"}, id="toolu_9")))
    )
    tool = {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "input_schema": WEATHER_TOOL["function"]["parameters"],
    }
    with messages_client.messages.stream(
        model="qwen3",
        max_tokens=100,
        messages=[{"role": "user", "content": "weather?"}],
        tools=[tool],  # type: ignore[list-item]
    ) as stream:
        final = stream.get_final_message()
    [block] = [b for b in final.content if b.type == "tool_use"]
    assert (block.name, block.input) == ("get_weather", {"city": "Paris"})
    assert [t["name"] for t in fakes.claude.requests[0].json["tools"]] == ["get_weather"]
    assert _count(fakes.native) == 1


def test_a_context_window_error_goes_only_to_a_larger_window(
    server: LiveServer, fakes: Fakes, client: openai.OpenAI
) -> None:
    too_long = error(
        400,
        "This model's maximum context length is 32000 tokens.",
        code="context_length_exceeded",
    )
    fakes.a.set_default(too_long)
    fakes.b.set_default(too_long)
    fakes.claude.reply(message("a long answer"))
    answer = client.chat.completions.create(model="qwen3", messages=user("long"))
    assert answer.choices[0].message.content == "a long answer"
    # One deployment said it; its twin has the same window, gpt-4o-mini a smaller one.
    assert _count(fakes.a) + _count(fakes.b) == 1
    assert _count(fakes.native) == 0


def test_a_request_error_is_the_clients_and_not_retried(
    server: LiveServer, fakes: Fakes, client: openai.OpenAI
) -> None:
    fakes.a.set_default(error(400, "temperature must be at most 1", param="temperature"))
    fakes.b.set_default(error(400, "temperature must be at most 1", param="temperature"))
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="qwen3", messages=user("x"), temperature=1.5)
    assert "temperature must be at most 1" in str(caught.value)
    assert sum(map(_count, fakes.all)) == 1


def test_when_everything_fails_one_error_names_no_upstream(
    server: LiveServer, fakes: Fakes, client: openai.OpenAI, messages_client: anthropic.Anthropic
) -> None:
    for fake in (fakes.a, fakes.b, fakes.native):
        fake.set_default(error(503, "down", type="server_error"))
    fakes.claude.set_default(anthropic_error(529, "overloaded", type="overloaded_error"))
    response = post_chat(server, {"model": "qwen3", "messages": user("x")})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"
    assert "127.0.0.1" not in response.text
    with pytest.raises(anthropic.APIStatusError) as caught:
        messages_client.messages.create(
            model="qwen3", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 502
    assert "127.0.0.1" not in str(caught.value.body)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["type"] == "error"


def test_models_lists_every_public_id(server: LiveServer, client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert ids == ["qwen3", "gpt-4o-mini", "claude"]


# --- observability -----------------------------------------------------------------------


def test_metrics_access_log_and_readyz_name_deployments(
    server: LiveServer, fakes: Fakes, client: openai.OpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fakes.a.set_default(error(503, "down", type="server_error"))
    fakes.b.set_default(completion("from b"))
    with caplog.at_level("INFO", logger="toolwire.access"):
        for _ in range(3):
            client.chat.completions.create(model="qwen3", messages=user("hi"))
    lines = [r.getMessage() for r in caplog.records if r.name == "toolwire.access"]
    assert lines
    assert all("deployment=vllm-b/Qwen/Qwen3-8B" in line for line in lines if "/chat" in line)
    with httpx.Client(base_url=server.url, timeout=10) as http:
        metrics = http.get("/metrics").text
        ready = http.get("/readyz")
    a_label = 'deployment="vllm-a/Qwen/Qwen3-8B",kind="status",upstream="vllm-a"'
    assert f"toolwire_deployment_failures_total{{{a_label}}} 2.0" in metrics
    cooled = 'deployment="vllm-a/Qwen/Qwen3-8B",upstream="vllm-a"'
    assert f"toolwire_deployment_cooldowns_total{{{cooled}}} 1.0" in metrics
    assert (
        'toolwire_deployment_requests_total{deployment="vllm-b/Qwen/Qwen3-8B",model="qwen3",'
        'upstream="vllm-b"} 3.0' in metrics
    )
    assert 'toolwire_deployment_in_flight{deployment="claude/claude-sonnet-4-5"' in metrics
    checks = ready.json()["checks"]
    assert {k: v for k, v in checks.items() if k.startswith("upstream:")} == {
        "upstream:vllm-a": "cooling down",
        "upstream:vllm-b": "ok",
        "upstream:openai": "ok",
        "upstream:claude": "ok",
    }
    assert ready.status_code == 200
    assert "127.0.0.1" not in ready.text


def test_the_router_is_the_retry_loop_unless_an_upstream_says_otherwise(fakes: Fakes) -> None:
    config = fakes.config()
    del config["upstreams"]["vllm-a"]["retries"]  # vllm-b keeps its own `retries: 0`
    config["upstreams"]["claude"]["retries"] = 3
    del config["upstreams"]["openai"]["retries"]
    config["models"]["solo"] = {"upstream": "openai", "model": "gpt-4o-mini"}
    fakes.a.set_default(error(503, "down", type="server_error"))
    fakes.b.set_default(completion("from b"))
    fakes.native.set_default(error(503, "down", type="server_error"))
    with live_gateway(config_with(**config)) as live, sdk(live) as client:
        for _ in range(2):
            answer = client.chat.completions.create(model="qwen3", messages=user("hi"))
            assert answer.choices[0].message.content == "from b"
        # No retries on vllm-a: its failure went straight to vllm-b.
        assert _count(fakes.a) == 1
        # A model with nowhere else to go keeps the upstream's default retries (2).
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="solo", messages=user("hi"))
        assert _count(fakes.native) == 3
