"""Load `toolwire.yaml`: every problem is collected and located (file, line, key path).

```
toolwire.yaml:7: upstream.tool_calls: unknown tool-call format 'hermez'; use 'auto' or ...
toolwire.yaml:15: keys[0]: give exactly one of 'sha256' (the key's hex digest) or 'env'
```

Structure and types come from the pydantic models in `toolwire.server.configuration.config`; the
checks that involve several fields (a route for every upstream kind, unique key names,
endpoint placeholders) run here on each section that is valid on its own, so one run
reports everything it can.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Union, cast, get_args, get_origin

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from toolwire.server.configuration.config import GatewayConfig, KeyConfig, parse_tool_calls
from toolwire.tools.http import endpoint_problem

__all__ = [
    "ConfigDocument",
    "ConfigError",
    "ConfigProblem",
    "Loc",
    "approver_findings",
    "environment_findings",
    "format_path",
    "load_config",
    "parse_config",
    "read_config",
    "routing_findings",
]

Loc = tuple[str | int, ...]
"""A key path inside the config: mapping keys and list indices."""

_PLAIN_KEY: Final = re.compile(r"[A-Za-z0-9_\-]+")
_PLACEHOLDER: Final = re.compile(r"\{([^{}]*)\}")
_SECTIONS: Final = ("upstream", "server_tools", "http_tools", "mcp_servers", "keys", "limits")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigProblem:
    """One problem in a configuration, with where it is."""

    path: str
    """The key path, e.g. `upstream.tool_calls` or `keys[0].sha256`; empty for the file."""
    message: str
    file: str | None = None
    line: int | None = None
    """1-based line in `file`, when known."""
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = self.file or "<config>"
        if self.line is not None:
            where += f":{self.line}"
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{where}: {prefix}{self.path + ': ' if self.path else ''}{self.message}"


class ConfigError(Exception):
    """A configuration with problems; `problems` lists every one of them."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(
            f"{count} problem{'s' if count != 1 else ''} in the configuration:\n{lines}"
        )


@dataclass(slots=True, kw_only=True)
class ConfigDocument:
    """A parsed config file: the config (`None` when it has errors) and its problems."""

    source: str
    config: GatewayConfig | None
    problems: list[ConfigProblem]
    _locator: _Locator
    sections: dict[str, Any] = field(default_factory=dict)
    """Each top-level section that is valid by itself (`upstream`, `server_tools`, `keys`,
    `limits`), even when the whole config is not: `toolwire check` loads the server tools
    of a config with problems elsewhere."""

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return self.config is not None and not self.errors

    @property
    def errors(self) -> list[ConfigProblem]:
        return [p for p in self.problems if p.severity == "error"]

    def add(
        self, loc: Loc, message: str, *, severity: Literal["error", "warning"] = "error"
    ) -> None:
        """Record a problem found later (importing tools, the environment), located in the file."""
        problem = self._locator.problem(loc, message, severity)
        self.problems.append(problem)
        if severity == "error":
            self.config = None


def load_config(path: str | os.PathLike[str]) -> GatewayConfig:
    """Read and validate a config file.

    Raises:
        ConfigError: The file cannot be read or has problems (all of them are listed).
    """
    doc = parse_config(_read(path), source=str(path))
    if doc.config is None:
        raise ConfigError(doc.errors)
    return doc.config


def read_config(path: str | os.PathLike[str]) -> ConfigDocument:
    """Read and validate a config file without raising for its problems.

    Raises:
        ConfigError: Only when the file cannot be read.
    """
    return parse_config(_read(path), source=str(path))


def parse_config(text: str, *, source: str = "<config>") -> ConfigDocument:
    """Validate config text without raising.

    Args:
        text: The YAML text. An empty document is the default configuration.
        source: The file name used in problem locations.
    """
    locator = _Locator(source)
    doc = ConfigDocument(source=source, config=None, problems=[], _locator=locator)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(filter(None, [exc.context, exc.problem])) or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        doc.problems.append(
            ConfigProblem(path="", message=f"YAML syntax error: {what}", file=source, line=line)
        )
        return doc
    except yaml.YAMLError as exc:
        doc.problems.append(ConfigProblem(path="", message=f"YAML error: {exc}", file=source))
        return doc
    if node is not None:
        locator.index(node, ())
    doc.problems.extend(locator.duplicates)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        doc.add((), "the config must be a mapping of keys (upstream:, keys:, ...)")
        return doc

    config: GatewayConfig | None = None
    failed: set[str] = set()
    try:
        config = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if p != "[key]")
            failed.add(str(loc[0]) if loc else "")
            doc.add(loc, _describe(error, loc))
    # Cross-field checks on every section that is valid by itself, so one run reports all.
    upstream = data.get("upstream")
    if isinstance(upstream, dict) and "upstream" in failed:
        # The upstream's other problems do not hide a missing route.
        kind = upstream.get("kind", "offline")
        if kind in ("openai", "anthropic") and not upstream.get("models"):
            doc.add(("upstream", "models"), _NO_ROUTES)
    for section in _SECTIONS:
        if section in failed:
            continue
        value = getattr(config, section) if config is not None else _validate_section(data, section)
        doc.sections[section] = value
        for loc, message in _SECTION_CHECKS[section](value):
            doc.add((section, *loc), message)
    tools, keys = doc.sections.get("server_tools"), doc.sections.get("keys")
    if tools is not None and keys is not None:
        named = [
            (("server_tools", "http", i, "approver"), h.name, h.approver)
            for i, h in enumerate(tools.http)
        ]
        for loc, message, severity in approver_findings(named, keys):
            doc.add(loc, message, severity=severity)
    if config is not None:
        for loc, message in routing_findings(config):
            doc.add(loc, message)
    if not doc.errors:
        doc.config = config
    return doc


Severity = Literal["error", "warning"]


def approver_findings(
    named: Iterable[tuple[Loc, str, str | None]], keys: Sequence[KeyConfig]
) -> list[tuple[Loc, str, Severity]]:
    """Tools whose named `approver` could never decide their calls.

    Args:
        named: `(where, tool name, approver)` of each tool (the approver may be `None`).
        keys: The configured keys.
    """
    found: list[tuple[Loc, str, Severity]] = []
    by_name = {k.name: k for k in keys}
    for loc, tool, approver in named:
        if approver is None:
            continue
        key = by_name.get(approver)
        if not keys:
            found.append(
                (
                    loc,
                    f"tool {tool!r} names the approver {approver!r}, but the gateway has no "
                    "keys: any caller may approve its calls. Configure keys (one named "
                    f"{approver!r}) to make that key the only one",
                    "warning",
                )
            )
        elif key is None:
            known = ", ".join(repr(k.name) for k in keys)
            found.append(
                (
                    loc,
                    f"tool {tool!r} names the approver {approver!r}, which is not a "
                    f"configured key (keys: {known}); its calls could never be approved",
                    "error",
                )
            )
        elif key.approve == "none":
            found.append(
                (
                    loc,
                    f"tool {tool!r} names the approver {approver!r}, whose key has "
                    "approve: none; give that key approve: own or any, or name another key",
                    "error",
                )
            )
    return found


def environment_findings(
    config: GatewayConfig, environ: Mapping[str, str] | None = None
) -> list[tuple[Loc, str]]:
    """Environment variables the config names but the environment lacks.

    `toolwire check` reports them as warnings (CI need not hold the secrets);
    `toolwire serve` refuses to start.
    """
    env = os.environ if environ is None else environ
    found: list[tuple[Loc, str]] = []
    name = config.upstream.api_key_env
    if name is not None and not env.get(name):
        found.append(
            (
                ("upstream", "api_key_env"),
                f"environment variable {name} is not set; the upstream key is read from it",
            )
        )
    for upstream_name, named in config.upstreams.items():
        var = named.api_key_env
        if var is not None and not env.get(var):
            found.append(
                (
                    ("upstreams", upstream_name, "api_key_env"),
                    f"environment variable {var} is not set; the key of upstream "
                    f"{upstream_name!r} is read from it",
                )
            )
    for i, source in enumerate(config.http_tools):
        if source.auth is not None and source.auth.startswith("env:"):
            var = source.auth.removeprefix("env:")
            if not env.get(var):
                found.append(
                    (
                        ("http_tools", i, "auth"),
                        f"environment variable {var} is not set; the API token of "
                        f"{source.openapi} is read from it",
                    )
                )
    for i, server in enumerate(config.mcp_servers):
        for header, var in server.headers_env.items():
            if not env.get(var):
                found.append(
                    (
                        ("mcp_servers", i, "headers_env", header),
                        f"environment variable {var} is not set; MCP server "
                        f"{server.name!r} sends it as {header}",
                    )
                )
        for var in server.env_from:
            if var not in env:
                found.append(
                    (
                        ("mcp_servers", i, "env_from"),
                        f"environment variable {var} is not set; MCP server "
                        f"{server.name!r} is given it",
                    )
                )
    for i, key in enumerate(config.keys):
        if key.env is not None and not env.get(key.env):
            found.append(
                (
                    ("keys", i, "env"),
                    f"environment variable {key.env} is not set; "
                    f"gateway key {key.name!r} is read from it",
                )
            )
    return found


def format_path(loc: Loc) -> str:
    """`("keys", 0, "sha256")` → `keys[0].sha256`; odd keys are quoted: `models["a/b"]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


# --- locating ------------------------------------------------------------------------------


class _Locator:
    """Line numbers of every key in a YAML document, and its duplicate keys."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: dict[Loc, int] = {}
        self.duplicates: list[ConfigProblem] = []

    def index(self, node: yaml.Node, loc: Loc) -> None:
        self.lines.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                key = str(key_node.value)
                line = key_node.start_mark.line + 1
                if key in seen:
                    # PyYAML keeps the last value silently; a repeated key is nearly always
                    # a mistake (two `upstream:` blocks), so say so.
                    self.duplicates.append(
                        ConfigProblem(
                            path=format_path((*loc, key)),
                            message="duplicate key; only the last value would be used",
                            file=self.source,
                            line=line,
                        )
                    )
                seen.add(key)
                self.lines[(*loc, key)] = line
                self.index(value_node, (*loc, key))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.index(item, (*loc, i))

    def problem(
        self, loc: Loc, message: str, severity: Literal["error", "warning"] = "error"
    ) -> ConfigProblem:
        line = None
        for end in range(len(loc), -1, -1):
            line = self.lines.get(tuple(str(p) if not isinstance(p, int) else p for p in loc[:end]))
            if line is not None:
                break
        return ConfigProblem(
            path=format_path(loc), message=message, file=self.source, line=line, severity=severity
        )


# --- messages ------------------------------------------------------------------------------


def _describe(error: Any, loc: Loc) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        valid = _keys_at(loc[:-1])
        message = "unknown key"
        if valid:
            close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
            message += f" Valid keys here: {', '.join(valid)}"
        return message
    if kind == "missing":
        return "required key is missing"
    if kind == "model_type":
        if loc[:2] == ("upstream", "models") and len(loc) == 3:
            return (
                f"write the upstream model name, or a mapping with 'model' and 'tool_calls' "
                f"(got {error.get('input')!r})"
            )
        return f"expected a mapping of keys (got {error.get('input')!r})"
    message = str(error["msg"])
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    value = error.get("input")
    if isinstance(value, str | int | float | bool) or value is None:
        message += f" (got {value!r})"
    return message


def _keys_at(loc: Loc) -> list[str]:
    """The field names of the config model at `loc`, if it is a model."""
    annotation: Any = GatewayConfig
    for part in loc:
        annotation = _inner_model(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(str(part))
            if info is None:
                return []
            annotation = info.annotation
        else:
            origin, args = get_origin(annotation), get_args(annotation)
            if origin is list and args:
                annotation = args[0]
            elif origin is dict and len(args) == 2:
                annotation = args[1]
            else:
                return []
    annotation = _inner_model(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _inner_model(annotation: Any) -> Any:
    if get_origin(annotation) is Union:
        for arg in get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return annotation


def _validate_section(data: dict[str, Any], section: str) -> Any:
    info = GatewayConfig.model_fields[section]
    if section not in data:
        return info.get_default(call_default_factory=True)
    adapter: TypeAdapter[Any] = TypeAdapter(cast(Any, info.annotation))
    return adapter.validate_python(data[section])


def _read(path: str | os.PathLike[str]) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            [ConfigProblem(path="", message="no such file", file=str(path))]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            [ConfigProblem(path="", message=f"cannot read: {reason}", file=str(path))]
        ) from None


# --- cross-field checks --------------------------------------------------------------------

_Finding = tuple[Loc, str]
_NO_ROUTES: Final = (
    "map at least one public model id to an upstream model, "
    "e.g. `models: {gpt-4o-mini: gpt-4o-mini}`"
)


def _upstream_checks(upstream: Any) -> list[_Finding]:
    found: list[_Finding] = []
    kind = upstream.kind
    if kind != "offline" and not upstream.models:
        found.append((("models",), _NO_ROUTES))
    settings: list[tuple[Loc, str | None]] = [(("tool_calls",), upstream.tool_calls)]
    settings += [
        (("models", public, "tool_calls"), r.tool_calls) for public, r in upstream.models.items()
    ]
    for loc, value in settings:
        if value is None:
            continue
        mode, _ = parse_tool_calls(value)
        if kind == "offline" and mode != "native":
            found.append(
                (loc, "the offline upstream writes and parses its own calls; use 'native'")
            )
        elif kind == "anthropic" and mode == "parse":
            found.append(
                (
                    loc,
                    "the Anthropic Messages API returns tool_use blocks; "
                    "use 'native' or 'prompted:<format>'",
                )
            )
    if kind == "offline" and upstream.api_key_env is not None:
        found.append((("api_key_env",), "the offline upstream takes no key; remove it"))
    return found


def routing_findings(config: GatewayConfig) -> list[_Finding]:
    """What is wrong with the `upstreams:` / `models:` form as a whole: mixed with
    `upstream:`, names that point nowhere, tool-call modes an upstream cannot serve."""
    if not config.upstreams and not config.models:
        return []
    found: list[_Finding] = []
    if "upstream" in config.model_fields_set:
        found.append(
            (
                ("upstream",),
                "use either 'upstream:' (one model server) or 'upstreams:' with 'models:', "
                "not both; to convert, move this block under 'upstreams: {main: ...}' without "
                "its 'models', and write each model as 'models: {id: {upstream: main, "
                "model: upstream-name}}'",
            )
        )
    if not config.models:
        found.append((("models",), "map at least one public model id to its deployments"))
    for name, upstream in config.upstreams.items():
        if upstream.models:
            found.append(
                (
                    ("upstreams", name, "models"),
                    "a named upstream has no 'models'; list public ids under the top-level "
                    "'models:' with 'upstream: " + name + "'",
                )
            )
        if upstream.kind == "offline" and upstream.api_key_env is not None:
            found.append((("upstreams", name, "api_key_env"), "the offline upstream takes no key"))
    for public, model in config.models.items():
        mode, _ = parse_tool_calls(model.tool_calls)
        for i, deployment in enumerate(model.deployments):
            target = config.upstreams.get(deployment.upstream)
            if target is None:
                known = ", ".join(repr(n) for n in config.upstreams) or "none"
                found.append(
                    (
                        ("models", public, "deployments", i, "upstream"),
                        f"no upstream named {deployment.upstream!r} (upstreams: {known})",
                    )
                )
            elif target.kind == "anthropic" and mode == "parse":
                found.append(
                    (
                        ("models", public, "tool_calls"),
                        f"upstream {deployment.upstream!r} is the Anthropic Messages API, "
                        "which returns tool_use blocks; use 'native' or 'prompted:<format>'",
                    )
                )
            elif target.kind == "offline" and mode != "native":
                found.append(
                    (
                        ("models", public, "tool_calls"),
                        "the offline upstream writes and parses its own calls; use 'native'",
                    )
                )
        for i, fallback in enumerate(model.fallbacks):
            if fallback == public:
                found.append(
                    (("models", public, "fallbacks", i), "a model is not its own fallback")
                )
            elif fallback not in config.models:
                found.append(
                    (
                        ("models", public, "fallbacks", i),
                        f"no model {fallback!r}; fallbacks are public ids under 'models:'",
                    )
                )
    return found


def _server_tools_checks(tools: Any) -> list[_Finding]:
    found: list[_Finding] = []
    seen: dict[str, int] = {}
    for i, http in enumerate(tools.http):
        if http.name in seen:
            found.append(
                (
                    ("http", i, "name"),
                    f"duplicate tool name {http.name!r} (also http[{seen[http.name]}])",
                )
            )
        seen.setdefault(http.name, i)
        problem = endpoint_problem(http.endpoint)
        if problem is not None:
            found.append((("http", i, "endpoint"), problem))
        properties = http.parameters.get("properties", {})
        required = set(http.parameters.get("required", []))
        for placeholder in _PLACEHOLDER.findall(http.endpoint):
            if placeholder not in properties:
                found.append(
                    (
                        ("http", i, "endpoint"),
                        f"placeholder {{{placeholder}}} is not a property of 'parameters'",
                    )
                )
            elif placeholder not in required:
                found.append(
                    (
                        ("http", i, "endpoint"),
                        f"placeholder {{{placeholder}}} must be a required parameter",
                    )
                )
    return found


def _keys_checks(keys: Any) -> list[_Finding]:
    found: list[_Finding] = []
    names: dict[str, int] = {}
    digests: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key.name in names:
            found.append(
                ((i, "name"), f"duplicate key name {key.name!r} (also keys[{names[key.name]}])")
            )
        names.setdefault(key.name, i)
        if key.sha256 is not None:
            if key.sha256 in digests:
                found.append(((i, "sha256"), f"the same key as keys[{digests[key.sha256]}]"))
            digests.setdefault(key.sha256, i)
    return found


def _mcp_servers_checks(servers: Any) -> list[_Finding]:
    found: list[_Finding] = []
    names: dict[str, int] = {}
    for i, server in enumerate(servers):
        if server.name in names:
            found.append(
                (
                    (i, "name"),
                    f"duplicate MCP server name {server.name!r} "
                    f"(also mcp_servers[{names[server.name]}])",
                )
            )
        names.setdefault(server.name, i)
    return found


def _no_checks(_: Any) -> list[_Finding]:
    return []


_SECTION_CHECKS: Final = {
    "upstream": _upstream_checks,
    "server_tools": _server_tools_checks,
    "http_tools": _no_checks,
    "mcp_servers": _mcp_servers_checks,
    "keys": _keys_checks,
    "limits": _no_checks,
}
