"""`toolwire chat`: one question, or an interactive conversation, with tools."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from toolwire.agent import Agent, Done, ToolCallResult, ToolCallStart
from toolwire.cli._common import TOOLS_OPTION_HELP, CliError, exit_with, load_tools
from toolwire.cli.render import EventPrinter, Waiting, format_arguments
from toolwire.models import Message, Model, OfflineModel, OpenAIChatModel, UserMessage
from toolwire.runner import Approver, Policy
from toolwire.tools import Tool, ToolCall, ToolContext

__all__ = ["ChatSession", "chat", "console_approver", "offline_note", "select_model"]

ReadLine = Callable[[str], str]
"""Reads one line after showing a prompt, like `input`; raises `EOFError` at end of input."""


def offline_note() -> Text:
    """The plain statement that the stand-in model is in use, and how to use a real one."""
    return Text.assemble(
        ("Using the offline stand-in model", "bold yellow"),
        (
            " (deterministic, no network, not a real LLM: it picks tools by matching your "
            "words against their names and descriptions).\n",
            "yellow",
        ),
        (
            "To use a real model: toolwire chat --base-url URL --model NAME, with the API key "
            "in TOOLWIRE_API_KEY (or set TOOLWIRE_BASE_URL and TOOLWIRE_MODEL). Any "
            "OpenAI-compatible endpoint works: OpenAI, vLLM, Ollama, llama.cpp, LM Studio.",
            "dim",
        ),
    )


def select_model(base_url: str | None, model: str | None, api_key: str | None) -> Model:
    """`OpenAIChatModel` when a base URL is given, else the offline stand-in.

    Raises:
        CliError: A model name was given without a base URL, or the reverse.
    """
    if not base_url:
        if model:
            raise CliError(
                f"--model {model!r} needs --base-url (or TOOLWIRE_BASE_URL) naming the "
                "OpenAI-compatible endpoint that serves it."
            )
        return OfflineModel()
    if not model:
        raise CliError(
            f"--base-url {base_url} needs --model (or TOOLWIRE_MODEL): the model name the "
            "endpoint serves."
        )
    return OpenAIChatModel(base_url=base_url, api_key=api_key, model=model)


def console_approver(console: Console, read: ReadLine, waiting: Waiting | None = None) -> Approver:
    """An approver that asks the person at the terminal; anything but y/yes is a no.

    `waiting`: the spinner to hide before asking.
    """

    async def approve(call: ToolCall, tool: Tool, ctx: ToolContext) -> bool:
        if waiting is not None:
            waiting.hide()
        prompt = Text.assemble(
            ("Run destructive tool ", "bold yellow"), format_arguments(tool.name, call.arguments)
        )
        with console.capture() as capture:
            console.print(prompt, end="")
        try:
            # Blocking on purpose: nothing else should write to the terminal meanwhile.
            answer = read(f"{capture.get()}? [y/N] ")
        except EOFError:
            console.print(Text("(no answer: treated as no; --yes allows destructive tools)"))
            return False
        return answer.strip().lower() in ("y", "yes")

    return approve


COMMANDS: dict[str, str] = {
    "/help": "show these commands",
    "/tools": "list the tools the model may call",
    "/reset": "forget the conversation and start over",
    "/exit": "leave (also /quit, Ctrl-D or Ctrl-C)",
}
"""The lines `ChatSession` handles itself; they never reach the model."""

_COMMAND = re.compile(r"/[A-Za-z][\w-]*")


class ChatSession:
    """A conversation with an agent in a terminal, keeping the history between turns.

    Args:
        agent: The agent to talk to.
        console: Where the transcript goes (standard output).
        read: How a line of input is read (`input` by default; tests inject their own).
        stream: Whether the model is asked to stream its turns.
        notices: Where hints, command output and errors go (standard error), so that
            standard output holds only the transcript; `console` when not given.
        quiet: Print only the answers: no tool lines, no reasoning, no hints.
        waiting: The spinner shown while the model thinks or a tool runs (give the same
            one to `console_approver`); none when not given.
    """

    def __init__(
        self,
        agent: Agent,
        console: Console,
        read: ReadLine = input,
        *,
        stream: bool = True,
        notices: Console | None = None,
        quiet: bool = False,
        waiting: Waiting | None = None,
    ) -> None:
        self.waiting = waiting if waiting is not None else Waiting(console, enabled=False)
        self.agent = agent
        self.console = console
        self.read = read
        self.stream = stream
        self.notices = notices if notices is not None else console
        self.quiet = quiet
        self.messages: list[Message] = []

    async def send(self, text: str) -> Done:
        """Run one turn for the user's `text`, printing it as it goes."""
        printer = EventPrinter(
            self.console,
            errors=self.notices,
            quiet=self.quiet,
            # Piped output is read by programs: no wrapping, no clipping of results.
            full=not self.console.is_terminal,
        )
        done: Done | None = None
        waiting = self.waiting
        waiting.show("thinking…")
        try:
            async for event in self.agent.run_stream(
                [*self.messages, UserMessage(content=text)], stream=self.stream
            ):
                waiting.hide()
                printer(event)
                if isinstance(event, ToolCallStart):
                    waiting.show(f"running {event.name}…")
                elif isinstance(event, ToolCallResult):
                    waiting.show("thinking…")
                elif isinstance(event, Done):
                    done = event
        finally:
            waiting.hide()
        assert done is not None
        if done.error is None:
            self.messages = list(done.result.messages)
        return done

    def repl(self) -> None:
        """Read messages until end of input, Ctrl-C or /exit; one event loop for the session."""
        if not self.quiet:
            self.notices.print(
                Text("Type a message; /help lists the commands, /exit or Ctrl-D leaves.", "dim")
            )
        with asyncio.Runner() as runner:
            while True:
                try:
                    line = self.read("you> ").strip()
                except (EOFError, KeyboardInterrupt):
                    self.notices.print()
                    return
                if not line:
                    continue
                if _COMMAND.fullmatch(line.split(maxsplit=1)[0]):
                    if not runner.run(self.command(line)):
                        return
                    continue
                if line.startswith("//"):
                    line = line[1:]  # an escaped message that begins with "/"
                try:
                    runner.run(self.send(line))
                except KeyboardInterrupt:
                    self.notices.print(Text("\n(interrupted)", style="dim"))

    async def command(self, line: str) -> bool:
        """Handle a `/command` line locally; `False` means leave the conversation."""
        name = line.split(maxsplit=1)[0].lower()
        if name in ("/exit", "/quit"):
            return False
        if name == "/reset":
            self.messages = []
            self.notices.print(Text("(conversation cleared)", style="dim"))
        elif name == "/help":
            for command, meaning in COMMANDS.items():
                self.notices.print(Text.assemble((f"  {command:<8}", "bold"), meaning))
            self.notices.print(
                Text("  Start a message with // to send a line that begins with /.", "dim")
            )
        elif name == "/tools":
            await self._list_tools()
        else:
            self.notices.print(
                Text.assemble(
                    (f"Unknown command {name}", "yellow"),
                    f"; the commands are {', '.join(COMMANDS)}. Nothing was sent to the "
                    "model (start a message with // to send a line that begins with /).",
                )
            )
        return True

    async def _list_tools(self) -> None:
        tools = await self.agent.runner.list_tools()
        if not tools:
            self.notices.print(Text("No tools: the model can only answer in text.", "dim"))
            return
        for tool in sorted(tools, key=lambda t: t.name):
            summary = (tool.description or "").strip().splitlines()
            line = Text.assemble(("  " + tool.name, "bold cyan"))
            if tool.effects != "read":
                line.append(f" [{tool.effects}]", style="yellow")
            if summary:
                line.append(f"  {summary[0]}", style="dim")
            self.notices.print(line)


def _read_with_prompt_on_stderr(prompt: str) -> str:
    """`input`, with the prompt on standard error (standard output is being piped)."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return input()


def chat(
    message: Annotated[
        str | None,
        typer.Argument(help="What to ask. Leave out for an interactive conversation."),
    ] = None,
    tools: Annotated[list[str] | None, typer.Option("--tools", help=TOOLS_OPTION_HELP)] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            envvar="TOOLWIRE_BASE_URL",
            help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1. "
            "Default: the offline stand-in model. The key is read from TOOLWIRE_API_KEY.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", envvar="TOOLWIRE_MODEL", help="Model name at --base-url."),
    ] = None,
    stream: Annotated[
        bool, typer.Option("--stream/--no-stream", help="Stream the model's turns.")
    ] = True,
    max_iterations: Annotated[
        int, typer.Option("--max-iterations", min=1, help="Model turns allowed per message.")
    ] = 5,
    instructions: Annotated[
        str | None, typer.Option("--instructions", help="System message for the model.")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Run destructive tools without asking.")
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="Print only the answers: no banner, tool lines or reasoning."
        ),
    ] = False,
) -> None:
    """Chat with a model that can call tools; shows every call, result and the answer.

    The transcript goes to standard output; the banner, hints and errors go to standard
    error, so `toolwire chat "..." > answer.txt` keeps only the conversation.
    """
    import os

    console = Console(highlight=False)
    if not console.is_terminal:
        # Piped: one line per result, never cut at 80 columns.
        console = Console(highlight=False, soft_wrap=True)
    notices = Console(stderr=True, highlight=False)
    try:
        provider = load_tools(tools or [])
        chosen = select_model(base_url, model, os.environ.get("TOOLWIRE_API_KEY"))
    except CliError as exc:
        raise exit_with(exc) from None

    if isinstance(chosen, OfflineModel) and not quiet:
        notices.print(offline_note())
        notices.print()
    read: ReadLine = input if console.is_terminal else _read_with_prompt_on_stderr
    waiting = Waiting(console, enabled=not quiet)
    agent = Agent(
        chosen,
        provider,
        instructions=instructions,
        max_iterations=max_iterations,
        policy=Policy(approval="auto" if yes else "ask"),
        approver=console_approver(notices, read, waiting),
    )
    session = ChatSession(
        agent, console, read, stream=stream, notices=notices, quiet=quiet, waiting=waiting
    )
    if message is None:
        session.repl()
        return
    try:
        done = asyncio.run(session.send(message))
    except KeyboardInterrupt:
        notices.print(Text("\n(interrupted)", style="dim"))
        raise typer.Exit(130) from None
    if done.error is not None:
        raise typer.Exit(1)
