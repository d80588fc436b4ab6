"""Real servers' quirks, absorbed here: one named profile per OpenAI-compatible engine.

Every Chat Completions request toolwire sends upstream goes through the profile of the
upstream's engine (`upstream.engine` in the gateway config, `OpenAIChatModel(engine=...)`)
just before it is sent, and only here: the wire format (`openai_wire`) writes what the
protocol says, the front doors and the agent know nothing of individual servers.

Each quirk below was seen from the real server (the end-to-end suite runs llama.cpp's
`llama-server` and llama-cpp-python's server; tests/models/test_quirks.py replays the
recordings). What the stream assembler already copes with for every upstream, whatever
the engine, is listed in `ChatStreamAssembler`'s docstring (ids or names repeated on every
delta, calls at index 0, `finish_reason` `"stop"` or missing after tool calls, usage in
the last chunk only).
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

__all__ = ["ENGINES", "Engine", "EngineQuirks", "quirks_for"]

Engine = Literal[
    "generic", "llama.cpp", "llama-cpp-python", "vllm", "sglang", "ollama", "lm-studio"
]
"""The engines toolwire knows by name (see docs/engines.md)."""

ENGINES: Final[tuple[str, ...]] = get_args(Engine)


class EngineQuirks:
    """The generic profile, and the base of every engine's own.

    Generic: an assistant message's `"content": null` beside its `tool_calls` is sent as
    `""`. The protocol allows both; llama-cpp-python's server rejects `null` (HTTP 500,
    "Input should be a valid string"), which failed the second turn of every tool call,
    and every server toolwire was run against accepts `""`.
    """

    name: str = "generic"

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request body as this engine needs it (`body` may be changed in place)."""
        for message in body["messages"]:
            if message.get("content") is None and message.get("role") == "assistant":
                message["content"] = ""
        return body


class LlamaCppQuirks(EngineQuirks):
    """llama.cpp's `llama-server`.

    - A named `tool_choice` (`{"type": "function", "function": {"name": ...}}`) is not
      read: the server logs "Wrong type supplied for parameter 'tool_choice', using
      default value" and lets the model choose. It is sent as `"required"` with only the
      named tool offered, which asks for the same thing in the form the server reads.
    """

    name = "llama.cpp"

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        body = super().request(body)
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            named = (choice.get("function") or {}).get("name")
            body["tool_choice"] = "required"
            body["tools"] = [t for t in body.get("tools", ()) if t["function"]["name"] == named]
        return body


class LlamaCppPythonQuirks(EngineQuirks):
    """llama-cpp-python's server (`python -m llama_cpp.server`), whose tool calls come
    from its `chatml-function-calling` chat format.

    - `tool_choice: "required"` fails with HTTP 500 and an empty message (the format
      asserts the choice is `"auto"`). With one tool offered it means that tool, and is
      sent as the named choice, which the format supports.
    - `tool_choice: "auto"` with `stream: true` ends in an empty stream (the format raises
      "Automatic streaming tool choice is not supported" after the 200 was sent). It is
      asked for in one piece; the answer is replayed as stream events.

    Not absorbed (docs/engines.md says what to do): its streams carry no usage (it ignores
    `stream_options`); tools without a `tool_choice` are not shown to the model; the
    format leaves tool results out of the prompt.
    """

    name = "llama-cpp-python"

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        body = super().request(body)
        choice = body.get("tool_choice")
        tools: list[dict[str, Any]] = body.get("tools") or []
        if choice == "required" and len(tools) == 1:
            name = tools[0]["function"]["name"]
            body["tool_choice"] = {"type": "function", "function": {"name": name}}
        elif choice == "auto" and tools and body.get("stream"):
            del body["stream"]
            body.pop("stream_options", None)
        return body


_PROFILES: Final[dict[str, EngineQuirks]] = {
    "generic": EngineQuirks(),
    "llama.cpp": LlamaCppQuirks(),
    "llama-cpp-python": LlamaCppPythonQuirks(),
}


def quirks_for(engine: str) -> EngineQuirks:
    """The profile of `engine` (one of `ENGINES`).

    Raises:
        ValueError: The engine is unknown; the message lists the known ones.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use one of: {', '.join(ENGINES)}")
    return _PROFILES.get(engine, _PROFILES["generic"])
