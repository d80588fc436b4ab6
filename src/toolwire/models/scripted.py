"""`ScriptedModel`: a model that replays responses you give it, for tests.

```python
model = ScriptedModel([
    AssistantMessage(tool_calls=(ToolCall(id="c1", name="add", arguments='{"a": 1}'),)),
    "The sum is 1.",
])
result = await Agent(model, tools).run("add one")
model.assert_complete()
assert model.requests[1].messages[-1].content == "1"
```
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from toolwire.models.base import ModelError, ModelResponse, ModelSettings, ModelStreamEvent
from toolwire.models.events import (
    ModelContentDelta,
    ModelReasoningDelta,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.messages import AssistantMessage, Message, Usage
from toolwire.tools.tool import Tool

__all__ = ["ScriptExhaustedError", "ScriptedModel", "ScriptedRequest", "ScriptedResponse"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedRequest:
    """One request a `ScriptedModel` received."""

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...]
    settings: ModelSettings | None
    stream: bool
    """Whether the request came through `stream()` rather than `complete()`."""

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


_Reply = ModelResponse | AssistantMessage | str
ScriptedResponse = (
    _Reply | Callable[[ScriptedRequest], _Reply] | Callable[[ScriptedRequest], Awaitable[_Reply]]
)
"""A scripted turn: a full `ModelResponse`, an `AssistantMessage`, plain text, or a
function of the `ScriptedRequest` (sync or async) returning one of those."""


class ScriptExhaustedError(ModelError):
    """A `ScriptedModel` was asked for more responses than it was given."""


class ScriptedModel:
    """A `Model` that replays scripted responses in order and records every request.

    `stream()` yields the same response in small pieces: text and reasoning as chunks of
    `chunk_size` characters, each tool call as a `ModelToolCallStart` followed by partial
    argument deltas, then the complete `ModelResponse`.

    Args:
        responses: The turns to replay, in order. See `ScriptedResponse`.
        name: What `name` reports.
        chunk_size: Characters per streamed text or argument delta.
    """

    def __init__(
        self,
        responses: Iterable[ScriptedResponse] = (),
        *,
        name: str = "scripted",
        chunk_size: int = 8,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1.")
        self._responses: deque[ScriptedResponse] = deque(responses)
        self._name = name
        self._chunk = chunk_size
        self._given = len(self._responses)
        self.requests: list[ScriptedRequest] = []
        """Every request received, in order."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        return len(self._responses)

    def enqueue(self, *responses: ScriptedResponse) -> None:
        """Append responses to the script."""
        self._responses.extend(responses)
        self._given += len(responses)

    def assert_complete(self) -> None:
        """Raise `AssertionError` if some scripted responses were never requested."""
        if self._responses:
            raise AssertionError(
                f"ScriptedModel {self._name!r}: {len(self._responses)} of {self._given} scripted "
                f"responses were never requested ({len(self.requests)} requests made)."
            )

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        return await self._next(messages, tools, settings, stream=False)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        response = await self._next(messages, tools, settings, stream=True)
        n = self._chunk
        msg = response.message
        if msg.reasoning:
            text = msg.reasoning
            for i in range(0, len(text), n):
                yield ModelReasoningDelta(text[i : i + n])
        if msg.content:
            text = msg.content
            for i in range(0, len(text), n):
                yield ModelContentDelta(text[i : i + n])
        for index, call in enumerate(msg.tool_calls):
            yield ModelToolCallStart(index, call.id, call.name)
            args = call.arguments
            for i in range(0, len(args), n):
                yield ModelToolCallArgsDelta(index, args[i : i + n])
        yield response

    async def _next(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        settings: ModelSettings | None,
        *,
        stream: bool,
    ) -> ModelResponse:
        request = ScriptedRequest(
            messages=tuple(messages), tools=tuple(tools), settings=settings, stream=stream
        )
        self.requests.append(request)
        if not self._responses:
            raise ScriptExhaustedError(
                f"ScriptedModel {self._name!r} has no response left for request "
                f"#{len(self.requests)} ({self._given} scripted). Add more with enqueue(...)."
            )
        item = self._responses.popleft()
        if callable(item):
            produced = item(request)
            item = await produced if inspect.isawaitable(produced) else produced
        return _to_response(item, self._name)


def _to_response(item: _Reply, model: str) -> ModelResponse:
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, str):
        return ModelResponse(
            message=AssistantMessage(content=item), usage=Usage(requests=1), model=model
        )
    if isinstance(item, AssistantMessage):
        return ModelResponse(
            message=item,
            finish_reason="tool_calls" if item.tool_calls else "stop",
            usage=Usage(requests=1),
            model=model,
        )
    raise TypeError(
        f"ScriptedModel: cannot use {type(item).__name__} as a response; give a ModelResponse, "
        "an AssistantMessage, a str, or a function returning one."
    )
