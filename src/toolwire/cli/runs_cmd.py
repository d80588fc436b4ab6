"""`toolwire runs show | resume`: a gateway's durable runs, and going on with a paused one.

A run paused for approval (`toolwire approvals ...`) is continued with `runs resume` once
every approval is decided; the answer is printed as the run goes on from there.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolwire.agent.state import result_from_json
from toolwire.cli._gateway import (
    DEFAULT_URL,
    JsonOption,
    KeyOption,
    UrlOption,
    call_text,
    clip,
    connect,
    format_time,
    path_segment,
    relative,
    write_json,
)
from toolwire.cli.render import format_arguments, format_result

__all__ = ["app", "run_details"]

app = typer.Typer(help="Inspect a gateway's runs, and resume one paused for approval.")

RunArgument = Annotated[str, typer.Argument(help="The run id (run_…).", show_default=False)]

_RESUME_TIMEOUT: Final = 600.0
"""Seconds a resume may take: the approved tools run, then the model answers."""

_STATUS_STYLE: Final = {
    "completed": "bold green",
    "awaiting_approval": "bold yellow",
    "client_tool_calls": "cyan",
    "running": "blue",
    "interrupted": "bold red",
    "error": "bold red",
    "max_iterations": "yellow",
}


@app.command("show")
def show_run(
    run_id: RunArgument,
    as_json: JsonOption = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Show a run: its status, its steps (model turns, tool calls, results) and what it
    waits for."""
    with connect(url, key) as gateway:
        run = gateway.get(f"/v1/runs/{path_segment(run_id)}")
    if as_json:
        write_json(run)
        return
    console = Console(highlight=False, soft_wrap=True)
    console.print(run_details(run))
    steps = run.get("steps") or []
    if steps:
        console.print()
        console.print(Text("Steps", style="bold"))
        for n, step in enumerate(steps, 1):
            _print_step(console, n, step)
    pending = run.get("pending_approvals") or []
    if pending and run.get("status") == "awaiting_approval":
        console.print()
        _print_pending(console, pending)
        console.print(
            Text(
                f"Decide each with toolwire approvals approve|deny ID, then: "
                f"toolwire runs resume {run.get('id', run_id)}",
                style="dim",
            )
        )
    elif run.get("output") and run.get("status") != "awaiting_approval":
        console.print()
        console.print(Text("Output", style="bold"))
        console.print(Text(str(run["output"])))


def run_details(run: dict[str, Any], now: float | None = None) -> Table:
    """A run's header, field by field."""
    now = time.time() if now is None else now
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    status = str(run.get("status"))
    grid.add_row("Run", str(run.get("id")))
    grid.add_row("Status", Text(status, style=_STATUS_STYLE.get(status, "")))
    grid.add_row("Model", str(run.get("model") or "—"))
    grid.add_row("Owner", str(run.get("owner") or "—"))
    for label, field in (("Created", "created_at"), ("Updated", "updated_at")):
        stamp = run.get(field)
        if isinstance(stamp, int | float) and stamp > 0:
            grid.add_row(label, f"{format_time(stamp)} ({relative(stamp, now)})")
    return grid


def _print_step(console: Console, n: int, step: dict[str, Any]) -> None:
    content = step.get("content")
    head = Text(f"{n:>2}. ", style="dim")
    head.append(clip(content, 200) if content else "(no text)", style="" if content else "dim")
    console.print(head)
    results = {r.get("call_id"): r for r in step.get("tool_results") or []}
    for call in step.get("tool_calls") or []:
        line = Text("    → ", style="cyan")
        line.append_text(format_arguments(str(call.get("name")), str(call.get("arguments", ""))))
        console.print(line)
        result = results.get(call.get("id"))
        if result is None:
            console.print(Text("      (no result yet)", style="dim"))
        else:
            console.print(Text("    ").append_text(_result_text(result)))


def _result_text(result: dict[str, Any]) -> Text:
    """A result as `toolwire chat` shows it; its raw JSON if its shape is unexpected."""
    error = result.get("error")
    if isinstance(error, dict) and error.get("code") == "awaiting_approval":
        # Not a failure: the call is held until a person decides.
        return Text.assemble("  ⏸ ", (str(result.get("name")), "cyan"), " waits for approval")
    try:
        return format_result(result_from_json(result))
    except (KeyError, TypeError, ValueError):
        return Text("  " + clip(str(result), 200))


def _print_pending(console: Console, pending: list[dict[str, Any]]) -> None:
    console.print(Text("Waiting for approval", style="bold yellow"))
    for approval in pending:
        line = Text("  ")
        line.append(str(approval.get("id")))
        line.append("  ")
        name = approval.get("tool") or approval.get("name")
        line.append_text(call_text(name, approval.get("arguments"), 80))
        if approval.get("approver"):
            line.append(f"  (approver: {approval['approver']})", style="dim")
        console.print(line)


def _door_text(answer: dict[str, Any]) -> str:
    """The text of a resume answered as a Messages message or a Responses response (a run
    resumes in the protocol of the door it started on)."""
    if answer.get("type") == "message":
        blocks = answer.get("content") or []
        return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    if answer.get("object") == "response":
        parts = [
            part.get("text", "")
            for item in answer.get("output") or []
            if item.get("type") == "message"
            for part in item.get("content") or []
            if part.get("type") == "output_text"
        ]
        return "".join(parts)
    return ""


@app.command("resume")
def resume_run(
    run_id: RunArgument,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the whole answer as JSON, in its door's protocol.")
    ] = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Go on with a run whose approvals are all decided, and print its answer."""
    with connect(url, key, timeout=_RESUME_TIMEOUT) as gateway:
        completion = gateway.post(
            f"/v1/runs/{path_segment(run_id)}/resume",
            {"stream": False},
            timeout=_RESUME_TIMEOUT,
        )
    if as_json:
        write_json(completion)
        return
    console = Console(highlight=False, soft_wrap=True)
    extension = completion.get("toolwire") or {}
    for call in extension.get("tool_calls") or []:
        line = Text("→ ", style="cyan")
        line.append_text(format_arguments(str(call.get("name")), str(call.get("arguments", ""))))
        console.print(line)
        if isinstance(call.get("result"), dict):
            console.print(_result_text(call["result"]))
    choices = completion.get("choices") or [{}]
    message = choices[0].get("message") or {}
    if extension.get("tool_calls"):
        console.print()
    content = message.get("content") or _door_text(completion)
    if content:
        console.print(Text(str(content)))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        line = Text("→ client tool ", style="yellow")
        line.append_text(
            format_arguments(str(function.get("name")), str(function.get("arguments", "")))
        )
        console.print(line)
    status = extension.get("status")
    if status == "awaiting_approval":
        console.print()
        _print_pending(console, extension.get("pending_approvals") or [])
        console.print(
            Text(
                f"Decide each with toolwire approvals approve|deny ID, then run this again: "
                f"toolwire runs resume {extension.get('run_id', run_id)}",
                style="dim",
            )
        )
    elif status == "client_tool_calls":
        console.print(
            Text(
                "The model asked for client tools: only the client that started the run can "
                "answer them.",
                style="dim",
            )
        )
