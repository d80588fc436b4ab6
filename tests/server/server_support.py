"""Helpers of the gateway tests: configs, keys, and the app in-process through httpx."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from toolwire.server import GatewayConfig, create_app

TOOLS_MODULE = str(Path(__file__).parent / "gateway_tools.py")

ALICE_KEY = "tw-alice-secret"
BOB_KEY = "tw-bob-secret"

GatewayFactory = Callable[..., contextlib.AbstractAsyncContextManager[httpx.AsyncClient]]


def config_with(**sections: Any) -> GatewayConfig:
    """A validated `GatewayConfig` from plain data (as the YAML would give it)."""
    return GatewayConfig.model_validate(sections)


def keyed_config(**extra: Any) -> GatewayConfig:
    """The test tools, alice's key by digest (scope 'reports'), bob's from BOB_KEY_ENV."""
    return config_with(
        server_tools={"modules": [TOOLS_MODULE]},
        keys=[
            {
                "name": "alice",
                "sha256": hashlib.sha256(ALICE_KEY.encode()).hexdigest(),
                "scopes": ["reports"],
            },
            {"name": "bob", "env": "BOB_KEY_ENV"},
        ],
        **extra,
    )


@contextlib.asynccontextmanager
async def gateway_client(
    config: GatewayConfig | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    if config is None:
        config = config_with(server_tools={"modules": [TOOLS_MODULE]})
    app = create_app(config, environ=environ if environ is not None else {"BOB_KEY_ENV": BOB_KEY})
    # httpx's ASGI transport does not run the lifespan; run it around the client.
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://gateway",
            headers=headers,
        ) as client,
    ):
        yield client
