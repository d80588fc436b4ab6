"""Responses `input` → toolwire messages, with the pairing rules of tool results.

A `function_call_output` is honoured only when it answers a `function_call` made earlier
in the input, or one the previous response (`previous_response_id`) handed back, that
has no output yet. Any other output is an orphan (an unknown call id, a second answer):
it is dropped and reported, or refused in strict mode. A call left without an output is
refused, as OpenAI does, since no upstream accepts a transcript with an unanswered call.

Items may come in any order the Responses API allows (an output long after its call,
the outputs of parallel calls after all the calls), so the messages are rebuilt in the
order Chat Completions needs: each assistant turn, then its calls' results in call order.
Consecutive `function_call` items (and the assistant message right before them) are one
turn, as the Responses API splits a turn into items.

Items that echo a previous output and carry nothing the model needs (`reasoning`, the
gateway's own `mcp_call` and `mcp_approval_request` items) are skipped, so clients that
send a whole conversation back (the Agents SDK does) work unchanged. Under the gateway's
`tool_request` dialect, an assistant message that is exactly `{"tool_request": {...}}` is
a call, and a `tool_result` message answers the oldest waiting call of that name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from toolwire.models.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
)
from toolwire.server.configuration.config import Dialect
from toolwire.server.http.errors import GatewayError
from toolwire.server.protocols.checks import (
    arguments_text,
    field_error,
    json_type,
    required_string,
    result_name,
    shown,
)
from toolwire.server.protocols.checks import as_tool_request as tool_request_call
from toolwire.server.protocols.responses.content import (
    assistant_text,
    output_text,
    plain_text,
    user_message,
)
from toolwire.tools.call import ToolCall

__all__ = ["ApprovalAnswer", "Input", "parse_input"]

ITEM_TYPES: Final = (
    "message",
    "function_call",
    "function_call_output",
    "mcp_approval_response",
)
_ECHOES: Final = frozenset({"reasoning", "mcp_call", "mcp_approval_request", "mcp_list_tools"})
"""Output items a client may send back; they add nothing the gateway does not keep."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAnswer:
    """An `mcp_approval_response` item: a decision on one approval request."""

    approval_id: str
    approve: bool
    reason: str | None
    where: str
    """The item's place in the request (`input[0]`), for errors."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Input:
    """The request's input as toolwire keeps it."""

    messages: tuple[Message, ...]
    """The new messages, to follow the previous response's conversation (if any)."""
    dropped_results: tuple[str, ...]
    """The call id (or, for `tool_result` messages, the name) of each orphan dropped."""
    answers: tuple[ApprovalAnswer, ...]
    """The approval decisions, in order."""
    first_other: str | None
    """Where the first item that is not an approval decision is (`input[2]`), if any."""


@dataclass(slots=True)
class _Turn:
    """One assistant turn being rebuilt: its text, its calls, and their results so far."""

    content: str | None
    calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, ToolMessage] = field(default_factory=dict)
    made_by: dict[str, str] = field(default_factory=dict)
    """Where each call was made (`input[3].call_id`), for errors."""
    external: bool = False
    """The previous response's turn: its assistant message is in the stored history."""
    by_name: bool = False
    """A `tool_request` message's call, answered by a `tool_result` message."""


def parse_input(
    raw: str | list[Any],
    *,
    waiting: Sequence[ToolCall] = (),
    strict_tool_results: bool,
    dialect: Dialect,
) -> Input:
    """Check and convert a Responses request's `input`.

    Args:
        raw: The request's `input` (a string, or a non-empty array of items).
        waiting: The client calls the previous response handed back, which the input
            may answer (and must: every call needs an output).
        strict_tool_results: Refuse an orphan output with 400 instead of dropping it.
        dialect: `tool_request` also accepts the whole-message JSON tool calls and
            `tool_result` messages.

    Raises:
        GatewayError: 400 naming the item at fault (`input[2].call_id`) and what to send.
    """
    items: list[Any] = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    transcript = _Transcript(waiting, strict=strict_tool_results, dialect=dialect)
    answers: list[ApprovalAnswer] = []
    first_other: str | None = None
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if type(item) is not dict:
            raise field_error(where, f"must be an input item object, not {json_type(item)}.")
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"  # the short form {"role": ..., "content": ...}
        if type(kind) is not str:
            raise _item_type_error(kind, where)  # before a set lookup: `[]` is unhashable
        if kind in _ECHOES:
            continue
        if kind == "mcp_approval_response":
            answers.append(_answer(item, where))
            transcript.current = None
            continue
        first_other = first_other or where
        if kind == "function_call":
            transcript.call(_function_call(item, where), f"{where}.call_id")
        elif kind == "function_call_output":
            transcript.current = None
            call_id = required_string(
                item.get("call_id"),
                f"{where}.call_id",
                "a function_call_output needs 'call_id': the id of the function_call it answers",
            )
            transcript.output(call_id, output_text(item, where), f"{where}.call_id")
        elif kind == "message":
            transcript.current = None
            transcript.message(item, i, where)
        else:
            raise _item_type_error(kind, where)
    return Input(
        messages=transcript.messages(),
        dropped_results=tuple(transcript.dropped),
        answers=tuple(answers),
        first_other=first_other,
    )


class _Transcript:
    """The conversation being rebuilt from the items, turn by turn."""

    def __init__(self, waiting: Sequence[ToolCall], *, strict: bool, dialect: Dialect) -> None:
        self.strict = strict
        self.tool_request = dialect == "tool_request"
        self.entries: list[Message | _Turn] = []
        self.by_call: dict[str, _Turn] = {}
        self.dropped: list[str] = []
        self.current: _Turn | None = None
        """The turn that `function_call` items join (until any other item comes)."""
        if waiting:
            previous = _Turn(content=None, calls=list(waiting), external=True)
            self.entries.append(previous)
            self.by_call.update((c.id, previous) for c in waiting)

    def call(self, call: ToolCall, where: str) -> None:
        if call.id in self.by_call:
            raise field_error(
                where,
                f"the call id {call.id!r} is used twice; give each call its own id, so that "
                "each function_call_output answers exactly one call.",
                code="duplicate_tool_call_id",
            )
        if self.current is None:
            self.current = _Turn(content=None)
            self.entries.append(self.current)
        self.current.calls.append(call)
        self.current.made_by[call.id] = where
        self.by_call[call.id] = self.current

    def output(self, call_id: str, content: str, where: str) -> None:
        """Pair an output with its call, or drop (refuse, in strict mode) an orphan."""
        turn = self.by_call.get(call_id)
        call = next((c for c in turn.calls if c.id == call_id), None) if turn else None
        if turn is not None and call is not None and call_id not in turn.results:
            turn.results[call_id] = ToolMessage(call_id=call_id, name=call.name, content=content)
            return
        if not self.strict:
            self.dropped.append(call_id)
            return
        why = (
            "that call has an output already"
            if turn is not None
            else "no function_call before it (nor in the previous response) has that id"
        )
        raise field_error(
            where,
            f"the output for call {call_id!r} answers no waiting call: {why}. Send each "
            "output once, after its function_call, or remove it (strict_tool_results is "
            "on, so orphan outputs are refused rather than dropped).",
            code="orphan_tool_result",
        )

    def message(self, item: dict[str, Any], i: int, where: str) -> None:
        role = item.get("role")
        if role == "user":
            self.entries.append(user_message(item, where))
        elif role in ("system", "developer"):
            self.entries.append(SystemMessage(content=plain_text(item, where, role)))
        elif role == "assistant":
            text = assistant_text(item, where)
            call = tool_request_call(text, i) if self.tool_request and text is not None else None
            if call is None:
                self.current = _Turn(content=text)
                self.entries.append(self.current)
                return
            # A tool_request message is one whole call, answered by name.
            turn = _Turn(content=None, calls=[call], made_by={call.id: f"{where}.content"})
            turn.by_name = True
            self.entries.append(turn)
            self.by_call[call.id] = turn
        elif role == "tool_result" and self.tool_request:
            name = result_name(item, where)
            self.output(self._oldest_waiting(name), plain_text(item, where, role), f"{where}.name")
        else:
            raise _role_error(role, where, self.tool_request)

    def _oldest_waiting(self, name: str) -> str:
        """The id of the oldest call of tool `name` still without an output (else `name`,
        which answers nothing: an orphan)."""
        for entry in self.entries:
            if isinstance(entry, _Turn):
                for call in entry.calls:
                    if call.name == name and call.id not in entry.results:
                        return call.id
        return name

    def messages(self) -> tuple[Message, ...]:
        """The messages in Chat Completions order; refuses a call left without an output."""
        out: list[Message] = []
        for entry in self.entries:
            if not isinstance(entry, _Turn):
                out.append(entry)
                continue
            for call in entry.calls:
                if call.id not in entry.results:
                    raise _missing(entry, call)
            if not entry.external:
                out.append(AssistantMessage(content=entry.content, tool_calls=tuple(entry.calls)))
            out.extend(entry.results[c.id] for c in entry.calls)
        return tuple(out)


# --- one item ------------------------------------------------------------------------------


def _function_call(item: dict[str, Any], where: str) -> ToolCall:
    call_id = required_string(
        item.get("call_id"), f"{where}.call_id", "must be the call's id, a non-empty string"
    )
    name = required_string(
        item.get("name"), f"{where}.name", "must be the tool's name, a non-empty string"
    )
    arguments = arguments_text(item.get("arguments", ""), f"{where}.arguments")
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _answer(item: dict[str, Any], where: str) -> ApprovalAnswer:
    approval_id = required_string(
        item.get("approval_request_id"),
        f"{where}.approval_request_id",
        "must be the id of the mcp_approval_request item it answers",
    )
    approve = item.get("approve")
    if type(approve) is not bool:
        raise field_error(f"{where}.approve", f"must be true or false, not {json_type(approve)}.")
    reason = item.get("reason")
    if reason is not None and (type(reason) is not str or len(reason) > 2000):
        raise field_error(f"{where}.reason", "must be a string of at most 2000 characters.")
    return ApprovalAnswer(approval_id=approval_id, approve=approve, reason=reason, where=where)


# --- errors --------------------------------------------------------------------------------


def _item_type_error(kind: Any, where: str) -> GatewayError:
    if kind == "item_reference":
        return field_error(
            where,
            "item references need OpenAI's item storage; send the item itself, or continue "
            "with 'previous_response_id'.",
            code="unsupported_input_item",
        )
    got = "is missing" if kind is None else f"is {shown(kind)}"
    return field_error(
        f"{where}.type",
        f"the item type {got}; this gateway takes {', '.join(repr(t) for t in ITEM_TYPES)} "
        "items (its own tools run inside it, so built-in tool items do not apply).",
        code="unsupported_input_item",
    )


def _role_error(role: Any, where: str, tool_request: bool) -> GatewayError:
    if role == "tool_result":
        return field_error(
            f"{where}.role",
            "'tool_result' messages belong to the tool_request dialect, which this gateway "
            'does not use; send {"type": "function_call_output", "call_id": ..., '
            '"output": ...}, or set `dialect: tool_request` in the gateway config.',
            code="unsupported_role",
        )
    roles: tuple[str, ...] = ("user", "assistant", "system", "developer")
    if tool_request:
        roles = (*roles, "tool_result")
    got = "is missing" if role is None else f"is {shown(role)}"
    return field_error(
        f"{where}.role",
        f"the role {got}; use one of {', '.join(repr(r) for r in roles)}.",
        code="invalid_role",
    )


def _missing(turn: _Turn, call: ToolCall) -> GatewayError:
    if turn.by_name:
        advice = f'send {{"role": "tool_result", "name": "{call.name}", "content": ...}}'
    else:
        advice = f'send {{"type": "function_call_output", "call_id": "{call.id}", "output": ...}}'
    if turn.external:
        return field_error(
            "input",
            f"the previous response called {call.name!r} (call {call.id!r}) and this input "
            f"has no output for it; every call needs one: {advice}.",
            code="missing_tool_result",
        )
    return field_error(
        turn.made_by[call.id],
        f"the call {call.id!r} of tool {call.name!r} has no output in this input; every "
        f"call needs one: {advice} after it (or remove the call).",
        code="missing_tool_result",
    )
