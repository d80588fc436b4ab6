"""The gateway over a real loopback socket (uvicorn), driven by the official `openai` SDK."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from live import LiveServer
from server_support import ALICE_KEY, BOB_KEY, TOOLS_MODULE, config_with, keyed_config

from toolwire.server import create_app


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    config = keyed_config(
        upstream={
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "models": {"fast": "gpt-4o-mini", "smart": "gpt-4o"},
        },
        limits={"max_body_bytes": 1024},
    )
    with LiveServer(create_app(config, environ={"BOB_KEY_ENV": BOB_KEY})) as live:
        yield live


def client(server: LiveServer, key: str = ALICE_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)


def test_openai_sdk_lists_models(server: LiveServer) -> None:
    with client(server) as sdk:
        models = sdk.models.list()
        one = sdk.models.retrieve("smart")
    assert [m.id for m in models.data] == ["fast", "smart"]
    assert all(m.owned_by == "toolwire" for m in models.data)
    assert one.id == "smart"


def test_openai_sdk_unknown_model_is_not_found(server: LiveServer) -> None:
    with client(server) as sdk, pytest.raises(openai.NotFoundError) as info:
        sdk.models.retrieve("gpt-9")
    assert info.value.status_code == 404
    assert info.value.code == "model_not_found"
    assert info.value.param == "model"


def test_openai_sdk_wrong_key_is_an_authentication_error(server: LiveServer) -> None:
    with client(server, key="tw-wrong") as sdk, pytest.raises(openai.AuthenticationError) as info:
        sdk.models.list()
    assert info.value.code == "invalid_api_key"
    assert "tw-wrong" not in str(info.value)


def test_tools_and_invoke_over_the_socket(server: LiveServer) -> None:
    headers = {"Authorization": f"Bearer {BOB_KEY}"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        tools = http.get("/v1/tools").json()["data"]
        result = http.post("/v1/tools/add/invoke", json={"arguments": {"a": 20, "b": 22}}).json()
        whoami = http.post("/v1/tools/whoami/invoke", json={}).json()
    # bob's key lacks the 'reports' scope quarterly_report needs: it is not listed.
    assert [t["function"]["name"] for t in tools] == ["whoami", "add"]
    assert result["result"] == 42
    assert whoami["result"]["principal"] == "bob"


def test_errors_over_the_socket(server: LiveServer) -> None:
    headers = {"Authorization": f"Bearer {ALICE_KEY}"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        big = http.post("/v1/tools/add/invoke", content=b"x" * 100_000)
        # The connection is still usable, or replaced, for the next request.
        malformed = http.post("/v1/tools/add/invoke", content=b"{")
        schema = http.post("/v1/tools/add/invoke", json={"arguments": "a=1"})
        missing = http.post("/v1/tools/nope/invoke", json={})
        health = http.get("/healthz", headers={"Authorization": ""})
    assert big.status_code == 413
    assert big.json()["error"]["code"] == "request_too_large"
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == "invalid_json"
    assert schema.status_code == 400
    assert schema.json()["error"]["param"] == "arguments"
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "tool_not_found"
    assert health.status_code == 200


def test_openai_sdk_against_an_open_gateway() -> None:
    app = create_app(config_with(server_tools={"modules": [TOOLS_MODULE]}), environ={})
    with LiveServer(app) as live, client(live, key="anything") as sdk:
        assert [m.id for m in sdk.models.list().data] == ["toolwire-offline"]
