"""The gateway app in-process: routes, auth, OpenAI-shaped errors and limits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from server_support import (
    ALICE_KEY,
    BOB_KEY,
    TOOLS_MODULE,
    GatewayFactory,
    config_with,
    keyed_config,
)

from toolwire.server import GatewayConfig


def assert_openai_error(response: httpx.Response, status: int, code: str | None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    return dict(error)


# --- health and models ---------------------------------------------------------------------


async def test_healthz(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_healthz_needs_no_key(gateway: GatewayFactory) -> None:
    async with gateway(keyed_config()) as client:
        assert (await client.get("/healthz")).status_code == 200


async def test_models_default_offline(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        response = await client.get("/v1/models")
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "list"
    [model] = body["data"]
    assert model["id"] == "toolwire-offline"
    assert model["object"] == "model"
    assert model["owned_by"] == "toolwire"
    assert isinstance(model["created"], int)


async def test_models_lists_the_public_ids_in_config_order(gateway: GatewayFactory) -> None:
    config = config_with(
        upstream={
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "models": {
                "fast": "gpt-4o-mini",
                "Qwen/Qwen3-8B": {"model": "qwen3", "tool_calls": "parse:hermes"},
            },
        }
    )
    async with gateway(config) as client:
        listed = (await client.get("/v1/models")).json()["data"]
        one = await client.get("/v1/models/Qwen/Qwen3-8B")
    assert [m["id"] for m in listed] == ["fast", "Qwen/Qwen3-8B"]
    assert one.status_code == 200
    assert one.json()["id"] == "Qwen/Qwen3-8B"


async def test_unknown_model_is_404(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        response = await client.get("/v1/models/gpt-9")
    error = assert_openai_error(response, 404, "model_not_found")
    assert error["param"] == "model"
    assert error["type"] == "invalid_request_error"
    assert "'gpt-9'" in error["message"]
    assert "'toolwire-offline'" in error["message"]


# --- tools ---------------------------------------------------------------------------------


async def test_tools_lists_server_tools_with_schemas(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        body = (await client.get("/v1/tools")).json()
    assert body["object"] == "list"
    by_name = {t["function"]["name"]: t for t in body["data"]}
    # quarterly_report needs the 'reports' scope, which an open gateway's callers lack.
    assert list(by_name) == ["whoami", "add"]
    add = by_name["add"]
    assert add["type"] == "function"
    assert add["function"]["description"] == "Add two integers."
    params = add["function"]["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["a", "b"]
    assert params["properties"]["a"]["type"] == "integer"
    assert add["effects"] == "read"
    # The injected context is never part of the schema.
    assert by_name["whoami"]["function"]["parameters"]["properties"] == {}


async def test_tools_lists_only_what_the_callers_key_may_call(gateway: GatewayFactory) -> None:
    async with gateway(keyed_config()) as client:
        alice = await client.get("/v1/tools", headers={"Authorization": f"Bearer {ALICE_KEY}"})
        bob = await client.get("/v1/tools", headers={"Authorization": f"Bearer {BOB_KEY}"})
    alice_tools = {t["function"]["name"]: t for t in alice.json()["data"]}
    assert list(alice_tools) == ["whoami", "add", "quarterly_report"]
    assert alice_tools["quarterly_report"]["scopes"] == ["reports"]
    assert [t["function"]["name"] for t in bob.json()["data"]] == ["whoami", "add"]


async def test_invoke_runs_the_tool_through_the_runner(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        response = await client.post(
            "/v1/tools/add/invoke", json={"arguments": {"a": 2, "b": "40"}, "id": "call_abc"}
        )
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "tool.result"
    assert body["call_id"] == "call_abc"
    assert body["name"] == "add"
    assert body["success"] is True
    assert body["result"] == 42
    assert body["error"] is None
    assert body["content"] == "42"
    # The runner repaired the number sent as a string.
    assert body["repaired"]
    assert body["duration_ms"] >= 0


async def test_invoke_gives_a_fresh_call_id_and_defaults_to_no_arguments(
    gateway: GatewayFactory,
) -> None:
    async with gateway() as client:
        body = (await client.post("/v1/tools/whoami/invoke", json={})).json()
    assert body["call_id"].startswith("call_")
    assert body["success"] is True
    assert body["result"] == {"principal": None, "scopes": [], "has_token": False}


async def test_invoke_invalid_arguments_is_a_failed_result_not_an_http_error(
    gateway: GatewayFactory,
) -> None:
    async with gateway() as client:
        response = await client.post("/v1/tools/add/invoke", json={"arguments": {"a": 1}})
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is False
    assert body["result"] is None
    assert body["error"]["code"] == "invalid_arguments"
    assert "'b'" in body["error"]["message"]
    assert body["content"].startswith('{"error"')


async def test_invoke_scoped_tool_without_the_scope_is_forbidden(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        body = (
            await client.post(
                "/v1/tools/quarterly_report/invoke", json={"arguments": {"quarter": "Q3"}}
            )
        ).json()
    assert body["success"] is False
    assert body["error"]["code"] == "forbidden"


async def test_invoke_unknown_tool_is_404(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        response = await client.post("/v1/tools/nope/invoke", json={"arguments": {}})
    error = assert_openai_error(response, 404, "tool_not_found")
    assert error["param"] == "name"
    assert "'nope'" in error["message"]
    assert "'add'" in error["message"]


# --- bad requests --------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"{not json", b'{"arguments": {}', b"\xff\xfe"])
async def test_malformed_json_is_400(gateway: GatewayFactory, body: bytes) -> None:
    async with gateway() as client:
        response = await client.post(
            "/v1/tools/add/invoke", content=body, headers={"content-type": "application/json"}
        )
    error = assert_openai_error(response, 400, "invalid_json")
    assert error["type"] == "invalid_request_error"
    assert "not valid JSON" in error["message"]


async def test_empty_body_is_400(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        response = await client.post("/v1/tools/add/invoke", content=b"  ")
    error = assert_openai_error(response, 400, None)
    assert "empty" in error["message"]


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"arguments": [1, 2]}, "arguments", "valid dictionary"),
        ({"arguments": {}, "argumnets": {}}, "argumnets", "unknown field"),
        ({"id": ""}, "id", "at least 1 character"),
    ],
)
async def test_request_schema_violation_is_400_naming_the_field(
    gateway: GatewayFactory, body: dict[str, Any], param: str, words: str
) -> None:
    async with gateway() as client:
        response = await client.post("/v1/tools/add/invoke", json=body)
    error = assert_openai_error(response, 400, None)
    assert error["param"] == param
    assert f"'{param}'" in error["message"]
    assert words in error["message"]


async def test_a_body_that_is_not_an_object_is_400(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        response = await client.post("/v1/tools/add/invoke", json=[1, 2])
    error = assert_openai_error(response, 400, None)
    assert "JSON object, not an array" in error["message"]


def small_limit() -> GatewayConfig:
    return config_with(server_tools={"modules": [TOOLS_MODULE]}, limits={"max_body_bytes": 64})


async def test_oversized_body_with_content_length_is_413(gateway: GatewayFactory) -> None:
    async with gateway(small_limit()) as client:
        response = await client.post(
            "/v1/tools/add/invoke", json={"arguments": {"a": 1, "b": 2}, "id": "x" * 100}
        )
        fits = await client.post("/v1/tools/add/invoke", json={"arguments": {"a": 1, "b": 2}})
    error = assert_openai_error(response, 413, "request_too_large")
    assert "64 bytes" in error["message"]
    assert "limits.max_body_bytes" in error["message"]
    assert fits.status_code == 200


async def test_oversized_chunked_body_is_refused_while_reading(gateway: GatewayFactory) -> None:
    produced = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal produced
        for _ in range(1000):
            produced += 1
            yield b"[" * 16

    async with gateway(small_limit()) as client:
        response = await client.post("/v1/tools/add/invoke", content=chunks())
    assert_openai_error(response, 413, "request_too_large")
    # The gateway stopped reading once past the limit: far fewer chunks than were on offer.
    assert produced < 20


async def test_unknown_path_and_wrong_method_are_openai_shaped(gateway: GatewayFactory) -> None:
    async with gateway() as client:
        missing = await client.get("/v1/nothing")
        wrong = await client.get("/v1/tools/add/invoke")
    assert_openai_error(missing, 404, "not_found")
    error = assert_openai_error(wrong, 405, "method_not_allowed")
    assert "GET" in error["message"]
    assert wrong.headers["allow"] == "POST"


# --- gateway keys --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/models"),
        ("GET", "/v1/models/toolwire-offline"),
        ("GET", "/v1/tools"),
        ("POST", "/v1/tools/add/invoke"),
    ],
)
async def test_every_route_needs_a_key_when_keys_are_configured(
    gateway: GatewayFactory, method: str, path: str
) -> None:
    async with gateway(keyed_config()) as client:
        missing = await client.request(method, path, json={"arguments": {"a": 1, "b": 1}})
        wrong = await client.request(
            method,
            path,
            json={"arguments": {"a": 1, "b": 1}},
            headers={"Authorization": "Bearer tw-wrong"},
        )
        basic = await client.request(method, path, headers={"Authorization": f"Basic {ALICE_KEY}"})
    error = assert_openai_error(missing, 401, "invalid_api_key")
    assert "Authorization: Bearer" in error["message"]
    assert missing.headers["www-authenticate"].startswith("Bearer")
    error = assert_openai_error(wrong, 401, "invalid_api_key")
    assert "tw-wrong" not in error["message"]
    assert_openai_error(basic, 401, "invalid_api_key")


async def test_auth_is_checked_before_the_body_is_read(gateway: GatewayFactory) -> None:
    config = keyed_config(limits={"max_body_bytes": 64})
    async with gateway(config) as client:
        response = await client.post("/v1/tools/add/invoke", content=b"{" * 1000)
    assert_openai_error(response, 401, "invalid_api_key")


async def test_a_keys_name_and_scopes_reach_the_tool_context(gateway: GatewayFactory) -> None:
    async with gateway(keyed_config()) as client:
        alice = {"Authorization": f"Bearer {ALICE_KEY}"}
        # Bob sends his own token for HTTP tools; the gateway key is never that token.
        bob = {"Authorization": f"Bearer {BOB_KEY}", "X-Forwarded-Authorization": "Bearer b"}
        as_alice = (await client.post("/v1/tools/whoami/invoke", json={}, headers=alice)).json()
        as_bob = (await client.post("/v1/tools/whoami/invoke", json={}, headers=bob)).json()
        report = {"arguments": {"quarter": "Q3"}}
        alice_report = await client.post(
            "/v1/tools/quarterly_report/invoke", json=report, headers=alice
        )
        bob_report = await client.post(
            "/v1/tools/quarterly_report/invoke", json=report, headers=bob
        )
        models = await client.get("/v1/models", headers=bob)
    assert as_alice["result"] == {"principal": "alice", "scopes": ["reports"], "has_token": False}
    assert as_bob["result"] == {"principal": "bob", "scopes": [], "has_token": True}
    assert alice_report.json()["result"] == "Report for Q3: all good."
    assert bob_report.json()["error"]["code"] == "forbidden"
    assert models.status_code == 200


async def test_bearer_scheme_is_case_insensitive(gateway: GatewayFactory) -> None:
    async with gateway(keyed_config()) as client:
        response = await client.get(
            "/v1/models", headers={"Authorization": f"bearer  {ALICE_KEY} "}
        )
    assert response.status_code == 200
