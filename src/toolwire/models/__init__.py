"""Upstream model clients behind one `Model` protocol.

`Model.stream()` yields this layer's own events (`ModelContentDelta`, `ModelReasoningDelta`,
`ModelToolCallStart`, `ModelToolCallArgsDelta`, then one `ModelResponse`), distinct from
the parser's and the agent's; see `toolwire.models.events`.
"""

from toolwire.models import messages
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.base import (
    FinishReason,
    Model,
    ModelError,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ToolChoice,
)
from toolwire.models.events import (
    ModelContentDelta,
    ModelDelta,
    ModelReasoningDelta,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
)
from toolwire.models.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolwire.models.offline import OfflineModel
from toolwire.models.openai import OpenAIChatModel
from toolwire.models.parsed import ParsingModel
from toolwire.models.prompted import PromptedModel
from toolwire.models.scripted import (
    ScriptedModel,
    ScriptedRequest,
    ScriptedResponse,
    ScriptExhaustedError,
)

__all__ = [
    "AnthropicModel",
    "AssistantMessage",
    "FinishReason",
    "Message",
    "Model",
    "ModelContentDelta",
    "ModelDelta",
    "ModelError",
    "ModelReasoningDelta",
    "ModelResponse",
    "ModelSettings",
    "ModelStreamEvent",
    "ModelToolCallArgsDelta",
    "ModelToolCallStart",
    "OfflineModel",
    "OpenAIChatModel",
    "ParsingModel",
    "PromptedModel",
    "ScriptExhaustedError",
    "ScriptedModel",
    "ScriptedRequest",
    "ScriptedResponse",
    "SystemMessage",
    "ToolChoice",
    "ToolMessage",
    "Usage",
    "UserMessage",
    "messages",
]
