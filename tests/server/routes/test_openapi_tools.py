"""HTTP tools from OpenAPI documents (`HttpTools.from_openapi`, `http_tools:` in the
gateway config), against a small API the tests serve on a real socket."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live import LiveServer
from server_support import config_with
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolwire import Agent, HttpTools, Toolbox, ToolContext
from toolwire.models.messages import AssistantMessage
from toolwire.models.scripted import ScriptedModel
from toolwire.runner import Policy, ToolRunner
from toolwire.server import create_app, parse_config
from toolwire.tools import ToolCall, ToolDefinitionError

SEEN: list[dict[str, Any]] = []
"""What the test API received: raw path, query, body, Authorization."""


async def _record(request: Request) -> dict[str, Any]:
    body = await request.body()
    seen = {
        "method": request.method,
        "raw_path": request.scope["raw_path"].decode(),
        "query": dict(request.query_params),
        "body": json.loads(body) if body else None,
        "authorization": request.headers.get("authorization"),
    }
    SEEN.append(seen)
    return seen


async def _order(request: Request) -> JSONResponse:
    seen = await _record(request)
    if request.method == "DELETE":
        return JSONResponse({"deleted": request.path_params["order_id"]})
    if request.path_params["order_id"] == "missing":
        return JSONResponse({"detail": "order missing does not exist"}, status_code=404)
    return JSONResponse({"id": request.path_params["order_id"], "seen": seen["raw_path"]})


async def _orders(request: Request) -> JSONResponse:
    seen = await _record(request)
    if request.method == "POST":
        return JSONResponse({"created": seen["body"], "dry_run": seen["query"].get("dry_run")})
    return JSONResponse([{"id": "1", "status": seen["query"].get("status")}])


async def _tags(request: Request) -> JSONResponse:
    seen = await _record(request)
    return JSONResponse({"tags": seen["body"]})


DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Orders", "version": "1"},
    "servers": [{"url": "/api"}],
    "paths": {
        "/orders": {
            "get": {
                "operationId": "listOrders",
                "summary": "List orders.",
                "parameters": [
                    {"name": "status", "in": "query", "schema": {"type": "string"}},
                    {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                ],
            },
            "post": {
                "operationId": "createOrder",
                "summary": "Create an order.",
                "parameters": [{"name": "dry_run", "in": "query", "schema": {"type": "boolean"}}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/NewOrder"}}
                    },
                },
            },
        },
        "/orders/{order_id}": {
            "parameters": [
                {
                    "name": "order_id",
                    "in": "path",
                    "required": True,
                    "description": "The order's id.",
                    "schema": {"type": "string"},
                }
            ],
            "get": {"operationId": "getOrder", "description": "One order."},
            "delete": {"operationId": "cancelOrder", "summary": "Cancel an order."},
        },
        "/tags": {
            "put": {
                "operationId": "setTags",
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {"type": "array", "items": {"type": "string"}}
                        }
                    }
                },
            }
        },
        "/trees": {
            "post": {
                "operationId": "plantTree",
                "requestBody": {
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Tree"}}
                    }
                },
            }
        },
    },
    "components": {
        "schemas": {
            "NewOrder": {
                "type": "object",
                "required": ["item"],
                "properties": {
                    "item": {"type": "string"},
                    "quantity": {"$ref": "#/components/schemas/Quantity"},
                },
            },
            "Quantity": {"type": "integer", "minimum": 1},
            "Tree": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}},
                },
            },
        }
    },
}


async def _document(request: Request) -> JSONResponse:
    return JSONResponse(DOCUMENT)


@pytest.fixture(scope="module")
def api() -> Iterator[LiveServer]:
    app = Starlette(
        routes=[
            Route("/openapi.json", _document),
            Route("/api/orders", _orders, methods=["GET", "POST"]),
            # `path`: a %2F the client sent must reach the handler (and be seen) as is.
            Route("/api/orders/{order_id:path}", _order, methods=["GET", "DELETE"]),
            Route("/api/tags", _tags, methods=["PUT"]),
            Route("/api/trees", _tags, methods=["POST"]),
        ]
    )
    with LiveServer(app) as live:
        yield live


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    SEEN.clear()
    yield
    SEEN.clear()


def _tools(api: LiveServer, **options: Any) -> HttpTools:
    return HttpTools.from_openapi(DOCUMENT, base_url=f"{api.url}/api", **options)


async def _run(tools: HttpTools, name: str, arguments: dict[str, Any], **ctx: Any) -> Any:
    runner = ToolRunner(tools, policy=Policy(approval="auto"))
    call = ToolCall(id="c1", name=name, arguments=json.dumps(arguments))
    return await runner.exec(call, ToolContext(**ctx))


# --- the mapping -----------------------------------------------------------------------------


def test_one_tool_per_operation_with_effects_from_the_method(api: LiveServer) -> None:
    tools = {t.name: t for t in _tools(api).tools}
    assert set(tools) == {
        "listOrders",
        "createOrder",
        "getOrder",
        "cancelOrder",
        "setTags",
        "plantTree",
    }
    assert tools["listOrders"].effects == "read"
    assert tools["createOrder"].effects == "write"
    assert tools["cancelOrder"].effects == "destructive"
    assert tools["listOrders"].description == "List orders."
    assert tools["getOrder"].description == "One order."


def test_parameters_body_and_refs_become_one_schema(api: LiveServer) -> None:
    tools = {t.name: t for t in _tools(api).tools}
    create = tools["createOrder"].input_schema
    assert create["properties"]["quantity"] == {"type": "integer", "minimum": 1}
    assert create["properties"]["dry_run"] == {"type": "boolean"}
    assert create["required"] == ["item"]
    get = tools["getOrder"].input_schema
    assert get["required"] == ["order_id"]
    assert get["properties"]["order_id"]["description"] == "The order's id."
    # An optional header parameter is left out; a recursive schema is cut where it recurs.
    assert "X-Trace" not in tools["listOrders"].input_schema["properties"]
    tree = tools["plantTree"].input_schema["properties"]
    assert tree["children"]["items"] == {}
    # A body that is not an object is one argument.
    assert tools["setTags"].input_schema["properties"]["body"]["type"] == "array"


def test_selection_and_overrides(api: LiveServer) -> None:
    tools = _tools(
        api,
        operations=["getOrder", "cancelOrder", "listOrders"],
        exclude=["listOrders"],
        effects={"getOrder": "write"},
        scopes=["orders"],
    )
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"getOrder", "cancelOrder"}
    assert by_name["getOrder"].effects == "write"
    assert by_name["cancelOrder"].scopes == ("orders",)


# --- calls -----------------------------------------------------------------------------------


async def test_calls_send_path_query_and_body_where_the_document_says(api: LiveServer) -> None:
    tools = _tools(api)
    got = await _run(tools, "getOrder", {"order_id": "42"})
    assert got.result == {"id": "42", "seen": "/api/orders/42"}
    listed = await _run(tools, "listOrders", {"status": "open"})
    assert listed.result == [{"id": "1", "status": "open"}]
    created = await _run(tools, "createOrder", {"item": "tea", "quantity": 2, "dry_run": True})
    assert created.result == {"created": {"item": "tea", "quantity": 2}, "dry_run": "true"}
    tagged = await _run(tools, "setTags", {"body": ["a", "b"]})
    assert tagged.result == {"tags": ["a", "b"]}
    invalid = await _run(tools, "createOrder", {"item": "tea", "quantity": 0})
    assert invalid.error is not None
    assert invalid.error.code == "invalid_arguments"
    missing = await _run(tools, "getOrder", {"order_id": "missing"})
    assert missing.error is not None
    assert "order missing does not exist" in missing.error.message
    await tools.aclose()


@pytest.mark.parametrize("order_id", ["../admin", "a/b", "%2e%2e", "..%2Fadmin"])
async def test_path_arguments_cannot_leave_their_segment(api: LiveServer, order_id: str) -> None:
    tools = _tools(api)
    result = await _run(tools, "getOrder", {"order_id": order_id})
    await tools.aclose()
    assert result.success
    [seen] = SEEN
    assert seen["raw_path"].startswith("/api/orders/")
    assert "/" not in seen["raw_path"].removeprefix("/api/orders/")
    assert result.result["id"] == order_id  # the server got the value back, whole


async def test_dot_segments_are_refused(api: LiveServer) -> None:
    tools = _tools(api)
    result = await _run(tools, "getOrder", {"order_id": ".."})
    await tools.aclose()
    assert result.error is not None
    assert SEEN == []


async def test_auth_forward_and_from_the_environment(api: LiveServer) -> None:
    forward = _tools(api, auth="forward")
    await _run(forward, "getOrder", {"order_id": "1"}, auth_token="caller-token")
    from_env = _tools(api, auth="env:ORDERS_TOKEN", environ={"ORDERS_TOKEN": "api-token"})
    await _run(from_env, "getOrder", {"order_id": "1"}, auth_token="caller-token")
    none = _tools(api)
    await _run(none, "getOrder", {"order_id": "1"}, auth_token="caller-token")
    for tools in (forward, from_env, none):
        await tools.aclose()
    assert [s["authorization"] for s in SEEN] == ["Bearer caller-token", "Bearer api-token", None]
    with pytest.raises(ToolDefinitionError, match="ORDERS_TOKEN is not set"):
        _tools(api, auth="env:ORDERS_TOKEN", environ={})


async def test_the_document_from_a_url_with_a_relative_server(api: LiveServer) -> None:
    tools = HttpTools.from_openapi(f"{api.url}/openapi.json", operations=["getOrder"])
    result = await _run(tools, "getOrder", {"order_id": "7"})
    await tools.aclose()
    assert result.result["id"] == "7"


async def test_an_agent_calls_an_openapi_tool(api: LiveServer) -> None:
    tools = _tools(api, operations=["getOrder"])
    call = ToolCall(id="c1", name="getOrder", arguments='{"order_id": "9"}')
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "Order 9 is there."])
    result = await Agent(model, Toolbox([tools])).run("Is order 9 there?")
    await tools.aclose()
    assert result.output == "Order 9 is there."
    assert result.steps[0].tool_results[0].result["id"] == "9"


# --- bad documents ---------------------------------------------------------------------------


def _with(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(DOCUMENT)
    document.update(changes)
    return document


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"swagger": "2.0", "paths": {}}, "Swagger 2.0"),
        ({"openapi": "3.0.0"}, "has no 'paths'"),
        ({"paths": {}}, "not an OpenAPI 3 document"),
    ],
)
def test_documents_that_are_not_openapi_3_are_refused(document: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        HttpTools.from_openapi(document, base_url="http://127.0.0.1:9")


def test_mapping_problems_are_named() -> None:
    with pytest.raises(ToolDefinitionError, match="no operation 'nope'"):
        HttpTools.from_openapi(DOCUMENT, base_url="http://x", operations=["nope"])
    with pytest.raises(ToolDefinitionError, match="names no server"):
        HttpTools.from_openapi(_with(servers=[]))
    external = copy.deepcopy(DOCUMENT)
    external["paths"]["/orders"]["post"]["requestBody"]["content"]["application/json"] = {
        "schema": {"$ref": "other.yaml#/Order"}
    }
    with pytest.raises(ToolDefinitionError, match="only references inside the document"):
        HttpTools.from_openapi(external, base_url="http://x")
    header = copy.deepcopy(DOCUMENT)
    header["paths"]["/orders"]["get"]["parameters"][1]["required"] = True
    with pytest.raises(ToolDefinitionError, match="requires the header parameter 'X-Trace'"):
        HttpTools.from_openapi(header, base_url="http://x")
    with pytest.raises(ToolDefinitionError, match="Cannot read the OpenAPI document"):
        HttpTools.from_openapi("/no/such/openapi.yaml")


# --- in the gateway --------------------------------------------------------------------------


def test_http_tools_in_the_gateway_config(api: LiveServer, tmp_path: Path) -> None:
    spec = tmp_path / "orders.json"
    spec.write_text(json.dumps(DOCUMENT))
    config = config_with(
        http_tools=[
            {
                "openapi": str(spec),
                "base_url": f"{api.url}/api",
                "operations": ["getOrder", "cancelOrder"],
                "effects": {"getOrder": "read"},
            }
        ],
        store="memory",
    )
    with LiveServer(create_app(config)) as gateway, httpx.Client(base_url=gateway.url) as http:
        listed = {t["function"]["name"]: t for t in http.get("/v1/tools").json()["data"]}
        assert set(listed) == {"getOrder", "cancelOrder"}
        assert listed["cancelOrder"]["effects"] == "destructive"
        got = http.post("/v1/tools/getOrder/invoke", json={"arguments": {"order_id": "5"}})
        assert got.json()["result"]["id"] == "5"


def test_bad_http_tools_entries_are_located(tmp_path: Path) -> None:
    doc = parse_config(
        json.dumps({"http_tools": [{"openapi": "x.yaml", "auth": "token"}]}),
        source="toolwire.yaml",
    )
    assert any(p.path == "http_tools[0].auth" for p in doc.errors)
