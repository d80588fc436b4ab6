"""`toolwire serve` (the gateway) and `toolwire check` (validate its config).

Both import the server lazily: `toolwire check` needs no server extra, and `serve`
starts in well under a second.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from toolwire.cli._common import discover_config, exit_with, stderr_console
from toolwire.cli.render import Waiting

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from toolwire.server import ConfigDocument, ConfigProblem, GatewayConfig
    from toolwire.server.gateway import Gateway
    from toolwire.store import Store

__all__ = ["check", "default_config", "serve"]

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="The gateway config (YAML). Default: $TOOLWIRE_CONFIG, else ./toolwire.yaml "
        "when it exists, else the offline model and the demo tools.",
        dir_okay=False,
    ),
]


def default_config() -> GatewayConfig:
    """What `toolwire serve` runs without a config: the offline model, the demo tools."""
    from toolwire.server import GatewayConfig, ServerToolsConfig

    return GatewayConfig(server_tools=ServerToolsConfig(modules=["toolwire.tools.demo"]))


def serve(
    config: ConfigOption = None,
    host: Annotated[
        str | None,
        typer.Option(help="Address to listen on. Default: the config's, else 127.0.0.1."),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port to listen on (0: any free port). Default: the config's, else 8000."
        ),
    ] = None,
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log/--no-access-log",
            help="Log one line per request (toolwire.access: request id, key name, route, "
            "status, duration, model).",
        ),
    ] = True,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            help="text (a timestamped line) or json (one JSON object per line).",
        ),
    ] = "text",
    drain_seconds: Annotated[
        int,
        typer.Option(
            "--drain-seconds",
            min=0,
            help="On SIGTERM / Ctrl-C, let requests in flight finish for this long, then end "
            "the rest.",
        ),
    ] = 30,
    workers: Annotated[
        str,
        typer.Option(
            "--workers",
            help="Processes serving on the same port: a number, or 'auto' for one per "
            "CPU core. Workers share runs, approvals and the cache through the store, so "
            "more than one needs a SQLite, PostgreSQL or Redis store.",
        ),
    ] = "1",
) -> None:
    """Start the OpenAI-compatible gateway."""
    count = _worker_count(workers)
    if log_format not in ("text", "json"):
        raise exit_with(f"--log-format must be 'text' or 'json', not {log_format!r}.")
    config, settings = _settings(config, host, port)
    app = _create_app(settings, access_log)
    sock = _bind(settings, app.state.gateway, count)
    _run(app, sock, settings, config, count, access_log, log_format, drain_seconds)


def _settings(
    config: Path | None, host: str | None, port: int | None
) -> tuple[Path | None, GatewayConfig]:
    """The config file found (if any) and the settings, with the command line's overrides."""
    from toolwire.server import MissingExtraError, require_server_extra

    try:
        require_server_extra()
    except MissingExtraError as exc:
        raise exit_with(str(exc), code=1) from None
    from toolwire.server import ConfigError, load_config

    try:
        config = discover_config(config)
        settings = load_config(config) if config is not None else default_config()
    except ConfigError as exc:
        _print_problems(exc.problems)
        raise typer.Exit(2) from None
    updates = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    if updates:
        settings = settings.model_copy(update=updates)
    if not 0 <= settings.port <= 65535:
        raise exit_with(f"--port must be between 0 and 65535, not {settings.port}.")
    return config, settings


def _create_app(settings: GatewayConfig, access_log: bool) -> Starlette:
    from toolwire.server import ConfigError, create_app

    try:
        return create_app(settings, access_log=access_log)
    except ConfigError as exc:
        _print_problems(exc.problems)
        raise typer.Exit(2) from None


def _bind(settings: GatewayConfig, gateway: Gateway, count: int) -> socket.socket:
    """The listening socket, once the store is known to fit `count` workers and to work."""
    try:
        sock = _listen(settings.host, settings.port)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise exit_with(
            f"Cannot listen on {settings.host}:{settings.port}: {reason}. "
            "Choose another --port or stop what is using it.",
            code=1,
        ) from None
    if count > 1 and not gateway.store.durable:
        sock.close()
        raise exit_with(
            f"--workers {count} needs a store the workers can share; {gateway.store.url} "
            "lives in one process. Use a SQLite file, PostgreSQL or Redis (`store:` in the "
            "config, or TOOLWIRE_STORE).",
            code=2,
        )
    problem = _check_store(gateway.store)
    if problem is not None:
        sock.close()
        raise exit_with(problem, code=1)
    return sock


def _run(
    app: Starlette,
    sock: socket.socket,
    settings: GatewayConfig,
    config: Path | None,
    count: int,
    access_log: bool,
    log_format: str,
    drain_seconds: int,
) -> None:
    """Serve on `sock` until stopped: in this process, or in `count` worker processes."""
    gateway: Gateway = app.state.gateway
    bound_host, bound_port = sock.getsockname()[:2]

    def banner() -> None:
        tool_names = [t.name for t in gateway.server_tool_list]
        _print_banner(settings, str(bound_host), int(bound_port), config, tool_names, gateway.store)

    from toolwire.server.http.serving import ServeOptions, StartupError, build_app, serve
    from toolwire.server.observability.logs import configure_logging

    level = os.environ.get("TOOLWIRE_LOG_LEVEL", "info")
    configure_logging(level, log_format)
    options = ServeOptions(
        log_level=level,
        access_log=access_log,
        drain_seconds=drain_seconds,
        header_timeout=settings.limits.header_timeout,
    )

    async def start() -> None:
        # MCP servers are connected in the server's own loop, before it listens.
        await _start_gateway(gateway)
        banner()

    try:
        if count == 1:
            serve(lambda: app, sock, options, before_serving=start)
            return
        # Each worker builds its own app from the same settings (it runs in a new
        # process); the tools are checked once here first.
        asyncio.run(_check_gateway(gateway))
        banner()
        factory = functools.partial(build_app, settings.model_dump_json(), access_log, log_format)
        serve(factory, sock, options, workers=count)
    except StartupError as exc:
        sock.close()
        raise exit_with(str(exc), code=1) from None


async def _start_gateway(gateway: Gateway) -> None:
    from toolwire.server.http.serving import StartupError
    from toolwire.tools import ToolDefinitionError

    waiting = Waiting(stderr_console())
    if gateway.tools.mcp:
        waiting.show(f"connecting to {len(gateway.tools.mcp)} MCP server(s)…")
    try:
        await gateway.start()
    except ToolDefinitionError as exc:
        await gateway.aclose()
        raise StartupError(f"Cannot start: {exc}") from None
    finally:
        waiting.hide()


async def _check_gateway(gateway: Gateway) -> None:
    await _start_gateway(gateway)
    await gateway.aclose()


def _worker_count(value: str) -> int:
    if value.strip().lower() == "auto":
        if hasattr(os, "sched_getaffinity"):
            return max(1, len(os.sched_getaffinity(0)))
        return os.cpu_count() or 1
    try:
        count = int(value)
    except ValueError:
        count = 0
    if not 1 <= count <= 256:
        raise exit_with(f"--workers must be a number from 1 to 256 or 'auto', not {value!r}.")
    return count


def _check_store(store: Store) -> str | None:
    """Open (create, migrate) the store once before serving: a store that cannot be
    opened stops the start with one line, not a traceback on the first request."""
    from toolwire.store import StoreError

    async def probe() -> None:
        await store.open()
        await store.aclose()

    try:
        asyncio.run(probe())
    except StoreError as exc:
        return f"Cannot open the store {store.url}: {exc}"
    return None


def _print_store(console: Console, store: Store) -> None:
    if not store.durable:
        console.print(
            Text(
                f"  store: {store.url} — for tests and demos only: runs, approvals and the "
                "audit log are lost when the gateway stops.",
                style="yellow",
            )
        )
    else:
        console.print(f"  store: {store.url}")


def check(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="The gateway config to check. Default: $TOOLWIRE_CONFIG, else ./toolwire.yaml.",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Validate a gateway config and list every problem, without starting anything."""
    from toolwire.server import ConfigError, read_config

    config = discover_config(config) or Path("toolwire.yaml")

    try:
        doc = read_config(config)
    except ConfigError as exc:
        _print_problems(exc.problems)
        raise typer.Exit(1) from None
    tool_count = check_document(doc)
    _print_problems(doc.problems)
    errors = len(doc.errors)
    console = Console(highlight=False, soft_wrap=True)
    if errors or doc.config is None:
        console.print(
            Text.assemble(
                (f"{config}: ", "bold"),
                (f"{errors} problem{'s' if errors != 1 else ''}", "bold red"),
            )
        )
        raise typer.Exit(1)
    console.print(
        Text.assemble(
            (f"{config}: ", "bold"), ("OK", "bold green"), f" ({_summary(doc.config, tool_count)})"
        )
    )


def check_document(doc: ConfigDocument) -> int:
    """Add what only loading can find to `doc`: tool modules that fail to import or clash
    (errors), environment variables that are unset here (warnings).

    Returns:
        The number of server tools (0 when they could not be loaded).
    """
    from toolwire.server import ServerToolsConfig, load_server_tools
    from toolwire.server.configuration.loader import approver_findings, environment_findings
    from toolwire.server.gateway import tool_approvers

    server_tools = doc.sections.get("server_tools")
    if not isinstance(server_tools, ServerToolsConfig):
        return 0
    openapi = doc.sections.get("http_tools")
    tools, findings = load_server_tools(
        server_tools, openapi=openapi if isinstance(openapi, list) else None
    )
    for loc, message in findings:
        doc.add(loc, message)
    keys = doc.sections.get("keys")
    if tools is not None and isinstance(keys, list):
        named = tool_approvers(tools, server_tools, skip_http=True)
        for loc, message, severity in approver_findings(named, keys):
            doc.add(loc, message, severity=severity)
    if doc.config is not None:
        for loc, message in environment_findings(doc.config):
            doc.add(loc, message, severity="warning")
    # Nothing to close: the HTTP tools' client is only created when a tool runs.
    return len(tools.provider.tools) if tools is not None else 0


def _summary(config: GatewayConfig, tools: int) -> str:
    upstream = config.upstream
    routes = upstream.routes()
    parts = [
        f"upstream {upstream.kind}",
        f"{len(routes)} model{'s' if len(routes) != 1 else ''}",
        f"{tools} server tool{'s' if tools != 1 else ''}",
        f"{len(config.keys)} key{'s' if len(config.keys) != 1 else ''}",
    ]
    return ", ".join(parts)


def _print_problems(problems: list[ConfigProblem]) -> None:
    console = stderr_console()
    for problem in sorted(problems, key=lambda p: (p.file or "", p.line or 0)):
        style = "yellow" if problem.severity == "warning" else "red"
        console.print(Text(str(problem), style=style), soft_wrap=True)


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before uvicorn starts so the banner shows the real port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so, and
    # without it a response written in two sends waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


def _print_banner(
    config: GatewayConfig,
    host: str,
    port: int,
    source: Path | None,
    tools: list[str],
    store: Store,
) -> None:
    display = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    if ":" in display:
        display = f"[{display}]"
    base = f"http://{display}:{port}/v1"
    model = next(iter(config.upstream.routes()))
    key = "<gateway key>" if config.keys else "unused"
    console = Console(highlight=False, soft_wrap=True)
    console.print(Text.assemble(("toolwire gateway", "bold"), f" listening on {base}"))
    origin = str(source) if source is not None else "built-in defaults"
    console.print(f"  config:   {origin}")
    console.print(
        f"  upstream: {config.upstream.kind}; models: {', '.join(config.upstream.routes())}"
    )
    console.print(f"  server tools: {', '.join(tools) or 'none'}")
    _print_store(console, store)
    if config.upstream.kind == "offline":
        console.print(
            Text(
                "  The offline model is a deterministic stand-in, not a language model.",
                style="yellow",
            )
        )
    auth = ' -H "Authorization: Bearer $TOOLWIRE_KEY"' if config.keys else ""
    console.print("\nTry it:")
    console.print(f"  curl{auth} {base}/models")
    console.print(f"  curl{auth} {base}/tools")
    if "calculate" in tools:
        console.print(
            f"  curl{auth} {base}/tools/calculate/invoke "
            """-d '{"arguments": {"expression": "6*7"}}'"""
        )
    console.print(
        f"  curl{auth} {base}/chat/completions -H 'content-type: application/json' "
        f"""-d '{{"model": "{model}", "messages": [{{"role": "user", "content": """
        """"What is the weather in Lisbon?"}]}'"""
    )
    console.print("\nWith the openai SDK:")
    console.print("  from openai import OpenAI")
    console.print(f'  client = OpenAI(base_url="{base}", api_key="{key}")')
    console.print(
        f'  client.chat.completions.create(model="{model}", '
        'messages=[{"role": "user", "content": "What is the weather in Lisbon?"}])\n'
    )
