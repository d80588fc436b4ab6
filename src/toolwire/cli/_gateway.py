"""A running gateway's REST API for the CLI: `GatewayClient`, the shared options
(`--url`, `--key`, `--json`) and the formatting helpers of `approvals`, `runs` and `audit`.

Every failure is one line (a `CliError`): the gateway's own error message (404, 409, 403,
...), or what stood between the command and the gateway. The gateway key is sent as a
bearer token and never printed.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import Annotated, Any, Final
from urllib.parse import quote, urlsplit

import httpx
import orjson
import typer
from rich.text import Text

from toolwire.cli._common import CliError, exit_with

__all__ = [
    "DEFAULT_URL",
    "STATUS_STYLE",
    "GatewayClient",
    "JsonOption",
    "KeyOption",
    "UrlOption",
    "call_text",
    "clip",
    "connect",
    "format_time",
    "path_segment",
    "relative",
    "short_arguments",
    "write_json",
]

DEFAULT_URL: Final = "http://127.0.0.1:8000"

UrlOption = Annotated[
    str,
    typer.Option(
        "--url",
        envvar="TOOLWIRE_URL",
        help="The gateway's address (its /v1 suffix may be left on).",
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key",
        envvar="TOOLWIRE_GATEWAY_KEY",
        help="A gateway key (sent as a bearer token; needed when the gateway has keys).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]

_TIMEOUT: Final = 30.0
"""Seconds to wait for an answer; resuming a run (model turns, tools) waits longer."""


class GatewayClient:
    """A toolwire gateway's REST API; every failure becomes one `CliError` line.

    Args:
        url: The gateway's address, e.g. `http://127.0.0.1:8000` (a trailing `/v1` is
            accepted: it is the address OpenAI clients are given).
        key: The gateway key, or `None` for a gateway without keys.

    Raises:
        CliError: `url` is not an http(s) URL, or `key` cannot be sent in a header.
    """

    def __init__(self, url: str, key: str | None, *, timeout: float = _TIMEOUT) -> None:
        base = url.strip().rstrip("/").removesuffix("/v1").rstrip("/")
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise CliError(
                f"--url {url!r} is not an http(s) URL, e.g. {DEFAULT_URL} "
                "(set --url or TOOLWIRE_URL)."
            )
        self.url = base
        self._key = key.strip() if key else None
        headers = {"accept": "application/json"}
        if self._key:
            if not self._key.isascii() or not self._key.isprintable():
                # httpx would refuse the header with an error that quotes its value.
                raise CliError(
                    "The gateway key (--key or TOOLWIRE_GATEWAY_KEY) holds characters that "
                    "cannot be sent in an HTTP header."
                )
            headers["authorization"] = f"Bearer {self._key}"
        try:
            self._http = httpx.Client(base_url=base, headers=headers, timeout=timeout)
        except (httpx.InvalidURL, ValueError) as exc:
            raise CliError(f"--url {url!r} is not a valid URL: {self._scrub(str(exc))}") from None

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def get(self, path: str, params: Mapping[str, str | int | float | None] | None = None) -> Any:
        """The JSON of `GET path`; `None` parameters are left out."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self._request("GET", path, params=query)

    def post(self, path: str, body: Any, *, timeout: float | None = _TIMEOUT) -> Any:
        """The JSON of `POST path` with the JSON `body` (`timeout=None`: wait as long as it
        takes)."""
        return self._request("POST", path, json=body, timeout=timeout)

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int | float] | None = None,
        json: Any = None,
        timeout: float | None = _TIMEOUT,
    ) -> Any:
        try:
            response = self._http.request(
                method, path, params=params, json=json, timeout=httpx.Timeout(timeout, connect=5)
            )
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise CliError(
                f"Cannot reach the gateway at {self.url}: is `toolwire serve` running? "
                "(set --url or TOOLWIRE_URL)"
            ) from None
        except httpx.TimeoutException:
            within = f" within {timeout:g} seconds" if timeout is not None else ""
            raise CliError(
                f"The gateway at {self.url} did not answer {method} {path}{within}."
            ) from None
        except httpx.HTTPError as exc:
            reason = self._scrub(str(exc)) or type(exc).__name__
            raise CliError(f"{method} {self.url}{path} failed: {reason}") from None
        if response.status_code >= 400:
            raise CliError(self._error_message(response))
        try:
            return response.json()
        except ValueError:
            raise CliError(
                f"The answer of {self.url}{path} is not JSON: is --url a toolwire gateway?"
            ) from None

    def _error_message(self, response: httpx.Response) -> str:
        """The gateway's OpenAI-shaped `error.message`, with a hint for a missing key."""
        try:
            body = response.json()
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message.strip():
            message = (
                f"The gateway at {self.url} answered {response.status_code} "
                f"{response.reason_phrase} to {response.request.method} {response.url.path}."
            )
        message = self._scrub(message)
        if response.status_code == 401:
            message += " (set --key or TOOLWIRE_GATEWAY_KEY)"
        elif isinstance(error, dict) and error.get("code") == "not_found":
            # The path itself is unknown: an older gateway, or something else at --url.
            message += f" Is {self.url} a toolwire gateway with this API?"
        return message

    def _scrub(self, text: str) -> str:
        """`text` with the gateway key masked, should anything ever echo it."""
        return text.replace(self._key, "***") if self._key else text


@contextlib.contextmanager
def connect(url: str, key: str | None, *, timeout: float = _TIMEOUT) -> Iterator[GatewayClient]:
    """`with connect(url, key) as gateway:` — a `CliError` inside ends the command with its
    line on stderr and status 1 (2 for a malformed `--url`)."""
    try:
        client = GatewayClient(url, key, timeout=timeout)
    except CliError as exc:
        raise exit_with(exc, code=2) from None
    try:
        with client:
            yield client
    except CliError as exc:
        raise exit_with(exc, code=1) from None


# --- formatting shared by the gateway commands ---------------------------------------------


def write_json(value: Any) -> None:
    """`value` as indented JSON on stdout."""
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


def format_time(timestamp: float | None) -> str:
    """A Unix time as local `YYYY-MM-DD HH:MM:SS`; `—` for none."""
    if timestamp is None:
        return "—"
    return datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def relative(timestamp: float, now: float | None = None) -> str:
    """`in 5m` / `3h 2m ago`: how far `timestamp` is from now, to the two largest units."""
    delta = timestamp - (time.time() if now is None else now)
    span = _span(abs(delta))
    return f"in {span}" if delta >= 0 else f"{span} ago"


def _span(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def clip(text: str, width: int) -> str:
    """`text` on one line, cut to `width` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def short_arguments(arguments: Any, width: int = 48) -> str:
    """Arguments (JSON text or an object) as `key=value, ...` on one line, clipped."""
    value = arguments
    if isinstance(arguments, str):
        try:
            value = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError:
            return clip(arguments, width)
    if isinstance(value, dict):
        text = ", ".join(f"{k}={_json_text(v)}" for k, v in value.items())
    else:
        text = _json_text(value)
    return clip(text, width)


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


STATUS_STYLE: Final = {
    "pending": "bold yellow",
    "approved": "green",
    "denied": "red",
    "expired": "dim",
    "used": "cyan",
}


# --- the commands ---------------------------------------------------------------------------


def call_text(name: Any, arguments: Any, width: int = 48) -> Text:
    """`tool(key=value, ...)` with the arguments shortened to `width` characters."""
    text = Text(str(name), style="cyan")
    text.append(f"({short_arguments(arguments, width)})")
    return text


def path_segment(ident: str) -> str:
    """`ident` safe to put in a URL path (an id never holds `/`, but a typo might)."""
    return quote(ident.strip(), safe="")
