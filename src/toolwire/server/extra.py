"""The `server` extra (Starlette + uvicorn): a clear message when it is not installed."""

from __future__ import annotations

import importlib.util
from typing import Final

__all__ = ["SERVER_EXTRA_MESSAGE", "MissingExtraError", "require_server_extra"]

SERVER_EXTRA_MESSAGE: Final = (
    "toolwire serve needs the server extra: pip install 'toolwire[server]'"
)


class MissingExtraError(ImportError):
    """An optional dependency group is not installed; the message says what to install."""


def require_server_extra() -> None:
    """Raise `MissingExtraError` unless Starlette, uvicorn and prometheus-client are
    installed (not imported)."""
    for module in ("starlette", "uvicorn", "prometheus_client"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            # ValueError: the module is in sys.modules with no spec (blocked, half-imported).
            found = False
        if not found:
            raise MissingExtraError(SERVER_EXTRA_MESSAGE)
