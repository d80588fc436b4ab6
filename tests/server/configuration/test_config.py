"""`toolwire.yaml`: validation with every problem located by file, line and key path."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from server_support import TOOLS_MODULE

from toolwire.parsing import FORMATS
from toolwire.server import (
    ConfigError,
    GatewayConfig,
    ModelRoute,
    load_config,
    parse_config,
    parse_tool_calls,
)
from toolwire.server.configuration.loader import environment_findings, format_path
from toolwire.server.gateway import load_server_tools

EXAMPLE = Path(__file__).parents[3] / "examples" / "toolwire.yaml"


def problems_of(text: str) -> list[str]:
    doc = parse_config(text, source="tw.yaml")
    return [str(p) for p in doc.problems]


def test_an_empty_file_is_the_default_offline_gateway() -> None:
    doc = parse_config("", source="tw.yaml")
    assert doc.ok
    assert doc.problems == []
    config = doc.config
    assert config == GatewayConfig()
    assert (config.host, config.port) == ("127.0.0.1", 8000)
    assert config.upstream.kind == "offline"
    assert list(config.upstream.routes()) == ["toolwire-offline"]
    assert config.limits.max_body_bytes == 4 * 1024 * 1024
    assert config.dialect == "openai"
    assert config.strict_tool_results is False


def test_the_example_config_is_valid() -> None:
    config = load_config(EXAMPLE)
    upstream = config.upstream
    assert upstream.kind == "openai"
    assert upstream.api_key_env == "UPSTREAM_API_KEY"
    routes = upstream.routes()
    assert routes["gpt-4o-mini"] == ModelRoute(model="gpt-4o-mini", tool_calls="native")
    assert routes["qwen3"] == ModelRoute(model="Qwen/Qwen3-8B", tool_calls="parse:hermes")
    [http] = config.server_tools.http
    assert http.method == "GET"
    assert http.forward_auth is True
    assert [k.name for k in config.keys] == ["alice", "ci"]


def test_a_full_config_round_trips() -> None:
    digest = hashlib.sha256(b"k").hexdigest().upper()
    text = f"""
upstream:
  kind: anthropic
  api_key_env: ANTHROPIC_API_KEY
  tool_calls: prompted:json_fence
  models: {{claude: claude-sonnet-4-5}}
server_tools:
  modules: [{TOOLS_MODULE}]
  http:
    - {{name: ping, endpoint: "http://127.0.0.1:9/ping", method: post}}
keys:
  - {{name: k, sha256: "{digest}", scopes: [a, b]}}
limits: {{max_body_bytes: 1000, max_messages: 5, max_tools: 2}}
strict_tool_results: true
dialect: tool_request
host: 0.0.0.0
port: 0
"""
    doc = parse_config(text)
    assert doc.problems == []
    config = doc.config
    assert config is not None
    assert config.upstream.effective_base_url == "https://api.anthropic.com"
    assert config.keys[0].sha256 == digest.lower()
    assert config.server_tools.http[0].method == "POST"
    assert config.limits.max_tools == 2
    assert (config.dialect, config.strict_tool_results, config.port) == ("tool_request", True, 0)


def test_yaml_syntax_error_gives_file_and_line() -> None:
    text = "upstream:\n  kind: openai\n  models: [a\nkeys: []\n"
    [problem] = parse_config(text, source="tw.yaml").problems
    assert problem.file == "tw.yaml"
    assert problem.line == 4
    assert str(problem).startswith("tw.yaml:4: YAML syntax error:")


def test_every_problem_is_reported_with_its_location() -> None:
    text = """\
upstream:
  kind: openai
  tool_calls: parse:hermez
  api_key_env: sk-live-123
  models:
    fast: {model: x, toolcalls: native}
server_tools:
  http:
    - name: bad name
      endpoint: ftp://host/x
      parameters: {type: object, properties: {id: {type: strin}}}
keys:
  - name: a
    sha256: not-a-digest
  - name: b
limits:
  max_body_bytes: 0
  max_messges: 3
dialect: soap
port: 70000
verbose: true
"""
    got = problems_of(text)
    expected_starts = [
        "tw.yaml:3: upstream.tool_calls: unknown tool-call format 'hermez'",
        "tw.yaml:4: upstream.api_key_env: 'sk-live-123' is not an environment variable name",
        "tw.yaml:6: upstream.models.fast.toolcalls: unknown key; did you mean 'tool_calls'?",
        "tw.yaml:9: server_tools.http[0].name: 'bad name' is not a tool name",
        "tw.yaml:10: server_tools.http[0].endpoint: 'ftp://host/x' is not an http(s) URL",
        "tw.yaml:11: server_tools.http[0].parameters: not a valid JSON Schema at properties/id",
        "tw.yaml:14: keys[0].sha256: must be the 64-character hex SHA-256 digest",
        "tw.yaml:15: keys[1]: give exactly one of 'sha256' (the key's hex digest) or 'env'",
        "tw.yaml:17: limits.max_body_bytes: Input should be greater than 0 (got 0)",
        "tw.yaml:18: limits.max_messges: unknown key; did you mean 'max_messages'?",
        "tw.yaml:19: dialect: Input should be 'openai' or 'tool_request' (got 'soap')",
        "tw.yaml:20: port: Input should be less than or equal to 65535 (got 70000)",
        "tw.yaml:21: verbose: unknown key",
    ]
    assert len(got) == len(expected_starts), "\n".join(got)
    for start in expected_starts:
        assert any(g.startswith(start) for g in got), f"{start!r} not in:\n" + "\n".join(got)


def test_unknown_format_lists_the_valid_ones() -> None:
    [problem] = problems_of("upstream: {tool_calls: 'prompted:nope'}")
    assert "unknown tool-call format 'nope'" in problem
    assert all(name in problem for name in FORMATS)
    assert "'auto'" not in problem  # parse only


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("native", ("native", None)),
        ("parse:hermes", ("parse", "hermes")),
        ("parse:auto", ("parse", "auto")),
        ("prompted:json_fence", ("prompted", "json_fence")),
    ],
)
def test_parse_tool_calls(value: str, expected: tuple[str, str | None]) -> None:
    assert parse_tool_calls(value) == expected


@pytest.mark.parametrize("value", ["", "native:x", "parse", "parse:", "prompted:auto", "tools"])
def test_parse_tool_calls_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="tool-call"):
        parse_tool_calls(value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "upstream: {kind: openai}",
            "tw.yaml:1: upstream.models: map at least one public model id",
        ),
        (
            "upstream: {kind: offline, tool_calls: 'parse:hermes'}",
            "tw.yaml:1: upstream.tool_calls: the offline upstream writes and parses its own calls",
        ),
        (
            "upstream: {kind: offline, api_key_env: KEY}",
            "tw.yaml:1: upstream.api_key_env: the offline upstream takes no key",
        ),
        (
            "upstream:\n  kind: anthropic\n  models:\n"
            "    c: {model: c, tool_calls: 'parse:hermes'}",
            "tw.yaml:4: upstream.models.c.tool_calls: the Anthropic Messages API returns tool_use",
        ),
        (
            "keys:\n  - {name: a, env: A}\n  - {name: a, env: B}",
            "tw.yaml:3: keys[1].name: duplicate key name 'a' (also keys[0])",
        ),
        (
            f"keys:\n  - {{name: a, sha256: '{'a' * 64}'}}\n  - {{name: b, sha256: '{'A' * 64}'}}",
            "tw.yaml:3: keys[1].sha256: the same key as keys[0]",
        ),
        (
            "keys:\n  - {name: a, sha256: 1234}",
            "tw.yaml:2: keys[0].sha256: write the digest in quotes",
        ),
        (
            "server_tools:\n  http:\n    - {name: t, endpoint: 'http://h/{id}'}",
            "tw.yaml:3: server_tools.http[0].endpoint: placeholder {id} is not a property",
        ),
        (
            "server_tools:\n  http:\n    - name: t\n      endpoint: 'http://h/{id}'\n"
            "      parameters: {type: object, properties: {id: {type: string}}}",
            "tw.yaml:4: server_tools.http[0].endpoint: placeholder {id} must be a required",
        ),
        (
            "server_tools:\n  http:\n    - {name: t, endpoint: 'http://h/'}\n"
            "    - {name: t, endpoint: 'http://h/'}",
            "tw.yaml:4: server_tools.http[1].name: duplicate tool name 't' (also http[0])",
        ),
        (
            "server_tools:\n  http:\n"
            "    - {name: t, endpoint: 'http://h/', parameters: {type: array}}",
            "tw.yaml:3: server_tools.http[0].parameters: must be a JSON Schema with type 'object'",
        ),
        ("upstream: {}\nupstream: {}", "tw.yaml:2: upstream: duplicate key"),
        ("- a\n- b", "tw.yaml:1: the config must be a mapping"),
        ("limits: 5", "tw.yaml:1: limits: expected a mapping of keys (got 5)"),
        (
            "upstream: {models: {a: 1}}",
            "tw.yaml:1: upstream.models.a: write the upstream model name, or a mapping",
        ),
    ],
)
def test_cross_field_checks(text: str, expected: str) -> None:
    got = problems_of(text)
    assert any(g.startswith(expected) for g in got), f"{expected!r} not in {got}"


def test_sections_valid_on_their_own_are_still_checked() -> None:
    # `limits` is broken; the upstream's cross-field problem is still reported.
    got = problems_of("upstream: {kind: openai}\nlimits: {max_tools: -1}")
    assert len(got) == 2
    assert any("upstream.models" in g for g in got)
    assert any("limits.max_tools" in g for g in got)


def test_load_config_raises_with_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "tw.yaml"
    path.write_text("port: x\ndialect: y\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert len(info.value.problems) == 2
    assert f"{path}:1: port:" in str(info.value)
    assert "2 problems" in str(info.value)


def test_load_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.yaml")


def test_environment_findings() -> None:
    config = GatewayConfig.model_validate(
        {
            "upstream": {"kind": "openai", "api_key_env": "UP", "models": {"m": "m"}},
            "keys": [{"name": "a", "env": "A"}, {"name": "b", "env": "B"}],
        }
    )
    found = environment_findings(config, {"A": "set", "B": ""})
    assert [format_path(loc) for loc, _ in found] == ["upstream.api_key_env", "keys[1].env"]
    assert environment_findings(config, {"UP": "x", "A": "x", "B": "x"}) == []
    # The names are in the messages, never a value.
    assert "UP" in found[0][1]


def test_load_server_tools_locates_module_failures(tmp_path: Path) -> None:
    broken = tmp_path / "broken_tools.py"
    broken.write_text("raise RuntimeError('boom')\n")
    empty = tmp_path / "empty_tools.py"
    empty.write_text("x = 1\n")
    config = GatewayConfig.model_validate(
        {"server_tools": {"modules": [TOOLS_MODULE, str(broken), str(empty), "no.such.module"]}}
    )
    tools, found = load_server_tools(config.server_tools)
    assert tools is None
    assert [format_path(loc) for loc, _ in found] == [
        "server_tools.modules[1]",
        "server_tools.modules[2]",
        "server_tools.modules[3]",
    ]
    assert "RuntimeError: boom" in found[0][1]
    assert "defines no tools" in found[1][1]
    assert "No module named 'no'" in found[2][1]


def test_load_server_tools_duplicate_names_across_sources() -> None:
    config = GatewayConfig.model_validate(
        {
            "server_tools": {
                "modules": [TOOLS_MODULE],
                "http": [{"name": "add", "endpoint": "http://127.0.0.1:9/add"}],
            }
        }
    )
    tools, found = load_server_tools(config.server_tools)
    assert tools is None
    [(loc, message)] = found
    assert loc == ("server_tools",)
    assert "Duplicate tool name 'add'" in message


@pytest.mark.parametrize(
    ("loc", "text"),
    [
        (("keys", 0, "sha256"), "keys[0].sha256"),
        (
            ("upstream", "models", "Qwen/Qwen3-8B", "model"),
            'upstream.models["Qwen/Qwen3-8B"].model',
        ),
        ((), ""),
        (("server_tools", "http", 2), "server_tools.http[2]"),
    ],
)
def test_format_path(loc: tuple[str | int, ...], text: str) -> None:
    assert format_path(loc) == text


def test_the_docs_embed_the_example_config_verbatim() -> None:
    docs = (EXAMPLE.parents[1] / "docs" / "gateway.md").read_text()
    assert "```yaml\n" + EXAMPLE.read_text() + "```" in docs


def test_store_and_approval_settings_are_checked() -> None:
    text = """\
store: "mysql://db/toolwire"
approvals:
  ttl: 0
  wait_seconds: -1
keys:
  - {name: ops, sha256: "%s", approve: everyone}
""" % ("a" * 64)
    got = problems_of(text)
    expected_starts = [
        "tw.yaml:1: store: unknown store 'mysql://db/toolwire': use memory, sqlite:///",
        "tw.yaml:3: approvals.ttl: Input should be greater than 0",
        "tw.yaml:4: approvals.wait_seconds: Input should be greater than or equal to 0",
        "tw.yaml:6: keys[0].approve: Input should be 'own', 'any' or 'none'",
    ]
    assert len(got) == len(expected_starts), "\n".join(got)
    for start in expected_starts:
        assert any(g.startswith(start) for g in got), f"{start!r} not in:\n" + "\n".join(got)


def test_the_resource_bounds_are_checked_with_their_lines() -> None:
    fields = problems_of("limits:\n  min_body_timeout: 0\nmcp:\n  stream_keepalive: -1\n")
    assert sorted(fields) == [
        "tw.yaml:2: limits.min_body_timeout: Input should be greater than 0 (got 0)",
        "tw.yaml:4: mcp.stream_keepalive: Input should be greater than 0 (got -1)",
    ]
    text = """\
limits:
  max_in_flight_bytes: 1048576
  max_in_flight_bytes_per_key: 2097152
mcp:
  max_streams: 4
  max_streams_per_key: 8
"""
    assert sorted(problems_of(text)) == [
        "tw.yaml:1: limits: max_in_flight_bytes_per_key (2097152) is more than "
        "max_in_flight_bytes (1048576)",
        "tw.yaml:4: mcp: max_streams_per_key (8) is more than max_streams (4)",
    ]
    defaults = GatewayConfig()
    assert defaults.limits.key_bytes == defaults.limits.max_in_flight_bytes // 4
    assert (defaults.mcp.max_streams, defaults.mcp.max_streams_per_key) == (256, 16)
