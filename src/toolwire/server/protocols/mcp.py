"""`/mcp`: the gateway's server tools over MCP streamable HTTP, for any MCP client.

The protocol is the official `mcp` SDK's (a low-level `Server` behind its
`StreamableHTTPSessionManager`, stateless with JSON answers, so any replica can serve
any request). What toolwire adds is what every front door adds: the caller's gateway key
(`Authorization: Bearer`, checked before the SDK sees the request) decides which tools
`tools/list` shows and which calls run, and every call goes through the gateway's
runner (validation, scopes, redaction, cache, audit).

A destructive tool never runs on the strength of the call alone. The first call makes a
pending approval (the same records `/v1/approvals` lists) and answers with an error
that gives its id and how to decide it; once approved, the same call (same tool, same
arguments, same key) runs, exactly once: the approval is consumed by compare-and-set.

`serve_stdio` serves a toolbox the same way over stdio (`toolwire mcp serve`), for local
clients; there a destructive tool runs only when the command was started with `--yes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from toolwire.runner import Approver, ToolRunner, approve_all
from toolwire.runner.audit import Grant, redact_arguments
from toolwire.server.http.disconnect import on_disconnect
from toolwire.server.http.draining import drain_of
from toolwire.server.http.errors import GatewayError
from toolwire.server.http.limits import Streams
from toolwire.server.http.requests import read_body
from toolwire.server.http.responses import json_response
from toolwire.server.keys.caller import Caller, authenticate
from toolwire.store.base import ApprovalRecord, Store, arguments_hash, canonical_json
from toolwire.tools import Tool, ToolCall, ToolContext, ToolResult, new_call_id

if TYPE_CHECKING:
    import mcp_types
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from toolwire.server.gateway import Gateway

__all__ = ["McpFrontDoor", "mcp_available", "serve_stdio"]

logger = logging.getLogger("toolwire.server")

PATH: Final = "/mcp"
_RUN_PREFIX: Final = "mcp_"
"""Approvals asked for over MCP belong to no agent run; their run id says where they came
from."""


def mcp_available() -> bool:
    """Whether the `mcp` SDK is installed (the `mcp` extra)."""
    import importlib.util

    return importlib.util.find_spec("mcp") is not None


# --- what both transports share ---------------------------------------------------------------

Runner = Callable[[ToolCall, Tool, Caller], Awaitable[ToolResult | str]]
"""Runs one call of a tool the caller may see; a `str` is an error message to return."""


def _server(
    tools: Callable[[Caller], Awaitable[list[Tool]]],
    caller_of: Callable[[Any], Caller],
    run: Runner,
) -> Server[Any]:
    import mcp_types
    from mcp.server.lowlevel import Server

    async def on_list_tools(
        ctx: Any, params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        with _protocol_errors():
            listed = await tools(caller_of(ctx))
            return mcp_types.ListToolsResult(tools=[_mcp_tool(t) for t in listed])

    async def on_call_tool(
        ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        with _protocol_errors():
            caller = caller_of(ctx)
            visible = {t.name: t for t in await tools(caller)}
            tool = visible.get(params.name)
            if tool is None:
                names = ", ".join(sorted(visible)) or "none"
                return _error(f"Unknown tool {params.name!r}. Available tools: {names}.")
            call = ToolCall(id=new_call_id(), name=params.name, arguments=_arguments(params))
            outcome = await run(call, tool, caller)
            if isinstance(outcome, str):
                return _error(outcome)
            return _result(outcome)

    return Server(
        "toolwire",
        version=_version(),
        instructions="Tools served by a toolwire gateway.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def _arguments(params: mcp_types.CallToolRequestParams) -> str:
    from mcp.shared.exceptions import MCPError

    try:
        return orjson.dumps(params.arguments or {}).decode()
    except orjson.JSONEncodeError:
        # JSON allows any integer; the runner's JSON (and most tools') stops at 64 bits.
        raise MCPError(
            INVALID_PARAMS,
            "Invalid params: an argument is an integer outside the 64-bit range; send it "
            "as a string.",
        ) from None


@contextlib.contextmanager
def _protocol_errors() -> Iterator[None]:
    """Failures as JSON-RPC errors of their own: the SDK would answer an exception with
    code 0 and its text, which may show the gateway's internals."""
    from mcp.shared.exceptions import MCPError

    try:
        yield
    except MCPError:
        raise
    except GatewayError as exc:
        code = INVALID_REQUEST if exc.status < 500 else INTERNAL_ERROR
        raise MCPError(code, exc.message) from None
    except Exception:
        logger.exception("An /mcp request failed")
        raise MCPError(
            INTERNAL_ERROR, "The gateway failed while serving the request; see its log."
        ) from None


def _mcp_tool(tool: Tool) -> mcp_types.Tool:
    import mcp_types

    annotations = mcp_types.ToolAnnotations(
        read_only_hint=tool.effects == "read",
        destructive_hint=tool.effects == "destructive",
        idempotent_hint=True if tool.effects == "read" else None,
    )
    schema = dict(tool.input_schema)
    schema.setdefault("type", "object")
    return mcp_types.Tool(
        name=tool.name,
        description=tool.description or None,
        input_schema=schema,
        annotations=annotations,
    )


def _result(result: ToolResult) -> mcp_types.CallToolResult:
    import mcp_types

    text = result.to_model_text()
    if not result.success:
        return _error(result.error.message if result.error is not None else text)
    structured = result.result if isinstance(result.result, dict) else None
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=False,
    )


def _error(message: str) -> mcp_types.CallToolResult:
    import mcp_types

    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=message)], is_error=True
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolwire")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


def _visible(tools: list[Tool], ctx: ToolContext) -> list[Tool]:
    return [t for t in tools if not t.scopes or ctx.scopes.issuperset(t.scopes)]


_METHODS: Final = ("GET", "POST", "DELETE")
_STREAM_OPEN: Final = b": toolwire: /mcp is stateless; this stream carries keep-alives only\n\n"
_KEEP_ALIVE: Final = b": keep-alive\n\n"
# JSON-RPC 2.0's error codes, as the MCP SDK's transport answers with them.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603


class _Invalid(Exception):
    """A POST body that is not one JSON-RPC message: 400 with a JSON-RPC error."""

    def __init__(self, code: int, message: str, id: str | int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = id

    def response(self) -> Response:
        return _jsonrpc_error(400, self.message, code=self.code, id=self.id)


def _jsonrpc_error(
    status: int,
    message: str,
    *,
    code: int | None = None,
    id: str | int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An HTTP error whose body is a JSON-RPC error (the MCP transport's own shape)."""
    if code is None:
        code = INTERNAL_ERROR if status in (429, 503) or status >= 500 else INVALID_REQUEST
    body = {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}
    return json_response(body, status, headers)


def _check_message(body: bytes) -> None:
    """Raise `_Invalid` unless `body` is one JSON-RPC message the SDK can take."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _Invalid(PARSE_ERROR, f"Parse error: {exc}") from None
    if isinstance(data, list):
        raise _Invalid(
            INVALID_REQUEST,
            "Invalid Request: batches are not supported; send one JSON-RPC message per POST.",
        )
    if not isinstance(data, dict):
        raise _Invalid(INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC object.")
    if "id" in data:
        id_ = data["id"]
        # MCP: "a string or integer", never null; a bool is not an integer here.
        if not isinstance(id_, str | int) or isinstance(id_, bool):
            raise _Invalid(INVALID_REQUEST, "Invalid Request: 'id' must be a string or an integer.")
    id_ok: str | int | None = data.get("id")
    if data.get("jsonrpc") != "2.0":
        raise _Invalid(INVALID_REQUEST, "Invalid Request: 'jsonrpc' must be \"2.0\".", id_ok)
    if "method" in data:
        if not isinstance(data["method"], str):
            raise _Invalid(INVALID_REQUEST, "Invalid Request: 'method' must be a string.", id_ok)
        if "params" in data and not isinstance(data["params"], dict):
            raise _Invalid(INVALID_PARAMS, "Invalid params: 'params' must be an object.", id_ok)
    elif id_ok is None or ("result" in data) == ("error" in data):
        raise _Invalid(
            INVALID_REQUEST,
            "Invalid Request: a message needs a 'method' (a request or notification) or an "
            "'id' with a 'result' or an 'error' (a response).",
            id_ok,
        )


def _keep_alive_comment() -> Message:
    return {"type": "http.response.body", "body": _KEEP_ALIVE, "more_body": True}


async def _keep_alive(request: Request, send: Send, interval: float, lifetime: float) -> None:
    """Hold an event stream open with SSE comments until the client leaves, `lifetime`
    passes or the drain deadline of a shutdown."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache, no-transform"),
                (b"x-accel-buffering", b"no"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _STREAM_OPEN, "more_body": True})
    loop = asyncio.get_running_loop()
    end = loop.time() + lifetime
    gone = asyncio.Event()
    stop_watching = on_disconnect(request.scope, request.receive, gone.set)
    drain = drain_of(request)
    try:
        with drain.guard():
            while (left := end - loop.time()) > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(interval, left)):
                        await gone.wait()
                if gone.is_set():
                    return
                if end - loop.time() > 0:
                    await send(_keep_alive_comment())
    except asyncio.CancelledError as exc:
        if not drain.interrupted(exc):
            raise
    finally:
        stop_watching()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


# --- over HTTP, in the gateway ----------------------------------------------------------------


class McpFrontDoor:
    """`/mcp` on the gateway: an ASGI endpoint and the session manager's lifespan.

    The SDK is loaded on the first `/mcp` request, not at start-up: it is a quarter of an
    idle worker's memory (25 MB), and most gateways never receive an MCP client. Its
    session manager then runs in a task of its own until the app shuts down.
    """

    def __init__(self, gateway: Gateway, streams: Streams | None = None) -> None:
        self._gateway = gateway
        settings = gateway.config.mcp
        self._streams = streams or Streams(settings.max_streams, settings.max_streams_per_key)
        self._manager: StreamableHTTPSessionManager | None = None
        self._runner: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()

    @property
    def routes(self) -> list[Route]:
        # Every method reaches the endpoint, so a wrong one gets a JSON-RPC-shaped 405.
        return [Route(PATH, endpoint=_Asgi(self._endpoint))]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self._runner is not None:
                self._stop.set()
                await self._runner

    async def _endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            if request.method not in _METHODS:
                raise GatewayError(
                    405,
                    f"Method Not Allowed: {request.method} on {PATH}; send JSON-RPC messages "
                    "with POST.",
                    headers={"Allow": ", ".join(_METHODS)},
                )
            caller = authenticate(request)  # before the SDK reads anything
            if request.method == "GET":
                await self._stream(request, caller, send)
                return
            if request.method == "POST":
                receive = await self._checked(request)
        except GatewayError as exc:
            await _jsonrpc_error(exc.status, exc.message, headers=exc.headers)(scope, receive, send)
            return
        except _Invalid as exc:
            await exc.response()(scope, receive, send)
            return
        manager = await self._started()
        await manager.handle_request(scope, receive, send)

    async def _checked(self, request: Request) -> Receive:
        """Read and check a POST's JSON-RPC message before the SDK does (its own answers
        to what is wrong there are plain text or a whole pydantic report); a `receive`
        that gives the SDK the body read here.

        Raises:
            GatewayError: The body is too large, too slow, or the gateway has no room.
            _Invalid: It is not one JSON-RPC message.
        """
        content_type = request.headers.get("content-type", "")
        if not content_type.lower().startswith("application/json"):
            raise GatewayError(415, "Unsupported Media Type: Content-Type must be application/json")
        body = await read_body(request, limit=self._gateway.config.limits.max_body_bytes)
        _check_message(body)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await request.receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay

    async def _stream(self, request: Request, caller: Caller, send: Send) -> None:
        """`GET /mcp`: an event stream that carries only keep-alive comments.

        `/mcp` is served statelessly, so no server message can ever be sent on such a
        stream; it is served here, not by the SDK (a hundred kilobytes of session each),
        and bounded (`mcp.max_streams`, per key too) apart from the request slots that
        model traffic needs. It ends after `mcp.stream_idle_timeout`.
        """
        settings = self._gateway.config.mcp
        if settings.max_streams == 0:
            raise GatewayError(
                405,
                "Method Not Allowed: this gateway offers no GET stream on /mcp; send "
                "JSON-RPC messages with POST.",
                headers={"Allow": "POST, DELETE"},
            )
        if "text/event-stream" not in request.headers.get("accept", ""):
            raise GatewayError(406, "Not Acceptable: Client must accept text/event-stream")
        key = caller.name if self._gateway.keyring.enabled else None
        refused = self._streams.acquire(key)
        if refused == 429:
            raise GatewayError(
                429,
                f"This key holds the most GET /mcp streams one key may "
                f"({settings.max_streams_per_key}, mcp.max_streams_per_key); close one first.",
                headers={"Retry-After": "5"},
            )
        if refused is not None:
            raise GatewayError(
                503,
                f"The gateway holds the most GET /mcp streams it serves "
                f"({settings.max_streams}, mcp.max_streams); retry later.",
                headers={"Retry-After": "5"},
            )
        try:
            await _keep_alive(
                request, send, settings.stream_keepalive, settings.stream_idle_timeout
            )
        finally:
            self._streams.release(key)

    async def _started(self) -> StreamableHTTPSessionManager:
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._serve())
        # Shielded: a client that leaves must not cancel the manager's start for others.
        await asyncio.shield(self._ready.wait())
        if self._manager is None:
            raise GatewayError(503, "The MCP endpoint failed to start; see the gateway's log.")
        return self._manager

    async def _serve(self) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        try:
            server = _server(self._tools, _request_caller, self._run)
            manager = StreamableHTTPSessionManager(
                app=server,
                stateless=True,
                json_response=True,
                max_request_body_size=self._gateway.config.limits.max_body_bytes,
            )
            async with manager.run():
                self._manager = manager
                self._ready.set()
                await self._stop.wait()
        except Exception:
            logger.exception("The /mcp endpoint failed")
        finally:
            self._ready.set()  # a failed start releases the requests waiting for it

    async def _tools(self, caller: Caller) -> list[Tool]:
        return _visible(await self._gateway.runner.list_tools(), caller.ctx)

    async def _run(self, call: ToolCall, tool: Tool, caller: Caller) -> ToolResult | str:
        gateway = self._gateway
        store = await gateway.ready()
        if tool.effects != "destructive":
            return await gateway.runner.exec(call, caller.ctx)
        return await _approved_run(gateway, store, caller, call, tool)


class _Asgi:
    """An ASGI callable as a route endpoint (Starlette treats a bound method as a
    request-response function)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


def _request_caller(ctx: Any) -> Caller:
    request = ctx.request
    if not isinstance(request, Request):
        raise GatewayError(400, "MCP over HTTP needs the HTTP request.")
    caller = authenticate(request)
    caller.ctx.metadata["front_door"] = "mcp"
    return caller


async def _approved_run(
    gateway: Gateway, store: Store, caller: Caller, call: ToolCall, tool: Tool
) -> ToolResult | str:
    """Run a destructive call only on an approval of exactly this call."""
    # Validation, scopes and the policy first: what could not run is answered as is.
    validated: list[ToolCall] = []

    async def undecided(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
        validated.append(call)  # its arguments as validated: what would run
        return None

    checked = await gateway.runner.exec(call, caller.ctx, approver=undecided)
    if checked.error is None or checked.error.code != "awaiting_approval" or not validated:
        return checked
    arguments = orjson.loads(validated[-1].arguments)
    digest = arguments_hash(arguments)
    # One "run" per key, tool and arguments: the approvals of this very call are one
    # indexed query away, however many other approvals there are.
    binding = canonical_json([caller.name, tool.name, digest]).encode()
    run_id = _RUN_PREFIX + hashlib.sha256(binding).hexdigest()[:32]
    now = time.time()
    mine = [
        r
        for r in await store.list_approvals(run_id=run_id, now=now, limit=100)
        if r.requested_by == caller.name and r.tool == tool.name and r.arguments_hash == digest
    ]
    for record in mine:
        if record.effective_status(now) != "approved":
            continue
        used = replace(record, status="used", used_at=now)
        if not await store.update_approval(used, expect=("approved",)):
            continue  # another request used it first
        grant = Grant(
            approval_id=record.id,
            approved_by=record.decided_by,
            approved_at=record.decided_at,
            requested_at=record.created_at,
        )
        call = replace(call, id=record.call_id)
        return await gateway.runner.exec(call, caller.ctx, approver=_bound(digest), grant=grant)
    pending = next((r for r in mine if r.effective_status(now) == "pending"), None)
    if pending is None:
        pending = ApprovalRecord(
            id="apr_" + uuid.uuid4().hex,
            run_id=run_id,
            call_id=call.id,
            tool=tool.name,
            # Shown to whoever lists it; the hash binds the real arguments.
            arguments=canonical_json(redact_arguments(tool, arguments)),
            arguments_hash=digest,
            reason=f"{tool.name!r} is a destructive tool called over MCP: a person must "
            "approve this call.",
            effects=tool.effects,
            requested_by=caller.name,
            approver=tool.approver,
            created_at=now,
            expires_at=now + gateway.config.approvals.ttl,
        )
        await store.add_approvals([pending])
    return (
        f"Tool {tool.name!r} needs approval before it runs, and it has not run. Approval "
        f"{pending.id} is pending: a person approves it with `toolwire approvals approve "
        f"{pending.id}` or `POST /v1/approvals/{pending.id}` with "
        '{"decision": "approve"}. Then call the tool again with the same arguments: it '
        "runs once."
    )


def _bound(digest: str) -> Approver:
    """Approves the call only if its validated arguments are the approved ones."""

    async def approve(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
        return arguments_hash(orjson.loads(call.arguments)) == digest

    return approve


# --- over stdio -------------------------------------------------------------------------------


def _local_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return "local"


async def serve_stdio(runner: ToolRunner, *, allow_destructive: bool) -> None:
    """Serve `runner`'s tools over stdio until the client closes the connection."""
    import anyio
    from mcp.server.stdio import stdio_server

    async def tools(caller: Caller) -> list[Tool]:
        return await runner.list_tools()

    async def run(call: ToolCall, tool: Tool, caller: Caller) -> ToolResult | str:
        if tool.effects == "destructive" and not allow_destructive:
            return (
                f"Tool {tool.name!r} is destructive and was not run: this server was "
                "started without --yes. Restart it with `toolwire mcp serve --yes` to allow "
                "destructive tools."
            )
        return await runner.exec(call, caller.ctx, approver=approve_all)

    def local(_: Any) -> Caller:
        return Caller(key=None, ctx=ToolContext(principal=_local_user()))

    server = _server(tools, local, run)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
    await anyio.lowlevel.checkpoint()
