"""`toolwire store prune`: apply retention to a store now, as the gateway does on a timer.

It works on the store itself (the SQLite file, the Redis database), not through a
gateway, so it also serves a store no gateway is running on. The durations come from the
flags, else from the config's `retention:`, else from the defaults (runs and approvals
30 days, audit records 365 days).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from toolwire.cli._common import discover_config, exit_with

__all__ = ["app", "prune"]

app = typer.Typer(help="Maintain a store: runs, approvals and the audit log.")

_DURATION_HELP = "Keep {kind} this long: 30d, 12h, 90m, or 'forever'. Default: the config's."


@app.command("prune")
def prune(
    runs: Annotated[
        str | None, typer.Option("--runs", help=_DURATION_HELP.format(kind="runs"))
    ] = None,
    approvals: Annotated[
        str | None, typer.Option("--approvals", help=_DURATION_HELP.format(kind="approvals"))
    ] = None,
    audit: Annotated[
        str | None,
        typer.Option("--audit", help=_DURATION_HELP.format(kind="audit records")),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="The store URL. Default: the config's store:, else $TOOLWIRE_STORE, else the "
            "SQLite file in the user's state directory.",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="The gateway config (default: ./toolwire.yaml)."),
    ] = None,
) -> None:
    """Delete the runs, approvals and audit records that retention no longer keeps."""
    from toolwire.server.configuration.config import GatewayConfig, RetentionConfig, parse_duration
    from toolwire.server.retention import prune_store
    from toolwire.store import PruneCounts, StoreError, default_store_url, open_store

    settings = GatewayConfig()
    path = discover_config(config)
    if path is not None:
        from toolwire.server.configuration.loader import ConfigError, load_config

        try:
            settings = load_config(path)
        except ConfigError as exc:
            raise exit_with(str(exc).replace("\n", " ")) from None
    retention = settings.retention
    updates: dict[str, float | None] = {}
    for name, given in (("runs", runs), ("approvals", approvals), ("audit", audit)):
        if given is not None:
            try:
                updates[name] = parse_duration(given)
            except ValueError as exc:
                raise exit_with(f"--{name}: {exc}") from None
    retention = RetentionConfig.model_validate(retention.model_dump() | updates)
    url = store or settings.store or os.environ.get("TOOLWIRE_STORE") or default_store_url()
    try:
        target = open_store(url)
    except StoreError as exc:
        raise exit_with(str(exc)) from None

    async def run() -> PruneCounts:
        await target.open()
        try:
            return await prune_store(target, retention, time.time())
        finally:
            await target.aclose()

    try:
        counts = asyncio.run(run())
    except StoreError as exc:
        raise exit_with(str(exc), code=1) from None
    typer.echo(
        f"Deleted {counts.runs} runs, {counts.approvals} approvals and {counts.audit} audit "
        f"records from {target.url}."
    )
