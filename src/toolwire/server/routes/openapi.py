"""`GET /openapi.json`: an OpenAPI 3.1 document of toolwire's own REST routes.

The approvals, runs, audit, tools, models and probe routes: what the CLI and the
playground call, and what an operator's scripts and API tools want described. The front
doors (`/v1/chat/completions`, `/v1/responses`, `/v1/messages`, `/mcp`) follow their
providers' own published specifications and are not repeated here.

The document is built from the Starlette routes themselves: paths, path parameters and
methods come from the route definitions, request bodies from the pydantic models the
handlers validate with, and only what a route cannot say (a summary, query parameters,
the answer's fields) from `_OPERATIONS`. A route without an entry there, or an entry
without a route, fails when the document is built (and so in the tests), so it cannot
drift from what the gateway serves.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from toolwire import __version__
from toolwire.server.http.responses import json_response
from toolwire.server.protocols.models import routes as model_routes
from toolwire.server.routes.console import api_routes as console_routes
from toolwire.server.routes.probes import routes as probe_routes
from toolwire.server.routes.runs import DecisionRequest, ResumeRequest
from toolwire.server.routes.runs import routes as run_routes
from toolwire.server.routes.tools import InvokeRequest
from toolwire.server.routes.tools import routes as tool_routes

__all__ = ["REST_ROUTES", "openapi_document", "routes"]

REST_ROUTES: Final[list[BaseRoute]] = [
    *probe_routes,
    *model_routes,
    *tool_routes,
    *run_routes,
    *console_routes,
]
"""The routes the document describes."""

_REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": _REF + name}


def _obj(required: Sequence[str] = (), **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": properties}


_STR: Final = {"type": "string"}
_OPT_STR: Final = {"type": ["string", "null"]}
_NUM: Final = {"type": "number"}
_OPT_NUM: Final = {"type": ["number", "null"]}
_ANY: Final[dict[str, Any]] = {}


def _list_of(item: str, **extra: Any) -> dict[str, Any]:
    return _obj(
        ["object", "data"],
        object={"const": "list"},
        data={"type": "array", "items": _ref(item)},
        **extra,
    )


_SCHEMAS: Final[dict[str, Any]] = {
    "Error": _obj(
        ["error"],
        error=_obj(
            ["message", "type", "param", "code"],
            message=_STR,
            type=_STR,
            param=_OPT_STR,
            code=_OPT_STR,
        ),
    ),
    "Health": _obj(["status"], status={"const": "ok"}),
    "Readiness": _obj(
        ["status", "checks"],
        status={"enum": ["ready", "not ready"]},
        checks={"type": "object", "additionalProperties": _STR},
    ),
    "Model": _obj(
        ["id", "object", "created", "owned_by"],
        id=_STR,
        object={"const": "model"},
        created={"type": "integer"},
        owned_by=_STR,
    ),
    "ModelList": _list_of("Model"),
    "Tool": _obj(
        ["type", "function", "effects", "scopes"],
        type={"const": "function"},
        function=_obj(["name", "parameters"], name=_STR, description=_STR, parameters=_ANY),
        effects={"enum": ["read", "write", "destructive"]},
        scopes={"type": "array", "items": _STR},
    ),
    "ToolList": _list_of("Tool"),
    "ToolResult": _obj(["object"], object={"const": "tool.result"}),
    "Approval": _obj(
        ["object", "id", "status", "run_id", "call_id", "name"],
        object={"const": "approval"},
        id=_STR,
        type={"const": "mcp_approval_request"},
        status={"enum": ["pending", "approved", "denied", "expired", "used"]},
        run_id=_STR,
        call_id=_STR,
        name=_STR,
        arguments=_ANY,
        effects=_STR,
        requested_by=_OPT_STR,
        created_at=_NUM,
        expires_at=_NUM,
        decided_by=_OPT_STR,
        decided_at=_OPT_NUM,
        last_user_message=_OPT_STR,
        may_decide={"type": ["boolean", "null"]},
    ),
    "ApprovalList": _list_of("Approval"),
    "Run": _obj(
        ["object", "id", "status", "steps", "pending_approvals"],
        object={"const": "run"},
        id=_STR,
        status=_STR,
        model=_OPT_STR,
        owner=_OPT_STR,
        steps={"type": "array"},
        pending_approvals={"type": "array"},
    ),
    "RunList": _list_of("RunSummary"),
    "RunSummary": _obj(
        ["object", "id", "status"], object={"const": "run"}, id=_STR, status=_STR, owner=_OPT_STR
    ),
    "ConsoleSession": _obj(
        ["object", "key", "open", "admin", "views"],
        object={"const": "console.session"},
        key=_OPT_STR,
        open={"type": "boolean"},
        admin={"type": "boolean"},
        approve=_STR,
        views={"type": "array", "items": _STR},
    ),
    "UpstreamList": _list_of(
        "Upstream", in_flight=_OPT_NUM, window_seconds=_NUM, recent_since=_OPT_NUM
    ),
    "Upstream": _obj(
        ["object", "name", "kind", "health", "deployments"],
        object={"const": "upstream"},
        name=_STR,
        kind=_STR,
        host=_OPT_STR,
        health=_STR,
        deployments={
            "type": "array",
            "items": _obj(
                ["model", "health", "failures", "recent_failures"],
                model=_STR,
                upstream_model=_STR,
                health=_STR,
                failures={"type": "object", "additionalProperties": _NUM},
                recent_failures=_NUM,
                in_flight=_OPT_NUM,
                cooldown_until=_OPT_NUM,
            ),
        },
    ),
    "AuditRecord": _obj(
        ["object", "id", "time", "event", "tool"],
        object={"const": "audit.record"},
        id={"type": "integer"},
        time=_NUM,
        event=_STR,
        tool=_STR,
        request_id=_OPT_STR,
        run_id=_OPT_STR,
        call_id=_OPT_STR,
        outcome=_OPT_STR,
    ),
    "AuditPage": _list_of(
        "AuditRecord", has_more={"type": "boolean"}, last_id={"type": ["integer", "null"]}
    ),
    "ChatCompletion": _obj(
        ["object", "choices"], object={"const": "chat.completion"}, choices={"type": "array"}
    ),
}

_BODIES: Final[dict[str, type[BaseModel]]] = {
    "DecisionRequest": DecisionRequest,
    "ResumeRequest": ResumeRequest,
    "InvokeRequest": InvokeRequest,
}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


_LIMIT: Final = _query(
    "limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "At most this many (default 100)."
)

_OPERATIONS: Final[dict[tuple[str, str], dict[str, Any]]] = {
    ("GET", "/healthz"): {"summary": "Liveness: the process answers.", "ok": "Health"},
    ("GET", "/readyz"): {
        "summary": "Readiness: the upstream, the store and the MCP servers answer (503 when not).",
        "ok": "Readiness",
        "also": {"503": "Readiness"},
    },
    ("GET", "/v1/models"): {"summary": "The model ids this gateway routes.", "ok": "ModelList"},
    ("GET", "/v1/models/{model}"): {"summary": "One routed model id.", "ok": "Model"},
    ("GET", "/v1/tools"): {
        "summary": "The server tools the caller's key may call.",
        "ok": "ToolList",
    },
    ("POST", "/v1/tools/{name}/invoke"): {
        "summary": "Run one server tool through the runner (validated, permitted, audited).",
        "body": "InvokeRequest",
        "ok": "ToolResult",
    },
    ("GET", "/v1/approvals"): {
        "summary": "The caller's approvals (everyone's for an admin key), newest first.",
        "query": [
            _query(
                "status",
                {"enum": ["pending", "approved", "denied", "expired", "used"]},
                "Only approvals with this status.",
            ),
            _query("run_id", _STR, "Only this run's approvals."),
            _LIMIT,
        ],
        "ok": "ApprovalList",
    },
    ("GET", "/v1/approvals/{id}"): {"summary": "One approval.", "ok": "Approval"},
    ("POST", "/v1/approvals/{id}"): {
        "summary": "Approve or deny a pending approval (409 when it was already decided).",
        "body": "DecisionRequest",
        "ok": "Approval",
    },
    ("GET", "/v1/runs/{id}"): {"summary": "A run's status, steps and approvals.", "ok": "Run"},
    ("POST", "/v1/runs/{id}/resume"): {
        "summary": "Continue a run once its approvals are decided; answers as a chat "
        "completion, or its chunks as server-sent events with `stream: true`.",
        "body": "ResumeRequest",
        "optional_body": True,
        "ok": "ChatCompletion",
        "stream": True,
    },
    ("GET", "/v1/runs"): {
        "summary": "The caller's runs (everyone's for an admin key), newest first.",
        "query": [
            _query(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": 200},
                "At most this many (default 50).",
            )
        ],
        "ok": "RunList",
    },
    ("GET", "/v1/console/session"): {
        "summary": "The caller's key and the console views its rights open.",
        "ok": "ConsoleSession",
    },
    ("GET", "/v1/upstreams"): {
        "summary": "Each upstream's deployments: health, failures, in-flight requests and "
        "cooldowns, from the figures of /metrics (admin keys).",
        "ok": "UpstreamList",
    },
    ("GET", "/v1/audit"): {
        "summary": "The audit log (admin keys), oldest first; page with `after`.",
        "query": [
            _query("tool", _STR, "Only this tool's records."),
            _query("key", _STR, "Only records of this key name."),
            _query("outcome", _STR, "Only this outcome (ok, denied, timeout, ...)."),
            _query("run_id", _STR, "Only this run's records."),
            _query("since", _NUM, "From this Unix time (seconds)."),
            _query("until", _NUM, "Up to this Unix time (seconds)."),
            _query(
                "after",
                {"type": "integer", "minimum": 0, "maximum": 2**62},
                "After this record id (the last one seen).",
            ),
            _LIMIT,
        ],
        "ok": "AuditPage",
    },
}

_PARAM: Final = re.compile(r"{([^}:]+)(?::[^}]+)?}")


def openapi_document(rest_routes: Sequence[BaseRoute] = REST_ROUTES) -> dict[str, Any]:
    """The OpenAPI 3.1 document of `rest_routes`.

    Raises:
        ValueError: A route has no entry in `_OPERATIONS`, or an entry has no route.
    """
    paths: dict[str, dict[str, Any]] = {}
    described: set[tuple[str, str]] = set()
    for route in rest_routes:
        if not isinstance(route, Route):
            continue
        path = _PARAM.sub(r"{\1}", route.path)
        for method in sorted((route.methods or set()) - {"HEAD"}):
            entry = _OPERATIONS.get((method, path))
            if entry is None:
                raise ValueError(f"{method} {path} has no entry in the OpenAPI operations")
            described.add((method, path))
            params = [
                {"name": name, "in": "path", "required": True, "schema": _STR}
                for name in _PARAM.findall(route.path)
            ]
            paths.setdefault(path, {})[method.lower()] = _operation(route.name, params, entry)
    missing = set(_OPERATIONS) - described
    if missing:
        raise ValueError(f"OpenAPI operations without a route: {sorted(missing)}")
    schemas = dict(_SCHEMAS)
    for name, model in _BODIES.items():
        schemas[name] = model.model_json_schema(ref_template=_REF + "{model}")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "toolwire gateway: REST routes",
            "version": __version__,
            "description": "toolwire's own routes: approvals, runs, audit, server tools, "
            "models and probes. The front doors follow their providers' specifications. "
            "Errors are OpenAI-shaped. A gateway with keys wants one as "
            "`Authorization: Bearer <key>` (or `x-api-key`) on every route but the probes.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
        },
    }


def _operation(name: str, params: list[dict[str, Any]], entry: dict[str, Any]) -> dict[str, Any]:
    ok: dict[str, Any] = {"application/json": {"schema": _ref(entry["ok"])}}
    if entry.get("stream"):
        ok["text/event-stream"] = {"schema": _STR}
    responses: dict[str, Any] = {"200": {"description": "OK", "content": ok}}
    for status, schema in entry.get("also", {}).items():
        responses[status] = {
            "description": "See the body.",
            "content": {"application/json": {"schema": _ref(schema)}},
        }
    responses["default"] = {
        "description": "An error, OpenAI-shaped.",
        "content": {"application/json": {"schema": _ref("Error")}},
    }
    operation: dict[str, Any] = {
        "operationId": name.lstrip("_"),
        "summary": entry["summary"],
        "parameters": [*params, *entry.get("query", [])],
        "responses": responses,
    }
    if "body" in entry:
        operation["requestBody"] = {
            "required": not entry.get("optional_body", False),
            "content": {"application/json": {"schema": _ref(entry["body"])}},
        }
    return operation


@functools.cache
def _document() -> dict[str, Any]:
    return openapi_document()


async def _openapi(request: Request) -> Response:
    # No key needed: it describes the routes, and says nothing of this gateway's state.
    return json_response(_document())


routes = [Route("/openapi.json", _openapi, methods=["GET"])]
