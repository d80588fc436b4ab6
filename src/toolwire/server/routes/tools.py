"""`GET /v1/tools` and `POST /v1/tools/{name}/invoke`: the server tools, and running one
through the runner (for clients that run the model loop themselves)."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.http.errors import GatewayError, store_error
from toolwire.server.http.requests import read_json, validate_body
from toolwire.server.http.responses import json_response
from toolwire.server.keys.caller import authenticate, gateway_of
from toolwire.server.run_view import result_json as _result_json
from toolwire.store.base import StoreError
from toolwire.tools import Tool, ToolCall, ToolResult, new_call_id

__all__ = ["InvokeRequest", "result_json", "routes"]


def _tool_entry(tool: Tool) -> dict[str, Any]:
    entry = tool.to_openai()
    entry["effects"] = tool.effects
    entry["scopes"] = list(tool.scopes)
    return entry


async def _list_tools(request: Request) -> Response:
    ctx = authenticate(request).ctx
    # Only the tools this caller may call: the others are not its business.
    tools = [
        t
        for t in await gateway_of(request).runner.list_tools()
        if not t.scopes or ctx.scopes.issuperset(t.scopes)
    ]
    return json_response({"object": "list", "data": [_tool_entry(t) for t in tools]})


class InvokeRequest(BaseModel):
    """The body of `POST /v1/tools/{name}/invoke`."""

    model_config = ConfigDict(extra="forbid")

    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments, as a JSON object."""
    id: str | None = Field(default=None, min_length=1)
    """The tool-call id to report in the result; a fresh one by default."""


async def _invoke_tool(request: Request) -> Response:
    ctx = authenticate(request).ctx
    gateway = gateway_of(request)
    name: str = request.path_params["name"]
    data = await read_json(request, limit=gateway.config.limits.max_body_bytes)
    body = validate_body(InvokeRequest, data)
    if await gateway.runner.get_tool(name) is None:
        listed = ", ".join(repr(t.name) for t in await gateway.runner.list_tools()) or "none"
        raise GatewayError(
            404,
            f"Unknown server tool {name!r}. Available tools: {listed}.",
            param="name",
            code="tool_not_found",
        )
    call = ToolCall(
        id=body.id or new_call_id(), name=name, arguments=orjson.dumps(body.arguments).decode()
    )
    try:
        await gateway.ready()
        result = await gateway.runner.exec(call, ctx)
    except StoreError as exc:
        raise store_error(exc) from None
    return json_response(result_json(result))


def result_json(result: ToolResult) -> dict[str, Any]:
    """A `ToolResult` as JSON; `content` is the text to send a model as the tool message."""
    return {"object": "tool.result", **_result_json(result)}


routes = [
    Route("/v1/tools", _list_tools, methods=["GET"]),
    Route("/v1/tools/{name}/invoke", _invoke_tool, methods=["POST"]),
]
