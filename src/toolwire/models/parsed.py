"""`ParsingModel`: tool calls parsed out of an upstream's text (`parse:<format>` upstreams).

Some upstreams get the tools natively (their chat template renders them) but hand the
model's calls back as raw text in `content`: a vLLM or SGLang server started without a
tool parser, a llama.cpp server without `--jinja`, a fine-tune its server does not know.
`ParsingModel` wraps such a model and runs its text through `toolwire.parsing`, so the
caller gets ordinary tool calls, streaming included.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence

from toolwire.models.base import (
    FinishReason,
    Model,
    ModelError,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
)
from toolwire.models.events import (
    ModelContentDelta,
    ModelDelta,
    ModelReasoningDelta,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.messages import AssistantMessage, Message
from toolwire.parsing import (
    ContentDelta,
    ParseEvent,
    ParseFailure,
    ReasoningDelta,
    ToolCallStart,
    format_for,
    parser_for,
)
from toolwire.tools.call import ToolCall
from toolwire.tools.tool import Tool

__all__ = ["ParsedTurn", "ParsingModel", "call_limit"]

FailureHook = Callable[[str, ParseFailure], None]
"""Told the format and the failure of each call an output opened but did not write validly."""


def call_limit(settings: ModelSettings | None) -> int | None:
    """How many calls a turn may return under `settings`: 0, 1 or any (None)."""
    if settings is None:
        return None
    if settings.tool_choice == "none":
        return 0
    return 1 if settings.parallel_tool_calls is False else None


class ParsedTurn:
    """One generation of an inner model, turned into parsed events and a final response.

    Content goes through the format's stream parser; the inner model's own reasoning and
    any native tool calls pass through. Every call, parsed or native, gets the next
    output index when it first appears, so indexes stay distinct and in order. Calls past
    `max_calls` are dropped (events and final message alike).

    Args:
        model: The model id the parser uses (for `format="auto"` and quirks).
        format: A format name from `toolwire.parsing.FORMATS`.
        tools: The tools offered, for the parser's schema typing.
        prompt_suffix: The end of the generation prompt (a pre-filled `<think>`).
        max_calls: Keep at most this many calls; None keeps all.
        on_failure: Told about each call the output opened but did not write validly.
    """

    def __init__(
        self,
        model: str,
        format: str,
        tools: Sequence[Tool],
        *,
        prompt_suffix: str = "",
        max_calls: int | None = None,
        on_failure: FailureHook | None = None,
    ) -> None:
        specs = [t.to_openai() for t in tools]
        self._format = format
        self._on_failure = on_failure
        self._parser = parser_for(model, specs, format=format, prompt_suffix=prompt_suffix)
        self._max = max_calls
        self._next = 0
        self._parsed_index: dict[int, int] = {}
        self._native_index: dict[int, int] = {}
        self._parsed: dict[int, tuple[str, str, list[str]]] = {}  # out index -> id, name, args
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._raw: list[str] = []

    @property
    def raw_text(self) -> str:
        """The inner model's content exactly as it wrote it, calls included."""
        return "".join(self._raw)

    def feed(self, event: ModelDelta) -> list[ModelStreamEvent]:
        """Translate one event of the inner model; return the events to pass on."""
        out: list[ModelStreamEvent] = []
        if isinstance(event, ModelContentDelta):
            self._raw.append(event.text)
            for parsed in self._parser.feed(event.text):
                self._on_parsed(parsed, out)
        elif isinstance(event, ModelReasoningDelta):
            self._reasoning.append(event.text)
            out.append(event)
        elif isinstance(event, ModelToolCallStart):
            index = self._native_index.setdefault(event.index, self._take_index())
            if self._keeps(index):
                out.append(ModelToolCallStart(index, event.id, event.name))
        else:
            mapped = self._native_index.get(event.index)
            if mapped is not None and self._keeps(mapped):
                out.append(ModelToolCallArgsDelta(mapped, event.text))
        return out

    def finish(self, response: ModelResponse) -> tuple[list[ModelStreamEvent], ModelResponse]:
        """The inner model's final response: the last events and the parsed response."""
        out: list[ModelStreamEvent] = []
        truncated = response.finish_reason == "length"
        for parsed in self._parser.finish(truncated=truncated):
            self._on_parsed(parsed, out)
        calls: dict[int, ToolCall] = {
            index: ToolCall(id=call_id, name=name, arguments="".join(args) or "{}")
            for index, (call_id, name, args) in self._parsed.items()
        }
        # The final message is authoritative for native calls; one never streamed gets
        # its events now so that a stream's events describe every call.
        for i, call in enumerate(response.message.tool_calls):
            streamed = i in self._native_index
            index = self._native_index.setdefault(i, self._take_index())
            if not self._keeps(index):
                continue
            if not streamed:
                out.append(ModelToolCallStart(index, call.id, call.name))
                out.append(ModelToolCallArgsDelta(index, call.arguments))
            calls[index] = call
        tool_calls = tuple(calls[i] for i in sorted(calls))
        message = AssistantMessage(
            content="".join(self._content) or None,
            tool_calls=tool_calls,
            reasoning="".join(self._reasoning) or None,
        )
        return out, ModelResponse(
            message=message,
            finish_reason=_finish_reason(response.finish_reason, bool(tool_calls)),
            usage=response.usage,
            model=response.model,
        )

    def _take_index(self) -> int:
        index = self._next
        self._next += 1
        return index

    def _keeps(self, index: int) -> bool:
        return self._max is None or index < self._max

    def _on_parsed(self, event: ParseEvent, out: list[ModelStreamEvent]) -> None:
        # The one place parser events become model events (toolwire.models.events).
        if isinstance(event, ContentDelta):
            self._content.append(event.text)
            out.append(ModelContentDelta(event.text))
        elif isinstance(event, ReasoningDelta):
            self._reasoning.append(event.text)
            out.append(ModelReasoningDelta(event.text))
        elif isinstance(event, ToolCallStart):
            index = self._take_index()
            self._parsed_index[event.index] = index
            if self._keeps(index):
                self._parsed[index] = (event.id, event.name, [])
                out.append(ModelToolCallStart(index, event.id, event.name))
        elif isinstance(event, ParseFailure):
            if self._on_failure is not None:
                self._on_failure(self._format, event)
        else:
            index = self._parsed_index[event.index]
            if self._keeps(index):
                self._parsed[index][2].append(event.text)
                out.append(ModelToolCallArgsDelta(index, event.text))


def _finish_reason(upstream: FinishReason, has_calls: bool) -> FinishReason:
    if upstream == "length":
        return "length"  # cut off: the caller must know even if some calls were complete
    if has_calls:
        return "tool_calls"
    return "stop" if upstream == "tool_calls" else upstream


async def stream_turn(
    inner: Model,
    messages: Sequence[Message],
    tools: Sequence[Tool],
    settings: ModelSettings | None,
    turn: ParsedTurn,
) -> AsyncGenerator[ModelStreamEvent, None]:
    """Stream `inner` through `turn`: translated events as they come, then the response."""
    final: ModelResponse | None = None
    async for event in inner.stream(messages, tools, settings):
        if isinstance(event, ModelResponse):
            final = event
            continue
        for out in turn.feed(event):
            yield out
    if final is None:
        raise ModelError(f"Model {inner.name!r} ended its stream without a final response.")
    events, response = turn.finish(final)
    for out in events:
        yield out
    yield response


async def complete_turn(
    inner: Model,
    messages: Sequence[Message],
    tools: Sequence[Tool],
    settings: ModelSettings | None,
    turn: ParsedTurn,
) -> ModelResponse:
    """One non-streamed answer of `inner` through `turn`, in the order a stream brings it:
    reasoning, content, then native calls."""
    response = await inner.complete(messages, tools, settings)
    message = response.message
    if message.reasoning:
        turn.feed(ModelReasoningDelta(message.reasoning))
    if message.content:
        turn.feed(ModelContentDelta(message.content))
    # Native calls before the parser's end, as in a stream: a parsed call completed only
    # by the end of the output is numbered after them there too.
    for i, call in enumerate(message.tool_calls):
        turn.feed(ModelToolCallStart(i, call.id, call.name))
    return turn.finish(response)[1]


class ParsingModel:
    """Wraps a model whose tool calls come back as raw text, and parses them out.

    The inner model gets the request unchanged (tools, settings, history with native
    tool calls and tool messages); its `content` is parsed in `format` as it streams.
    Reasoning and any native tool calls it returns anyway pass through, the calls
    numbered after or between the parsed ones in order of appearance. The result has
    `finish_reason="tool_calls"` when there are calls, `"length"` when the upstream was
    cut off (a call cut off midway is then dropped, never half-returned).

    Args:
        inner: The upstream model.
        format: A name from `toolwire.parsing.FORMATS`, or `"auto"` to pick it from
            `inner.name`.
        prompt_suffix: The end of the upstream's generation prompt, when it pre-fills
            something (`"<think>\\n"`), so the parser knows where the output starts.
        on_parse_failure: Called with the format and the failure for each call the
            upstream opened but did not write validly (metrics count them; the text stays
            content).
    """

    def __init__(
        self,
        inner: Model,
        format: str,
        *,
        prompt_suffix: str = "",
        on_parse_failure: FailureHook | None = None,
    ) -> None:
        self._inner = inner
        self._format = format_for(inner.name, format=None if format == "auto" else format)
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
        """The format the output is parsed in (resolved when `"auto"` was given)."""
        return self._format

    def __repr__(self) -> str:
        return f"ParsingModel({self._inner!r}, format={self._format!r})"

    def turn(self, tools: Sequence[Tool], settings: ModelSettings | None) -> ParsedTurn:
        """A fresh `ParsedTurn` for one generation."""
        return ParsedTurn(
            self._inner.name,
            self._format,
            tools,
            prompt_suffix=self._suffix,
            max_calls=call_limit(settings),
            on_failure=self.on_parse_failure,
        )

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        turn = self.turn(tools, settings)
        return await complete_turn(self._inner, messages, tools, settings, turn)

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        turn = self.turn(tools, settings)
        return stream_turn(self._inner, messages, tools, settings, turn)
