"""HTTP tools from an OpenAPI 3.0 / 3.1 document: one `HttpTool` per operation.

```python
tools = HttpTools.from_openapi("https://api.example.com/openapi.json",
                               operations=["getOrder", "cancelOrder"], auth="forward")
```

- **Names** come from `operationId` (characters other than letters, digits, `_` and `-`
  become `_`, at most 64), else from the method and path (`get_orders_order_id`).
- **Arguments** are the path and query parameters, then the JSON request body: an object
  body's properties become arguments of their own, unless one of them has the name of a
  parameter (or the body is not an object), in which case the whole body is one
  argument called `body`. Local `$ref`s are resolved; a recursive one is cut to `{}`
  (any value) where it recurs. Header and cookie parameters are not supported: an
  operation that requires one is refused, naming it.
- **Effects** follow the method (`GET` → read, `DELETE` → destructive, others → write)
  unless `effects={"operationId": ...}` says otherwise.
- **Safety.** Path parameters are percent-encoded whole segments (`/`, `..` and the like
  cannot move the request), and the scheme, host and port come from `base_url` or the
  document's `servers`, never from arguments.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, cast
from urllib.parse import urljoin

from toolwire.tools.errors import ToolDefinitionError
from toolwire.tools.http import HttpMethod, HttpTool
from toolwire.tools.tool import Effects

__all__ = ["load_openapi", "openapi_tools"]

_METHODS: Final = ("get", "post", "put", "patch", "delete")
_EFFECTS: Final[dict[str, Effects]] = {
    "GET": "read",
    "DELETE": "destructive",
    "POST": "write",
    "PUT": "write",
    "PATCH": "write",
}
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_\-]+")
_MAX_DEPTH: Final = 64


def load_openapi(source: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The document, and the URL it came from (for relative `servers`).

    Raises:
        ToolDefinitionError: It cannot be read, is not JSON/YAML, is not OpenAPI 3.
    """
    if isinstance(source, Mapping):
        return _checked(dict(source), "the document"), None
    text: str
    where = str(source)
    url: str | None = None
    if isinstance(source, str) and source.startswith(("http://", "https://")):
        import httpx

        try:
            response = httpx.get(source, timeout=30, follow_redirects=True)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise ToolDefinitionError(f"Cannot fetch the OpenAPI document {where}: {exc}") from None
        text, url = response.text, str(response.url)
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ToolDefinitionError(
                f"Cannot read the OpenAPI document {where}: {reason}"
            ) from None
    import yaml

    try:
        data = yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        raise ToolDefinitionError(
            f"The OpenAPI document {where} is neither JSON nor YAML: {' '.join(str(exc).split())}"
        ) from None
    if not isinstance(data, dict):
        raise ToolDefinitionError(f"The OpenAPI document {where} is not a mapping.")
    return _checked(data, where), url


def _checked(data: dict[str, Any], where: str) -> dict[str, Any]:
    if "swagger" in data:
        raise ToolDefinitionError(
            f"{where} is Swagger {data['swagger']} (OpenAPI 2); convert it to OpenAPI 3 first "
            "(for example with swagger2openapi)."
        )
    version = str(data.get("openapi", ""))
    if not version.startswith("3."):
        raise ToolDefinitionError(f"{where} is not an OpenAPI 3 document (no 'openapi: 3.x').")
    if not isinstance(data.get("paths"), dict):
        raise ToolDefinitionError(f"{where} has no 'paths'.")
    return data


def openapi_tools(
    document: Mapping[str, Any],
    *,
    base_url: str | None = None,
    document_url: str | None = None,
    operations: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    auth: Literal["forward"] | None = None,
    headers: Mapping[str, str] | None = None,
    effects: Mapping[str, Effects] | None = None,
    scopes: Sequence[str] = (),
    timeout: float | None = None,
) -> list[HttpTool]:
    """One `HttpTool` per selected operation of an OpenAPI 3 document.

    Args:
        base_url: Where the API is; default the document's first `servers` entry.
        document_url: Where the document came from (a relative server URL is resolved
            against it).
        operations: Only these (by `operationId`, or by tool name when there is none).
        exclude: Not these.
        auth: `"forward"`: send the caller's token (`ToolContext.auth_token`).
        headers: Headers sent with every request (a static API key, say).
        effects: Effects by `operationId`, over what the method implies.
        scopes: Scopes a caller needs for every tool.
        timeout: Seconds per request.

    Raises:
        ToolDefinitionError: No base URL, an unknown operation asked for, an unresolvable
            `$ref`, a required header parameter, or two operations with one tool name.
    """
    root = _server_url(document, base_url, document_url)
    found: dict[str, tuple[str, str, dict[str, Any], list[Any]]] = {}
    names: dict[str, str] = {}
    for path, item in document["paths"].items():
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") or []
        for method in _METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            op_id = operation.get("operationId")
            name = _tool_name(op_id if isinstance(op_id, str) else f"{method}_{path}")
            key = op_id if isinstance(op_id, str) else name
            if name in names:
                raise ToolDefinitionError(
                    f"Operations {names[name]!r} and {key!r} both become tool {name!r}; "
                    "exclude one of them."
                )
            names[name] = key
            found[key] = (method.upper(), path, operation, shared)
    if operations is not None:
        unknown = [o for o in operations if o not in found]
        if unknown:
            raise ToolDefinitionError(
                f"The OpenAPI document has no operation {', '.join(map(repr, unknown))}; "
                f"it has {', '.join(map(repr, found)) or 'none'}."
            )
    overrides = dict(effects or {})
    tools = []
    for key, (method, path, operation, shared) in found.items():
        if (operations is not None and key not in operations) or key in exclude:
            continue
        tools.append(
            _tool(
                document,
                key,
                method,
                root.rstrip("/") + path,
                operation,
                shared,
                effects=overrides.get(key, _EFFECTS[method]),
                forward=auth == "forward",
                headers=dict(headers or {}),
                scopes=tuple(scopes),
                timeout=timeout,
            )
        )
    return tools


def _server_url(document: Mapping[str, Any], base_url: str | None, doc_url: str | None) -> str:
    if base_url is not None:
        url = base_url
    else:
        servers = document.get("servers") or []
        first = servers[0] if servers and isinstance(servers[0], dict) else None
        if first is None or not isinstance(first.get("url"), str):
            raise ToolDefinitionError(
                "The OpenAPI document names no server; give base_url (the API's root URL)."
            )
        url = first["url"]
        for var, spec in (first.get("variables") or {}).items():
            url = url.replace("{" + var + "}", str((spec or {}).get("default", "")))
        if doc_url is not None:
            url = urljoin(doc_url, url)
    if not url.startswith(("http://", "https://")):
        raise ToolDefinitionError(
            f"The API's base URL {url!r} is not an http(s) URL; give base_url."
        )
    if "{" in url:
        raise ToolDefinitionError(f"The API's base URL {url!r} has a placeholder; give base_url.")
    return url


def _tool_name(raw: str) -> str:
    name = _UNSAFE_NAME.sub("_", raw).strip("_")[:64]
    return name or "operation"


def _tool(
    document: Mapping[str, Any],
    key: str,
    method: str,
    endpoint: str,
    operation: dict[str, Any],
    shared: list[Any],
    *,
    effects: Effects,
    forward: bool,
    headers: dict[str, str],
    scopes: tuple[str, ...],
    timeout: float | None,
) -> HttpTool:
    params: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*shared, *(operation.get("parameters") or [])]:
        param = _resolve(raw, document, key)
        if isinstance(param, dict) and "name" in param and "in" in param:
            params[(param["name"], param["in"])] = param  # the operation's own win
    properties: dict[str, Any] = {}
    required: list[str] = []
    query: list[str] = []
    for (name, where), param in params.items():
        if where in ("header", "cookie"):
            if param.get("required"):
                raise ToolDefinitionError(
                    f"Operation {key!r} requires the {where} parameter {name!r}, which "
                    "toolwire cannot fill; exclude the operation."
                )
            continue
        schema = _resolve(param.get("schema") or {}, document, key)
        description = param.get("description")
        if isinstance(description, str) and "description" not in schema:
            schema = {**schema, "description": description}
        properties[name] = schema
        if where == "path" or param.get("required"):
            required.append(name)
        if where == "query":
            query.append(name)
    body_argument = None
    body = _json_body(operation, document, key)
    if body is not None:
        schema, body_required = body
        props = schema.get("properties") if schema.get("type", "object") == "object" else None
        if isinstance(props, dict) and props and not set(props) & set(properties):
            properties.update(props)
            required += [r for r in schema.get("required") or [] if r in props]
        else:
            body_argument = "body"
            properties["body"] = schema
            if body_required:
                required.append("body")
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = sorted(set(required), key=required.index)
    summary = operation.get("summary") or ""
    detail = operation.get("description") or ""
    description = "\n\n".join(p for p in (summary, detail) if isinstance(p, str) and p)
    return HttpTool(
        name=_tool_name(key),
        description=description or f"{method} {endpoint}",
        endpoint=endpoint,
        method=cast(HttpMethod, method),
        input_schema=input_schema,
        forward_auth=forward,
        effects=effects,
        timeout=timeout,
        scopes=scopes,
        query=tuple(query) if method in ("POST", "PUT", "PATCH") else None,
        body_argument=body_argument,
        headers=headers,
    )


def _json_body(
    operation: Mapping[str, Any], document: Mapping[str, Any], key: str
) -> tuple[dict[str, Any], bool] | None:
    body = _resolve(operation.get("requestBody"), document, key)
    if not isinstance(body, dict):
        return None
    content = body.get("content") or {}
    media = next((m for m in content if m == "application/json" or m.endswith("+json")), None)
    if media is None:
        if body.get("required") and content:
            raise ToolDefinitionError(
                f"Operation {key!r} takes a {next(iter(content))} body; toolwire sends JSON "
                "bodies only. Exclude the operation."
            )
        return None
    schema = _resolve((content[media] or {}).get("schema") or {}, document, key)
    return (schema if isinstance(schema, dict) else {}), bool(body.get("required"))


def _resolve(node: Any, document: Mapping[str, Any], key: str) -> Any:
    """`node` with every local `$ref` replaced by what it points to (a copy)."""
    return _inline(node, document, key, (), 0)


def _inline(
    node: Any, document: Mapping[str, Any], key: str, seen: tuple[str, ...], depth: int
) -> Any:
    if depth > _MAX_DEPTH:
        return {}
    if isinstance(node, list):
        return [_inline(item, document, key, seen, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            return {}  # recursive: any value here
        target = _pointer(document, ref, key)
        rest = {k: v for k, v in node.items() if k != "$ref"}
        merged = {**target, **rest} if isinstance(target, dict) else target
        return _inline(merged, document, key, (*seen, ref), depth + 1)
    return {k: _inline(v, document, key, seen, depth + 1) for k, v in node.items()}


def _pointer(document: Mapping[str, Any], ref: str, key: str) -> Any:
    if not ref.startswith("#/"):
        raise ToolDefinitionError(
            f"Operation {key!r} uses the $ref {ref!r}: only references inside the document "
            "('#/...') are supported."
        )
    node: Any = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise ToolDefinitionError(f"Operation {key!r}: the $ref {ref!r} points to nothing.")
        node = node[part]
    return copy.deepcopy(node)
