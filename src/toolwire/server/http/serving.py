"""Running the gateway under uvicorn: a drain deadline that ends streams cleanly, a
deadline for request headers, and several worker processes on one socket.

- **Drain.** On SIGTERM uvicorn stops accepting, lets requests run for
  `timeout_graceful_shutdown`, then cancels them mid-stream. `GatewayServer` expires the
  app's `Drain` a moment before that, so each open stream ends with its protocol's error
  event and a request still waiting gets a 503 it can retry.
- **Header deadline.** uvicorn times out idle keep-alive connections but not a client
  that sends its request headers slowly or never (slowloris): such a connection would
  be held forever. The protocol classes here close it after `header_timeout` seconds,
  with a 408 when part of a request had arrived.
- **Workers.** `serve(..., workers=N)` runs N processes that accept on the same socket,
  each with its own app; whatever they must share (runs, approvals, audit, cache) lives
  in the store. A worker that dies is replaced; SIGTERM drains every worker.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from multiprocessing.process import BaseProcess
from typing import Any, Final

import uvicorn
from starlette.applications import Starlette

from toolwire.server.http.draining import Drain
from toolwire.server.http.header_deadline import (
    DEFAULT_HEADER_TIMEOUT,
    H11WithHeaderDeadline,
)

__all__ = [
    "GatewayServer",
    "H11WithHeaderDeadline",
    "ServeOptions",
    "StartupError",
    "build_app",
    "serve",
]

logger = logging.getLogger("toolwire.server")

_DRAIN_GRACE: Final = 1.0
"""Seconds between expiring the drain and uvicorn cancelling what is left: time for the
final events to be written."""


class ServeOptions:
    """How to run the server (picklable: worker processes receive it)."""

    def __init__(
        self,
        *,
        log_level: str = "info",
        access_log: bool = True,
        drain_seconds: float = 30.0,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    ) -> None:
        self.log_level = log_level
        self.access_log = access_log
        self.drain_seconds = drain_seconds
        self.header_timeout = header_timeout

    def uvicorn_config(self, app: Any) -> uvicorn.Config:
        config = uvicorn.Config(
            app,
            log_level=self.log_level,
            lifespan="on",
            # toolwire's own access log (`toolwire.access`) replaces uvicorn's, and
            # `toolwire.server.observability.logs` sets up the loggers (uvicorn's
            # dictConfig would not keep the chosen format).
            access_log=False,
            log_config=None,
            http=_protocol_class(),
            # uvicorn cancels what is left this long after the drain expired the streams.
            timeout_graceful_shutdown=int(self.drain_seconds + _DRAIN_GRACE + 0.999),
        )
        config.header_timeout = self.header_timeout  # type: ignore[attr-defined]
        return config


class StartupError(Exception):
    """What stopped the gateway before it served (one line for the operator)."""


class GatewayServer(uvicorn.Server):
    """uvicorn's server with the gateway's drain deadline.

    Args:
        before_serving: Runs in the server's event loop before it listens (the gateway
            starts its MCP servers there, so their connections live in that loop); it may
            raise `StartupError`.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        drain_seconds: float,
        before_serving: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(config)
        self.drain_seconds = drain_seconds
        self.before_serving = before_serving

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        if self.before_serving is not None:
            await self.before_serving()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            # What start-up left alive (modules, the app, its config and tools) lives as
            # long as the process: moved out of the collector's reach, a full collection
            # then costs what requests allocate, not the whole process. A stream of many
            # small events (thousands of decoded JSON chunks) paid ~30% of its CPU for
            # those collections before.
            gc.collect()
            gc.freeze()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        drain = _drain_of(self.config.loaded_app)
        timer = None
        if drain is not None:
            timer = asyncio.get_running_loop().call_later(self.drain_seconds, self._expire, drain)
        try:
            await super().shutdown(sockets)
        finally:
            if timer is not None:
                timer.cancel()

    @staticmethod
    def _expire(drain: Drain) -> None:
        count = drain.expire()
        if count:
            logger.warning("drain deadline passed: ending %d open request(s)", count)


def serve(
    app_factory: Callable[[], Starlette],
    sock: socket.socket,
    options: ServeOptions,
    *,
    workers: int = 1,
    before_serving: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve on `sock` until SIGTERM / SIGINT.

    Args:
        app_factory: Builds the app; with `workers > 1` it runs in each worker, so it must
            be picklable (a module-level function or a `functools.partial` of one).
        workers: Processes accepting on `sock`.
        before_serving: With one worker, run in the server's loop before it listens.

    Raises:
        StartupError: From `before_serving`.
    """
    if workers <= 1:
        server = GatewayServer(
            options.uvicorn_config(app_factory()), options.drain_seconds, before_serving
        )
        server.run(sockets=[sock])
        return
    _Supervisor(app_factory, sock, options, workers).run()


def build_app(config_json: str, access_log: bool = True, log_format: str = "text") -> Starlette:
    """The app for `GatewayConfig` JSON: what each worker process runs."""
    from toolwire.server.app import create_app
    from toolwire.server.configuration.config import GatewayConfig
    from toolwire.server.observability.logs import configure_logging

    configure_logging(options_level(), log_format)
    return create_app(GatewayConfig.model_validate_json(config_json), access_log=access_log)


def options_level() -> str:
    """The log level `toolwire serve` runs at (`TOOLWIRE_LOG_LEVEL`, default info)."""
    return os.environ.get("TOOLWIRE_LOG_LEVEL", "info")


def _protocol_class() -> type[asyncio.Protocol]:
    try:
        from toolwire.server.http._httptools_protocol import GatewayHttpProtocol
    except ImportError:  # httptools is optional; uvicorn falls back to h11 the same way
        return H11WithHeaderDeadline
    return GatewayHttpProtocol


def _drain_of(app: Any) -> Drain | None:
    # uvicorn wraps the app in its own middlewares, each keeping the next as `.app`.
    for _ in range(16):
        if app is None:
            return None
        state = getattr(app, "state", None)
        drain = getattr(state, "drain", None) if state is not None else None
        if isinstance(drain, Drain):
            return drain
        app = getattr(app, "app", None)
    return None


# --- workers -------------------------------------------------------------------------------

_RESTART_BACKOFF: Final = (0.5, 1.0, 2.0, 5.0, 10.0)
_STARTUP_FAILURE: Final = 3


def _worker(
    app_factory: Callable[[], Starlette], sock: socket.socket, options: ServeOptions
) -> None:
    try:
        app = app_factory()
    except Exception:
        logger.exception("worker %d could not build the app", os.getpid())
        raise SystemExit(_STARTUP_FAILURE) from None
    server = GatewayServer(options.uvicorn_config(app), options.drain_seconds)
    server.run(sockets=[sock])
    if not server.started:
        raise SystemExit(_STARTUP_FAILURE)


class _Supervisor:
    """Starts the workers, replaces one that dies, and stops them all on a signal."""

    def __init__(
        self,
        app_factory: Callable[[], Starlette],
        sock: socket.socket,
        options: ServeOptions,
        workers: int,
    ) -> None:
        self._args = (app_factory, sock, options)
        self._count = workers
        self._grace = options.drain_seconds + _DRAIN_GRACE + 5.0
        self._context = multiprocessing.get_context("spawn")
        self._processes: list[BaseProcess] = []
        self._stop: int | None = None

    def run(self) -> None:
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            self._processes = [self._start() for _ in range(self._count)]
            logger.info("started %d workers", self._count)
            self._watch()
        finally:
            self._terminate()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._stop is not None and signum == signal.SIGINT:
            for process in self._processes:  # a second Ctrl-C: stop now
                process.kill()
        self._stop = signum

    def _start(self) -> BaseProcess:
        process = self._context.Process(target=_worker, args=self._args, daemon=False)
        process.start()
        return process

    def _watch(self) -> None:
        failures = 0
        while self._stop is None:
            time.sleep(0.2)
            for index, process in enumerate(self._processes):
                if process.is_alive() or self._stop is not None:
                    continue
                if process.exitcode == _STARTUP_FAILURE:
                    logger.error("worker %s failed to start; stopping", process.pid)
                    self._stop = signal.SIGTERM
                    return
                delay = _RESTART_BACKOFF[min(failures, len(_RESTART_BACKOFF) - 1)]
                failures += 1
                logger.error(
                    "worker %s exited with %s; starting another in %.1f s",
                    process.pid,
                    process.exitcode,
                    delay,
                )
                time.sleep(delay)
                self._processes[index] = self._start()

    def _terminate(self) -> None:
        for process in self._processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self._grace
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                logger.error("worker %s did not stop in time; killing it", process.pid)
                process.kill()
                process.join()
