"""`toolwire tools list` and `toolwire tools call`."""

from __future__ import annotations

import asyncio
import dataclasses
import getpass
import sys
import uuid
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console, Group
from rich.json import JSON
from rich.panel import Panel
from rich.text import Text

from toolwire.cli._common import (
    TOOLS_OPTION_HELP,
    CliError,
    exit_with,
    load_tools,
    stderr_console,
)
from toolwire.cli.chat_cmd import console_approver
from toolwire.cli.render import Waiting
from toolwire.runner import Policy, ToolRunner
from toolwire.store import StoreError, default_store_url, open_store
from toolwire.tools import Tool, ToolCall, ToolContext, ToolProvider, ToolResult, new_call_id

__all__ = ["app"]

app = typer.Typer(help="List the available tools, or run one.", no_args_is_help=True)

ToolsOption = Annotated[list[str] | None, typer.Option("--tools", help=TOOLS_OPTION_HELP)]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


@app.command("list")
def list_tools(tools: ToolsOption = None, as_json: JsonOption = False) -> None:
    """Print each tool with its description, effects and JSON Schema."""
    provider = _load(tools)
    listed = asyncio.run(provider.list_tools())
    if as_json:
        _write_json([_describe(t) for t in listed])
        return
    console = Console(highlight=False)
    if not listed:
        console.print("No tools found.")
        return
    for t in listed:
        title = Text.assemble(
            (t.name, "bold cyan"), ("  ", ""), (t.effects, _EFFECT_STYLE[t.effects])
        )
        if t.scopes:
            title.append(f"  scopes: {', '.join(t.scopes)}", style="dim")
        body = Group(
            Text(t.description or "(no description)"),
            JSON.from_data(t.input_schema, indent=2),
        )
        console.print(Panel(body, title=title, title_align="left", expand=False))


@app.command("call")
def call_tool(
    name: Annotated[str, typer.Argument(help="The tool to run.")],
    arguments: Annotated[
        str, typer.Argument(help='Its arguments as a JSON object, e.g. \'{"city": "Lisbon"}\'.')
    ] = "{}",
    tools: ToolsOption = None,
    as_json: JsonOption = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Run a destructive tool without asking.")
    ] = False,
    audit: Annotated[
        bool,
        typer.Option(
            "--audit/--no-audit",
            help="Record the call in the audit log of the store ($TOOLWIRE_STORE, else the "
            "SQLite file in the user's state directory).",
        ),
    ] = True,
) -> None:
    """Run one tool through the runner (validation, approval, timeout, redaction) and print
    its ToolResult. Exits with status 1 when the result is an error."""
    provider = _load(tools)
    console = Console(highlight=False)
    try:
        result = asyncio.run(_call(provider, name, arguments, console, yes=yes, audit=audit))
    except StoreError as exc:
        raise exit_with(
            f"The audit log cannot be written ({exc}); the tool was not run. Fix the store "
            "or pass --no-audit.",
            code=1,
        ) from None
    if result.error is not None and result.error.code == "awaiting_approval":
        # No terminal to ask on (a pipe, a script): say how to approve, not "denied".
        raise exit_with(
            f"{name} is a destructive tool and needs approval; there is no terminal to ask "
            "on, so it was not run. Run the command again with --yes to approve this call.",
            code=3,
        )
    if as_json:
        data = dataclasses.asdict(result)
        if result.error is not None:
            # The error reads as its message in Python; in JSON it keeps its code too.
            data["error"] = {"code": result.error.code, "message": result.error.message}
        _write_json(data)
    else:
        _print_result(console, result)
    if not result.success:
        raise typer.Exit(1)


async def _call(
    provider: ToolProvider,
    name: str,
    arguments: str,
    console: Console,
    *,
    yes: bool,
    audit: bool,
) -> ToolResult:
    # On standard error: standard output may be JSON read by a program.
    waiting = Waiting(stderr_console())
    store = open_store(default_store_url()) if audit else None
    if store is not None:
        await store.open()
    try:
        runner = ToolRunner(
            provider,
            policy=Policy(approval="auto" if yes else "ask"),
            # Without a terminal the call waits for an approval nobody can give here; the
            # command then says how to give it (--yes).
            approver=(
                console_approver(console, input, waiting) if sys.stdin.isatty() else _undecided
            ),
            audit=store,
        )
        ctx = ToolContext(principal=_local_user(), run_id="cli_" + uuid.uuid4().hex)
        waiting.show(f"running {name}…")
        return await runner.exec(ToolCall(id=new_call_id(), name=name, arguments=arguments), ctx)
    finally:
        waiting.hide()
        if store is not None:
            await store.aclose()


def _local_user() -> str | None:
    # Who ran it, for the audit log: the local account name.
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


async def _undecided(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
    return None


def _print_result(console: Console, result: ToolResult) -> None:
    header = Text()
    if result.success:
        header.append("✓ ", style="bold green")
        header.append(result.name, style="bold cyan")
        header.append(" succeeded", style="green")
    else:
        assert result.error is not None
        header.append("✗ ", style="bold red")
        header.append(result.name, style="bold cyan")
        header.append(f" failed: {result.error.code}", style="bold red")
    header.append(f"  ({result.duration_ms:.1f} ms, call {result.call_id})", style="dim")
    console.print(header)
    if result.success:
        if isinstance(result.result, str):
            console.print(Text(result.result))
        else:
            console.print(JSON.from_data(result.result, indent=2, default=str))
    else:
        assert result.error is not None
        console.print(Text(result.error.message, style="red"))
    if result.repaired:
        console.print(Text("repaired arguments: " + "; ".join(result.repaired), style="dim"))


_EFFECT_STYLE = {"read": "green", "write": "yellow", "destructive": "bold red"}


def _describe(t: Tool) -> dict[str, Any]:
    return {
        "name": t.name,
        "description": t.description,
        "effects": t.effects,
        "parameters": t.input_schema,
        "scopes": list(t.scopes),
    }


def _write_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


def _load(modules: list[str] | None) -> ToolProvider:
    try:
        return load_tools(modules or [])
    except CliError as exc:
        raise exit_with(exc) from None
