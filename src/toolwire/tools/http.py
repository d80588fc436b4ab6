"""`HttpTools`: tools that call HTTP endpoints, optionally with the caller's bearer token.

```python
orders = HttpTool(
    name="get_order",
    description="Look up one of the caller's orders.",
    endpoint="https://shop.internal/api/orders/{order_id}",
    method="GET",
    input_schema={"type": "object", "properties": {"order_id": {"type": "string"}},
                  "required": ["order_id"]},
    forward_auth=True,
)
provider = HttpTools([orders])
```

Arguments fill the endpoint's `{placeholders}`; the rest go in the query string (GET,
DELETE) or as a JSON body (POST, PUT, PATCH). A JSON response becomes the result, any
other body its text. Failures become `ToolExecutionError`s whose messages are safe for a
model. A 4xx answer is the model's to fix (a wrong id, a missing field), so its message
carries the API's own error body: cut to `MAX_ERROR_BODY` bytes, with the caller's token,
any bearer token and the service's address masked. Other failures (5xx, timeouts,
unreachable) name none of the service's details: a server error's body may hold a stack
trace.
"""

from __future__ import annotations

import logging
import os
import re
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import quote

import orjson

from toolwire.tools.call import ToolResult
from toolwire.tools.context import ToolContext
from toolwire.tools.errors import (
    ToolDefinitionError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameterError,
)
from toolwire.tools.tool import Effects, Tool

if TYPE_CHECKING:
    import httpx

__all__ = ["MAX_ERROR_BODY", "HttpMethod", "HttpTool", "HttpTools", "endpoint_problem"]

logger = logging.getLogger("toolwire.tools.http")

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]

_PLACEHOLDER: Final = re.compile(r"\{([^{}]*)\}")
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
DEFAULT_TIMEOUT: Final = 30.0
MAX_ERROR_BODY: Final = 2048
"""Bytes of a 4xx answer's body passed on to the model."""
_BEARER: Final = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+")


@dataclass(frozen=True, kw_only=True)
class HttpTool:
    """The definition of one tool backed by an HTTP endpoint."""

    name: str
    description: str = ""
    endpoint: str
    """An http(s) URL; `{name}` placeholders are filled from the arguments (URL-quoted)."""
    method: HttpMethod = "POST"
    input_schema: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """JSON Schema of the arguments; the runner validates calls against it."""
    forward_auth: bool = False
    """Send `ToolContext.auth_token` as `Authorization: Bearer` (when the caller has one)."""
    effects: Effects = "read"
    timeout: float | None = None
    """Seconds to wait for the endpoint; `None` uses the provider's default."""
    scopes: tuple[str, ...] = ()
    allow: tuple[str, ...] | None = None
    """Fields of the JSON answer that may reach the model (see `Tool.allow`)."""
    approver: str | None = None
    """The gateway key that must approve calls of a destructive HTTP tool (`Tool.approver`)."""
    audit_arguments: tuple[str, ...] | None = None
    """Arguments the audit log may record (`Tool.audit_arguments`)."""
    query: tuple[str, ...] | None = None
    """For POST, PUT and PATCH: the arguments sent as query parameters rather than in the
    body (an OpenAPI operation's query parameters)."""
    body_argument: str | None = None
    """The argument whose value is the whole JSON body, instead of the remaining arguments
    as one object."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Headers sent with every request (an API key read from the environment, say)."""
    parameters: InitVar[dict[str, Any] | None] = None
    """Deprecated spelling of `input_schema`."""

    def __post_init__(self, parameters: dict[str, Any] | None) -> None:
        if parameters is not None:
            warnings.warn(
                f"HTTP tool {self.name!r}: parameters= is deprecated; use input_schema=.",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "input_schema", parameters)
        if self.method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            raise ToolDefinitionError(
                f"HTTP tool {self.name!r}: method {self.method!r} is not one of "
                "GET, POST, PUT, PATCH, DELETE."
            )
        if not self.endpoint.startswith(("http://", "https://")):
            raise ToolDefinitionError(
                f"HTTP tool {self.name!r}: endpoint {self.endpoint!r} is not an http(s) URL."
            )
        problem = endpoint_problem(self.endpoint)
        if problem is not None:
            raise ToolDefinitionError(f"HTTP tool {self.name!r}: {problem}")

    def to_tool(self) -> Tool:
        """The provider-neutral definition shown to models."""
        return Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            effects=self.effects,
            timeout=self.timeout,
            scopes=tuple(self.scopes),
            allow=tuple(self.allow) if self.allow is not None else None,
            approver=self.approver,
            audit_arguments=(
                tuple(self.audit_arguments) if self.audit_arguments is not None else None
            ),
        )

    @property
    def placeholders(self) -> list[str]:
        """The argument names used in `endpoint`."""
        return _PLACEHOLDER.findall(self.endpoint)


class HttpTools:
    """A `ToolProvider` over HTTP endpoints.

    Args:
        tools: The endpoint definitions.
        client: The HTTP client to use; by default one is created on first use and closed
            by `aclose()`.
        timeout: Seconds to wait for an endpoint whose tool sets no `timeout`.
    """

    def __init__(
        self,
        tools: Iterable[HttpTool],
        *,
        client: httpx.AsyncClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._defs: dict[str, HttpTool] = {}
        for definition in tools:
            if definition.name in self._defs:
                raise ToolDefinitionError(
                    f"Duplicate HTTP tool name {definition.name!r}. Rename one of them."
                )
            self._defs[definition.name] = definition
        self._tools = [d.to_tool() for d in self._defs.values()]
        self._client = client
        self._owns_client = client is None
        self._timeout = timeout

    @classmethod
    def from_openapi(
        cls,
        source: str | os.PathLike[str] | Mapping[str, Any],
        *,
        base_url: str | None = None,
        operations: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        auth: str | None = None,
        effects: Mapping[str, Effects] | None = None,
        scopes: Sequence[str] = (),
        timeout: float | None = None,
        client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> HttpTools:
        """HTTP tools for the operations of an OpenAPI 3.0 / 3.1 document (see
        `toolwire.tools.openapi` for the mapping).

        Args:
            source: The document: a path (JSON or YAML), an http(s) URL, or a mapping.
            base_url: The API's root URL; default the document's first `servers` entry.
            operations: Only these operations (by `operationId`).
            exclude: Not these.
            auth: `"forward"` (send the caller's token) or `"env:VAR"` (a bearer token read
                from the environment variable now); default none.
            effects: Effects by `operationId`; default from the HTTP method.
            scopes: Scopes a caller needs for these tools.
            timeout: Seconds per request.
            environ: Where `env:VAR` is read (default `os.environ`).

        Raises:
            ToolDefinitionError: The document cannot be read or mapped, or `auth` names
                an unset variable; the message says which and what to do.
        """
        from toolwire.tools.openapi import load_openapi, openapi_tools

        headers: dict[str, str] = {}
        forward: Literal["forward"] | None = None
        if auth == "forward":
            forward = "forward"
        elif auth is not None and auth.startswith("env:"):
            var = auth.removeprefix("env:")
            value = (os.environ if environ is None else environ).get(var)
            if not value:
                raise ToolDefinitionError(
                    f"auth {auth!r}: the environment variable {var} is not set; set it to the "
                    "API's token."
                )
            headers["Authorization"] = f"Bearer {value}"
        elif auth is not None:
            raise ToolDefinitionError(f"auth {auth!r} is neither 'forward' nor 'env:VARIABLE'.")
        document, url = load_openapi(
            os.fspath(source) if isinstance(source, os.PathLike) else source
        )
        definitions = openapi_tools(
            document,
            base_url=base_url,
            document_url=url,
            operations=operations,
            exclude=exclude,
            auth=forward,
            headers=headers,
            effects=effects,
            scopes=scopes,
            timeout=timeout,
        )
        return cls(definitions, client=client)

    @property
    def tools(self) -> list[Tool]:
        """The tool definitions (known without any request)."""
        return list(self._tools)

    async def list_tools(self) -> list[Tool]:
        return self.tools

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext | None = None
    ) -> ToolResult:
        """Call the endpoint of `name` with validated `arguments`.

        Raises:
            ToolNotFoundError: No HTTP tool of that name.
            ToolExecutionError: The endpoint failed, could not be reached, timed out or
                answered with invalid JSON. Only a 4xx answer's own body is passed on
                (bounded and masked); otherwise the message names none of its details.
        """
        if ctx is None:
            ctx = ToolContext()
        definition = self._defs.get(name)
        if definition is None:
            raise ToolNotFoundError.unknown(name, list(self._defs))
        import httpx

        started = time.perf_counter()
        url, rest = _fill_endpoint(definition, arguments)
        headers = {**definition.headers, "Accept": "application/json"}
        if definition.forward_auth and ctx.auth_token:
            headers["Authorization"] = f"Bearer {ctx.auth_token}"
        body: Any = None
        params = None
        if definition.method in _BODY_METHODS:
            if definition.query:
                params = _query({k: v for k, v in rest.items() if k in definition.query})
                rest = {k: v for k, v in rest.items() if k not in definition.query}
            body = rest.get(definition.body_argument) if definition.body_argument else rest
        else:
            params = _query(rest)
        timeout = definition.timeout if definition.timeout is not None else self._timeout
        try:
            response = await self._get_client().request(
                definition.method, url, params=params, json=body, headers=headers, timeout=timeout
            )
        except httpx.TimeoutException:
            logger.warning("HTTP tool %s: %s %s timed out", name, definition.method, url)
            raise ToolExecutionError(
                f"The service behind tool {name!r} did not answer in time. Try again later."
            ) from None
        except httpx.HTTPError as exc:
            logger.warning("HTTP tool %s: %s %s failed: %r", name, definition.method, url, exc)
            raise ToolExecutionError(
                f"The service behind tool {name!r} could not be reached. Try again later."
            ) from None
        if response.status_code >= 400:
            logger.warning(
                "HTTP tool %s: %s %s answered %d",
                name,
                definition.method,
                url,
                response.status_code,
            )
            hint = (
                " The caller may lack access."
                if response.status_code in (401, 403)
                else " Check the arguments."
                if response.status_code < 500
                else ""
            )
            said = ""
            if response.status_code < 500:
                # The API's own words tell the model what to fix ("order 9 does not exist").
                answer = _error_body(response, ctx.auth_token)
                said = f" The service said: {answer}" if answer else ""
            raise ToolExecutionError(
                f"The service behind tool {name!r} answered HTTP {response.status_code} "
                f"({response.reason_phrase or 'error'}).{hint}{said}"
            )
        result = _decode(name, response)
        elapsed = (time.perf_counter() - started) * 1000
        return ToolResult.ok("", name, result, duration_ms=elapsed)

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            # No redirects: a redirect could carry the forwarded token to another host.
            self._client = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> HttpTools:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"HttpTools([{', '.join(self._defs)}])"


def endpoint_problem(endpoint: str) -> str | None:
    """Why `endpoint`'s placeholders cannot be filled safely, or `None`.

    Arguments may fill path segments only: a placeholder in the scheme, host or port would
    let the model pick where the caller's token is sent, and one in the query string or
    fragment would be dropped (arguments that are not in the path already go in the query
    string of a GET or DELETE, or in the JSON body).
    """
    start = endpoint.find("://")
    rest = endpoint[start + 3 :] if start >= 0 else endpoint
    authority, slash, path = rest.partition("/")
    if _PLACEHOLDER.search(endpoint[: start + 3] + authority):
        return (
            f"endpoint {endpoint!r} has a placeholder in its scheme, host or port; arguments "
            "may only fill path segments (write the host out)."
        )
    path_only, _, query = (slash + path).partition("?")
    path_only, _, fragment = path_only.partition("#")
    if _PLACEHOLDER.search(query) or _PLACEHOLDER.search(fragment):
        return (
            f"endpoint {endpoint!r} has a placeholder in its query string or fragment; remove "
            "it: arguments that are not in the path are sent as query parameters (GET, "
            "DELETE) or in the JSON body by themselves."
        )
    return None


def _fill_endpoint(
    definition: HttpTool, arguments: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    rest = dict(arguments)

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in rest:
            raise ToolExecutionError(
                f"Tool {definition.name!r} needs the argument {key!r}; call it again with it."
            )
        value = rest.pop(key)
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        if text in ("", ".", ".."):
            # Quoting leaves dots alone, and an empty segment or a dot segment would move
            # the request (with the caller's token) to another path.
            shown = "empty" if not text else repr(text)
            raise ToolParameterError(
                f"The argument {key!r} of tool {definition.name!r} is {shown}; it names a path "
                "segment, so it cannot be empty, '.' or '..'. Call the tool again with a real "
                "value."
            )
        return quote(text, safe="")

    return _PLACEHOLDER.sub(substitute, definition.endpoint), rest


def _query(arguments: Mapping[str, Any]) -> list[tuple[str, str | int | float | bool | None]]:
    params: list[tuple[str, str | int | float | bool | None]] = []
    for key, value in arguments.items():
        values: Sequence[Any] = value if isinstance(value, list) else [value]
        for item in values:
            if item is None:
                continue
            if isinstance(item, bool):
                params.append((key, "true" if item else "false"))
            elif isinstance(item, str | int | float):
                params.append((key, str(item)))
            else:
                params.append((key, orjson.dumps(item).decode()))
    return params


def _error_body(response: httpx.Response, token: str | None) -> str:
    """A 4xx body for the model: at most `MAX_ERROR_BODY` bytes, secrets masked."""
    text = response.content[: MAX_ERROR_BODY * 32].decode(
        response.encoding or "utf-8", errors="replace"
    )
    # Mask before cutting, so a cut never leaves part of a secret behind.
    if token:
        text = text.replace(token, "[redacted]")
    text = _BEARER.sub("Bearer [redacted]", text)
    url = response.request.url
    origin = f"{url.scheme}://{url.netloc.decode('ascii', errors='replace')}"
    text = text.replace(origin, "[service]")
    if "." in url.host or ":" in url.host:  # a bare name ("api") could be an ordinary word
        text = text.replace(url.host, "[service]")
    text = " ".join(text.split())
    data = text.encode()
    if len(data) <= MAX_ERROR_BODY:
        return text
    return data[:MAX_ERROR_BODY].decode("utf-8", errors="ignore") + " [truncated]"


def _decode(name: str, response: httpx.Response) -> Any:
    content = response.content
    if not content:
        return None
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            raise ToolExecutionError(
                f"The service behind tool {name!r} answered with invalid JSON."
            ) from None
    return response.text
