"""`toolwire chat` and `toolwire tools`, in-process through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes.openai_server import FakeOpenAIServer, completion, delta, error, sse, tool_call
from toolwire.cli.main import app


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for var in ("TOOLWIRE_BASE_URL", "TOOLWIRE_MODEL", "TOOLWIRE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return CliRunner()


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with notes/groceries.txt, for the sample tools."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "groceries.txt").write_text("eggs")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "notes"


# --- chat, offline ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_chat_offline_demo(cli: CliRunner, stream: str) -> None:
    out = cli.invoke(app, ["chat", stream, "What's the weather in Lisbon?"])
    assert out.exit_code == 0, out.output
    text = out.output
    assert "offline stand-in model" in text
    assert "--base-url" in text
    assert "TOOLWIRE_API_KEY" in text
    assert '→ get_weather(city="Lisbon")' in text
    assert "✓ get_weather:" in text
    assert "demo data" in text
    # The answer comes after the tool lines.
    assert text.rindex("Lisbon") > text.index("✓ get_weather:")
    assert "Traceback" not in text


def test_chat_offline_with_two_tools(cli: CliRunner) -> None:
    out = cli.invoke(app, ["chat", "What is 17 * 23?"])
    assert out.exit_code == 0, out.output
    assert '→ calculate(expression="17 * 23")' in out.output
    assert "391" in out.output


def test_chat_with_user_tools_and_a_denied_destructive_call(cli: CliRunner, notes: Path) -> None:
    # No terminal to ask: the destructive call is refused, and the model is told so.
    out = cli.invoke(
        app, ["chat", "--tools", "sample_tools", "delete the note 'groceries'"], input=""
    )
    assert out.exit_code == 0, out.output
    assert '→ delete_note(title="groceries")' in out.output
    assert "? [y/N]" in out.output
    assert "✗ delete_note failed, denied" in out.output
    assert (notes / "groceries.txt").exists()


def test_chat_yes_runs_destructive_tools(cli: CliRunner, notes: Path) -> None:
    out = cli.invoke(
        app, ["chat", "--yes", "--tools", "sample_tools", "delete the note 'groceries'"]
    )
    assert out.exit_code == 0, out.output
    assert "[y/N]" not in out.output
    assert "✓ delete_note: Deleted the note 'groceries'." in out.output
    assert not (notes / "groceries.txt").exists()


def test_chat_tool_error_is_shown_and_the_run_goes_on(cli: CliRunner) -> None:
    out = cli.invoke(app, ["chat", "--tools", "sample_tools", "crash"])
    assert out.exit_code == 0, out.output
    assert "✗ crash failed, execution_error" in out.output
    assert "Traceback" not in out.output
    assert "disk on fire" not in out.output  # the exception text stays out of the model's view


def test_chat_banner_goes_to_stderr_and_the_transcript_to_stdout(cli: CliRunner) -> None:
    out = cli.invoke(app, ["chat", "What's the weather in Lisbon?"])
    assert out.exit_code == 0, out.output
    assert "offline stand-in model" in out.stderr
    assert "offline stand-in model" not in out.stdout
    assert '→ get_weather(city="Lisbon")' in out.stdout
    assert "Lisbon" in out.stdout.splitlines()[-1]


def test_no_progress_spinner_when_output_is_not_a_terminal(cli: CliRunner) -> None:
    out = cli.invoke(app, ["chat", "--tools", "sample_tools", "build the slow report in 0.2 s"])
    assert out.exit_code == 0, out.output
    assert "running slow_report" not in out.output
    assert "\x1b" not in out.output


def test_chat_quiet_prints_only_the_answer(cli: CliRunner) -> None:
    out = cli.invoke(app, ["chat", "--quiet", "What's the weather in Lisbon?"])
    assert out.exit_code == 0, out.output
    assert out.stderr == ""
    assert "→ get_weather" not in out.stdout
    assert "✓" not in out.stdout
    assert "Lisbon" in out.stdout
    assert len(out.stdout.strip().splitlines()) == 1


def test_chat_piped_prints_results_whole_on_one_line(cli: CliRunner) -> None:
    import sample_tools

    out = cli.invoke(app, ["chat", "--tools", "sample_tools", "show the product catalog"])
    assert out.exit_code == 0, out.output
    whole = json.dumps(sample_tools.product_catalog(), ensure_ascii=False)
    assert len(whole) > 2000
    [line] = [ln for ln in out.stdout.splitlines() if "✓ product_catalog:" in ln]
    assert line.endswith(whole)  # not wrapped at 80 columns, not cut at 400 characters


# --- chat, a real endpoint (a fake OpenAI-compatible server on loopback) -------------------


def test_chat_against_an_endpoint_without_streaming(
    cli: CliRunner, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        completion(tool_calls=[tool_call("get_weather", {"city": "Porto"}, id="call_w")]),
        completion("It is windy in Porto."),
    )
    out = cli.invoke(
        app,
        [
            *["chat", "--no-stream", "--base-url", openai_server.base_url],
            *["--model", "fake-model", "Weather in Porto?"],
        ],
        env={"TOOLWIRE_API_KEY": "sk-test"},
    )
    assert out.exit_code == 0, out.output
    assert "offline" not in out.output
    assert '→ get_weather(city="Porto")' in out.output
    assert "✓ get_weather:" in out.output
    assert "It is windy in Porto." in out.output
    first, second = openai_server.requests
    assert first.headers["authorization"] == "Bearer sk-test"
    assert first.json["model"] == "fake-model"
    assert not first.json.get("stream")
    assert {t["function"]["name"] for t in first.json["tools"]} == {
        "get_current_time",
        "get_weather",
        "calculate",
    }
    tool_msg = second.json["messages"][-1]
    assert tool_msg["role"] == "tool"
    assert tool_msg["tool_call_id"] == "call_w"
    assert "Porto" in tool_msg["content"]


def test_chat_against_an_endpoint_streaming_from_env(
    cli: CliRunner, openai_server: FakeOpenAIServer
) -> None:
    call_start = {
        "index": 0,
        "id": "call_s",
        "type": "function",
        "function": {"name": "calculate", "arguments": '{"expres'},
    }
    call_rest = {"index": 0, "function": {"arguments": 'sion": "2 + 2"}'}}
    openai_server.reply(
        sse(
            [
                delta(tool_calls=[call_start]),
                delta(tool_calls=[call_rest], finish_reason="tool_calls"),
            ]
        ),
        sse([delta("The answer "), delta("is 4."), delta(finish_reason="stop")]),
    )
    out = cli.invoke(
        app,
        ["chat", "2 + 2?"],
        env={"TOOLWIRE_BASE_URL": openai_server.base_url, "TOOLWIRE_MODEL": "fake-model"},
    )
    assert out.exit_code == 0, out.output
    assert '→ calculate(expression="2 + 2")' in out.output
    assert "The answer is 4." in out.output
    assert openai_server.requests[0].json["stream"] is True


def test_unreachable_endpoint_is_one_readable_line(cli: CliRunner) -> None:
    out = cli.invoke(app, ["chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "hi"])
    assert out.exit_code == 1
    errors = [line for line in out.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1
    assert "127.0.0.1:9" in errors[0]
    assert "Traceback" not in out.output


def test_failing_endpoint_is_one_readable_line(
    cli: CliRunner, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(error(401, "Incorrect API key provided."))
    out = cli.invoke(
        app, ["chat", "--base-url", openai_server.base_url, "--model", "fake-model", "hi"]
    )
    assert out.exit_code == 1
    errors = [line for line in out.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1
    assert "Incorrect API key" in errors[0]
    assert "Traceback" not in out.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "gpt-x"], "needs --base-url"),
        (["--base-url", "http://127.0.0.1:9/v1"], "needs --model"),
    ],
)
def test_incomplete_model_options(cli: CliRunner, args: list[str], needle: str) -> None:
    out = cli.invoke(app, ["chat", *args, "hi"])
    assert out.exit_code == 2
    assert needle in out.output


# --- bad tool modules ---------------------------------------------------------------------


def write_module(tmp_path: Path, name: str, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("source", "needles"),
    [
        ("import not_a_real_package_xyz\n", ["ModuleNotFoundError", "not_a_real_package_xyz"]),
        ("def broken(:\n", ["SyntaxError"]),
        ("raise RuntimeError('config missing')\n", ["RuntimeError", "config missing"]),
    ],
)
@pytest.mark.parametrize("command", [["chat", "hi"], ["tools", "list"]])
def test_tool_module_that_fails_to_import(
    cli: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    needles: list[str],
    command: list[str],
) -> None:
    name = f"badtools_{abs(hash((source, tuple(command))))}"
    write_module(tmp_path, name, source, monkeypatch)
    out = cli.invoke(app, [*command, "--tools", name])
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 1, out.output
    assert lines[0].startswith("Error: Could not import tool module")
    assert name in lines[0]
    for needle in needles:
        assert needle in lines[0]
    assert "Traceback" not in out.output


def test_tool_module_with_an_unsupported_annotation(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (
        "import socket\nfrom toolwire import tool\n\n"
        "@tool\ndef connect(sock: socket.socket) -> str:\n    '''Connect.'''\n    return ''\n"
    )
    write_module(tmp_path, "annotated_tools", source, monkeypatch)
    out = cli.invoke(app, ["tools", "list", "--tools", "annotated_tools"])
    assert out.exit_code == 2
    assert "sock" in out.output
    assert "Traceback" not in out.output


def test_duplicate_tool_names_across_modules(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (
        "from toolwire import tool\n\n"
        "@tool\ndef add(a: int) -> int:\n    '''Add.'''\n    return a\n"
    )
    write_module(tmp_path, "more_tools", source, monkeypatch)
    out = cli.invoke(app, ["tools", "list", "--tools", "sample_tools", "--tools", "more_tools"])
    assert out.exit_code == 2
    assert "Duplicate tool name 'add'" in out.output


# --- tools list / call --------------------------------------------------------------------


def test_tools_list_demo(cli: CliRunner) -> None:
    out = cli.invoke(app, ["tools", "list"])
    assert out.exit_code == 0, out.output
    for name in ("get_current_time", "get_weather", "calculate"):
        assert name in out.output
    assert '"properties"' in out.output


def test_tools_list_json(cli: CliRunner) -> None:
    out = cli.invoke(app, ["tools", "list", "--json", "--tools", "sample_tools"])
    assert out.exit_code == 0, out.output
    listed = {t["name"]: t for t in json.loads(out.output)}
    assert set(listed) == {
        "list_notes",
        "delete_note",
        "add",
        "crash",
        "product_catalog",
        "slow_report",
    }
    assert listed["delete_note"]["effects"] == "destructive"
    assert listed["add"]["parameters"]["required"] == ["a", "b"]
    assert listed["add"]["parameters"]["properties"]["a"]["description"] == "The first number."


def test_tools_call_success(cli: CliRunner) -> None:
    out = cli.invoke(app, ["tools", "call", "add", '{"a": 2, "b": "3"}', "--tools", "sample_tools"])
    assert out.exit_code == 0, out.output
    assert "✓ add succeeded" in out.output
    assert "5" in out.output
    assert "repaired" in out.output


def test_tools_call_json_output(cli: CliRunner) -> None:
    out = cli.invoke(app, ["tools", "call", "calculate", '{"expression": "6 * 7"}', "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["success"] is True
    assert result["name"] == "calculate"
    assert result["result"]["result"] == 42
    assert result["call_id"].startswith("call_")


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["add", '{"a": 1'], "invalid_json"),
        (["add", "[1, 2]"], "invalid_"),
        (["add", '{"a": 1}'], "invalid_arguments"),
        (["nope"], "unknown_tool"),
        (["crash"], "execution_error"),
    ],
)
def test_tools_call_error_results_exit_non_zero(cli: CliRunner, args: list[str], code: str) -> None:
    out = cli.invoke(app, ["tools", "call", *args, "--tools", "sample_tools"])
    assert out.exit_code == 1, out.output
    assert "✗" in out.output
    assert f"failed: {code}" in out.output
    assert "Traceback" not in out.output


def test_tools_call_json_error(cli: CliRunner) -> None:
    out = cli.invoke(app, ["tools", "call", "nope", "--json"])
    assert out.exit_code == 1
    result = json.loads(out.output)
    assert result["success"] is False
    assert result["error"]["code"] == "unknown_tool"
    assert "get_weather" in result["error"]["message"]


def test_tools_call_destructive_needs_yes_without_a_terminal(cli: CliRunner, notes: Path) -> None:
    args = ["tools", "call", "delete_note", '{"title": "groceries"}', "--tools", "sample_tools"]
    out = cli.invoke(app, args)
    assert out.exit_code == 3
    assert "needs approval" in out.output
    assert "--yes" in out.output
    assert "denied" not in out.output
    assert (notes / "groceries.txt").exists()
    out = cli.invoke(app, [*args, "--yes"])
    assert out.exit_code == 0, out.output
    assert not (notes / "groceries.txt").exists()


def test_help_lists_the_commands(cli: CliRunner) -> None:
    out = cli.invoke(app, ["--help"])
    assert out.exit_code == 0
    assert "chat" in out.output
    assert "tools" in out.output


def test_tools_call_writes_the_audit_log(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from toolwire.store import AuditQuery, open_store

    url = f"sqlite:///{tmp_path / 'state.db'}"
    monkeypatch.setenv("TOOLWIRE_STORE", url)
    out = cli.invoke(app, ["tools", "call", "calculate", '{"expression": "6 * 7"}'])
    assert out.exit_code == 0, out.output

    async def read() -> list[tuple[str, str, str | None, dict[str, object] | None]]:
        store = open_store(url)
        await store.open()
        try:
            return [
                (r.event, r.tool, r.outcome, r.arguments)
                for r in await store.list_audit(AuditQuery())
            ]
        finally:
            await store.aclose()

    assert asyncio.run(read()) == [("finished", "calculate", "ok", {"expression": "6 * 7"})]


def test_tools_call_refuses_to_run_unaudited_when_the_store_is_broken(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "state.db"
    broken.write_text("not a database\n" * 50)
    monkeypatch.setenv("TOOLWIRE_STORE", f"sqlite:///{broken}")
    out = cli.invoke(app, ["tools", "call", "calculate", '{"expression": "1"}'])
    assert out.exit_code == 1
    assert "--no-audit" in out.output
    ok = cli.invoke(app, ["tools", "call", "calculate", '{"expression": "1"}', "--no-audit"])
    assert ok.exit_code == 0, ok.output
