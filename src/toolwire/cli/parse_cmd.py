"""`toolwire parse`: run a model's raw output through the parser, for debugging a model."""

from __future__ import annotations

import codecs
import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from toolwire.cli._common import exit_with
from toolwire.parsing import (
    FORMATS,
    ParseEvent,
    UnknownFormatError,
    format_for,
    match_format,
    parse_output,
    parser_for,
)

__all__ = ["parse"]

_CHUNK = 65536


def parse(
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Model id that wrote the output; picks the format."),
    ] = None,
    format: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", help=f"Format name instead of the model's: {', '.join(FORMATS)}."
        ),
    ] = None,
    stream: Annotated[
        bool,
        typer.Option("--stream", help="Feed stdin as it arrives; print the events as JSON lines."),
    ] = False,
    prompt_suffix: Annotated[
        str,
        typer.Option(
            "--prompt-suffix", help="End of the generation prompt, e.g. a pre-filled '<think>\\n'."
        ),
    ] = "",
    truncated: Annotated[
        bool, typer.Option("--truncated", help="The output was cut off by max_tokens.")
    ] = False,
    tool_specs: Annotated[
        Path | None,
        typer.Option(
            "--tool-specs",
            help="JSON file with the tools offered (OpenAI `tools` list); some formats type "
            "argument values by their schema.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Read raw model output on stdin; print content, reasoning and tool calls as JSON.

    Give the model id (`--model`) or the format (`--format`).
    """
    listed = ", ".join(FORMATS)
    if model is None and format is None:
        raise exit_with(f"Give --model <model id> or --format <format>; the formats: {listed}.")
    if format is None and model is not None and match_format(model) is None:
        raise exit_with(
            f"No parser format is known for the model {model!r}; name one with --format: {listed}."
        )
    try:
        name = format_for(model or "", format=format)
    except UnknownFormatError as e:
        raise exit_with(str(e)) from None
    model = model or name
    tools = _load_specs(tool_specs) if tool_specs else None
    if stream:
        parser = parser_for(model, tools, format=name, prompt_suffix=prompt_suffix)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while chunk := _read_chunk():
            _print_events(parser.feed(decoder.decode(chunk)))
        _print_events(parser.feed(decoder.decode(b"", final=True)))
        _print_events(parser.finish(truncated=truncated))
        return
    text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    result = parse_output(
        text, model, tools, format=name, prompt_suffix=prompt_suffix, truncated=truncated
    )
    payload = {"format": name, **dataclasses.asdict(result)}
    sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")


def _read_chunk() -> bytes:
    # read1 returns whatever has arrived (one read), so events follow a live pipe.
    buffer: Any = sys.stdin.buffer
    return bytes(buffer.read1(_CHUNK) if hasattr(buffer, "read1") else buffer.read(_CHUNK))


def _print_events(events: list[ParseEvent]) -> None:
    for event in events:
        fields = dataclasses.asdict(event)
        line = {"type": fields.pop("type"), **fields}  # the tag first, for people reading it
        sys.stdout.write(orjson.dumps(line).decode() + "\n")
    if events:
        sys.stdout.flush()


def _load_specs(path: Path) -> list[dict[str, Any]]:
    try:
        specs = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise exit_with(f"{path} is not valid JSON ({e}); give a list of tools.") from None
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise exit_with(f"{path} must hold a JSON list of tool objects (OpenAI `tools` form).")
    return specs
