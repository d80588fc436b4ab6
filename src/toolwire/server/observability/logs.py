"""The gateway's log output: plain lines with a timestamp, or JSON lines.

Records of the `toolwire` loggers carry structured fields in `extra={"toolwire": {...}}`
(the access log does); JSON lines put them at the top level. Keys, tokens and tool
argument values are never given to a logger in the first place.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Final, Literal

import orjson

__all__ = ["JsonFormatter", "LogFormat", "configure_logging"]

LogFormat = Literal["text", "json"]
_TEXT: Final = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


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


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send the `toolwire` and `uvicorn` loggers to stderr in one format.

    Replaces handlers this function attached before (a worker process calls it again);
    leaves a handler someone else attached (`-v`) alone.
    """
    formatter: logging.Formatter = (
        JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT)
    )
    numeric = level.upper() if level.upper() in logging.getLevelNamesMapping() else "INFO"
    for name in ("toolwire", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if getattr(handler, "_toolwire", False):
                logger.removeHandler(handler)
        if name == "toolwire" and any(
            not isinstance(h, logging.NullHandler) for h in logger.handlers
        ):
            continue  # -v attached a handler of its own
        handler = logging.StreamHandler()
        handler._toolwire = True  # type: ignore[attr-defined]
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        logger.setLevel(numeric)
        logger.propagate = False
