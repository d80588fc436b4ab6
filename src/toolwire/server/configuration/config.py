"""The gateway's configuration (`toolwire.yaml`) as pydantic models.

Structure and types are checked here; loading from YAML, locating problems in the file
and the checks that need several fields at once live in `toolwire.server.configuration.loader`.
Secrets are never part of the configuration: the upstream key and gateway keys given as
environment variables are read when the gateway starts, and gateway keys written in the
file are SHA-256 hashes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from toolwire.models.quirks import Engine

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "OFFLINE_MODEL_ID",
    "ApprovalsConfig",
    "CooldownConfig",
    "DeploymentConfig",
    "GatewayConfig",
    "HttpToolConfig",
    "KeyConfig",
    "KeyLimitsConfig",
    "LimitsConfig",
    "McpEndpointConfig",
    "McpServerConfig",
    "MetricsConfig",
    "ModelRoute",
    "OpenApiToolsConfig",
    "PublicModelConfig",
    "RetentionConfig",
    "RoutingConfig",
    "ServerToolsConfig",
    "ToolCallsMode",
    "ToolProviderConfig",
    "TracingConfig",
    "UpstreamConfig",
    "parse_duration",
    "parse_tool_calls",
]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8000
OFFLINE_MODEL_ID: Final = "toolwire-offline"
"""The public model id of the offline upstream when the config maps none."""

ToolCallsMode = Literal["native", "parse", "prompted"]
UpstreamKind = Literal["openai", "anthropic", "offline"]
Dialect = Literal["openai", "tool_request"]
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]

_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]+")
_DEFAULT_BASE_URLS: Final = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}


def parse_tool_calls(value: str) -> tuple[ToolCallsMode, str | None]:
    """Split a `tool_calls` setting into its mode and format.

    Args:
        value: `native`, `parse:<format>` (`parse:auto` picks the format from the
            upstream model id) or `prompted:<format>`.

    Returns:
        The mode and the format name (`None` for `native`, `"auto"` for `parse:auto`).

    Raises:
        ValueError: The value is none of those, or names no known format; the message
            lists the valid choices.
    """
    from toolwire.parsing import FORMATS

    mode, sep, fmt = value.partition(":")
    if mode == "native" and not sep:
        return "native", None
    if mode not in ("parse", "prompted") or not sep:
        raise ValueError(
            f"{value!r} is not a tool-call mode; use 'native', 'parse:<format>' or "
            "'prompted:<format>', e.g. 'parse:hermes'"
        )
    if fmt == "auto" and mode == "parse":
        return "parse", "auto"
    if fmt not in FORMATS:
        extra = "'auto' or " if mode == "parse" else ""
        raise ValueError(
            f"unknown tool-call format {fmt!r}; use {extra}one of: {', '.join(FORMATS)}"
        )
    return ("parse" if mode == "parse" else "prompted"), fmt


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _checked_tool_calls(value: str) -> str:
    parse_tool_calls(value)
    return value


def _checked_http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value


def _checked_env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not an environment variable name")
    return value


_ToolCalls = Annotated[str, AfterValidator(_checked_tool_calls)]
"""A `tool_calls` setting (see `parse_tool_calls`)."""
_HttpUrl = Annotated[str, AfterValidator(_checked_http_url)]
"""An http(s) URL."""
_EnvName = Annotated[str, AfterValidator(_checked_env_name)]
"""The name of an environment variable."""


class ModelRoute(_Section):
    """Where one public model id goes. In YAML a plain string is the upstream model name."""

    model: str = Field(min_length=1)
    """The model name sent upstream."""
    tool_calls: _ToolCalls | None = None
    """Overrides `upstream.tool_calls` for this model."""


class UpstreamConfig(_Section):
    """The model server behind the gateway."""

    kind: UpstreamKind = "offline"
    """`openai` (any OpenAI-compatible endpoint), `anthropic` (Messages API) or
    `offline` (the embedded stand-in model; no network)."""
    base_url: str | None = None
    """Defaults to the provider's public API for `openai` and `anthropic`."""
    api_key_env: str | None = None
    """Name of the environment variable holding the upstream key. The key itself is never
    written in the config, logged or echoed."""
    tool_calls: _ToolCalls = "native"
    """`native`, `parse:<format>` or `prompted:<format>` (see `parse_tool_calls`)."""
    models: dict[str, ModelRoute] = Field(default_factory=dict)
    """Public model id (what clients send) → upstream model."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds to wait for the upstream (connecting, and between bytes of a response)."""
    retries: int = Field(default=2, ge=0, le=10)
    """Retries, with backoff, of connect errors, 429 and 5xx; only before the upstream has
    sent the first byte of an answer, so nothing the client saw is ever repeated."""
    max_response_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    """The largest upstream answer read: a whole body, or one event of a stream. A larger
    one fails the request with a clear 502 instead of filling the gateway's memory."""
    tool_call_ids: Literal["auto", "keep", "anthropic", "mistral"] = "auto"
    """How call ids are rewritten for the upstream (and mapped back): `auto` is
    `anthropic` for that kind, `mistral` (nine characters) for Mistral-family model names,
    otherwise ids are sent as they are."""
    prompted_instructions: str | None = None
    """For `prompted:<format>`: the text put before the tool definitions in the system
    prompt (default: toolwire's own instructions for the format)."""
    engine: Engine = "generic"
    """For `openai`: the server software behind `base_url` (`llama.cpp`,
    `llama-cpp-python`, `vllm`, `sglang`, `ollama`, `lm-studio`), whose known quirks
    toolwire absorbs (`toolwire.models.quirks`, docs/engines.md)."""

    @field_validator("models", mode="before")
    @classmethod
    def _plain_names(cls, value: Any) -> Any:
        # `public: upstream-name` is the common case; expand it to a full route.
        if isinstance(value, dict):
            return {k: {"model": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL, e.g. 'http://localhost:8001/v1'")
        return value.rstrip("/") if value is not None else None

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} is not an environment variable name; write the variable's name "
                "(e.g. OPENAI_API_KEY), never the key itself"
            )
        return value

    @property
    def effective_base_url(self) -> str | None:
        """`base_url`, or the provider's public API for `openai` / `anthropic`."""
        return self.base_url or _DEFAULT_BASE_URLS.get(self.kind)

    def routes(self) -> dict[str, ModelRoute]:
        """Every public model id with its route, `tool_calls` filled in from the default."""
        if not self.models and self.kind == "offline":
            return {OFFLINE_MODEL_ID: ModelRoute(model=OFFLINE_MODEL_ID, tool_calls="native")}
        return {
            public: route
            if route.tool_calls is not None
            else route.model_copy(update={"tool_calls": self.tool_calls})
            for public, route in self.models.items()
        }


class HttpToolConfig(_Section):
    """A server tool that calls an HTTP endpoint (see `toolwire.tools.http.HttpTool`)."""

    name: str
    description: str = ""
    endpoint: _HttpUrl
    """An http(s) URL; `{param}` placeholders are filled from the arguments."""
    method: HttpMethod = "POST"
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments (an object schema)."""
    forward_auth: bool = False
    """Send the caller's bearer token to the endpoint."""
    effects: Literal["read", "write", "destructive"] = "read"
    timeout: float | None = Field(default=None, gt=0)
    scopes: list[str] = Field(default_factory=list)
    allow: list[str] | None = None
    """Fields of the JSON answer that may reach the model; all of them by default."""
    approver: str | None = None
    """For a destructive tool: the key (by name) that must approve its calls."""
    audit_arguments: list[str] | None = None
    """Arguments whose values the audit log, approvals and run views may show; dotted
    paths reach into objects (`settings.region`). By default every value whose name, at
    any depth, does not look like a secret."""

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _tool_name(cls, value: str) -> str:
        if not _TOOL_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a tool name; use letters, digits, '_', '-', '.'")
        return value

    @field_validator("parameters")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        import jsonschema_rs

        if value.get("type") != "object":
            raise ValueError("must be a JSON Schema with type 'object'")
        try:
            jsonschema_rs.meta.validate(value)
        except jsonschema_rs.ValidationError as exc:
            where = "/".join(str(p) for p in exc.instance_path) or "(root)"
            raise ValueError(f"not a valid JSON Schema at {where}: {exc.message}") from None
        except jsonschema_rs.ReferencingError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc}") from None
        return value


class ToolProviderConfig(_Section):
    """A `ToolProvider` served as server tools, made by a factory (see
    `toolwire.Toolbox.from_factory`)."""

    factory: str
    """`module:name` of a provider class or a function returning a provider, e.g.
    `myapp.weather:WeatherToolProvider`; the module is a dotted name or a .py path."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Passed to the factory when it takes an argument (as the seed's providers do)."""

    @field_validator("factory")
    @classmethod
    def _factory(cls, value: str) -> str:
        module, sep, name = value.rpartition(":")
        if not sep or not module.strip() or not name.strip():
            raise ValueError(
                f"{value!r} is not 'module:name', e.g. 'myapp.weather:WeatherToolProvider'"
            )
        return value


class McpServerConfig(_Section):
    """An MCP server whose tools are served as server tools (see `toolwire.tools.McpTools`).

    Give `command` (a stdio server, started by the gateway) or `url` (an HTTP one).
    """

    name: str
    """Unique; the server's tools are called `<name>__<tool>` unless `prefix` says else."""
    command: list[str] | None = None
    """The program and its arguments, e.g. `[uvx, mcp-server-git]`."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the server process (literal values)."""
    env_from: list[str] = Field(default_factory=list)
    """Variables passed on from the gateway's own environment (for secrets)."""
    cwd: str | None = None
    url: _HttpUrl | None = None
    """A streamable HTTP (or, with `transport: sse`, SSE) endpoint."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request (literal values)."""
    headers_env: dict[str, str] = Field(default_factory=dict)
    """HTTP headers whose values are read from environment variables (for secrets)."""
    transport: Literal["stdio", "streamable_http", "sse"] | None = None
    prefix: str | None = None
    """The tool-name prefix instead of `<name>__` (`""`: the server's own names)."""
    include: list[str] | None = None
    """Only these tools (the server's names)."""
    exclude: list[str] = Field(default_factory=list)
    effects: dict[str, Literal["read", "write", "destructive"]] = Field(default_factory=dict)
    """Effects by the server's tool name, over what its annotations say."""
    scopes: list[str] = Field(default_factory=list)
    """Scopes a gateway key needs to see and call this server's tools."""
    forward_auth: bool = False
    """Send the caller's token to an HTTP server (never by default)."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds a call may take."""
    start: Literal["eager", "lazy"] = "eager"
    """`eager`: connect when the gateway starts; `lazy`: on the first request."""

    @field_validator("name")
    @classmethod
    def _server_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_\-]{1,48}", value):
            raise ValueError(f"{value!r} is not a server name; use letters, digits, '_', '-'")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not all(part.strip() for part in value)):
            raise ValueError("give the program and its arguments, e.g. [uvx, mcp-server-git]")
        return value

    @field_validator("env_from", "headers_env")
    @classmethod
    def _env_names(cls, value: Any) -> Any:
        names = value.values() if isinstance(value, dict) else value
        for name in names:
            _checked_env_name(name)
        return value

    @model_validator(mode="after")
    def _one_endpoint(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (a stdio server) or 'url'")
        if self.command is not None and (self.headers or self.headers_env or self.forward_auth):
            raise ValueError("headers, headers_env and forward_auth are for an HTTP server (url)")
        if self.command is not None and self.transport not in (None, "stdio"):
            raise ValueError("a command is a stdio server; leave out 'transport'")
        if self.url is not None and (self.env or self.env_from or self.cwd):
            raise ValueError("env, env_from and cwd are for a stdio server (command)")
        if self.url is not None and self.transport == "stdio":
            raise ValueError("transport 'stdio' needs a command, not a url")
        return self


class OpenApiToolsConfig(_Section):
    """HTTP tools made from an OpenAPI 3 document (see `HttpTools.from_openapi`)."""

    openapi: str
    """The document: a path (JSON or YAML; relative to the working directory) or a URL."""
    base_url: _HttpUrl | None = None
    """The API's root URL; default the document's first `servers` entry."""
    operations: list[str] | None = None
    """Only these operations (by `operationId`)."""
    exclude: list[str] = Field(default_factory=list)
    auth: str | None = None
    """`forward` (the caller's token) or `env:VARIABLE` (a bearer token from the gateway's
    environment); default none."""
    effects: dict[str, Literal["read", "write", "destructive"]] = Field(default_factory=dict)
    """Effects by `operationId`; default from the method (GET read, DELETE destructive,
    others write)."""
    scopes: list[str] = Field(default_factory=list)
    timeout: float | None = Field(default=None, gt=0)

    @field_validator("auth")
    @classmethod
    def _auth(cls, value: str | None) -> str | None:
        if value is None or value == "forward":
            return value
        if value.startswith("env:") and _ENV_NAME.fullmatch(value.removeprefix("env:")):
            return value
        raise ValueError(f"{value!r} is neither 'forward' nor 'env:VARIABLE'")


class MetricsConfig(_Section):
    """`GET /metrics` (Prometheus)."""

    enabled: bool = True
    public: bool = False
    """With gateway keys configured, `/metrics` needs an admin key unless this is set."""


class TracingConfig(_Section):
    """OpenTelemetry traces over OTLP/HTTP (the `otel` extra). Nothing is sent by default."""

    enabled: bool = False
    endpoint: str | None = None
    """The collector's OTLP/HTTP root, e.g. `http://otel-collector:4318`; default
    `$OTEL_EXPORTER_OTLP_ENDPOINT`, else `http://localhost:4318`."""
    service_name: str = "toolwire"


class McpEndpointConfig(_Section):
    """`/mcp`: the server tools over MCP streamable HTTP."""

    enabled: bool | None = None
    """`None` (default): on when the `mcp` SDK is installed; `true` requires it."""
    max_streams: int = Field(default=256, ge=0)
    """`GET /mcp` event streams open at once, in all (0: `GET /mcp` answers 405, which
    the MCP transport allows). They have their own budget: they never take the request
    slots of `limits.max_in_flight`. Past it, 503 with a JSON-RPC error."""
    max_streams_per_key: int = Field(default=16, ge=0)
    """`GET /mcp` event streams one gateway key may hold open (not applied on an open
    gateway, whose callers are one principal). Past it, 429 with a JSON-RPC error."""
    stream_idle_timeout: float = Field(default=300.0, gt=0)
    """Seconds a `GET /mcp` stream stays open: the gateway serves `/mcp` statelessly, so
    it never sends a message on one; the client opens another when it wants."""
    stream_keepalive: float = Field(default=15.0, gt=0)
    """Seconds between the SSE comments that keep an idle `GET /mcp` stream alive through
    proxies."""

    @model_validator(mode="after")
    def _per_key_within_total(self) -> McpEndpointConfig:
        if self.max_streams_per_key > self.max_streams:
            raise ValueError(
                f"max_streams_per_key ({self.max_streams_per_key}) is more than max_streams "
                f"({self.max_streams})"
            )
        return self


class ServerToolsConfig(_Section):
    """Tools that run inside the gateway."""

    modules: list[str] = Field(default_factory=list)
    """Python modules (dotted names or .py paths) whose `@tool` functions are served."""
    http: list[HttpToolConfig] = Field(default_factory=list)
    providers: list[ToolProviderConfig] = Field(default_factory=list)
    """Tool providers (objects with `list_tools` / `execute_tool`), listed once at start."""


class KeyLimitsConfig(_Section):
    """What one gateway key may spend. Unset: no limit (on a key entry: the default from
    `limits.per_key`). Counted in the store, so replicas on one Redis or PostgreSQL share
    them; past one, 429 with `Retry-After` and OpenAI's `x-ratelimit-*` headers."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    """Input and output tokens, as the upstream reports them, after each model turn: a
    request is refused once the minute's count has reached the limit."""
    tool_calls_per_minute: int | None = Field(default=None, ge=1)
    """Server-tool calls, all tools together; checked before each call runs."""
    tools: dict[str, int] = Field(default_factory=dict)
    """Calls per minute of one tool, by name."""
    concurrent_requests: int | None = Field(default=None, ge=1)
    budget: int | None = Field(default=None, ge=1)
    """Tokens per day (UTC)."""

    @field_validator("tools")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, limit in value.items():
            if limit < 1:
                raise ValueError(f"the limit of tool {name!r} must be at least 1 (got {limit})")
        return value

    def over(self, defaults: KeyLimitsConfig) -> KeyLimitsConfig:
        """These limits, each unset one taken from `defaults`."""
        fields = {n: getattr(self, n) for n in self.model_fields_set}
        return defaults.model_copy(update={**fields, "tools": {**defaults.tools, **self.tools}})

    @property
    def any(self) -> bool:
        return any(v for n, v in self if n != "tools") or bool(self.tools)


class KeyConfig(_Section):
    """A gateway key: give `sha256` (hex digest of the key) or `env` (a variable holding it)."""

    name: str = Field(min_length=1)
    """Who uses the key; becomes `ToolContext.principal`."""
    sha256: str | None = None
    env: _EnvName | None = None
    scopes: list[str] = Field(default_factory=list)
    """Becomes `ToolContext.scopes`: the tool permissions of this key."""
    admin: bool = False
    """May see every caller's approvals and runs, resume any run (with its owner's
    scopes), decide any approval no tool reserves for another key, and read the audit log
    (`/v1/audit`)."""
    limits: KeyLimitsConfig = Field(default_factory=KeyLimitsConfig)
    """What this key may spend; unset ones come from `limits.per_key`."""
    approve: Literal["own", "any", "none"] = "own"
    """Which approvals this key may decide (and so see): those of its own runs
    (default), anyone's, or none. A tool that names an `approver` key can only be decided
    by that key, whatever the settings (docs/runs.md has the whole table)."""

    @field_validator("sha256", mode="before")
    @classmethod
    def _quoted(cls, value: Any) -> Any:
        if isinstance(value, int | float):
            # YAML read a digest made only of digits (or digits and one 'e') as a number.
            raise ValueError('write the digest in quotes: sha256: "…"')
        return value

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is None:
            return None
        digest = value.strip().lower()
        if not _HEX64.fullmatch(digest):
            raise ValueError(
                "must be the 64-character hex SHA-256 digest of the key "
                '(printf %s "$KEY" | sha256sum), not the key itself'
            )
        return digest

    @model_validator(mode="after")
    def _one_source(self) -> KeyConfig:
        if (self.sha256 is None) == (self.env is None):
            raise ValueError("give exactly one of 'sha256' (the key's hex digest) or 'env'")
        return self


class LimitsConfig(_Section):
    """Request limits, enforced before anything reaches the upstream."""

    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    """Largest request body; bigger ones get 413 while still being read."""
    max_messages: int = Field(default=512, gt=0)
    max_tools: int = Field(default=128, gt=0)
    max_iterations: int = Field(default=5, ge=1, le=100)
    """Model turns per request when server tools run (the agent loop's bound)."""
    body_timeout: float = Field(default=30.0, gt=0)
    """Seconds a client may take to send a request body while the gateway has room;
    slower gets 408. Past half of `max_in_flight` or `max_in_flight_bytes` the deadline
    of every body still arriving shrinks, down to `min_body_timeout` when full."""
    min_body_timeout: float = Field(default=2.0, gt=0)
    """The body deadline when the request slots or bytes are (nearly) all taken: a stalled
    upload cannot hold them long (`body_timeout` when that is shorter)."""
    header_timeout: float = Field(default=10.0, gt=0)
    """Seconds a client may take to send a request's headers (and an idle new connection
    may wait before its first request); slower is closed, with 408 when part of a
    request had arrived (`toolwire serve` only)."""
    max_in_flight: int = Field(default=1024, ge=1)
    """Requests in flight at once (a stream counts until it ends; `GET /mcp` streams have
    their own budget, `mcp.max_streams`); past it, 503 with `Retry-After` before the body
    is read."""
    max_in_flight_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    """Memory the requests in flight may hold for their bodies, charged as the bytes
    arrive (not as declared): five times the bytes (received, parsed, sent upstream) and,
    once a JSON body is read, 64 bytes per value it may hold (`[[],[],…]` parses to 21
    times its bytes). Past it, 503 with `Retry-After`."""
    max_in_flight_bytes_per_key: int | None = Field(default=None, ge=1024)
    """The same, for the requests of one gateway key (default: a quarter of
    `max_in_flight_bytes`), so that one key cannot take it all; past it, 429 with
    `Retry-After`. Not applied on an open gateway."""
    per_key: KeyLimitsConfig = Field(default_factory=KeyLimitsConfig)
    """The default limits of every gateway key (a key's own `limits` win)."""
    max_tool_calls: int = Field(default=64, ge=1, le=10_000)
    """Tool calls one model turn may make when server tools run; the rest are refused
    (`too_many_calls`) and not run."""

    @model_validator(mode="after")
    def _per_key_within_total(self) -> LimitsConfig:
        per_key = self.max_in_flight_bytes_per_key
        if per_key is not None and per_key > self.max_in_flight_bytes:
            raise ValueError(
                f"max_in_flight_bytes_per_key ({per_key}) is more than max_in_flight_bytes "
                f"({self.max_in_flight_bytes})"
            )
        return self

    @property
    def key_bytes(self) -> int:
        """`max_in_flight_bytes_per_key`, or its default."""
        if self.max_in_flight_bytes_per_key is not None:
            return self.max_in_flight_bytes_per_key
        return max(1024, self.max_in_flight_bytes // 4)


class ApprovalsConfig(_Section):
    """How long approvals live and how long a streaming client is kept waiting."""

    ttl: float = Field(default=3600.0, gt=0)
    """Seconds a pending approval stays valid; after that it is `expired`."""
    wait_seconds: float = Field(default=0.0, ge=0, le=3600)
    """When a streamed run pauses for approval, keep the stream open this long and go on
    in the same stream once the approval is decided (0: end the stream at once)."""


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DAY: Final = 86400.0


def parse_duration(value: Any) -> float | None:
    """Seconds in `30d`, `12h`, `90m`, `45s`, `2w` or a plain number of seconds; `None` for
    `forever` (or a null value).

    Raises:
        ValueError: Anything else, or a duration that is not positive.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == "forever"):
        return None
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value.strip().lower())):
        seconds = float(match[1]) * _UNIT_SECONDS[match[2]]
    if seconds is None or not 0 < seconds < float("inf"):
        raise ValueError(
            f"write a positive duration such as 30d, 12h, 90m or 45s, or 'forever' (got {value!r})"
        )
    return seconds


class RetentionConfig(_Section):
    """How long the store keeps what can no longer change (`Store.prune`), per kind.

    Each is a duration (`30d`, `12h`) or `forever`. Runs count from their last write and
    only final ones go (or paused ones whose approvals all expired); approvals count from
    their creation and only decided, used or expired ones go; audit records count from
    their time and go oldest first. Keep the audit log longest: it is what shows, later,
    which tool ran with which arguments for whom.
    """

    runs: float | None = 30 * _DAY
    approvals: float | None = 30 * _DAY
    audit: float | None = 365 * _DAY
    interval: float = Field(default=3600.0, ge=10, le=_DAY)
    """How often the gateway prunes (10 s to 1 d; each replica on its own timer, which is
    harmless: a prune deletes only what retention no longer keeps)."""

    @field_validator("runs", "approvals", "audit", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float | None:
        return parse_duration(value)

    @field_validator("interval", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> float:
        seconds = parse_duration(value)
        if seconds is None:
            raise ValueError("the interval is a duration such as 1h or 10m, not 'forever'")
        return seconds


class DeploymentConfig(_Section):
    """One place a public model runs: a named upstream and the model name sent to it."""

    upstream: str = Field(min_length=1)
    """A name under `upstreams:`."""
    model: str = Field(min_length=1)
    """The model name sent upstream."""
    weight: int = Field(default=1, ge=1, le=1000)
    """Its share of the traffic under `weighted_round_robin` (and of the in-flight
    requests under `least_busy`)."""


class PublicModelConfig(_Section):
    """A public model id of the `upstreams:` form: its deployments and fallbacks.

    `{upstream: u, model: m}` is short for one deployment.
    """

    deployments: list[DeploymentConfig] = Field(min_length=1)
    """One or more; requests are balanced across them by `routing.strategy`."""
    tool_calls: _ToolCalls = "native"
    """`native`, `parse:<format>` or `prompted:<format>` for every deployment."""
    fallbacks: list[str] = Field(default_factory=list)
    """Other public model ids, tried in order when every deployment failed before the
    client received a byte."""
    context_window: int | None = Field(default=None, ge=1)
    """Tokens the model takes; a context-window error goes only to a fallback whose
    window is larger (unknown: such an error goes to no fallback)."""

    @model_validator(mode="before")
    @classmethod
    def _one_deployment(cls, value: Any) -> Any:
        if isinstance(value, dict) and "deployments" not in value and "upstream" in value:
            short = {k: value[k] for k in ("upstream", "model", "weight") if k in value}
            rest = {k: v for k, v in value.items() if k not in short}
            return {**rest, "deployments": [short]}
        return value


class CooldownConfig(_Section):
    """Passive health: a deployment that fails `failures` times in a row is left out for
    `seconds`, then tried again with one request."""

    failures: int = Field(default=3, ge=1, le=1000)
    seconds: float = Field(default=30.0, gt=0, le=86400)


class RoutingConfig(_Section):
    """How a public model's deployments share its requests."""

    strategy: Literal["least_busy", "weighted_round_robin", "latency"] = "least_busy"
    """`least_busy`: fewest requests in flight (per unit of weight); `weighted_round_robin`:
    in turn, by weight; `latency`: the fastest recent answers (time to first byte)."""
    cooldown: CooldownConfig = Field(default_factory=CooldownConfig)


class GatewayConfig(_Section):
    """Everything `toolwire serve` needs. All fields have defaults: `GatewayConfig()` is
    the offline upstream on 127.0.0.1:8000 with no server tools and no keys."""

    upstream: UpstreamConfig = Field(default_factory=UpstreamConfig)
    upstreams: dict[str, UpstreamConfig] = Field(default_factory=dict)
    """Named model servers (each without `models`), for the `models:` form; not together
    with `upstream:`."""
    models: dict[str, PublicModelConfig] = Field(default_factory=dict)
    """Public model id → its deployments on `upstreams` and its fallbacks."""
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    server_tools: ServerToolsConfig = Field(default_factory=ServerToolsConfig)
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    """MCP servers whose tools are served as server tools."""
    http_tools: list[OpenApiToolsConfig] = Field(default_factory=list)
    """HTTP tools made from OpenAPI documents, one per operation."""
    mcp: McpEndpointConfig = Field(default_factory=McpEndpointConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    playground: bool = True
    """Serve the playground web page at `/`."""
    """The gateway's own MCP endpoint (`/mcp`)."""
    keys: list[KeyConfig] = Field(default_factory=list)
    """When any are configured, every request except `/healthz` needs one."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    store: str | None = None
    """Where runs, approvals, the audit log, the tool cache and the gateway's memory of
    its own steps live: `sqlite:///path/state.db` (default: see
    `toolwire.store.default_store_url`), `postgresql://user@host/db` or
    `redis://host:6379/0` (replicas share it), or `memory` (tests and demos only: nothing
    survives a restart)."""
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    """What the store keeps and for how long; applied in the background by the gateway
    and by `toolwire store prune`."""
    memory_ttl: float = Field(default=86400.0, gt=0)
    """Seconds the gateway remembers the server-tool steps of a run that handed client
    tool calls back, so the client's next request can continue it."""
    strict_tool_results: bool = False
    """Refuse an orphan tool result with 400 instead of dropping it."""
    dialect: Dialect = "openai"
    """`tool_request`: also accept the strict whole-message JSON tool-request dialect."""
    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from toolwire.store import StoreError, open_store

        try:
            open_store(value)  # only parses the URL; nothing is opened
        except StoreError as exc:
            raise ValueError(str(exc)) from None
        return value
