"""Stream events of the parsers and the assembled `ParsedOutput`.

These belong to the parsing layer, which depends on nothing else in the package; they
are what `parser_for(...).feed()` returns and nothing more. A model's stream has its own
types (`toolwire.models.ModelContentDelta`, ...), made from these in `ParsedTurn`, and the
agent has its own run events (`toolwire.agent`): code outside the parsers never needs
two classes of one name.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from typing import Any, Literal

from toolwire.parsing._json import loads

__all__ = [
    "ContentDelta",
    "ParseEvent",
    "ParseFailure",
    "ParsedOutput",
    "ParsedToolCall",
    "ReasoningDelta",
    "ToolCallArgsDelta",
    "ToolCallStart",
    "assemble",
]


@dataclass(frozen=True, slots=True)
class ContentDelta:
    text: str
    type: Literal["content"] = "content"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call begins. Emitted once per call, only once the whole call is known."""

    index: int
    id: str
    name: str
    type: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True, slots=True)
class ToolCallArgsDelta:
    """A fragment of a call's JSON arguments; the fragments of one index concatenate to it."""

    index: int
    text: str
    type: Literal["tool_call_args"] = "tool_call_args"


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """Text that opened a tool call in the format's markup but is not a valid call.

    Informational: the text itself comes back as content (or reasoning) events, so nothing
    is lost; this says that it happened, for metrics and logs. Never emitted for text
    that merely could have been a call (a bare JSON answer).
    """

    reason: str
    """What was wrong: `unfinished` (the output ended inside the call) or `invalid`."""
    text: str
    """The call's text as the model wrote it, markers included."""
    type: Literal["parse_failure"] = "parse_failure"


ParseEvent = ContentDelta | ReasoningDelta | ToolCallStart | ToolCallArgsDelta | ParseFailure


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    arguments_json: str
    """The arguments as compact JSON text; `json.loads(arguments_json) == arguments`."""
    offered: bool | None = None
    """Whether a tool of this name was offered (`None`: no tools were given to check).
    A call to a tool that was not offered is still returned (a runner answers it with
    `unknown_tool`, so the model can correct itself); a gateway may drop it instead."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedOutput:
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    failures: list[ParseFailure] = field(default_factory=list)
    """Calls the output opened but did not write validly (their text is in `content`)."""


def assemble(events: Iterable[ParseEvent], offered: Set[str] | None = None) -> ParsedOutput:
    """Fold a sequence of events into the `ParsedOutput` they describe.

    `offered`: the names of the tools offered, to mark each call's `offered`.
    """
    content: list[str] = []
    reasoning: list[str] = []
    starts: dict[int, ToolCallStart] = {}
    args: dict[int, list[str]] = {}
    failures: list[ParseFailure] = []
    for ev in events:
        if isinstance(ev, ContentDelta):
            content.append(ev.text)
        elif isinstance(ev, ReasoningDelta):
            reasoning.append(ev.text)
        elif isinstance(ev, ToolCallStart):
            starts[ev.index] = ev
            args.setdefault(ev.index, [])
        elif isinstance(ev, ParseFailure):
            failures.append(ev)
        else:
            args.setdefault(ev.index, []).append(ev.text)
    calls = []
    for index in sorted(starts):
        text = "".join(args[index]) or "{}"
        parsed = loads(text)
        calls.append(
            ParsedToolCall(
                id=starts[index].id,
                name=starts[index].name,
                arguments=parsed,
                arguments_json=text,
                offered=None if offered is None else starts[index].name in offered,
            )
        )
    return ParsedOutput(
        content="".join(content) or None,
        reasoning="".join(reasoning) or None,
        tool_calls=calls,
        failures=failures,
    )
