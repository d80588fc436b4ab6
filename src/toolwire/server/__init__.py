"""The gateway: an OpenAI-compatible HTTP server in front of any upstream model.

The configuration, its loader and the runtime state import no HTTP framework, so
`toolwire check` works without the `server` extra; `create_app` needs it
(`pip install 'toolwire[server]'`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolwire.server.configuration.config import (
    GatewayConfig,
    HttpToolConfig,
    KeyConfig,
    LimitsConfig,
    ModelRoute,
    ServerToolsConfig,
    UpstreamConfig,
    parse_tool_calls,
)
from toolwire.server.configuration.loader import (
    ConfigDocument,
    ConfigError,
    ConfigProblem,
    load_config,
    parse_config,
    read_config,
)
from toolwire.server.extra import SERVER_EXTRA_MESSAGE, MissingExtraError, require_server_extra
from toolwire.server.gateway import Gateway, load_server_tools
from toolwire.server.http.errors import GatewayError
from toolwire.server.keys.keyring import GatewayKey, Keyring, hash_key

if TYPE_CHECKING:
    from toolwire.server.app import create_app

__all__ = [
    "SERVER_EXTRA_MESSAGE",
    "ConfigDocument",
    "ConfigError",
    "ConfigProblem",
    "Gateway",
    "GatewayConfig",
    "GatewayError",
    "GatewayKey",
    "HttpToolConfig",
    "KeyConfig",
    "Keyring",
    "LimitsConfig",
    "MissingExtraError",
    "ModelRoute",
    "ServerToolsConfig",
    "UpstreamConfig",
    "create_app",
    "hash_key",
    "load_config",
    "load_server_tools",
    "parse_config",
    "parse_tool_calls",
    "read_config",
    "require_server_extra",
]


def __getattr__(name: str) -> Any:
    # create_app pulls in Starlette (the server extra); load it only when asked for.
    if name == "create_app":
        require_server_extra()
        from toolwire.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
