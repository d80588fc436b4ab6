"""`McpTools`: the tools of one MCP server as a `ToolProvider`.

```python
files = McpTools(command=["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                 name="files")
search = McpTools(url="https://mcp.example.com/mcp", headers={"X-Team": "ops"}, name="search")
agent = Agent(model, Toolbox([files, search]))
```

The protocol is the official `mcp` SDK's (`pip install 'toolwire[mcp]'`). Each server's
tools are named `<name>__<tool>` (`prefix=` changes that), and their MCP annotations
become toolwire effects (`readOnlyHint` → read, `destructiveHint` → destructive, anything
else → write), so validation, scopes, approvals, caching and audit apply to them as to any
tool. The connection lives in a background task: it starts on first use (or with
`start()`), is checked with pings, and is opened again with a growing pause when the
server dies; meanwhile the server's tools fail with `unavailable` and other tools are not
affected. A server that announces a changed tool list is listed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from toolwire.tools.call import ToolErrorInfo, ToolResult
from toolwire.tools.context import ToolContext
from toolwire.tools.errors import ToolDefinitionError, ToolExecutionError, ToolNotFoundError
from toolwire.tools.tool import Effects, Tool

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["McpStatus", "McpTools", "McpTransport"]

logger = logging.getLogger("toolwire.tools.mcp")

McpTransport = Literal["stdio", "streamable_http", "sse"]
McpStatus = Literal["stopped", "starting", "up", "down", "closed"]

_NAME: Final = re.compile(r"[A-Za-z0-9_\-]")
_BACKOFF: Final = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_PING_EVERY: Final = 5.0
_START_TIMEOUT: Final = 30.0
_INSTALL: Final = "McpTools needs the MCP SDK: pip install 'toolwire[mcp]'"


class McpTools:
    """The tools of one MCP server.

    Give `command` (a stdio server, started as a subprocess) or `url` (a streamable HTTP
    server; `transport="sse"` for an older SSE one).

    Args:
        command: The program and its arguments, e.g. `["uvx", "mcp-server-git"]`.
        env: Extra environment variables for the subprocess.
        cwd: Its working directory.
        url: The server's endpoint, e.g. `https://example.com/mcp`.
        headers: HTTP headers sent with every request (e.g. an API key).
        transport: `stdio` for `command`; `streamable_http` (default) or `sse` for `url`.
        name: The server's name; tools are called `<name>__<tool>`.
        prefix: The prefix of tool names instead (`""`: the server's own names).
        include: Only these tools (the server's names).
        exclude: Not these tools.
        effects: Effects by the server's tool name, over what its annotations say.
        scopes: Scopes a caller needs for every tool of this server.
        forward_auth: Send the caller's token (`ToolContext.auth_token`) as
            `Authorization: Bearer` to an HTTP server, with a connection of its own per
            call. Off by default: a server only sees the headers given here.
        timeout: Seconds a call may take (the runner's tool timeout).
        start_timeout: Seconds to wait for the first connection when a tool is needed.
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: McpTransport | None = None,
        name: str | None = None,
        prefix: str | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        effects: Mapping[str, Effects] | None = None,
        scopes: Sequence[str] = (),
        forward_auth: bool = False,
        timeout: float | None = None,
        start_timeout: float = _START_TIMEOUT,
    ) -> None:
        if importlib.util.find_spec("mcp") is None:
            raise ToolDefinitionError(_INSTALL)
        if (command is None) == (url is None):
            raise ToolDefinitionError("McpTools needs exactly one of command=[...] or url=...")
        if command is not None:
            if isinstance(command, str) or not command or not all(command):
                raise ToolDefinitionError(
                    "McpTools(command=...) takes the program and its arguments as a list, "
                    'e.g. ["uvx", "mcp-server-git"].'
                )
            if transport not in (None, "stdio"):
                raise ToolDefinitionError("A command is a stdio server; leave out transport=.")
        elif url is not None and not url.startswith(("http://", "https://")):
            raise ToolDefinitionError(f"McpTools(url={url!r}) is not an http(s) URL.")
        if forward_auth and url is None:
            raise ToolDefinitionError("forward_auth only applies to an HTTP server (url=...).")
        self.command = list(command) if command is not None else None
        self.env = dict(env or {})
        self.cwd = cwd
        self.url = url
        self.headers = dict(headers or {})
        self.transport: McpTransport = transport or ("stdio" if command else "streamable_http")
        self.name = name or (self.command[0].rsplit("/", 1)[-1] if self.command else url) or "mcp"
        self.prefix = prefix if prefix is not None else (f"{_safe(name)}__" if name else "")
        self.include = frozenset(include) if include is not None else None
        self.exclude = frozenset(exclude)
        self.effects = dict(effects or {})
        self.scopes = tuple(scopes)
        self.forward_auth = forward_auth
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.on_change: Callable[[], None] | None = None
        """Called (without arguments) when the tool list changed; the gateway uses it."""
        self.status: McpStatus = "stopped"
        self.last_error: str | None = None
        self._tools: list[Tool] = []
        self._remote: dict[str, str] = {}
        self._client: Client | None = None
        self._up = asyncio.Event()
        self._attempted = asyncio.Event()
        self._broken = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._relists: set[asyncio.Task[None]] = set()
        """Listings started by notifications (held so they are not collected mid-way)."""
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self, *, wait: bool = True) -> None:
        """Start the connection (if not started) and, with `wait`, wait until the first
        attempt succeeded or failed (at most `start_timeout`); a server that is down keeps
        being retried either way."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            if self.status == "closed":
                raise ToolExecutionError(f"MCP server {self.name!r} was closed.")
            self._up, self._broken, self._stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
            self._attempted = asyncio.Event()
            self._loop = loop
            self.status = "starting"
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")
        if wait:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._attempted.wait(), self.start_timeout)

    async def aclose(self) -> None:
        """Close the connection; a stdio server's process is ended."""
        task, self._task = self._task, None
        self.status = "closed"
        if task is None or task.done():
            return
        if self._loop is not asyncio.get_running_loop():
            task.cancel()
            return
        self._stop.set()
        self._broken.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 10)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def __aenter__(self) -> McpTools:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # --- the provider ------------------------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        """The server's tools as last listed (started on first use)."""
        if self._task is None:
            await self.start()
        return list(self._tools)

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext | None = None, /
    ) -> ToolResult:
        """Call the tool on the server.

        Raises:
            ToolNotFoundError: This server has no such tool.
            ToolExecutionError: The server answered with an error the SDK raised.
        """
        if self._task is None:
            await self.start()
        remote = self._remote.get(name)
        if remote is None:
            raise ToolNotFoundError.unknown(name, list(self._remote))
        token = ctx.auth_token if ctx is not None else None
        if self.forward_auth and token:
            return await self._call_with_token(remote, arguments, token)
        client = self._client
        if client is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._up.wait(), min(self.start_timeout, 5.0))
            client = self._client
        if client is None:
            return self._unavailable()
        try:
            result = await client.call_tool(remote, arguments)
        except Exception as exc:
            if _is_protocol_error(exc):
                raise ToolExecutionError(f"MCP server {self.name!r}: {_message(exc)}") from None
            self.last_error = _message(exc)
            self.status = "down"
            self._broken.set()  # the connection failed: the supervisor opens a new one
            return self._unavailable()
        return _result(result)

    def _unavailable(self) -> ToolResult:
        reason = f" ({self.last_error})" if self.last_error else ""
        message = (
            f"The MCP server {self.name!r} is unavailable{reason}; toolwire is reconnecting. "
            "Try again later or use another tool."
        )
        return ToolResult(success=False, error=ToolErrorInfo(message, code="unavailable"))

    async def _call_with_token(
        self, remote: str, arguments: dict[str, Any], token: str
    ) -> ToolResult:
        from mcp import Client

        headers = {**self.headers, "Authorization": f"Bearer {token}"}
        try:
            async with Client(self._transport(headers), cache=None) as client:
                result = await client.call_tool(remote, arguments)
        except Exception as exc:
            if _is_protocol_error(exc):
                raise ToolExecutionError(f"MCP server {self.name!r}: {_message(exc)}") from None
            self.last_error = _message(exc)
            return self._unavailable()
        return _result(result)

    # --- the connection ----------------------------------------------------------------

    def _transport(self, headers: Mapping[str, str] | None = None) -> Any:
        try:
            from mcp import StdioServerParameters
        except ImportError:
            raise ToolDefinitionError(_INSTALL) from None
        if self.command is not None:
            return StdioServerParameters(
                command=self.command[0],
                args=self.command[1:],
                env=self.env or None,
                cwd=self.cwd,
            )
        assert self.url is not None
        sent = dict(headers if headers is not None else self.headers)
        if self.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(self.url, headers=sent)
        return _streamable_http(self.url, sent)

    async def _supervise(self) -> None:
        try:
            from mcp import Client
        except ImportError:
            self.status, self.last_error = "down", _INSTALL
            logger.error(_INSTALL)
            return
        failures = 0
        while not self._stop.is_set():
            self._broken.clear()
            try:
                # Calls are timed by the runner (`Tool.timeout`), not by the SDK.
                async with Client(self._transport(), message_handler=self._on_message) as client:
                    await self._relist(client)
                    self._client = client
                    self.status, self.last_error = "up", None
                    self._up.set()
                    self._attempted.set()
                    failures = 0
                    logger.info("MCP server %r is up (%d tools)", self.name, len(self._tools))
                    await self._watch(client)
            except Exception as exc:
                self.last_error = _message(exc)
            finally:
                self._client = None
                self._up.clear()
            if self._stop.is_set():
                break
            self.status = "down"
            self._attempted.set()
            delay = _BACKOFF[min(failures, len(_BACKOFF) - 1)]
            failures += 1
            logger.warning(
                "MCP server %r is down (%s); connecting again in %.1f s",
                self.name,
                self.last_error or "closed",
                delay,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def _watch(self, client: Client) -> None:
        """Return when the connection must be given up: closed, broken, or dead.

        A 2026-07-28 server is watched through its change subscription, which fails when
        the connection does; an older one (or one without subscriptions) is pinged.
        """
        watched = asyncio.Event()
        listener = asyncio.create_task(self._listen(client, watched))
        try:
            while not self._broken.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._broken.wait(), _PING_EVERY)
                if self._broken.is_set() or watched.is_set():
                    continue
                await asyncio.wait_for(self._probe(client), _PING_EVERY)
        finally:
            listener.cancel()
            with contextlib.suppress(BaseException):
                await listener

    async def _probe(self, client: Client) -> None:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await client.list_tools(cache_mode="use")  # `ping` is gone in these versions
        else:
            await client.send_ping()

    async def _listen(self, client: Client, watched: asyncio.Event) -> None:
        # 2026-07-28 servers announce changes on a subscription; older ones send a
        # `notifications/tools/list_changed` message (see `_on_message`).
        from mcp.client.subscriptions import ListenNotSupportedError
        from mcp.shared.exceptions import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED

        try:
            async with client.listen(tools_list_changed=True) as subscription:
                watched.set()
                async for _ in subscription:
                    await self._relist(client)
        except ListenNotSupportedError:
            return
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED and not watched.is_set():
                return  # the server does not offer subscriptions: `_watch` probes it
            self.last_error = _message(exc)
        except Exception as exc:
            self.last_error = _message(exc)
        # The subscription ended or was lost: so did the connection.
        self._broken.set()

    async def _on_message(self, message: Any) -> None:
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            client = self._client
            if client is not None:
                # Not awaited here: the listing's answer arrives through this same handler.
                task = asyncio.create_task(self._relist(client))
                self._relists.add(task)
                task.add_done_callback(self._relists.discard)

    async def _relist(self, client: Client) -> None:
        listed: list[Any] = []
        cursor: str | None = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        tools: list[Tool] = []
        remote: dict[str, str] = {}
        for spec in listed:
            if self.include is not None and spec.name not in self.include:
                continue
            if spec.name in self.exclude:
                continue
            local = self.prefix + _safe(spec.name)
            if local in remote:
                logger.warning(
                    "MCP server %r: tools %r and %r both become %r; keeping the first",
                    self.name,
                    remote[local],
                    spec.name,
                    local,
                )
                continue
            remote[local] = spec.name
            tools.append(self._tool(local, spec))
        changed = [t.name for t in tools] != [t.name for t in self._tools] or any(
            a.input_schema != b.input_schema for a, b in zip(tools, self._tools, strict=False)
        )
        self._tools, self._remote = tools, remote
        if changed and self.on_change is not None:
            self.on_change()

    def _tool(self, local: str, spec: Any) -> Tool:
        annotations = spec.annotations
        effects: Effects = self.effects.get(spec.name) or _effects(annotations)
        description = spec.description or (annotations.title if annotations else None) or ""
        schema = spec.input_schema if isinstance(spec.input_schema, dict) else {}
        if schema.get("type") != "object":
            schema = {"properties": {}, **schema} | {"type": "object"}
        return Tool(
            name=local,
            description=description,
            input_schema=schema,
            effects=effects,
            scopes=self.scopes,
            timeout=self.timeout,
        )

    @property
    def label(self) -> str:
        """How messages name this provider."""
        return f"MCP server {self.name!r}"

    def __repr__(self) -> str:
        where = " ".join(self.command) if self.command else self.url
        return f"McpTools({self.name!r}, {where!r}, {self.status})"


@contextlib.asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport on an HTTP client of our own (for the headers),
    closed with it."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own defaults: a response stream may stay open for a long time.
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


def _effects(annotations: Any) -> Effects:
    if annotations is None:
        return "write"
    if annotations.destructive_hint:
        return "destructive"
    if annotations.read_only_hint:
        return "read"
    return "write"


def _safe(name: str) -> str:
    # OpenAI allows ^[a-zA-Z0-9_-]{1,64}$ in function names; other upstreams are stricter
    # still about dots and slashes.
    return "".join(c if _NAME.fullmatch(c) else "_" for c in name)


def _result(result: Any) -> ToolResult:
    """An MCP `CallToolResult` as a toolwire result."""
    parts = [_part(block) for block in result.content]
    if result.is_error:
        text = "\n".join(p if isinstance(p, str) else str(p) for p in parts) or "The tool failed."
        return ToolResult(success=False, error=text)
    if result.structured_content is not None:
        return ToolResult(success=True, result=result.structured_content)
    if len(parts) == 1:
        return ToolResult(success=True, result=parts[0])
    return ToolResult(success=True, result=parts)


def _part(block: Any) -> Any:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return {"type": kind, "mime_type": block.mime_type, "bytes": _decoded_size(block.data)}
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return {"type": "resource", "uri": str(resource.uri), "text": text}
        return {
            "type": "resource",
            "uri": str(resource.uri),
            "mime_type": getattr(resource, "mime_type", None),
            "bytes": _decoded_size(getattr(resource, "blob", "")),
        }
    if kind == "resource_link":
        return {"type": "resource_link", "uri": str(block.uri), "name": block.name}
    return {"type": str(kind)}


def _decoded_size(data: str) -> int:
    """Bytes in base64 `data` (without decoding it)."""
    data = data.strip()
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def _is_protocol_error(exc: BaseException) -> bool:
    """An error the server answered (unknown tool, invalid params), not a broken link."""
    from mcp.shared.exceptions import MCPError
    from mcp_types.jsonrpc import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


def _message(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_message(e) for e in exc.exceptions)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
