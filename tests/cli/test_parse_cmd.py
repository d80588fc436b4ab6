"""`toolwire parse`: raw output on stdin, the parse (or its events) as JSON on stdout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from toolwire.cli.main import app
from toolwire.parsing import FORMATS

RAW = (
    '<think>plan</think>Checking.\n<tool_call>{"name": "w", "arguments": {"c": "Oslo"}}</tool_call>'
)


def _run(args: list[str], stdin: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["parse", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_prints_the_parsed_result_as_json() -> None:
    code, out, _ = _run(["--model", "Qwen/Qwen3-8B"], RAW)
    assert code == 0
    parsed = json.loads(out)
    assert parsed["format"] == "hermes"
    assert (parsed["content"], parsed["reasoning"]) == ("Checking.", "plan")
    [call] = parsed["tool_calls"]
    assert (call["name"], call["arguments"], call["arguments_json"]) == (
        "w",
        {"c": "Oslo"},
        '{"c":"Oslo"}',
    )


def test_stream_prints_one_event_per_line() -> None:
    code, out, _ = _run(["--model", "Qwen/Qwen3-8B", "--stream"], RAW)
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["type"] for e in events] == [
        "reasoning",
        "content",
        "tool_call_start",
        "tool_call_args",
    ]
    assert events[2]["name"] == "w"
    assert json.loads(events[3]["text"]) == {"c": "Oslo"}


def test_explicit_format_prompt_suffix_and_truncation() -> None:
    code, out, _ = _run(
        ["-m", "anything", "--format", "pre_json", "--prompt-suffix", "<think>\n"],
        'why</think><pre>{"name": "f"}</pre>',
    )
    assert code == 0
    parsed = json.loads(out)
    assert (parsed["format"], parsed["reasoning"]) == ("pre_json", "why")
    assert parsed["tool_calls"][0]["arguments"] == {}

    code, out, _ = _run(
        ["-m", "Qwen/Qwen3-8B", "--truncated"], '<tool_call>{"name": "f", "arguments": {"a'
    )
    assert (code, json.loads(out)["tool_calls"]) == (0, [])


def test_tool_specs_type_raw_argument_values(tmp_path: Path) -> None:
    specs = tmp_path / "tools.json"
    specs.write_text(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
                    },
                }
            ]
        )
    )
    raw = "<tool_call>\n<function=f>\n<parameter=n>\n42\n</parameter>\n</function>\n</tool_call>"
    code, out, _ = _run(["-m", "Qwen/Qwen3-Coder-30B-A3B", "--tool-specs", str(specs)], raw)
    assert code == 0
    assert json.loads(out)["tool_calls"][0]["arguments"] == {"n": 42}


def test_unknown_format_is_one_line_listing_the_formats() -> None:
    code, out, err = _run(["--model", "x", "--format", "nope"], "hello")
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "'nope'" in err
    assert all(name in err for name in FORMATS)


def test_bad_tool_specs_file_is_one_clear_line(tmp_path: Path) -> None:
    specs = tmp_path / "tools.json"
    specs.write_text('{"not": "a list"}')
    code, _, err = _run(["--format", "hermes", "--tool-specs", str(specs)], "hello")
    assert code == 2
    assert "list of tool objects" in err


def test_a_format_needs_no_model() -> None:
    code, out, _ = _run(
        ["--format", "hermes"], 'hi <tool_call>{"name": "a", "arguments": {}}</tool_call>'
    )
    assert code == 0
    assert '"name": "a"' in out


def test_an_unknown_model_is_an_error_listing_the_formats() -> None:
    code, out, err = _run(["--model", "my-own-finetune"], "hello")
    assert code == 2
    assert out == ""
    assert "'my-own-finetune'" in err
    assert "--format" in err
    assert all(name in err for name in FORMATS)


def test_neither_model_nor_format_is_an_error() -> None:
    code, _, err = _run([], "hello")
    assert code == 2
    assert "--model" in err
    assert "--format" in err


def test_installed_command_streams_from_a_real_pipe() -> None:
    script = Path(sys.executable).with_name("toolwire")
    proc = subprocess.run(
        [str(script), "parse", "--model", "Qwen/Qwen3-8B", "--stream"],
        input=RAW.encode(),
        capture_output=True,
        check=True,
        timeout=60,
    )
    types = [json.loads(line)["type"] for line in proc.stdout.decode().splitlines()]
    assert types[-2:] == ["tool_call_start", "tool_call_args"]
