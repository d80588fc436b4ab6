"""`PromptedModel`: tool calling for upstreams that know nothing of tools (`prompted:<format>`).

The tools go into the system prompt as text, written in one format's syntax
(`toolwire.parsing.render`); the model's answer is parsed in that format
(`ParsingModel`'s machinery). The conversation is rewritten for a tool-less upstream:
earlier calls become assistant text, tool results become user messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.models.base import Model, ModelError, ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from toolwire.models.parsed import FailureHook, ParsedTurn, complete_turn, stream_turn
from toolwire.parsing.render import (
    RenderCall,
    check_render_format,
    example_call,
    render_assistant,
    render_calls,
    render_results,
    render_tool_prompt,
)
from toolwire.tools.call import ToolCall
from toolwire.tools.tool import Tool

__all__ = ["PromptedModel", "rewrite_history"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """What one request offers and demands, from its tools and settings."""

    offered: tuple[Tool, ...]
    forced: str | None
    """"required", the name of the one tool to call, or None."""
    single: bool


class PromptedModel:
    """Tool calling by instruction, for a model served without any tool support.

    Per request:

    - The inner model gets no `tools` (nor `tool_choice` / `parallel_tool_calls`); the
      system prompt gets the instruction text, the tool definitions and how to call them
      in `format`, with an example. An existing first system message is extended.
    - The history is rewritten: assistant tool calls become assistant text in `format`'s
      syntax, and each run of tool messages becomes one user message with the results in
      the format's response syntax (Hermes: `<tool_response>…</tool_response>`).
    - The answer is parsed in `format`, like `ParsingModel` does.
    - `tool_choice="none"`: the tools are not offered, and no call is returned.
      `"required"` or a tool's name: the instructions say so, and the answer is checked;
      when the model ignored the demand (no call, or another tool), the request is made
      once more with the answer and a short correction appended, and that second answer
      is returned whatever it is. An answer cut off by `max_tokens` is not retried.
      `parallel_tool_calls=False`: the instructions ask for one call at most, and only
      the first call is kept.

    Streaming with a forced `tool_choice` cannot take back what it has yielded, so the
    first attempt is buffered until it passed the check: the caller sees nothing until
    the first answer is complete (no token-by-token streaming), then all of it at once,
    or the retry streamed as it comes. With `auto`, events stream as they arrive.

    Args:
        inner: The upstream model.
        format: The format taught and parsed; one of `toolwire.parsing.render.RENDER_FORMATS`.
        instructions: The opening of the tool instructions; defaults to
            `default_instructions(format)`. The tool definitions and the syntax with an
            example always follow it.
        prompt_suffix: The end of the upstream's generation prompt when it pre-fills
            something (`"<think>\\n"`).
        on_parse_failure: Called for each call the upstream opened but did not write
            validly (see `ParsingModel`).
    """

    def __init__(
        self,
        inner: Model,
        format: str = "hermes",
        *,
        instructions: str | None = None,
        prompt_suffix: str = "",
        on_parse_failure: FailureHook | None = None,
    ) -> None:
        self._inner = inner
        self._format = check_render_format(format)
        self._instructions = instructions
        self._suffix = prompt_suffix
        self.on_parse_failure = on_parse_failure

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def inner(self) -> Model:
        return self._inner

    @property
    def format(self) -> str:
        return self._format

    def __repr__(self) -> str:
        return f"PromptedModel({self._inner!r}, format={self._format!r})"

    # ------------------------------------------------------------------ the Model protocol

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        plan = self._plan(tools, settings)
        request, inner_settings = self.prepare(messages, tools, settings)
        turn = self._turn(plan)
        response = await complete_turn(self._inner, request, (), inner_settings, turn)
        correction = self._correction(plan, response)
        if correction is None:
            return response
        retry = self._retry_messages(request, turn.raw_text, correction)
        second = await complete_turn(self._inner, retry, (), inner_settings, self._turn(plan))
        second.usage.add(response.usage)
        return second

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        return self._stream(messages, tools, settings)

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None,
    ) -> AsyncIterator[ModelStreamEvent]:
        plan = self._plan(tools, settings)
        request, inner_settings = self.prepare(messages, tools, settings)
        turn = self._turn(plan)
        first = stream_turn(self._inner, request, (), inner_settings, turn)
        if plan.forced is None:
            # Closed here if the consumer stops early, not left to the collector.
            async with contextlib.aclosing(first) as events:
                async for event in events:
                    yield event
            return
        # A retry is only possible while nothing was yielded: hold the first attempt.
        held = [event async for event in first]
        response = held[-1]
        assert isinstance(response, ModelResponse)
        correction = self._correction(plan, response)
        if correction is None:
            for event in held:
                yield event
            return
        retry = self._retry_messages(request, turn.raw_text, correction)
        second = stream_turn(self._inner, retry, (), inner_settings, self._turn(plan))
        async with contextlib.aclosing(second) as events:
            async for event in events:
                if isinstance(event, ModelResponse):
                    event.usage.add(response.usage)
                yield event

    # ------------------------------------------------------------------ the request

    def prepare(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> tuple[list[Message], ModelSettings | None]:
        """The messages and settings the inner model gets for this request."""
        plan = self._plan(tools, settings)
        request = rewrite_history(self._format, messages)
        if plan.offered:
            specs = [t.to_openai() for t in plan.offered]
            prompt = render_tool_prompt(
                self._format, specs, instructions=self._instructions, rules=_rules(plan)
            )
            request = _with_system(request, prompt)
        inner_settings = settings
        if settings is not None:
            inner_settings = dataclasses.replace(
                settings, tool_choice=None, parallel_tool_calls=None
            )
        return request, inner_settings

    def _plan(self, tools: Sequence[Tool], settings: ModelSettings | None) -> _Plan:
        choice = settings.tool_choice if settings is not None else None
        if choice == "none" or not tools:
            return _Plan(offered=(), forced=None, single=False)
        forced: str | None = None
        if choice == "required":
            forced = "required"
        elif choice not in (None, "auto"):
            names = [t.name for t in tools]
            if choice not in names:
                message = (
                    f"tool_choice names {choice!r}, which is not among the tools: "
                    f"{', '.join(repr(n) for n in names)}."
                )
                raise ModelError(
                    message,
                    status=400,
                    body={
                        "message": message,
                        "type": "invalid_request_error",
                        "param": "tool_choice",
                        "code": None,
                    },
                )
            forced = choice
        # The tool_request dialect carries one call per message whatever was asked.
        single = (
            settings is not None and settings.parallel_tool_calls is False
        ) or self._format == "tool_request"
        return _Plan(offered=tuple(tools), forced=forced, single=single)

    def _turn(self, plan: _Plan) -> ParsedTurn:
        return ParsedTurn(
            self._inner.name,
            self._format,
            plan.offered,
            prompt_suffix=self._suffix,
            max_calls=0 if not plan.offered else 1 if plan.single else None,
            on_failure=self.on_parse_failure,
        )

    # ------------------------------------------------------------------ forced choice

    def _correction(self, plan: _Plan, response: ModelResponse) -> str | None:
        """The corrective user message when the answer ignored a forced choice, else None."""
        if plan.forced is None or response.finish_reason == "length":
            return None
        calls = response.message.tool_calls
        if plan.forced == "required":
            if calls:
                return None
            target = "one of the tools"
            example = example_call([t.to_openai() for t in plan.offered])
            said = "Your reply did not call any tool."
        else:
            if calls and all(c.name == plan.forced for c in calls):
                return None
            target = f"the tool {plan.forced!r}"
            tool = next(t for t in plan.offered if t.name == plan.forced)
            example = example_call([tool.to_openai()])
            wrong = sorted({c.name for c in calls if c.name != plan.forced})
            said = (
                f"Your reply called {', '.join(repr(n) for n in wrong)} instead."
                if wrong
                else "Your reply did not call any tool."
            )
        syntax = render_calls(self._format, [example])
        return (
            f"{said} This reply must call {target}. Write the call now, in the format of "
            f"the instructions, for example:\n{syntax}"
        )

    def _retry_messages(
        self, request: Sequence[Message], answer: str, correction: str
    ) -> list[Message]:
        retry = list(request)
        if answer.strip():
            retry.append(AssistantMessage(content=answer))
        retry.append(UserMessage(content=correction))
        return retry


def _rules(plan: _Plan) -> list[str]:
    rules = []
    if plan.forced == "required":
        rules.append("You must call at least one tool in your reply; do not answer without one.")
    elif plan.forced is not None:
        rules.append(f"You must call the tool {plan.forced!r} in your reply, and no other tool.")
    if plan.single:
        rules.append("Call at most one tool per reply.")
    return rules


def _with_system(messages: list[Message], prompt: str) -> list[Message]:
    for i, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            extended = SystemMessage(content=f"{message.content}\n\n{prompt}".lstrip())
            return [*messages[:i], extended, *messages[i + 1 :]]
    return [SystemMessage(content=prompt), *messages]


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        value = None
    # Arguments that were not a JSON object got an error result the model will read;
    # echoing broken JSON back would only teach it the broken syntax.
    return value if isinstance(value, dict) else {}


def rewrite_history(format: str, messages: Sequence[Message]) -> list[Message]:
    """`messages` for an upstream without tools: calls as text, results as user messages.

    An assistant message with tool calls becomes assistant text (its content first, then
    the calls in `format`'s syntax); each run of consecutive tool messages becomes one user
    message holding their results in the format's response syntax. Other messages stay.
    """
    out: list[Message] = []
    results: list[tuple[str, str]] = []

    def flush() -> None:
        if results:
            out.append(UserMessage(content=render_results(format, results)))
            results.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            results.append((message.name, message.content))
            continue
        flush()
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls: list[RenderCall] = [(c.name, _arguments(c)) for c in message.tool_calls]
            text = render_assistant(format, message.content, calls)
            out.append(AssistantMessage(content=text, reasoning=message.reasoning))
        else:
            out.append(message)
    flush()
    return out
