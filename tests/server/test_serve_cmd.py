"""`toolwire check` and `toolwire serve`."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from server_support import TOOLS_MODULE
from typer.testing import CliRunner

from toolwire.cli.main import app

EXAMPLE = Path(__file__).parents[2] / "examples" / "toolwire.yaml"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for var in ("UPSTREAM_API_KEY", "TOOLWIRE_CI_KEY"):
        monkeypatch.delenv(var, raising=False)
    return CliRunner()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolwire.yaml"
    path.write_text(text)
    return path


# --- check ---------------------------------------------------------------------------------


def test_check_the_example(cli: CliRunner) -> None:
    out = cli.invoke(app, ["check", "--config", str(EXAMPLE)])
    assert out.exit_code == 0, out.output
    assert "OK (upstream openai, 3 models, 4 server tools, 2 keys)" in out.output
    # Secrets named by the config but absent here are warnings, not failures.
    assert "warning: upstream.api_key_env: environment variable UPSTREAM_API_KEY" in out.output
    assert "warning: keys[1].env: environment variable TOOLWIRE_CI_KEY" in out.output


def test_check_the_example_with_its_environment(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_API_KEY", "sk-test")
    monkeypatch.setenv("TOOLWIRE_CI_KEY", "tw-ci")
    out = cli.invoke(app, ["check", "-c", str(EXAMPLE)])
    assert out.exit_code == 0
    assert "warning" not in out.output
    assert "sk-test" not in out.output


def test_check_reports_every_problem_with_its_location(cli: CliRunner, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "upstream:\n  kind: openai\n  tool_calls: parse:nope\nlimits:\n  max_tools: 0\n"
        "server_tools:\n  modules: [no_such_module_xyz]\nextra: 1\n",
    )
    out = cli.invoke(app, ["check", "--config", str(path)])
    assert out.exit_code == 1
    lines = [line for line in out.output.splitlines() if line.startswith(str(path))]
    assert [line.split(": ")[0:2] for line in lines[:-1]] == [
        [f"{path}:1", "upstream.models"],  # missing: the line of its parent
        [f"{path}:3", "upstream.tool_calls"],
        [f"{path}:5", "limits.max_tools"],
        [f"{path}:7", "server_tools.modules[0]"],
        [f"{path}:8", "extra"],
    ]
    assert lines[-1] == f"{path}: 5 problems"


def test_check_imports_the_tool_modules(cli: CliRunner, tmp_path: Path) -> None:
    path = write(
        tmp_path, "server_tools:\n  modules:\n    - " + TOOLS_MODULE + "\n    - nope_xyz\n"
    )
    out = cli.invoke(app, ["check", "-c", str(path)])
    assert out.exit_code == 1
    assert (
        f"{path}:4: server_tools.modules[1]: Could not import tool module 'nope_xyz'" in out.output
    )
    path.write_text("server_tools:\n  modules: [" + TOOLS_MODULE + "]\n")
    out = cli.invoke(app, ["check", "-c", str(path)])
    assert out.exit_code == 0
    assert "3 server tools" in out.output


def test_check_yaml_syntax_error(cli: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, "upstream:\n  kind: 'openai\n")
    out = cli.invoke(app, ["check", "-c", str(path)])
    assert out.exit_code == 1
    assert re.search(rf"{re.escape(str(path))}:\d+: YAML syntax error", out.output)


def test_check_missing_file(cli: CliRunner, tmp_path: Path) -> None:
    out = cli.invoke(app, ["check", "-c", str(tmp_path / "absent.yaml")])
    assert out.exit_code == 1
    assert "absent.yaml: no such file" in out.output


def test_check_defaults_to_toolwire_yaml_here(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "port: 9000\n")
    out = cli.invoke(app, ["check"])
    assert out.exit_code == 0
    assert "toolwire.yaml: OK (upstream offline, 1 model, 0 server tools, 0 keys)" in out.output


# --- serve: refusals before anything starts ------------------------------------------------


def test_serve_refuses_a_bad_config(cli: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, "port: many\n")
    out = cli.invoke(app, ["serve", "-c", str(path)])
    assert out.exit_code == 2
    assert f"{path}:1: port:" in out.output
    assert "listening" not in out.output


def test_serve_refuses_unset_secrets(cli: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, "keys:\n  - {name: ci, env: TOOLWIRE_CI_KEY}\n")
    out = cli.invoke(app, ["serve", "-c", str(path)])
    assert out.exit_code == 2
    assert "keys[0].env: environment variable TOOLWIRE_CI_KEY is not set" in out.output


def test_serve_without_the_server_extra(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    out = cli.invoke(app, ["serve"])
    assert out.exit_code == 1
    assert "toolwire serve needs the server extra: pip install 'toolwire[server]'" in out.output


def test_serve_port_in_use(cli: CliRunner) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = cli.invoke(app, ["serve", "--port", str(port)])
    assert out.exit_code == 1
    assert f"Cannot listen on 127.0.0.1:{port}" in out.output


# --- serve: a real process -----------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """`toolwire serve --port 0` with no config, as a subprocess; yields its URL and banner."""
    env = {**os.environ, "TOOLWIRE_LOG_LEVEL": "warning", "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolwire.cli.main", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    banner: list[str] = []
    try:
        for line in proc.stdout:
            banner.append(line.rstrip("\n"))
            if line.startswith("  client.chat.completions.create("):
                break
        match = re.search(r"listening on (http://\S+)/v1", "\n".join(banner))
        assert match, "\n".join(banner)
        url = match.group(1)
        # The socket is bound before the banner; wait until uvicorn serves it.
        with httpx.Client(timeout=10) as http:
            for _ in range(500):
                try:
                    if http.get(f"{url}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None:
                    raise AssertionError(proc.stdout.read())
                threading_wait(0.01)
        yield url, banner
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def threading_wait(seconds: float) -> None:
    import threading

    threading.Event().wait(seconds)


def test_serve_with_no_config_runs_offline_with_the_demo_tools(
    served: tuple[str, list[str]],
) -> None:
    url, banner = served
    text = "\n".join(banner)
    assert "config:   built-in defaults" in text
    assert "upstream: offline; models: toolwire-offline" in text
    assert "server tools: get_current_time, get_weather, calculate" in text
    assert "deterministic stand-in" in text
    assert f"curl {url}/v1/models" in text
    assert f'OpenAI(base_url="{url}/v1"' in text
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as sdk:
        assert [m.id for m in sdk.models.list().data] == ["toolwire-offline"]
        reply = sdk.chat.completions.create(
            model="toolwire-offline",
            messages=[{"role": "user", "content": "What is 6*7? Use calculate."}],
        )
    assert "42" in (reply.choices[0].message.content or "")
    with httpx.Client(base_url=url) as http:
        result = http.post(
            "/v1/tools/calculate/invoke", json={"arguments": {"expression": "6*7"}}
        ).json()
    assert result["result"] == {"expression": "6*7", "result": 42}


def test_version(cli: CliRunner) -> None:
    from importlib.metadata import version

    out = cli.invoke(app, ["--version"])
    assert out.exit_code == 0
    assert out.output.strip() == f"toolwire {version('toolwire')}"


@pytest.mark.parametrize("how", ["env", "here"])
def test_serve_and_check_find_the_config_without_config_option(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text("port: 70000\n")  # invalid: proves this file was read
    if how == "env":
        monkeypatch.setenv("TOOLWIRE_CONFIG", str(config))
        monkeypatch.chdir(tmp_path.parent)
    else:
        monkeypatch.delenv("TOOLWIRE_CONFIG", raising=False)
        monkeypatch.chdir(tmp_path)
    served = cli.invoke(app, ["serve"])
    assert served.exit_code == 2
    assert "port" in served.output
    checked = cli.invoke(app, ["check"])
    assert checked.exit_code == 1
    assert "port" in checked.output


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve", "-v"], ["-v", "serve"]),
        (["tools", "list", "--verbose"], ["--verbose", "tools", "list"]),
        (["check", "--version"], ["--version", "check"]),
        (["chat", "--", "-v"], ["chat", "--", "-v"]),  # after `--` it is a message
    ],
)
def test_global_flags_may_follow_the_command(argv: list[str], expected: list[str]) -> None:
    from toolwire.cli.main import hoist_global_flags

    assert hoist_global_flags(argv) == expected


def test_config_may_come_before_the_command(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("port: 70000\n")
    env = {k: v for k, v in os.environ.items() if k != "TOOLWIRE_CONFIG"}
    out = subprocess.run(
        [sys.executable, "-m", "toolwire.cli.main", "--config", str(config), "check"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "NO_COLOR": "1"},
        cwd=tmp_path,
    )
    assert out.returncode == 1
    assert "mine.yaml" in out.stdout + out.stderr
