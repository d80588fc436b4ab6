"""The estimate behind `POST /v1/messages/count_tokens`.

The gateway cannot count with the upstream's tokenizer: OpenAI-compatible servers have no
counting endpoint, the offline model has no tokenizer, and calling the upstream to count
would cost a request. So the answer is an estimate, the same for every upstream:

- text (system prompt, messages, tool calls' names and arguments, tool results, and
  every tool definition the model is shown, the gateway's server tools included): one
  token per 4 characters, rounded up, the usual rule of thumb for English text and JSON;
- 3 tokens per message for its framing (the role and separators of chat templates);
- 1,600 tokens per image or document, the size Anthropic gives a full-size image.

Use it to budget a context window, not to bill.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import orjson

from toolwire.models.messages import AssistantMessage, Message, UserMessage
from toolwire.tools.tool import Tool

__all__ = ["estimate_tokens"]

CHARS_PER_TOKEN: Final = 4
MESSAGE_TOKENS: Final = 3
ATTACHMENT_TOKENS: Final = 1600


def estimate_tokens(messages: Sequence[Message], tools: Iterable[Tool]) -> int:
    """The estimated input tokens of a request (see the module docstring)."""
    chars = 0
    fixed = 0
    for message in messages:
        fixed += MESSAGE_TOKENS
        if isinstance(message, AssistantMessage):
            chars += len(message.content or "")
            for call in message.tool_calls:
                chars += len(call.name) + len(call.arguments)
        elif isinstance(message, UserMessage):
            chars += len(message.content)
            if message.parts is not None:
                fixed += ATTACHMENT_TOKENS * sum(p.get("type") != "text" for p in message.parts)
        else:  # system and tool messages: their text
            chars += len(message.content)
    for tool in tools:
        chars += len(tool.name) + len(tool.description) + len(orjson.dumps(tool.input_schema))
    return -(-chars // CHARS_PER_TOKEN) + fixed
