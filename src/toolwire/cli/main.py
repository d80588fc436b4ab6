"""The `toolwire` command; each sub-command lives in its own module."""

from __future__ import annotations

import logging
import os
import sys
from typing import Annotated

import typer

from toolwire.cli import (
    approvals_cmd,
    audit_cmd,
    chat_cmd,
    mcp_cmd,
    parse_cmd,
    runs_cmd,
    serve_cmd,
    store_cmd,
    tools_cmd,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="toolwire",
    help="A tool-calling runtime and OpenAI-compatible gateway for LLM assistants.",
    no_args_is_help=True,
    # Errors the user can fix are printed as one line; a traceback here would be a bug.
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"toolwire {version('toolwire')}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log what the runner does, tracebacks included.")
    ] = False,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            "-c",
            help="The gateway config for the commands that read one (serve, check); the "
            "same as the command's own --config.",
        ),
    ] = None,
) -> None:
    if config is not None:
        # `discover_config` reads it: the command's own --config still wins.
        os.environ["TOOLWIRE_CONFIG"] = config
    logger = logging.getLogger("toolwire")
    saved = (logger.level, logger.propagate)
    if verbose:
        from rich.logging import RichHandler

        handler: logging.Handler = RichHandler(show_path=False)
        logger.setLevel(logging.DEBUG)
    else:
        # A tool that raises is reported as its error result; its traceback is for --verbose.
        handler = logging.NullHandler()
        logger.propagate = False
    logger.addHandler(handler)

    def restore() -> None:
        # Leave logging as it was for whoever runs the app in-process (tests, embedding).
        logger.removeHandler(handler)
        logger.level, logger.propagate = saved

    ctx.call_on_close(restore)


app.command("chat")(chat_cmd.chat)
app.add_typer(tools_cmd.app, name="tools")
app.command("parse")(parse_cmd.parse)
app.command("serve")(serve_cmd.serve)
app.command("check")(serve_cmd.check)
app.add_typer(approvals_cmd.app, name="approvals")
app.add_typer(runs_cmd.app, name="runs")
app.command("audit")(audit_cmd.audit)
app.add_typer(mcp_cmd.app, name="mcp")
app.add_typer(store_cmd.app, name="store")


_GLOBAL_FLAGS = frozenset({"-v", "--verbose", "--version"})


def hoist_global_flags(argv: list[str]) -> list[str]:
    """`argv` with the global flags (`-v`, `--version`) moved before the sub-command, so
    `toolwire serve -v` works like `toolwire -v serve` (no sub-command has flags of those
    names). Nothing after a `--` is touched."""
    end = argv.index("--") if "--" in argv else len(argv)
    flags = [a for a in argv[:end] if a in _GLOBAL_FLAGS]
    rest = [a for a in argv[:end] if a not in _GLOBAL_FLAGS]
    return [*flags, *rest, *argv[end:]]


def main() -> None:
    """Entry point of the `toolwire` script."""
    app(args=hoist_global_flags(sys.argv[1:]))


if __name__ == "__main__":
    main()
