"""What `Model.stream()` yields before its final `ModelResponse`: small tagged dataclasses.

These are the models layer's own types, named `Model...` so that no name in the public
surface means two things: `toolwire.parsing` keeps its parser events (`ContentDelta`,
`ReasoningDelta`, `ToolCallStart`, `ToolCallArgsDelta`; that layer depends on nothing else
in the package) and `toolwire.agent` has its run events (`TextDelta`, `ReasoningDelta`,
`ToolCallStart`, ...). A parser's events become these in exactly one place,
`toolwire.models.parsed.ParsedTurn` (and `OfflineModel`, which parses its own text).
Consumers of a model stream (the agent, the gateway) import them from `toolwire.models`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ModelContentDelta",
    "ModelDelta",
    "ModelReasoningDelta",
    "ModelToolCallArgsDelta",
    "ModelToolCallStart",
]


@dataclass(frozen=True, slots=True)
class ModelContentDelta:
    """A piece of the model's visible answer."""

    text: str
    type: Literal["model_content"] = "model_content"


@dataclass(frozen=True, slots=True)
class ModelReasoningDelta:
    """A piece of the model's reasoning (thinking) text."""

    text: str
    type: Literal["model_reasoning"] = "model_reasoning"


@dataclass(frozen=True, slots=True)
class ModelToolCallStart:
    """A tool call begins: the first event of output index `index`.

    Native upstreams emit it as soon as the call's id and name are known, parsed ones once
    the whole call is read; either way its arguments follow as `ModelToolCallArgsDelta`s.
    """

    index: int
    id: str
    name: str
    type: Literal["model_tool_call_start"] = "model_tool_call_start"


@dataclass(frozen=True, slots=True)
class ModelToolCallArgsDelta:
    """A fragment of a call's JSON arguments; the fragments of one index concatenate to it."""

    index: int
    text: str
    type: Literal["model_tool_call_args"] = "model_tool_call_args"


ModelDelta = ModelContentDelta | ModelReasoningDelta | ModelToolCallStart | ModelToolCallArgsDelta
"""Every event of a model stream but the final `ModelResponse`."""
