"""The gateway's log output: plain lines with a timestamp, or JSON lines.

Records of the `toolwire` loggers carry structured fields in `extra={"toolwire": {...}}`
(the access log does); JSON lines put them at the top level. Keys, tokens and tool
argument values are never given to a logger in the first place.

Lines are written by a background thread (`LineWriter`), in the order they were logged,
a batch at a time: the event loop only formats a line and appends it to a queue, and one
`write` carries every line logged since the last (a write per line cost more CPU than the
rest of the access log). The writer wakes every `FLUSH_INTERVAL` while lines come in;
what is queued is written on exit (SIGTERM included: `logging.shutdown` flushes it) and
when `configure_logging` replaces the handler. A `kill -9` loses what is queued: the
lines of at most the last `FLUSH_INTERVAL`. A queue of `MAX_QUEUED` lines that the stream
does not take (a full pipe) makes the logging thread write them itself, and wait as
`logging.StreamHandler` did.

The access log's own line (`access_handler`, `LineHandler.access`) skips `LogRecord`s
altogether when the `toolwire` loggers are the ones `configure_logging` set up; the line
is the same as the formatter's, character for character.
"""

from __future__ import annotations

import collections
import logging
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any, Final, Literal, TextIO

import orjson

__all__ = [
    "FLUSH_INTERVAL",
    "JsonFormatter",
    "LineHandler",
    "LineWriter",
    "LogFormat",
    "access_handler",
    "configure_logging",
]

LogFormat = Literal["text", "json"]
_TEXT: Final = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
FLUSH_INTERVAL: Final = 0.01
"""Seconds between two writes of the queued lines while lines come in."""
MAX_QUEUED: Final = 4096
_IDLE_ROUNDS: Final = 20
"""Empty rounds after which the writer sleeps until the next line (an idle gateway does not
wake every `FLUSH_INTERVAL`)."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "toolwire", None)
        if isinstance(fields, dict):
            out.update({k: v for k, v in fields.items() if v is not None})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class LineWriter:
    """Lines written to `stream` by a daemon thread, in order, in batches.

    `write` only appends to a queue (any thread); the thread writes what is queued every
    `interval` seconds while lines come in. `flush` writes what is queued now, in the
    calling thread; `close` flushes and stops the thread.
    """

    def __init__(
        self, stream: TextIO, *, interval: float = FLUSH_INTERVAL, max_queued: int = MAX_QUEUED
    ) -> None:
        self.stream = stream
        self.interval = interval
        self.max_queued = max_queued
        self._lines: collections.deque[str] = collections.deque()
        self._lock = threading.Lock()  # one batch written at a time, batches in order
        self._wake = threading.Event()
        self._idle = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="toolwire-log-writer", daemon=True)
        self._thread.start()

    def write(self, line: str) -> None:
        """Queue `line` (with its newline)."""
        self._lines.append(line)
        if self._idle:
            self._idle = False
            self._wake.set()
        if len(self._lines) >= self.max_queued:
            self.flush()  # the stream is not keeping up: wait for it, as a direct write did

    def flush(self) -> None:
        """Write every queued line now."""
        with self._lock:
            self._drain()

    def close(self) -> None:
        """Write what is queued and stop the thread."""
        self._closed = True
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5)
        self.flush()

    def _drain(self) -> None:
        lines = self._lines
        if not lines:
            return
        batch = []
        pop = lines.popleft
        while lines:
            batch.append(pop())
        try:
            self.stream.write("".join(batch))
            self.stream.flush()
        except (OSError, ValueError):  # a closed stream, a broken pipe: nowhere to write
            pass

    def _run(self) -> None:
        empty = 0
        while not self._closed:
            if self._lines:
                empty = 0
                self.flush()
            else:
                empty += 1
                if empty >= _IDLE_ROUNDS:
                    self._idle = True
                    if not self._lines and not self._closed:
                        self._wake.wait()
                    self._wake.clear()
                    self._idle = False
                    empty = 0
                    continue
            time.sleep(self.interval)


class LineHandler(logging.Handler):
    """A handler whose lines go through a `LineWriter` (`configure_logging` sets it up).

    Args:
        log_format: `text` (a timestamped line) or `json`.
        stream: Where the lines go (default: `sys.stderr` as it is now).
    """

    def __init__(self, log_format: str = "text", stream: TextIO | None = None) -> None:
        super().__init__()
        self.json = log_format == "json"
        self.setFormatter(JsonFormatter() if self.json else logging.Formatter(_TEXT))
        self.writer = LineWriter(stream if stream is not None else sys.stderr)
        self._stamp: tuple[int, str] = (-1, "")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.writer.write(line + "\n")

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
        super().close()

    def access(self, message: str, fields: dict[str, Any], created: float) -> None:
        """Write the `toolwire.access` INFO line of `message` and `fields` logged at
        `created` (`time.time()`): what `emit` writes for that record, without making
        one."""
        if self.json:
            # As `datetime.fromtimestamp` rounds: to the microsecond, then truncated.
            second = int(created)
            micros = round((created - second) * 1_000_000)
            if micros >= 1_000_000:
                second += 1
                micros -= 1_000_000
            ms = micros // 1000
        else:
            second = int(created)  # as `LogRecord.msecs`
            ms = int((created - second) * 1000)
        cached, stamp = self._stamp
        if second != cached:
            stamp = (
                datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
                if self.json
                else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            )
            self._stamp = (second, stamp)  # one assignment: threads never see half of it
        if self.json:
            out: dict[str, Any] = {
                "time": f"{stamp}.{ms:03d}+00:00",
                "level": "info",
                "logger": "toolwire.access",
                "message": message,
            }
            for k, v in fields.items():
                if v is not None:
                    out[k] = v
            line = orjson.dumps(out, default=str).decode()
        else:
            line = f"{stamp},{ms:03d} INFO    toolwire.access: {message}"
        self.writer.write(line + "\n")


_toolwire_logger = logging.getLogger("toolwire")
_access_logger = logging.getLogger("toolwire.access")


def access_handler() -> LineHandler | None:
    """The handler the `toolwire.access` line can be handed to directly: the one
    `configure_logging` set up, when it is the only place an INFO access record would go
    (no other handler or filter, the level lets INFO through). `None`: log a record."""
    access = _access_logger
    parent = _toolwire_logger
    if access.handlers or access.filters or parent.filters or access.disabled:
        return None
    if parent.propagate or not access.propagate:
        return None
    handler: LineHandler | None = None
    for each in parent.handlers:
        if type(each) is logging.NullHandler:
            continue  # the CLI's, for the commands that log nothing
        if handler is not None or type(each) is not LineHandler:
            return None
        handler = each
    if handler is None or handler.filters or handler.level > logging.INFO:
        return None
    return handler if access.isEnabledFor(logging.INFO) else None


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send the `toolwire` and `uvicorn` loggers to stderr in one format.

    Replaces (and flushes) handlers this function attached before (a worker process calls
    it again); leaves a handler someone else attached (`-v`) alone.
    """
    handler: LineHandler | None = None
    numeric = level.upper() if level.upper() in logging.getLevelNamesMapping() else "INFO"
    replaced: list[logging.Handler] = []
    for name in ("toolwire", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            if getattr(old, "_toolwire", False):
                logger.removeHandler(old)
                if old not in replaced:
                    replaced.append(old)
        if name == "toolwire" and any(
            not isinstance(h, logging.NullHandler) for h in logger.handlers
        ):
            continue  # -v attached a handler of its own
        if handler is None:
            # One handler, one writer: the lines of every logger in the order logged.
            handler = LineHandler(log_format)
            handler._toolwire = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(numeric)
        logger.propagate = False
    for old in replaced:
        old.close()
