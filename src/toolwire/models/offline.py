"""`OfflineModel`: the embedded stand-in model. Deterministic, no network, no weights."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson

from toolwire.models._offline_args import fill_arguments, fill_calls
from toolwire.models._offline_match import best_tool, split_clauses
from toolwire.models.base import ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.events import (
    ModelContentDelta,
    ModelDelta,
    ModelReasoningDelta,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.messages import AssistantMessage, Message, ToolMessage, Usage, UserMessage
from toolwire.parsing import (
    ContentDelta,
    ParsedOutput,
    ParseEvent,
    ParseFailure,
    ReasoningDelta,
    ToolCallStart,
    assemble,
    parse_output,
    parser_for,
)
from toolwire.tools.call import ToolCall
from toolwire.tools.tool import Tool

__all__ = ["OfflineModel"]

PARSER_MODEL = "toolwire/offline"
"""The model id handed to `toolwire.parsing` with `format="hermes"`."""


class OfflineModel:
    """A stand-in for a real language model, so every toolwire path runs offline.

    It is not a language model and does not understand language. It is deterministic:

    - It picks a tool by word overlap between the latest user request and the tools'
      names and descriptions (simple stemming, a few synonyms); a request made of
      several clauses ("... and ...") may get one call per clause.
    - It fills the arguments from the request and the JSON schema: a place after "in"
      or "for", an arithmetic expression, an enum value the text mentions, numbers,
      quoted strings; optional parameters it finds nothing for are left to their
      defaults.
    - It writes its calls as raw Hermes-style text (`<tool_call>{"name": ..., "arguments":
      ...}</tool_call>`) and runs that text through the real `toolwire.parsing` parser,
      in pieces when streaming, exactly as a model's output would be.
    - Once the tool results are in, it answers from them in a plain sentence quoting
      the values, or says which call failed and why.
    - When no tool fits, it says plainly that it is the offline stand-in.

    Use `OpenAIChatModel` (or another real model) for actual answers.

    Args:
        chunk_size: Characters per piece when streaming.
    """

    def __init__(self, *, chunk_size: int = 12) -> None:
        self._chunk = max(1, chunk_size)

    @property
    def name(self) -> str:
        return "toolwire-offline"

    def __repr__(self) -> str:
        return "OfflineModel()"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        text = self.write(messages, tools, settings)
        parsed = parse_output(text, PARSER_MODEL, _specs(tools), format="hermes")
        return _response(parsed)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        text = self.write(messages, tools, settings)
        parser = parser_for(PARSER_MODEL, _specs(tools), format="hermes")
        events: list[ParseEvent] = []
        n = self._chunk
        for i in range(0, len(text), n):
            new = parser.feed(text[i : i + n])
            events.extend(new)
            for event in new:
                if (delta := _model_delta(event)) is not None:
                    yield delta
        new = parser.finish()
        events.extend(new)
        for event in new:
            if (delta := _model_delta(event)) is not None:
                yield delta
        yield _response(assemble(events))

    def write(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> str:
        """The raw text this model outputs for a request, before parsing."""
        request, results = _latest_turn(messages)
        if results:
            return _answer(results)
        choice = settings.tool_choice if settings is not None else None
        offered = [] if choice == "none" else list(tools)
        if choice not in (None, "auto", "none", "required"):
            offered = [t for t in offered if t.name == choice]
        calls = _plan_calls(request, offered, force=choice not in (None, "auto", "none"))
        if not calls:
            return _no_tool_answer(request, offered)
        return "\n".join(
            "<tool_call>\n"
            + json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
            + "\n</tool_call>"
            for name, args in calls
        )


def _specs(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [t.to_openai() for t in tools]


def _model_delta(event: ParseEvent) -> ModelDelta | None:
    """The model stream's event for a parser event (None for a `ParseFailure`, which the
    text it carries already came back as content)."""
    if isinstance(event, ContentDelta):
        return ModelContentDelta(event.text)
    if isinstance(event, ReasoningDelta):
        return ModelReasoningDelta(event.text)
    if isinstance(event, ToolCallStart):
        return ModelToolCallStart(event.index, event.id, event.name)
    if isinstance(event, ParseFailure):
        return None
    return ModelToolCallArgsDelta(event.index, event.text)


def _response(parsed: ParsedOutput) -> ModelResponse:
    calls = tuple(
        ToolCall(id=c.id, name=c.name, arguments=c.arguments_json) for c in parsed.tool_calls
    )
    return ModelResponse(
        message=AssistantMessage(
            content=parsed.content, reasoning=parsed.reasoning, tool_calls=calls
        ),
        finish_reason="tool_calls" if calls else "stop",
        usage=Usage(requests=1),
        model="toolwire-offline",
    )


def _latest_turn(messages: Sequence[Message]) -> tuple[str, list[ToolMessage]]:
    """The latest user request and the tool results that arrived after it."""
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.content, list(reversed(results))
        if isinstance(message, ToolMessage):
            results.append(message)
    return "", list(reversed(results))


def _plan_calls(
    request: str, tools: list[Tool], *, force: bool
) -> list[tuple[str, dict[str, Any]]]:
    if not tools or not request.strip():
        if force and tools:
            return [(tools[0].name, fill_arguments(tools[0].input_schema, request, request))]
        return []
    # Each clause that matches a tool owns the text up to the next matching clause, so
    # "add 3 and 5" keeps its "5" although "and" starts a new clause.
    matched = [
        (start, match)
        for start, end in split_clauses(request)
        if (match := best_tool(request[start:end], tools)) is not None
    ]
    calls: list[tuple[str, dict[str, Any]]] = []
    for i, (start, match) in enumerate(matched):
        begin = 0 if i == 0 else start
        end = matched[i + 1][0] if i + 1 < len(matched) else len(request)
        text = request[begin:end]
        for args in fill_calls(match.tool.input_schema, text, request):
            call = (match.tool.name, args)
            if call not in calls:
                calls.append(call)
    if not calls:
        match = best_tool(request, tools, force=force)
        if match is not None:
            calls.extend(
                (match.tool.name, args)
                for args in fill_calls(match.tool.input_schema, request, request)
            )
    return calls


def _no_tool_answer(request: str, tools: list[Tool]) -> str:
    intro = (
        "I am toolwire's offline stand-in model, not a real language model: I can only "
        "help by calling one of the available tools"
    )
    if not tools:
        return f"{intro}, and no tools are available for this request."
    names = ", ".join(t.name for t in tools)
    return f"{intro}, and none of them matches your request. Available tools: {names}."


def _answer(results: list[ToolMessage]) -> str:
    return " ".join(_describe_result(r) for r in results)


def _describe_result(result: ToolMessage) -> str:
    try:
        value: Any = orjson.loads(result.content)
    except orjson.JSONDecodeError:
        value = result.content
    error = value.get("error") if isinstance(value, dict) else None
    if result.is_error or (isinstance(error, dict) and len(value) == 1):
        code = error.get("code") if isinstance(error, dict) else None
        if isinstance(error, dict):
            reason = str(error.get("message", "")).strip() or "no details given"
        else:
            reason = _describe(value)
        label = f" ({code})" if code else ""
        return f"The call to {result.name} failed{label}: {_sentence(reason)}"
    if isinstance(value, dict) and "result" in value:
        rest = {k: v for k, v in value.items() if k != "result"}
        extra = f" ({_describe(rest)})" if rest else ""
        return f"From {result.name}: the result is {_describe(value['result'])}{extra}."
    return f"From {result.name}: {_sentence(_describe(value))}"


def _describe(value: Any, depth: int = 0) -> str:
    if isinstance(value, dict):
        if not value:
            return "nothing"
        parts = [f"{str(k).replace('_', ' ')} {_describe(v, depth + 1)}" for k, v in value.items()]
        return _limit(", ".join(parts) if depth == 0 else "(" + ", ".join(parts) + ")")
    if isinstance(value, list):
        if not value:
            return "an empty list"
        shown = [_describe(v, depth + 1) for v in value[:10]]
        more = f" and {len(value) - 10} more" if len(value) > 10 else ""
        return _limit("; ".join(shown) + more)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    return _limit(str(value))


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def _limit(text: str, size: int = 600) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"
