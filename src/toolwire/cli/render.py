"""Showing an agent run in a terminal: tool calls, results, errors and the answer."""

from __future__ import annotations

import json
from typing import Any

import orjson
from rich.console import Console
from rich.status import Status
from rich.text import Text

from toolwire.agent import (
    AgentEvent,
    ApprovalRequired,
    Done,
    ReasoningDelta,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.tools import ToolResult

__all__ = ["EventPrinter", "Waiting", "format_arguments", "format_result"]

_MAX_SHOWN = 400
"""Characters of a tool result shown in the transcript; the model still gets all of it."""


def format_arguments(name: str, arguments: str) -> Text:
    """`name(key=value, ...)` for a JSON object, the raw text marked invalid otherwise."""
    text = Text()
    text.append(name, style="bold cyan")
    try:
        parsed: Any = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        text.append(" ")
        text.append(_clip(arguments), style="yellow")
        text.append("  (not a JSON object)", style="dim")
        return text
    text.append("(")
    for i, (key, value) in enumerate(parsed.items()):
        if i:
            text.append(", ")
        text.append(key, style="cyan")
        text.append("=")
        text.append(_json(value))
    text.append(")")
    return text


def format_result(result: ToolResult, *, full: bool = False) -> Text:
    """A green check, the tool and its value; or a red cross, the error code and message.

    Long values are cut to a few hundred characters unless `full` (the model gets all).
    """
    if result.success:
        body = result.result if isinstance(result.result, str) else _json(result.result)
        line = Text("  ✓ ", style="green")
        line.append(result.name, style="cyan")
        line.append(": ")
        line.append(body if full else _clip(body))
        if result.cached:
            line.append("  (cached)", style="dim")
        return line
    assert result.error is not None
    line = Text("  ✗ ", style="bold red")
    line.append(result.name, style="cyan")
    line.append(" failed, ")
    line.append(result.error.code, style="bold red")
    line.append(": ")
    line.append(result.error.message, style="red")
    return line


class EventPrinter:
    """Prints agent events as a person wants to read them.

    Text and reasoning are streamed as they arrive; each tool call is shown with its
    arguments, each result on the line below it. `Done` prints the reason a run stopped
    without an answer, or its error (on `errors` when given).

    Args:
        console: Where the transcript goes.
        show_reasoning: Show the model's reasoning, dimmed.
        errors: Where a failed run's error goes; `console` when not given.
        quiet: Only the answer's text (and errors): no tool lines, no reasoning.
        full: Show tool results whole instead of cutting long ones.
    """

    def __init__(
        self,
        console: Console,
        *,
        show_reasoning: bool = True,
        errors: Console | None = None,
        quiet: bool = False,
        full: bool = False,
    ) -> None:
        self.console = console
        self.errors = errors if errors is not None else console
        self.quiet = quiet
        self.full = full
        self.show_reasoning = show_reasoning and not quiet
        self._mid_line = False
        self._in_reasoning = False
        self._after_tools = False

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, TextDelta):
            if self._in_reasoning:
                self._end_line()
                self._in_reasoning = False
            if self._after_tools:
                self.console.print()  # set the answer apart from the tool lines
                self._after_tools = False
            self._write(event.text)
        elif isinstance(event, ReasoningDelta):
            if self.show_reasoning:
                self._in_reasoning = True
                self._write(event.text, style="dim italic")
        elif self.quiet and isinstance(event, ToolCallStart | ToolCallResult):
            pass
        elif isinstance(event, ToolCallStart):
            self._end_line()
            line = Text("→ ", style="cyan")
            line.append_text(format_arguments(event.name, event.arguments))
            self.console.print(line)
        elif isinstance(event, ToolCallResult):
            self._end_line()
            self.console.print(format_result(event.result, full=self.full))
            self._after_tools = True
        elif isinstance(event, ApprovalRequired):
            pass  # the approver asks the question itself
        elif isinstance(event, Done):
            self._end_line()
            if event.error is not None:
                self.errors.print(
                    Text.assemble(("Error: ", "bold red"), event.error), soft_wrap=True
                )
            elif event.result.status != "completed":
                self.console.print(Text(event.result.output, style="yellow"))

    def _write(self, text: str, style: str | None = None) -> None:
        self.console.print(Text(text, style=style or ""), end="", soft_wrap=True, highlight=False)
        self._mid_line = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False


class Waiting:
    """A spinner with a short message while nothing is being printed (the model is
    thinking, a tool is running); only on a terminal, so pipes and logs get no control
    characters. Hide it before printing or asking anything."""

    def __init__(self, console: Console, *, enabled: bool = True) -> None:
        self._console = console
        self._on = enabled and console.is_terminal and not console.is_dumb_terminal
        self._status: Status | None = None

    def show(self, message: str) -> None:
        if not self._on:
            return
        if self._status is None:
            self._status = self._console.status(Text(message, style="dim"), spinner="dots")
            self._status.start()
        else:
            self._status.update(Text(message, style="dim"))

    def hide(self) -> None:
        if self._status is not None:
            status, self._status = self._status, None
            status.stop()


def _json(value: Any) -> str:
    # Spaced separators (unlike the model's compact form) so long results wrap at words.
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _clip(text: str) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    if len(text) <= _MAX_SHOWN:
        return text
    return f"{text[:_MAX_SHOWN]}… ({len(text) - _MAX_SHOWN} more characters)"
