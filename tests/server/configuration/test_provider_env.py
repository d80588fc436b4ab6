"""The upstream's key and base URL fall back to the variables the provider's own SDK
reads (`OPENAI_API_KEY`, `OPENAI_BASE_URL`; `ANTHROPIC_…`) when the config names neither;
what the config says always wins."""

from __future__ import annotations

import httpx
from live import LiveServer
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion
from toolwire.server import create_app

ASK = {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}


def test_openai_key_and_base_url_come_from_the_environment(
    openai_server: FakeOpenAIServer,
) -> None:
    config = config_with(upstream={"kind": "openai", "models": {"gpt": "gpt-4o"}}, store="memory")
    environ = {"OPENAI_API_KEY": "sk-from-env-123456", "OPENAI_BASE_URL": openai_server.base_url}
    openai_server.reply(completion("hello"))
    with LiveServer(create_app(config, environ=environ)) as live:
        answer = httpx.post(f"{live.url}/v1/chat/completions", json=ASK, timeout=10)
    assert answer.status_code == 200, answer.text
    assert openai_server.requests[-1].headers["authorization"] == "Bearer sk-from-env-123456"


def test_the_config_wins_over_the_environment(openai_server: FakeOpenAIServer) -> None:
    upstream = {
        "kind": "openai",
        "base_url": openai_server.base_url,
        "api_key_env": "MY_KEY",
        "models": {"gpt": "gpt-4o"},
    }
    config = config_with(upstream=upstream, store="memory")
    environ = {
        "MY_KEY": "sk-mine-1234567",
        "OPENAI_API_KEY": "sk-other-1234567",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    openai_server.reply(completion("hello"))
    with LiveServer(create_app(config, environ=environ)) as live:
        answer = httpx.post(f"{live.url}/v1/chat/completions", json=ASK, timeout=10)
    assert answer.status_code == 200, answer.text
    assert openai_server.requests[-1].headers["authorization"] == "Bearer sk-mine-1234567"
