"""`HttpTools` against a real HTTP service on loopback: directly, via the runner, the gateway."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from live import LiveServer
from server_support import ALICE_KEY, GatewayFactory, config_with, keyed_config
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from toolwire import Agent, AssistantMessage, ScriptedModel, ToolMessage
from toolwire.runner import ToolRunner
from toolwire.tools import (
    Toolbox,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    ToolExecutionError,
    ToolNotFoundError,
)
from toolwire.tools.http import MAX_ERROR_BODY, HttpTool, HttpTools

SECRET_BODY = "internal detail: db password hunter2"


def _seen(request: Request, body: Any = None) -> dict[str, Any]:
    return {
        "method": request.method,
        "path": request.url.path,
        "query": [[k, v] for k, v in request.query_params.multi_items()],
        "authorization": request.headers.get("authorization"),
        "body": body,
    }


async def _order(request: Request) -> Response:
    body = await request.json() if request.method in ("POST", "PUT", "PATCH") else None
    return JSONResponse(_seen(request, body))


async def _status(request: Request) -> Response:
    code = int(request.path_params["code"])
    if code >= 500:
        return PlainTextResponse(SECRET_BODY, status_code=code)
    # A client error explains itself, echoing the caller's header and the URL as some APIs do.
    detail = {
        "error": "no such thing",
        "seen": request.headers.get("authorization"),
        "url": str(request.url),
    }
    return JSONResponse(detail, status_code=code)


async def _reject(request: Request) -> Response:
    # An API's own 4xx explanation, echoing the caller's token and padded past any bound.
    body = {
        "error": "order_id must look like 'A-1042'",
        "received_authorization": request.headers.get("authorization"),
        "padding": "x" * 10_000,
    }
    return JSONResponse(body, status_code=422)


async def _text(request: Request) -> Response:
    return PlainTextResponse("plain words")


async def _bad_json(request: Request) -> Response:
    return Response(b"{oops", media_type="application/json")


async def _empty(request: Request) -> Response:
    return Response(status_code=204)


async def _slow(request: Request) -> Response:
    await asyncio.sleep(2)
    return JSONResponse({})


service = Starlette(
    routes=[
        Route("/orders/{order_id:path}", _order, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/status/{code:int}", _status),
        Route("/text", _text),
        Route("/reject", _reject, methods=["POST"]),
        Route("/bad-json", _bad_json),
        Route("/empty", _empty, methods=["GET", "DELETE"]),
        Route("/slow", _slow),
    ]
)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with LiveServer(service) as server:
        yield server.url


ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "expand": {"type": "array", "items": {"type": "string"}},
        "verbose": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "filter": {"type": "object"},
    },
    "required": ["order_id"],
}


def order_tool(base: str, **options: Any) -> HttpTool:
    defaults: dict[str, Any] = {
        "name": "get_order",
        "description": "Look up an order.",
        "endpoint": f"{base}/orders/{{order_id}}",
        "method": "GET",
        "input_schema": ORDER_SCHEMA,
    }
    return HttpTool(**{**defaults, **options})


async def run(tool: HttpTool, arguments: dict[str, Any], ctx: ToolContext | None = None) -> Any:
    async with HttpTools([tool]) as provider:
        result = await provider.execute_tool(tool.name, arguments, ctx or ToolContext())
    assert result.success
    assert result.name == tool.name
    return result.result


async def test_get_fills_placeholders_and_the_query(base: str) -> None:
    seen = await run(
        order_tool(base),
        {
            "order_id": "A/1 b",
            "expand": ["items", "customer"],
            "verbose": True,
            "note": None,
            "filter": {"x": 1},
        },
    )
    assert seen["method"] == "GET"
    # The placeholder value is quoted: its '/' does not add a path segment.
    assert seen["path"] == "/orders/A/1 b"
    assert seen["query"] == [
        ["expand", "items"],
        ["expand", "customer"],
        ["verbose", "true"],
        ["filter", '{"x":1}'],
    ]
    assert seen["body"] is None


async def test_post_sends_the_other_arguments_as_json(base: str) -> None:
    tool = order_tool(base, method="POST")
    seen = await run(tool, {"order_id": "42", "expand": ["items"], "verbose": False})
    assert seen["method"] == "POST"
    assert seen["path"] == "/orders/42"
    assert seen["query"] == []
    assert seen["body"] == {"expand": ["items"], "verbose": False}


@pytest.mark.parametrize(
    ("forward", "token", "expected"),
    [(True, "user-token", "Bearer user-token"), (True, None, None), (False, "user-token", None)],
)
async def test_bearer_token_forwarded_only_when_configured(
    base: str, forward: bool, token: str | None, expected: str | None
) -> None:
    seen = await run(
        order_tool(base, forward_auth=forward), {"order_id": "1"}, ToolContext(auth_token=token)
    )
    assert seen["authorization"] == expected


async def test_text_and_empty_responses(base: str) -> None:
    text = HttpTool(name="t", endpoint=f"{base}/text", method="GET")
    empty = HttpTool(name="e", endpoint=f"{base}/empty", method="DELETE")
    assert await run(text, {}) == "plain words"
    assert await run(empty, {}) is None


async def failure(tool: HttpTool, arguments: dict[str, Any] | None = None) -> str:
    async with HttpTools([tool], timeout=5) as provider:
        with pytest.raises(ToolExecutionError) as info:
            await provider.execute_tool(tool.name, arguments or {}, ToolContext(auth_token="tok"))
    message = str(info.value)
    # Safe for a model: no endpoint, no token, no server error's body (a 4xx body, masked,
    # is the model's to read).
    assert "127.0.0.1" not in message
    assert "tok" not in message
    assert "hunter2" not in message
    return message


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (404, "HTTP 404 (Not Found). Check the arguments."),
        (401, "HTTP 401 (Unauthorized). The caller may lack access."),
        (503, "HTTP 503 (Service Unavailable)."),
    ],
)
async def test_error_statuses_become_safe_execution_errors(
    base: str, code: int, words: str
) -> None:
    tool = HttpTool(name="s", endpoint=f"{base}/status/{code}", method="GET", forward_auth=True)
    message = await failure(tool)
    assert words in message
    assert "'s'" in message
    assert ("The service said:" in message) is (code < 500)
    assert ("no such thing" in message) is (code < 500)


async def test_a_4xx_body_reaches_the_model_bounded_and_masked(base: str) -> None:
    tool = HttpTool(
        name="create_order",
        endpoint=f"{base}/reject",
        input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
        forward_auth=True,
    )
    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=(ToolCall(id="c1", name="create_order", arguments='{"id": "9"}'),)
            ),
            "Sorry.",
        ]
    )
    token = "user-token-8d1f3c"
    async with HttpTools([tool]) as http:
        await Agent(model, http).run("Order it", ToolContext(auth_token=token))
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage)
    assert sent.is_error
    message = json.loads(sent.content)["error"]["message"]
    assert "answered HTTP 422" in message
    assert "order_id must look like 'A-1042'" in message  # the API's own words
    assert '"received_authorization":"Bearer [redacted]"' in message
    assert token not in sent.content
    assert "127.0.0.1" not in message
    said = message.split("The service said: ", 1)[1]
    assert len(said.encode()) <= MAX_ERROR_BODY + len(" [truncated]")
    assert said.endswith(" [truncated]")


async def test_invalid_json_response(base: str) -> None:
    message = await failure(HttpTool(name="j", endpoint=f"{base}/bad-json", method="GET"))
    assert "invalid JSON" in message


async def test_timeout(base: str) -> None:
    tool = HttpTool(name="slow", endpoint=f"{base}/slow", method="GET", timeout=0.1)
    assert "did not answer in time" in await failure(tool)


async def test_unreachable_endpoint() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port any more.
    tool = HttpTool(name="gone", endpoint=f"http://127.0.0.1:{port}/x", method="GET")
    assert "could not be reached" in await failure(tool)


async def test_unknown_tool_and_bad_definitions(base: str) -> None:
    async with HttpTools([order_tool(base)]) as provider:
        with pytest.raises(ToolNotFoundError):
            await provider.execute_tool("nope", {}, ToolContext())
        assert [t.name for t in await provider.list_tools()] == ["get_order"]
    with pytest.raises(ToolDefinitionError, match="Duplicate HTTP tool name 'get_order'"):
        HttpTools([order_tool(base), order_tool(base)])
    with pytest.raises(ToolDefinitionError, match="not an http"):
        HttpTool(name="x", endpoint="ftp://host/x")
    with pytest.raises(ToolDefinitionError, match="method 'TRACE'"):
        HttpTool(name="x", endpoint="http://host/x", method="TRACE")  # type: ignore[arg-type]


async def test_an_injected_client_is_used_and_left_open(base: str) -> None:
    async with httpx.AsyncClient() as client:
        provider = HttpTools([order_tool(base)], client=client)
        result = await provider.execute_tool("get_order", {"order_id": "7"}, ToolContext())
        await provider.aclose()
        assert not client.is_closed
    assert result.result["path"] == "/orders/7"


async def test_through_the_runner_arguments_are_validated(base: str) -> None:
    async with HttpTools([order_tool(base, scopes=("orders",))]) as http:
        runner = ToolRunner(Toolbox([http]))
        ctx = ToolContext(scopes=frozenset({"orders"}))
        ok = await runner.exec(
            ToolCall(id="c1", name="get_order", arguments='{"order_id": "9"}'), ctx
        )
        bad = await runner.exec(ToolCall(id="c2", name="get_order", arguments="{}"), ctx)
        denied = await runner.exec(
            ToolCall(id="c3", name="get_order", arguments='{"order_id": "9"}'), ToolContext()
        )
    assert ok.success
    assert ok.call_id == "c1"
    assert ok.result["path"] == "/orders/9"
    assert bad.error is not None
    assert bad.error.code == "invalid_arguments"
    assert denied.error is not None
    assert denied.error.code == "forbidden"


async def test_gateway_serves_http_tools_and_forwards_the_callers_token(
    gateway: GatewayFactory, base: str
) -> None:
    http = {
        "name": "get_order",
        "description": "Look up an order.",
        "endpoint": f"{base}/orders/{{order_id}}",
        "method": "get",
        "parameters": ORDER_SCHEMA,
        "forward_auth": True,
    }
    config = keyed_config().model_copy(
        update={"server_tools": config_with(server_tools={"http": [http]}).server_tools}
    )
    user = {"X-Forwarded-Authorization": "Bearer user-token-1"}
    async with gateway(config, headers={"Authorization": f"Bearer {ALICE_KEY}"}) as client:
        listed = (await client.get("/v1/tools")).json()["data"]
        response = await client.post(
            "/v1/tools/get_order/invoke", json={"arguments": {"order_id": "55"}}, headers=user
        )
        without = await client.post(
            "/v1/tools/get_order/invoke", json={"arguments": {"order_id": "56"}}
        )
    assert [t["function"]["name"] for t in listed] == ["get_order"]
    body = response.json()
    assert body["success"] is True, body
    assert body["result"]["path"] == "/orders/55"
    assert body["result"]["authorization"] == "Bearer user-token-1"
    # The gateway key authenticates the caller to the gateway; it is never forwarded.
    assert without.json()["result"]["authorization"] is None


async def test_without_gateway_keys_the_bearer_token_is_the_callers(
    gateway: GatewayFactory, base: str
) -> None:
    http = {
        "name": "get_order",
        "endpoint": f"{base}/orders/{{order_id}}",
        "method": "get",
        "parameters": ORDER_SCHEMA,
        "forward_auth": True,
    }
    config = config_with(server_tools={"http": [http]})
    async with gateway(config, headers={"Authorization": "Bearer api-token"}) as client:
        response = await client.post(
            "/v1/tools/get_order/invoke", json={"arguments": {"order_id": "7"}}
        )
    assert response.json()["result"]["authorization"] == "Bearer api-token"


def test_parameters_is_the_deprecated_spelling_of_input_schema(base: str) -> None:
    with pytest.warns(DeprecationWarning, match="use input_schema="):
        old = HttpTool(name="o", endpoint=f"{base}/orders/{{order_id}}", parameters=ORDER_SCHEMA)
    assert old.input_schema == ORDER_SCHEMA
    assert old.to_tool().input_schema == ORDER_SCHEMA
    assert order_tool(base, allow=("path",)).to_tool().allow == ("path",)


def test_http_tool_config_carries_allow_approver_and_audit_arguments() -> None:
    from toolwire.server.gateway import load_server_tools

    config = config_with(
        server_tools={
            "http": [
                {
                    "name": "drop_table",
                    "endpoint": "http://127.0.0.1:9/api/tables/{table}",
                    "method": "DELETE",
                    "parameters": {
                        "type": "object",
                        "properties": {"table": {"type": "string"}, "token": {"type": "string"}},
                        "required": ["table"],
                    },
                    "effects": "destructive",
                    "allow": ["dropped"],
                    "approver": "dba",
                    "audit_arguments": ["table"],
                }
            ]
        }
    )
    tools, problems = load_server_tools(config.server_tools)
    assert problems == []
    assert tools is not None
    [tool] = tools.provider.tools
    assert (tool.allow, tool.approver, tool.audit_arguments) == (("dropped",), "dba", ("table",))


@pytest.mark.parametrize("value", [".", "..", ""])
async def test_a_dot_or_empty_path_argument_never_moves_the_request(base: str, value: str) -> None:
    tool = order_tool(base, method="POST", forward_auth=True)
    runner = ToolRunner(HttpTools([tool]))
    result = await runner.exec(
        ToolCall(id="c1", name="get_order", arguments=json.dumps({"order_id": value})),
        ToolContext(auth_token="user-token"),
    )
    assert not result.success
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "path segment" in result.error.message


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        ("http://{host}/orders", "scheme, host or port"),
        ("http://127.0.0.1:{port}/orders", "scheme, host or port"),
        ("http://{host}.example.com/orders", "scheme, host or port"),
        ("http://127.0.0.1/orders?id={order_id}", "query string"),
    ],
)
def test_arguments_never_choose_where_the_request_goes(endpoint: str, why: str) -> None:
    with pytest.raises(ToolDefinitionError, match=why):
        HttpTool(name="t", endpoint=endpoint, method="GET", input_schema=ORDER_SCHEMA)

    from toolwire.server.configuration.loader import parse_config

    text = (
        f"server_tools:\n  http:\n    - name: t\n      endpoint: '{endpoint}'\n      method: GET\n"
    )
    doc = parse_config(text, source="tw.yaml")
    assert not doc.ok
    assert any(why in p.message for p in doc.problems), doc.problems
