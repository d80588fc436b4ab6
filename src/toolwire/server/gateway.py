"""`Gateway`: what the HTTP app runs on, built from a `GatewayConfig`.

No HTTP framework here: the server tools, their runner, the gateway keys and the model
routes, so `toolwire check` can load everything the app would without the server extra.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from toolwire.agent import Agent
from toolwire.models import Model
from toolwire.models.observed import ModelObserver
from toolwire.models.parsed import FailureHook
from toolwire.models.relay_http import pooled_client
from toolwire.runner import Policy, ToolRunner
from toolwire.runner.audit import redact_arguments, redact_arguments_json
from toolwire.server.configuration.config import (
    GatewayConfig,
    McpServerConfig,
    ModelRoute,
    OpenApiToolsConfig,
    ServerToolsConfig,
)
from toolwire.server.configuration.loader import (
    ConfigError,
    ConfigProblem,
    Loc,
    approver_findings,
    environment_findings,
    format_path,
    routing_findings,
)
from toolwire.server.http.errors import GatewayError
from toolwire.server.keys.keyring import GatewayKey, Keyring
from toolwire.server.keys.quotas import KeyLimiter, counted
from toolwire.server.upstreams.clients import build_model
from toolwire.server.upstreams.routing import (
    Deployment,
    RoutedModel,
    RoutingObserver,
    build_routed_models,
)
from toolwire.store import Store, StoreError, default_store_url, open_store
from toolwire.tools import Tool, ToolContext, ToolDefinitionError, ToolProvider
from toolwire.tools.http import HttpTool, HttpTools
from toolwire.tools.mcp import McpTools
from toolwire.tools.toolbox import Toolbox

__all__ = [
    "Gateway",
    "ServerTools",
    "load_mcp_servers",
    "load_server_tools",
    "tool_approvers",
]

logger = logging.getLogger("toolwire.server")


@dataclass(slots=True, kw_only=True)
class ServerTools:
    """The tools that run inside the gateway."""

    provider: Toolbox
    http: HttpTools | None = None
    """Kept to close its HTTP client when the gateway stops."""
    mcp: list[McpTools] = field(default_factory=list)
    """The MCP servers, started and stopped with the gateway."""
    openapi: list[HttpTools] = field(default_factory=list)
    """The HTTP tools made from OpenAPI documents (their clients closed at the end)."""

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()
        for tools in self.openapi:
            await tools.aclose()
        await asyncio.gather(*(server.aclose() for server in self.mcp))


def load_mcp_servers(configs: list[McpServerConfig], environ: Mapping[str, str]) -> list[McpTools]:
    """The MCP servers of the config (not started)."""
    servers = []
    for c in configs:
        env = {**c.env, **{name: environ[name] for name in c.env_from if name in environ}}
        headers = {**c.headers, **{h: environ.get(v, "") for h, v in c.headers_env.items()}}
        servers.append(
            McpTools(
                command=c.command,
                env=env,
                cwd=c.cwd,
                url=c.url,
                headers=headers,
                transport=c.transport,
                name=c.name,
                prefix=c.prefix,
                include=c.include,
                exclude=c.exclude,
                effects=c.effects,
                scopes=c.scopes,
                forward_auth=c.forward_auth,
                timeout=c.timeout,
            )
        )
    return servers


def load_server_tools(
    config: ServerToolsConfig,
    mcp: list[McpTools] | None = None,
    openapi: list[OpenApiToolsConfig] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[ServerTools | None, list[tuple[Loc, str]]]:
    """Import the tool modules, make the tool providers and define the HTTP tools.

    Returns:
        The tools (`None` when anything failed) and every problem, located under
        `server_tools`.
    """
    findings: list[tuple[Loc, str]] = []
    parts: list[ToolProvider] = []
    for i, module in enumerate(config.modules):
        try:
            parts.append(Toolbox.from_module(module))
        except ToolDefinitionError as exc:
            findings.append((("server_tools", "modules", i), " ".join(str(exc).split())))
    for i, entry in enumerate(config.providers):
        try:
            # Listed once here, so the gateway knows the names of its server tools.
            parts.append(Toolbox.from_factory(entry.factory, entry.config))
        except ToolDefinitionError as exc:
            loc: Loc = ("server_tools", "providers", i, "factory")
            findings.append((loc, " ".join(str(exc).split())))
    http: HttpTools | None = None
    if config.http:
        defined: list[HttpTool] = []
        for i, h in enumerate(config.http):
            try:
                defined.append(
                    HttpTool(
                        name=h.name,
                        description=h.description,
                        endpoint=h.endpoint,
                        method=h.method,
                        input_schema=h.parameters,
                        forward_auth=h.forward_auth,
                        effects=h.effects,
                        timeout=h.timeout,
                        scopes=tuple(h.scopes),
                        allow=tuple(h.allow) if h.allow is not None else None,
                        approver=h.approver,
                        audit_arguments=(
                            tuple(h.audit_arguments) if h.audit_arguments is not None else None
                        ),
                    )
                )
            except ToolDefinitionError as exc:
                findings.append((("server_tools", "http", i), str(exc)))
        http = HttpTools(defined)
        parts.append(http)
    openapi_tools: list[HttpTools] = []
    for i, source in enumerate(openapi or []):
        try:
            openapi_tools.append(
                HttpTools.from_openapi(
                    source.openapi,
                    base_url=source.base_url,
                    operations=source.operations,
                    exclude=source.exclude,
                    auth=source.auth,
                    effects=source.effects,
                    scopes=source.scopes,
                    timeout=source.timeout,
                    environ=environ,
                )
            )
        except ToolDefinitionError as exc:
            findings.append((("http_tools", i, "openapi"), " ".join(str(exc).split())))
    parts.extend(openapi_tools)
    if findings:
        return None, findings
    try:
        provider = Toolbox([*parts, *(mcp or [])])
    except ToolDefinitionError as exc:
        return None, [(("server_tools",), str(exc))]
    return (
        ServerTools(provider=provider, http=http, mcp=list(mcp or []), openapi=openapi_tools),
        [],
    )


def tool_approvers(
    tools: ServerTools, config: ServerToolsConfig, *, skip_http: bool = False
) -> list[tuple[Loc, str, str | None]]:
    """`(where, tool, approver)` of the server tools for `approver_findings`. The YAML's
    HTTP tools are located at their entry (`skip_http`: `parse_config` reports those)."""
    http = {h.name: i for i, h in enumerate(config.http)}
    out: list[tuple[Loc, str, str | None]] = []
    for tool in tools.provider.tools:
        if tool.name not in http:
            out.append((("server_tools",), tool.name, tool.approver))
        elif not skip_http:
            loc: Loc = ("server_tools", "http", http[tool.name], "approver")
            out.append((loc, tool.name, tool.approver))
    return out


_PROVIDER_ENV: Final = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
}


def _with_provider_environment(config: GatewayConfig, env: Mapping[str, str]) -> GatewayConfig:
    """The upstream's key and base URL from the variables the provider's own SDK reads
    (`OPENAI_API_KEY`, `OPENAI_BASE_URL`; `ANTHROPIC_…`) when the config names neither."""
    upstream = config.upstream
    names = _PROVIDER_ENV.get(upstream.kind)
    if names is None:
        return config
    key_var, url_var = names
    update: dict[str, str] = {}
    if upstream.api_key_env is None and env.get(key_var):
        update["api_key_env"] = key_var
    if upstream.base_url is None and env.get(url_var):
        update["base_url"] = env[url_var]
    if not update:
        return config
    return config.model_copy(update={"upstream": upstream.model_copy(update=update)})


def _with_named_provider_environment(
    config: GatewayConfig, env: Mapping[str, str]
) -> GatewayConfig:
    """`_with_provider_environment` for each named upstream: its key from the provider's
    own variable when it names none (the base URL is never taken: two upstreams of one
    kind would both get it)."""
    if not config.upstreams:
        return config
    named = dict(config.upstreams)
    for name, upstream in named.items():
        names = _PROVIDER_ENV.get(upstream.kind)
        if names is not None and upstream.api_key_env is None and env.get(names[0]):
            named[name] = upstream.model_copy(update={"api_key_env": names[0]})
    return config.model_copy(update={"upstreams": named})


def _public_routes(config: GatewayConfig) -> dict[str, ModelRoute]:
    """Each public id of the `models:` form as a route (its first deployment's model): what
    `/v1/models` and the metrics list."""
    return {
        public: ModelRoute(model=entry.deployments[0].model, tool_calls=entry.tool_calls)
        for public, entry in config.models.items()
    }


class Gateway:
    """The gateway's runtime state: routes, keys, server tools and their runner.

    Args:
        config: A validated configuration.
        environ: Where environment variables are read (default `os.environ`).

    Raises:
        ConfigError: Tool modules fail to load, or variables the config names are unset.
    """

    def __init__(
        self,
        config: GatewayConfig,
        *,
        environ: Mapping[str, str] | None = None,
        observer: ModelObserver | None = None,
        on_parse_failure: FailureHook | None = None,
        routing_observer: RoutingObserver | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        config = _with_provider_environment(config, env)
        config = _with_named_provider_environment(config, env)
        problems = [
            ConfigProblem(path=format_path(loc), message=message)
            for loc, message in [*environment_findings(config, env), *routing_findings(config)]
        ]
        mcp = load_mcp_servers(config.mcp_servers, env)
        tools, findings = load_server_tools(config.server_tools, mcp, config.http_tools, env)
        problems += [ConfigProblem(path=format_path(loc), message=m) for loc, m in findings]
        if tools is not None:
            for loc, message, severity in approver_findings(
                tool_approvers(tools, config.server_tools), config.keys
            ):
                if severity == "error":
                    problems.append(ConfigProblem(path=format_path(loc), message=message))
                else:
                    logger.warning("%s: %s", format_path(loc), message)
        store_url = config.store or env.get("TOOLWIRE_STORE") or default_store_url()
        store: Store | None = None
        try:
            # Built now, opened on first use (or at startup): requests without server tools
            # never touch it.
            store = open_store(store_url)
        except StoreError as exc:
            problems.append(ConfigProblem(path="store", message=str(exc)))
        if problems or tools is None or store is None:
            raise ConfigError(problems)
        self.config = config
        self.routes: dict[str, ModelRoute] = config.upstream.routes()
        self.keyring = Keyring.from_config(config.keys, env)
        self.tools = tools
        self.store = store
        self._store_open = False
        self._store_lock: asyncio.Lock | None = None
        self.limiter = KeyLimiter(config.keys, config.limits.per_key, self.ready)
        """Per-key limits (`keys[].limits`, `limits.per_key`), counted in the store."""
        self.runner = ToolRunner(
            tools.provider,
            policy=Policy(),
            cache=self.store,
            audit=self.store,
            gate=self.limiter.tool_gate if self.limiter.active else None,
        )
        self.started = int(time.time())
        name = config.upstream.api_key_env
        # Read once, kept private: never logged, echoed or put in an error message.
        self._upstream_key = env.get(name) if name is not None else None
        upstream = config.upstream
        # One pool for every route: keep-alive connections to the upstream are the
        # gateway's main saving on added latency.
        self.http_client = pooled_client(timeout=upstream.timeout)
        self.models: dict[str, Model] = {
            public: build_model(
                upstream,
                route,
                api_key=self._upstream_key,
                http_client=self.http_client,
                dialect=config.dialect,
                observer=observer,
                on_parse_failure=on_parse_failure,
            )
            for public, route in self.routes.items()
        }
        self._upstream_keys = [
            k for u in config.upstreams.values() if u.api_key_env and (k := env.get(u.api_key_env))
        ]
        if config.models:
            self.routes = _public_routes(config)
            self.models = dict(
                build_routed_models(
                    config,
                    {
                        n: env.get(u.api_key_env) if u.api_key_env else None
                        for n, u in config.upstreams.items()
                    },
                    http_client=self.http_client,
                    observer=observer,
                    on_parse_failure=on_parse_failure,
                    routing_observer=routing_observer,
                )
            )
        self.models = counted(self.models, self.limiter)
        self.server_tool_list: list[Tool] = tools.provider.tools
        """The server tools as last listed (MCP servers' tools come and go)."""
        self.server_tool_names: frozenset[str] = frozenset(t.name for t in self.server_tool_list)
        self._refreshing: asyncio.Task[None] | None = None
        self._tools_stale = False
        self._started = False
        for server in tools.mcp:
            server.on_change = self._tools_changed
        self.agents: dict[str, Agent] = {
            public: Agent(
                model,
                tools.provider,
                max_iterations=config.limits.max_iterations,
                max_tool_calls=config.limits.max_tool_calls,
                runner=self.runner,
                store=self.store,
                approval_ttl=config.approvals.ttl,
            )
            for public, model in self.models.items()
        }

    async def start(self) -> None:
        """Start what the gateway needs before serving: the MCP servers (waiting for the
        `eager` ones) and the store when there are server tools.

        Raises:
            ToolDefinitionError: Two tools have one name (an MCP server's and another's).
            StoreError: The store cannot be opened.
        """
        lazy = {c.name for c in self.config.mcp_servers if c.start == "lazy"}
        servers = self.tools.mcp
        await asyncio.gather(*(s.start(wait=s.name not in lazy) for s in servers))
        for server in servers:
            if server.name not in lazy and server.status != "up":
                logger.warning(
                    "MCP server %r did not come up (%s); its tools are unavailable until it does",
                    server.name,
                    server.last_error or "no answer",
                )
        await self.refresh_tools()
        self._started = True
        if self.server_tool_names or servers:
            await self.ready()

    async def refresh_tools(self) -> None:
        """List the server tools again (an MCP server came up or changed its tools).

        Raises:
            ToolDefinitionError: Two tools have one name.
        """
        tools = await self.runner.refresh_tools()
        self.server_tool_list = tools
        self.server_tool_names = frozenset(t.name for t in tools)

    def _tools_changed(self) -> None:
        if not self._started:
            return  # `start` lists everything once the servers are up
        self._tools_stale = True
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh_stale())

    async def _refresh_stale(self) -> None:
        while self._tools_stale:
            self._tools_stale = False
            try:
                await self.refresh_tools()
            except ToolDefinitionError as exc:
                logger.error("server tools not updated: %s", exc)
            except Exception:
                logger.exception("server tools not updated")

    async def ready(self) -> Store:
        """The store, opened (and migrated) on first use.

        Raises:
            StoreError: It cannot be opened.
        """
        if self._store_open:
            return self.store
        if self._store_lock is None:
            self._store_lock = asyncio.Lock()
        async with self._store_lock:
            if not self._store_open:
                await self.store.open()
                self._store_open = True
        return self.store

    @property
    def opened_store(self) -> Store | None:
        """The store if something opened it already (server tools, a request), else
        `None`: background work must not create a store nobody uses."""
        return self.store if self._store_open else None

    def deployments(self) -> list[Deployment]:
        """Every deployment of the `models:` form, once each (none for `upstream:`)."""
        seen: dict[int, Deployment] = {}
        for model in self.models.values():
            routed = getattr(model, "inner", model)
            if isinstance(routed, RoutedModel):
                for pool in routed.chain:
                    seen.update((id(d), d) for d in pool.deployments)
        return list(seen.values())

    def redact(self, text: str) -> str:
        """`text` with the upstream key masked: some upstreams echo the key they were sent
        (in an authentication error, say), and the gateway must never pass it on."""
        for key in (self._upstream_key, *self._upstream_keys):
            # A very short key (a placeholder like "x") would mask ordinary text.
            if key is not None and len(key) >= 8 and key in text:
                text = text.replace(key, "[redacted]")
        return text

    def shown_arguments(self, tool_name: str, arguments: str) -> str:
        """A call's JSON arguments as an answer may show them: redacted at every depth by
        the server tool's allowlist (by secret-looking names for any other tool)."""
        return redact_arguments_json(self._server_tool(tool_name), arguments)

    def shown_object(self, tool_name: str, arguments: Any) -> dict[str, Any] | None:
        """`shown_arguments` for arguments already parsed (audit records)."""
        return redact_arguments(self._server_tool(tool_name), arguments)

    def _server_tool(self, name: str) -> Tool | None:
        return next((t for t in self.server_tool_list if t.name == name), None)

    def unknown_model(self, model_id: str) -> GatewayError:
        """The 404 for a model id the config does not route."""
        listed = ", ".join(repr(m) for m in self.routes)
        return GatewayError(
            404,
            f"The model {model_id!r} does not exist on this gateway. Available models: {listed}.",
            param="model",
            code="model_not_found",
        )

    def context(self, key: GatewayKey | None, token: str | None) -> ToolContext:
        """The `ToolContext` of one request made with `key`; `token` is the caller's token
        that HTTP tools with `forward_auth` may send on."""
        return ToolContext(
            scopes=key.scopes if key is not None else frozenset(),
            principal=key.name if key is not None else None,
            auth_token=token,
            run_id="run_" + os.urandom(16).hex(),  # as uuid4().hex, without the object
        )

    async def aclose(self) -> None:
        """Release what the gateway holds open (the upstream pool, HTTP tool clients)."""
        await self.http_client.aclose()
        await self.tools.aclose()
        if self._store_open:
            self._store_open = False
            await self.store.aclose()

    def __repr__(self) -> str:
        return (
            f"Gateway(upstream={self.config.upstream.kind!r}, models={list(self.routes)!r}, "
            f"keys={len(self.keyring)})"
        )
