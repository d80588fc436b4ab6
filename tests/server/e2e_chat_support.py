"""Helpers of the end-to-end `/v1/chat/completions` tests: a gateway on a real loopback
socket in front of a fake upstream, the `openai` SDK pointed at it, and checks of the
OpenAI error shape."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

import httpx
import openai
from live import LiveServer
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from toolwire.server import GatewayConfig, create_app

# The tools and messages are typed `Any`: they go both to the `openai` SDK (TypedDict
# parameters) and into raw JSON bodies.
UPSTREAM_KEY_ENV: Final = "TOOLWIRE_TEST_UPSTREAM_KEY"
UPSTREAM_SECRET: Final = "sk-upstream-Sekr3t-9c41f0e2d7"
"""The upstream key: recognisable, so any echo of it in a response is caught."""
ENVIRON: Final = {UPSTREAM_KEY_ENV: UPSTREAM_SECRET}

WEATHER_TOOL: Final[Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name."}},
            "required": ["city"],
        },
    },
}
TIME_TOOL: Final[Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def openai_upstream(base_url: str, models: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """An `upstream` section for an OpenAI-compatible fake, keyed by `UPSTREAM_KEY_ENV`."""
    return {
        "kind": "openai",
        "base_url": base_url,
        "api_key_env": UPSTREAM_KEY_ENV,
        "models": dict(models),
        **extra,
    }


@contextlib.contextmanager
def live_gateway(
    config: GatewayConfig,
    environ: Mapping[str, str] | None = None,
    *,
    served_by: str = "uvicorn",
) -> Iterator[LiveServer]:
    """The gateway app served on 127.0.0.1 (a free port) by uvicorn as it comes, or with
    `served_by="toolwire"` by the server `toolwire serve` runs (its protocol, drain and
    header deadline)."""
    app = create_app(config, environ=dict(ENVIRON if environ is None else environ))
    with LiveServer(app, served_by=served_by) as live:
        yield live


def sdk(server: LiveServer, key: str = "unused", **options: Any) -> openai.OpenAI:
    """The official client pointed at the gateway; retries off so each call is one request."""
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, **options)


def post_chat(
    server: LiveServer,
    body: Any = None,
    *,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """`POST /v1/chat/completions` with raw httpx (for what the SDK would refuse to send)."""
    with httpx.Client(base_url=server.url, timeout=10) as http:
        if content is not None:
            return http.post(
                "/v1/chat/completions",
                content=content,
                headers={"content-type": "application/json", **(headers or {})},
            )
        return http.post("/v1/chat/completions", json=body, headers=headers)


def openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The `error` object of an OpenAI-shaped error response, after checking its shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["type"], str)
    assert error["type"]
    assert UPSTREAM_SECRET not in response.text
    return error


def sse_chunks(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON events of a streamed response (`[DONE]` left out), after checking that it
    ends with `[DONE]`."""
    datas = [
        line[len("data: ") :] for line in response.text.split("\n") if line.startswith("data: ")
    ]
    assert datas, response.text
    assert datas[-1] == "[DONE]", response.text[-500:]
    return [json.loads(d) for d in datas[:-1]]


def user(text: str = "What is the weather in Paris?") -> list[Any]:
    """One user message, typed loosely so the SDK's and raw requests can both take it."""
    return [{"role": "user", "content": text}]


def function_calls(answer: ChatCompletion) -> list[tuple[str, str, Any]]:
    """`(id, name, parsed arguments)` of each tool call of the answer's first choice."""
    out: list[tuple[str, str, Any]] = []
    for call in answer.choices[0].message.tool_calls or []:
        assert isinstance(call, ChatCompletionMessageFunctionToolCall)
        out.append((call.id, call.function.name, json.loads(call.function.arguments)))
    return out
