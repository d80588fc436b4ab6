"""`toolwire audit` against a real gateway, and the times it accepts.

The gateway runs on a loopback socket in front of the fake OpenAI server, which calls the
destructive `wipe` server tool for every new request and answers once the result is back.
Each test makes its own run (pause, approve, resume) and reads that run's records.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from fakes.openai_server import FakeOpenAIServer, ReceivedRequest, Reply, completion, tool_call
from server.live import LiveServer
from toolwire.cli._common import CliError
from toolwire.cli.audit_cmd import parse_time
from toolwire.cli.main import app
from toolwire.server import GatewayConfig, create_app

ALICE, OPS = "tw-audit-alice-Sekr3t", "tw-audit-ops-Sekr3t"
MODEL = "gpt-test"

TOOLS = '''
from toolwire import tool


@tool(effects="destructive")
def wipe(volume: str, api_token: str = "none") -> str:
    """Wipe a volume.

    Args:
        volume: The volume.
        api_token: A credential (never logged).
    """
    return f"Wiped {volume}."
'''


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def gateway(
    _openai_server_session: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    tools = tmp_path_factory.mktemp("tools") / "cli_audit_tools.py"
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
                {"name": "ops", "sha256": _digest(OPS), "admin": True},
            ],
            "store": "memory",
        }
    )
    with LiveServer(create_app(config, environ={})) as live:
        yield live


_call_ids = itertools.count(1)


def _model(request: ReceivedRequest) -> Reply:
    last = request.json["messages"][-1]
    if last["role"] == "tool":
        return completion(f"Done: {last['content']}")
    arguments = {"volume": last["content"].split()[-1], "api_token": "tok-Sekr3t"}
    return completion(
        tool_calls=[tool_call("wipe", arguments, id=f"call_{next(_call_ids)}")],
    )


@pytest.fixture
def upstream(openai_server: FakeOpenAIServer) -> FakeOpenAIServer:
    openai_server.set_default(_model)
    return openai_server


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for var in ("TOOLWIRE_URL", "TOOLWIRE_GATEWAY_KEY", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)
    return CliRunner()


def _env(gateway: LiveServer, key: str = OPS) -> dict[str, str | None]:
    return {"TOOLWIRE_URL": gateway.url, "TOOLWIRE_GATEWAY_KEY": key, "COLUMNS": "200"}


def _finished_run(gateway: LiveServer, volume: str) -> str:
    """Alice asks to wipe `volume`; ops approves; the run is resumed. Its id."""
    with (
        httpx.Client(base_url=gateway.url, timeout=10, headers=_auth(ALICE)) as alice,
        httpx.Client(base_url=gateway.url, timeout=10, headers=_auth(OPS)) as ops,
    ):
        paused = alice.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": f"Wipe {volume}"}]},
        )
        assert paused.status_code == 200, paused.text
        extension = paused.json()["toolwire"]
        [pending] = extension["pending_approvals"]
        decided = ops.post(f"/v1/approvals/{pending['id']}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        resumed = alice.post(f"/v1/runs/{extension['run_id']}/resume", json={})
        assert resumed.status_code == 200, resumed.text
        run_id: str = extension["run_id"]
    return run_id


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _records(cli: CliRunner, gateway: LiveServer, *args: str) -> list[dict[str, Any]]:
    out = cli.invoke(app, ["audit", *args, "--json"], env=_env(gateway))
    assert out.exit_code == 0, out.output
    records: list[dict[str, Any]] = json.loads(out.stdout)
    return records


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


def test_the_audit_of_one_run(
    cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer
) -> None:
    run_id = _finished_run(gateway, "vol-a")

    records = _records(cli, gateway, "--run", run_id)

    assert [(r["event"], r["outcome"]) for r in records] == [
        ("finished", "awaiting_approval"),
        ("finished", "approval_approved"),
        ("finished", "run_resumed"),  # who resumed, before anything ran
        ("started", None),
        ("finished", "ok"),
    ]
    assert {r["tool"] for r in records} == {"wipe", ""}
    assert {r["run_id"] for r in records} == {run_id}
    ran = records[-1]
    assert ran["key_name"] == "alice"
    assert ran["approved_by"] == "ops"
    assert ran["approval_id"] == records[1]["approval_id"]
    assert ran["arguments"]["volume"] == "vol-a"
    # The argument named like a credential is logged redacted.
    assert "tok-Sekr3t" not in json.dumps(records)


def test_the_table(cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer) -> None:
    run_id = _finished_run(gateway, "vol-table")

    out = cli.invoke(app, ["audit", "--run", run_id], env=_env(gateway))

    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["ID", "Time", "Key", "Call", "Event", "Outcome", "ms"]
    assert any("wipe(volume=" in line and "ok" in line for line in lines)
    assert any("approval_approved" in line for line in lines)
    assert "approved by ops" in out.stdout
    assert any("run_resumed" in line for line in lines)
    assert lines[-1] == "5 records"
    assert OPS not in out.output


def test_filters(cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer) -> None:
    run_id = _finished_run(gateway, "vol-filter")

    ok = _records(cli, gateway, "--run", run_id, "--outcome", "ok")
    assert [r["event"] for r in ok] == ["finished"]
    assert _records(cli, gateway, "--run", run_id, "--tool", "wipe") != []
    assert _records(cli, gateway, "--run", run_id, "--tool", "nothing") == []
    by_alice = _records(cli, gateway, "--run", run_id, "--key-name", "alice")
    by_ops = _records(cli, gateway, "--run", run_id, "--key-name", "ops")
    assert len(by_alice) == 4  # the resume and the call's two records
    assert [r["outcome"] for r in by_ops] == ["approval_approved"]

    assert len(_records(cli, gateway, "--run", run_id, "--since", "1h")) == 5
    assert _records(cli, gateway, "--run", run_id, "--until", "2001-01-01") == []
    assert len(_records(cli, gateway, "--run", run_id, "--since", "2001-01-01T00:00Z")) == 5
    future = str(time.time() + 3600)
    assert _records(cli, gateway, "--run", run_id, "--since", future) == []

    out = cli.invoke(app, ["audit", "--run", run_id, "--tool", "nothing"], env=_env(gateway))
    assert out.exit_code == 0, out.output
    assert out.stdout.strip() == "No audit records match."


def test_pages(cli: CliRunner, gateway: LiveServer, upstream: FakeOpenAIServer) -> None:
    run_id = _finished_run(gateway, "vol-pages")
    every = _records(cli, gateway, "--run", run_id)

    first = cli.invoke(app, ["audit", "--run", run_id, "--limit", "3"], env=_env(gateway))
    assert first.exit_code == 0, first.output
    last_id = every[2]["id"]
    assert first.stdout.splitlines()[-1] == f"3 records; more with --after {last_id} (or --all)"

    assert (
        _records(cli, gateway, "--run", run_id, "--limit", "3", "--after", str(last_id))
        == (every[3:])
    )
    assert _records(cli, gateway, "--run", run_id, "--limit", "1", "--all") == every
    assert _records(cli, gateway, "--run", run_id, "--limit", "2", "--all") == every


def test_a_key_that_is_not_admin(cli: CliRunner, gateway: LiveServer) -> None:
    out = cli.invoke(app, ["audit"], env=_env(gateway, key=ALICE))

    assert out.exit_code == 1
    assert "admin key" in _one_error_line(out.stderr)
    assert ALICE not in out.output


def test_an_unreachable_gateway(cli: CliRunner) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    out = cli.invoke(app, ["audit", "--url", url])

    assert out.exit_code == 1
    assert _one_error_line(out.stderr) == (
        f"Error: Cannot reach the gateway at {url}: is `toolwire serve` running? "
        "(set --url or TOOLWIRE_URL)"
    )


def test_a_bad_time_is_a_usage_error(cli: CliRunner, gateway: LiveServer) -> None:
    out = cli.invoke(app, ["audit", "--since", "yesterday"], env=_env(gateway))

    assert out.exit_code == 2
    line = _one_error_line(out.stderr)
    assert "--since 'yesterday' is not a time" in line


# --- parse_time -----------------------------------------------------------------------------

NOW = 1_750_000_000.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1735689600", 1735689600.0),
        ("1735689600.5", 1735689600.5),
        ("2025-01-01T00:00:00Z", 1735689600.0),
        ("2025-01-01T01:00:00+01:00", 1735689600.0),
        ("90s", NOW - 90),
        ("15m", NOW - 900),
        ("2h", NOW - 7200),
        ("7d", NOW - 7 * 86400),
        ("1w", NOW - 7 * 86400),
        (" 2H ", NOW - 7200),
    ],
)
def test_parse_time(text: str, expected: float) -> None:
    assert parse_time(text, "--since", NOW) == expected


def test_parse_time_without_an_offset_is_local_time() -> None:
    local = datetime(2025, 3, 1, 12, 30).astimezone()
    assert parse_time("2025-03-01T12:30", "--since", NOW) == local.timestamp()
    assert parse_time("2025-03-01", "--since", NOW) == datetime(2025, 3, 1).astimezone().timestamp()


@pytest.mark.parametrize("text", ["yesterday", "", "nan", "inf", "5 parsecs", "2025-13-01"])
def test_parse_time_refuses(text: str) -> None:
    with pytest.raises(CliError, match="is not a time"):
        parse_time(text, "--until", NOW)


def test_parse_time_utc_example() -> None:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    assert parse_time(moment.isoformat(), "--since", NOW) == moment.timestamp()
