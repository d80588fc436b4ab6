"""`toolwire approvals` and `toolwire runs` against a real gateway.

The gateway runs on a loopback socket (uvicorn in a thread) in front of the fake OpenAI
server, which answers every new request with a call to the destructive `delete_file`
server tool (the path is the last word of the user's message) and every tool result with
a final answer. A run therefore pauses for approval; the commands are run in-process
through typer's CliRunner, as a person would type them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from fakes.openai_server import (
    FakeOpenAIServer,
    ReceivedRequest,
    Reply,
    completion,
    raw,
    tool_call,
)
from server.live import LiveServer
from toolwire.cli._common import CliError
from toolwire.cli._gateway import GatewayClient
from toolwire.cli.main import app
from toolwire.server import GatewayConfig, create_app

ALICE, BOB, OPS = "tw-cli-alice-Sekr3t", "tw-cli-bob-Sekr3t", "tw-cli-ops-Sekr3t"
KEYS = (ALICE, BOB, OPS)
MODEL = "gpt-test"

TOOLS = '''
from pathlib import Path

from toolwire import tool


@tool(effects="destructive")
def delete_file(path: str) -> str:
    """Delete a file. This cannot be undone.

    Args:
        path: The file to delete.
    """
    Path(path).unlink()
    return f"Deleted {path}."
'''


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def gateway(
    _openai_server_session: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    tools = tmp_path_factory.mktemp("tools") / "cli_approvals_tools.py"
    tools.write_text(TOOLS)
    config = GatewayConfig.model_validate(
        {
            "upstream": {
                "kind": "openai",
                "base_url": _openai_server_session.base_url,
                "models": {MODEL: "fake-model"},
            },
            "server_tools": {"modules": [str(tools)]},
            "keys": [
                {"name": "alice", "sha256": _digest(ALICE)},
                {"name": "bob", "sha256": _digest(BOB), "approve": "none"},
                {"name": "ops", "sha256": _digest(OPS), "admin": True},
            ],
            "store": "memory",
        }
    )
    with LiveServer(create_app(config, environ={})) as live:
        yield live


_call_ids = itertools.count(1)


def _model(request: ReceivedRequest) -> Reply:
    """Call `delete_file` for a new request; answer once the tool's result is back."""
    last = request.json["messages"][-1]
    if last["role"] == "tool":
        return completion(f"Done: {last['content']}")
    path = last["content"].split()[-1]
    call = tool_call("delete_file", {"path": path}, id=f"call_{next(_call_ids)}")
    return completion("I'll delete it.", tool_calls=[call])


@pytest.fixture
def upstream(openai_server: FakeOpenAIServer) -> FakeOpenAIServer:
    openai_server.set_default(_model)
    return openai_server


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for var in ("TOOLWIRE_URL", "TOOLWIRE_GATEWAY_KEY", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)
    return CliRunner()


def _env(gateway: LiveServer, key: str | None = ALICE, **extra: str) -> dict[str, str | None]:
    # A wide terminal, so the tables' rows stay on one line each.
    return {"TOOLWIRE_URL": gateway.url, "TOOLWIRE_GATEWAY_KEY": key, "COLUMNS": "200", **extra}


def _paused(gateway: LiveServer, target: Path, key: str = ALICE) -> tuple[str, str]:
    """Ask the gateway to delete `target`: the run pauses. Its approval id and run id."""
    target.write_text("data")
    with httpx.Client(base_url=gateway.url, timeout=10) as http:
        response = http.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": f"Delete {target}"}]},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert response.status_code == 200, response.text
    extension = response.json()["toolwire"]
    assert extension["status"] == "awaiting_approval"
    [pending] = extension["pending_approvals"]
    return pending["id"], extension["run_id"]


def _approval(gateway: LiveServer, approval_id: str) -> Any:
    with httpx.Client(base_url=gateway.url, timeout=10) as http:
        response = http.get(
            f"/v1/approvals/{approval_id}", headers={"Authorization": f"Bearer {OPS}"}
        )
    assert response.status_code == 200, response.text
    return response.json()


def _no_secret(*texts: str) -> None:
    for text in texts:
        for key in KEYS:
            assert key not in text


def _one_error_line(stderr: str) -> str:
    """The single `Error: ...` line a failed command prints (no traceback)."""
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


# --- list and show --------------------------------------------------------------------------


def test_list_shows_the_pending_approval(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, _ = _paused(gateway, tmp_path / "old.log")

    out = cli.invoke(app, ["approvals", "list"], env=_env(gateway))

    assert out.exit_code == 0, out.output
    [row] = [line for line in out.stdout.splitlines() if approval_id in line]
    # The arguments are shortened to keep the row on one line; `show` gives them whole.
    assert f'delete_file(path="{str(tmp_path)[:20]}' in row
    assert "alice" in row
    assert "pending" in row
    assert re.search(r"in \d+m", row), row
    assert "toolwire approvals approve ID" in out.stdout
    _no_secret(out.output)


def test_list_keeps_ids_whole_in_a_narrow_terminal(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, _ = _paused(gateway, tmp_path / "narrow.log")

    out = cli.invoke(app, ["approvals", "list"], env=_env(gateway, COLUMNS="80"))

    assert out.exit_code == 0, out.output
    assert approval_id in out.stdout


def test_list_json_and_filters(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, run_id = _paused(gateway, tmp_path / "a.log")
    other_id, _ = _paused(gateway, tmp_path / "b.log")

    out = cli.invoke(app, ["approvals", "list", "--json"], env=_env(gateway))
    assert out.exit_code == 0, out.output
    listed = json.loads(out.stdout)
    assert {approval_id, other_id} <= {a["id"] for a in listed}
    assert all(a["status"] == "pending" for a in listed)

    out = cli.invoke(app, ["approvals", "list", "--run", run_id, "--json"], env=_env(gateway))
    assert out.exit_code == 0, out.output
    [only] = json.loads(out.stdout)
    assert only["id"] == approval_id
    assert only["name"] == "delete_file"
    assert json.loads(only["arguments"]) == {"path": str(tmp_path / "a.log")}
    assert only["requested_by"] == "alice"

    out = cli.invoke(app, ["approvals", "list", "--status", "denied"], env=_env(gateway))
    assert out.exit_code == 0, out.output
    assert approval_id not in out.stdout

    out = cli.invoke(app, ["approvals", "list", "--run", "run_none"], env=_env(gateway))
    assert out.exit_code == 0, out.output
    assert out.stdout.strip() == "No pending approvals for run run_none."


def test_list_refuses_an_unknown_status(cli: CliRunner, gateway: LiveServer) -> None:
    out = cli.invoke(app, ["approvals", "list", "--status", "maybe"], env=_env(gateway))
    assert out.exit_code == 2
    assert "maybe" in out.stderr


def test_show_gives_the_exact_call(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, run_id = _paused(gateway, tmp_path / "show.log")

    out = cli.invoke(app, ["approvals", "show", approval_id], env=_env(gateway))

    assert out.exit_code == 0, out.output
    text = out.stdout
    for expected in (approval_id, run_id, "pending", "delete_file", "destructive", "show.log"):
        assert expected in text
    assert "sha256:" in text
    assert f"toolwire approvals approve {approval_id}" in text
    _no_secret(out.output)

    out = cli.invoke(app, ["approvals", "show", approval_id, "--json"], env=_env(gateway))
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown == _approval(gateway, approval_id)


# --- deciding -------------------------------------------------------------------------------


def test_approve_then_resume_runs_the_call_once(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    target = tmp_path / "approved.log"
    approval_id, run_id = _paused(gateway, target)

    out = cli.invoke(
        app, ["approvals", "approve", approval_id, "--reason", "old logs"], env=_env(gateway)
    )
    assert out.exit_code == 0, out.output
    assert f"Approved {approval_id}" in out.stdout
    assert f"toolwire runs resume {run_id}" in out.stdout
    decided = _approval(gateway, approval_id)
    assert decided["status"] == "approved"
    assert decided["decided_by"] == "alice"
    assert decided["decision_reason"] == "old logs"
    assert target.exists()  # approving alone runs nothing

    # A second decision on the same approval: 409, one line.
    again = cli.invoke(app, ["approvals", "approve", approval_id], env=_env(gateway))
    assert again.exit_code == 1
    line = _one_error_line(again.stderr)
    assert approval_id in line
    assert "approved, not pending" in line

    resumed = cli.invoke(app, ["runs", "resume", run_id], env=_env(gateway))
    assert resumed.exit_code == 0, resumed.output
    assert not target.exists()
    assert "✓ delete_file: Deleted" in resumed.stdout
    assert f"Done: Deleted {target}." in resumed.stdout
    assert _approval(gateway, approval_id)["status"] == "used"

    # Resumed once: a second resume is refused and nothing runs again.
    twice = cli.invoke(app, ["runs", "resume", run_id], env=_env(gateway))
    assert twice.exit_code == 1
    assert run_id in _one_error_line(twice.stderr)

    used = cli.invoke(app, ["approvals", "deny", approval_id], env=_env(gateway))
    assert used.exit_code == 1
    assert "used, not pending" in _one_error_line(used.stderr)
    _no_secret(out.output, again.output, resumed.output, twice.output, used.output)


def test_deny_with_a_reason(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    target = tmp_path / "keep.log"
    approval_id, run_id = _paused(gateway, target)

    out = cli.invoke(
        app,
        ["approvals", "deny", approval_id, "--reason", "still needed", "--json"],
        env=_env(gateway),
    )
    assert out.exit_code == 0, out.output
    denied = json.loads(out.stdout)
    assert denied["id"] == approval_id
    assert denied["status"] == "denied"
    assert denied["decision_reason"] == "still needed"

    resumed = cli.invoke(app, ["runs", "resume", run_id], env=_env(gateway))
    assert resumed.exit_code == 0, resumed.output
    assert target.exists()
    assert "✗ delete_file failed, denied" in resumed.stdout
    assert "still needed" in resumed.stdout
    # The model was told, reason included.
    assert "still needed" in upstream.last.json["messages"][-1]["content"]


def test_deny_prints_what_was_denied(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, run_id = _paused(gateway, tmp_path / "x.log")

    out = cli.invoke(app, ["approvals", "deny", approval_id], env=_env(gateway))

    assert out.exit_code == 0, out.output
    assert f"Denied {approval_id}: delete_file(path=" in out.stdout
    assert f"toolwire runs resume {run_id}" in out.stdout


def test_a_key_that_may_not_approve_gets_the_403_line(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, _ = _paused(gateway, tmp_path / "bob.log", key=BOB)

    out = cli.invoke(app, ["approvals", "approve", approval_id, "--key", BOB], env=_env(gateway))

    assert out.exit_code == 1
    line = _one_error_line(out.stderr)
    assert "may not decide" in line
    assert _approval(gateway, approval_id)["status"] == "pending"
    # An admin key may.
    ok = cli.invoke(app, ["approvals", "approve", approval_id, "--key", OPS], env=_env(gateway))
    assert ok.exit_code == 0, ok.output
    assert _approval(gateway, approval_id)["decided_by"] == "ops"
    _no_secret(out.output, ok.output)


# --- runs -----------------------------------------------------------------------------------


def test_runs_show(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, run_id = _paused(gateway, tmp_path / "run.log")

    out = cli.invoke(app, ["runs", "show", run_id], env=_env(gateway))

    assert out.exit_code == 0, out.output
    text = out.stdout
    assert run_id in text
    assert "awaiting_approval" in text
    assert "I'll delete it." in text
    assert "→ delete_file(path=" in text
    assert "⏸ delete_file waits for approval" in text
    assert approval_id in text
    assert f"toolwire runs resume {run_id}" in text

    out = cli.invoke(app, ["runs", "show", run_id, "--json"], env=_env(gateway))
    assert out.exit_code == 0, out.output
    run = json.loads(out.stdout)
    assert run["id"] == run_id
    assert run["status"] == "awaiting_approval"
    assert [a["id"] for a in run["pending_approvals"]] == [approval_id]


def test_resume_before_deciding_says_what_is_pending(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, run_id = _paused(gateway, tmp_path / "early.log")

    out = cli.invoke(app, ["runs", "resume", run_id], env=_env(gateway))

    assert out.exit_code == 1
    assert approval_id in _one_error_line(out.stderr)
    assert (tmp_path / "early.log").exists()


def test_resume_json_is_the_chat_completion(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, run_id = _paused(gateway, tmp_path / "json.log")
    assert cli.invoke(app, ["approvals", "approve", approval_id], env=_env(gateway)).exit_code == 0

    out = cli.invoke(app, ["runs", "resume", run_id, "--json"], env=_env(gateway))

    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"].startswith("Done: Deleted")
    assert body["toolwire"]["status"] == "completed"


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["approvals", "show", "apr_nope"],
        ["approvals", "approve", "apr_nope"],
        ["approvals", "deny", "apr_nope", "--reason", "no"],
    ],
)
def test_an_unknown_approval_is_one_404_line(
    cli: CliRunner, gateway: LiveServer, args: list[str]
) -> None:
    out = cli.invoke(app, args, env=_env(gateway))

    assert out.exit_code == 1
    assert out.stdout == ""
    line = _one_error_line(out.stderr)
    assert "Approval" in line
    assert "apr_nope" in line
    assert "does not exist" in line


def test_an_unknown_run_is_one_404_line(cli: CliRunner, gateway: LiveServer) -> None:
    for args in (["runs", "show", "run_nope"], ["runs", "resume", "run_nope"]):
        out = cli.invoke(app, args, env=_env(gateway))
        assert out.exit_code == 1
        line = _one_error_line(out.stderr)
        assert "run_nope" in line
        assert "does not exist" in line


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    "args",
    [
        ["approvals", "list"],
        ["approvals", "show", "apr_x"],
        ["approvals", "approve", "apr_x"],
        ["runs", "show", "run_x"],
        ["runs", "resume", "run_x"],
    ],
)
def test_an_unreachable_gateway_is_one_clear_line(cli: CliRunner, args: list[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}"

    out = cli.invoke(app, [*args, "--url", url, "--key", ALICE])

    assert out.exit_code == 1
    line = _one_error_line(out.stderr)
    assert line == (
        f"Error: Cannot reach the gateway at {url}: is `toolwire serve` running? "
        "(set --url or TOOLWIRE_URL)"
    )
    _no_secret(out.output)


def test_the_url_comes_from_the_environment(cli: CliRunner) -> None:
    url = f"http://127.0.0.1:{_free_port()}"

    out = cli.invoke(app, ["approvals", "list"], env={"TOOLWIRE_URL": url})

    assert out.exit_code == 1
    assert f"Cannot reach the gateway at {url}:" in _one_error_line(out.stderr)


def test_the_openai_base_url_works_too(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    approval_id, _ = _paused(gateway, tmp_path / "v1.log")

    out = cli.invoke(
        app, ["approvals", "list", "--url", f"{gateway.url}/v1/"], env=_env(gateway, key=ALICE)
    )

    assert out.exit_code == 0, out.output
    assert approval_id in out.stdout


def test_a_missing_or_wrong_key_says_where_to_set_it(cli: CliRunner, gateway: LiveServer) -> None:
    missing = cli.invoke(app, ["approvals", "list"], env=_env(gateway, key=None))
    assert missing.exit_code == 1
    line = _one_error_line(missing.stderr)
    assert "Missing gateway key" in line
    assert line.endswith("(set --key or TOOLWIRE_GATEWAY_KEY)")

    wrong = cli.invoke(
        app, ["approvals", "list", "--key", "tw-not-a-key-Sekr3t"], env=_env(gateway)
    )
    assert wrong.exit_code == 1
    assert "Invalid gateway key" in _one_error_line(wrong.stderr)
    assert "tw-not-a-key-Sekr3t" not in wrong.output


def test_a_malformed_url_is_a_usage_error(cli: CliRunner) -> None:
    out = cli.invoke(app, ["approvals", "list", "--url", "localhost:8000"])

    assert out.exit_code == 2
    assert "is not an http(s) URL" in _one_error_line(out.stderr)


def test_something_else_at_the_url(cli: CliRunner, openai_server: FakeOpenAIServer) -> None:
    # The fake upstream is no gateway: its 404 is reported, not a traceback.
    url = f"http://127.0.0.1:{openai_server.port}"
    out = cli.invoke(app, ["approvals", "list", "--url", url])

    assert out.exit_code == 1
    line = _one_error_line(out.stderr)
    assert "404" in line


def test_a_slow_or_strange_answer_is_one_line(openai_server: FakeOpenAIServer) -> None:
    url = f"http://127.0.0.1:{openai_server.port}"
    openai_server.reply(raw("{}", delay=2), raw("<html>hello</html>", content_type="text/html"))
    with GatewayClient(url, ALICE) as client:
        with pytest.raises(CliError) as slow:
            client.post("/v1/chat/completions", {}, timeout=0.2)
        with pytest.raises(CliError) as strange:
            client.post("/v1/chat/completions", {})
    assert str(slow.value) == (
        f"The gateway at {url} did not answer POST /v1/chat/completions within 0.2 seconds."
    )
    assert str(strange.value) == (
        f"The answer of {url}/v1/chat/completions is not JSON: is --url a toolwire gateway?"
    )
    # The key went as a bearer token, and only there.
    assert openai_server.requests[-1].headers["authorization"] == f"Bearer {ALICE}"


def test_help_never_shows_the_key(cli: CliRunner) -> None:
    out = cli.invoke(app, ["approvals", "list", "--help"], env={"TOOLWIRE_GATEWAY_KEY": ALICE})

    assert out.exit_code == 0
    assert "TOOLWIRE_GATEWAY_KEY" in out.stdout
    assert ALICE not in out.stdout
