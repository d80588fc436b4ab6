"""Run an ASGI app on a real loopback socket with uvicorn, in a background thread."""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Any

import uvicorn

from toolwire.server.http.serving import GatewayServer, ServeOptions

__all__ = ["LiveServer"]


class LiveServer:
    """`with LiveServer(app) as server: server.url` — uvicorn on 127.0.0.1, a free port.

    The lifespan runs, so whatever the app opens at startup is closed at exit.
    """

    def __init__(
        self, app: Any, *, server: uvicorn.Server | None = None, served_by: str = "uvicorn"
    ) -> None:
        """`server`: a server of one's own (its config's app is served) instead of
        uvicorn's default one for `app`; or `served_by="toolwire"`: the server
        `toolwire serve` runs (its protocol classes, drain and header deadline)."""
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        if server is None and served_by == "toolwire":
            options = ServeOptions(log_level="warning", access_log=False)
            server = GatewayServer(options.uvicorn_config(app), drain_seconds=1)
        elif server is None:
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._server = server
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("uvicorn failed to start")
            threading.Event().wait(0.005)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._sock.close()
