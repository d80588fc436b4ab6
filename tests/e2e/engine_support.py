"""What the end-to-end tests share: the engines behind a gateway, the tool, the grammar,
and the engine's own answer to compare the gateway's with."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import anthropic
import httpx
import openai
from engine_processes import EngineProcess, GatewayProcess

MAX_TOKENS: Final = 12
"""Plain answers are cut here: a 135M model on 2 shared cores writes ~10-60 tokens/s."""

WEATHER_TOOL: Final[Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name."}},
            "required": ["city"],
        },
    },
}

HERMES_CALL_GRAMMAR: Final = (
    'root ::= "<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": '
    '{\\"city\\": \\"" [A-Z] [a-z]+ "\\"}}\\n</tool_call>"'
)
"""GBNF that makes the model write one Hermes call of `get_weather` (the city is its own):
how users force a small model to call a tool through `prompted:hermes` or `parse:hermes`."""

QUESTION: Final[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
GREETING: Final[Any] = [{"role": "user", "content": "Say hello."}]
WEATHER: Final = {"city": "Paris", "temperature": 21, "sky": "sunny"}


@dataclass(frozen=True, slots=True)
class Target:
    """One engine with `toolwire serve` in front of it.

    `models` maps the gateway's public ids to the engine's model names: `plain` (native,
    no tools), `prompted` (`prompted:hermes`) and, on llama-cpp-python, `parse`
    (`parse:hermes`) and `native` (its own tool calls).
    """

    name: str
    engine: EngineProcess
    gateway: GatewayProcess
    models: dict[str, str]

    def openai(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.gateway.url}/v1", api_key="unused", max_retries=0)

    def anthropic(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.gateway.url, api_key="unused", max_retries=0)

    def direct(self, public: str, messages: Any, **body: Any) -> dict[str, Any]:
        """The engine's own (non-streamed) answer to the request the gateway would send."""
        request = {"model": self.models[public], "messages": messages, "temperature": 0, **body}
        answer = httpx.post(f"{self.engine.url}/v1/chat/completions", json=request, timeout=120)
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = answer.json()
        return data


def tool_result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(WEATHER)}
