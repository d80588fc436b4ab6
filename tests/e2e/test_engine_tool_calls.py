"""Tool calls the real model writes, through `toolwire serve`: parsed out of its text
(`prompted:hermes`, `parse:hermes`) or the engine's own (llama-cpp-python, a named
`tool_choice`), streamed and not; the follow-up turn with the tool result is accepted by
the real server; and the agent loop runs a server tool against the real model."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from engine_support import HERMES_CALL_GRAMMAR, QUESTION, WEATHER, WEATHER_TOOL, Target, tool_result
from openai.types.chat import ChatCompletionMessageFunctionToolCall


def _ask(
    sdk: openai.OpenAI, model: str, messages: Any, stream: bool, **options: Any
) -> tuple[str | None, list[tuple[str, str, str]], str | None]:
    """The answer's content, its calls `(id, name, arguments)` and finish reason, rebuilt
    from the chunks when streamed (as a client does)."""
    request: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "tools": [WEATHER_TOOL],
        "temperature": 0,
        "max_tokens": 48,
        **options,
    }
    if not stream:
        answer = sdk.chat.completions.create(**request)
        message = answer.choices[0].message
        calls = [
            (c.id, c.function.name, c.function.arguments)
            for c in message.tool_calls or []
            if isinstance(c, ChatCompletionMessageFunctionToolCall)
        ]
        return message.content, calls, answer.choices[0].finish_reason
    content: list[str] = []
    parts: dict[int, list[str]] = {}
    finish = None
    for chunk in sdk.chat.completions.create(**request, stream=True):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        content.append(choice.delta.content or "")
        for delta in choice.delta.tool_calls or []:
            call = parts.setdefault(delta.index, ["", "", ""])
            fn = delta.function
            call[0] = call[0] or delta.id or ""
            call[1] = call[1] or (fn.name if fn and fn.name else "")
            call[2] += fn.arguments if fn and fn.arguments else ""
        finish = choice.finish_reason or finish
    rebuilt = [(i, n, a) for i, n, a in (parts[k] for k in sorted(parts))]
    return "".join(content) or None, rebuilt, finish


def _call_and_follow_up(target: Target, model: str, stream: bool, **force: Any) -> str:
    """One forced call of `get_weather`, then the follow-up turn with its result; returns
    the model's answer to the follow-up."""
    with target.openai() as sdk:
        content, calls, finish = _ask(sdk, model, QUESTION, stream, **force)
        assert finish == "tool_calls"
        assert content is None
        [(call_id, name, arguments)] = calls
        assert name == "get_weather"
        assert json.loads(arguments) == {"city": "Paris"}
        assert call_id
        # The assistant message exactly as the SDK gives it back: `content: null`.
        assistant = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
        history = [*QUESTION, assistant, tool_result(call_id)]
        answer, more, finish = _ask(sdk, model, history, stream)
    assert finish in ("stop", "length")
    assert not more
    assert answer
    return answer


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_prompted_call_from_the_models_text(target: Target, stream: bool) -> None:
    # The upstream request carries no tools: the grammar writes a Hermes <tool_call>.
    answer = _call_and_follow_up(
        target, "prompted", stream, extra_body={"grammar": HERMES_CALL_GRAMMAR}
    )
    assert "<tool_call>" not in answer


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_parsed_call_from_the_models_text(llama_cpp_python_target: Target, stream: bool) -> None:
    # The tools go upstream (its ChatML format ignores them); the grammar writes the call
    # and toolwire parses it. The follow-up sends the call back as `tool_calls` beside
    # `content: ""`: llama-cpp-python refuses `null` there.
    _call_and_follow_up(
        llama_cpp_python_target, "parse", stream, extra_body={"grammar": HERMES_CALL_GRAMMAR}
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_native_call_with_a_named_tool_choice(
    llama_cpp_python_target: Target, stream: bool
) -> None:
    # llama-cpp-python's chatml-function-calling writes the call under a JSON-schema
    # grammar of its own and returns it as `tool_calls`.
    _call_and_follow_up(
        llama_cpp_python_target,
        "native",
        stream,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )


def test_agent_loop_runs_a_server_tool_against_the_model(agent_target: Target) -> None:
    # The grammar makes every turn a call, so the loop runs until its bound (two turns):
    # each call is parsed from the model's text, run in the gateway, and its result
    # goes back to the real server, which takes it.
    with agent_target.openai() as sdk:
        answer = sdk.chat.completions.create(
            model="prompted",
            messages=QUESTION,
            temperature=0,
            max_tokens=48,
            extra_body={"grammar": HERMES_CALL_GRAMMAR},
        )
    run = (answer.model_extra or {})["toolwire"]
    assert run["status"] == "max_iterations"
    assert [c["name"] for c in run["tool_calls"]] == ["get_weather", "get_weather"]
    for call in run["tool_calls"]:
        assert json.loads(call["arguments"]) == {"city": "Paris"}
        assert call["result"]["result"] == WEATHER
    assert answer.usage is not None
    assert answer.usage.prompt_tokens > 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_native_required_choice_of_the_one_tool(
    llama_cpp_python_target: Target, stream: bool
) -> None:
    # chatml-function-calling fails "required" (HTTP 500); with one tool, toolwire's
    # llama-cpp-python profile sends it as that tool's named choice.
    with llama_cpp_python_target.openai() as sdk:
        content, calls, finish = _ask(sdk, "native", QUESTION, stream, tool_choice="required")
    assert content is None
    assert finish == "tool_calls"
    [(call_id, name, arguments)] = calls
    assert (name, json.loads(arguments)) == ("get_weather", {"city": "Paris"})
    assert call_id.startswith("call_")


def test_native_auto_choice_streamed(llama_cpp_python_target: Target) -> None:
    # Streamed, chatml-function-calling's "auto" ends in an empty stream; toolwire asks
    # for it in one piece and streams that: the engine's own (greedy) choice.
    direct = llama_cpp_python_target.direct(
        "native", QUESTION, tools=[WEATHER_TOOL], tool_choice="auto", max_tokens=48
    )["choices"][0]
    with llama_cpp_python_target.openai() as sdk:
        content, calls, finish = _ask(sdk, "native", QUESTION, True, tool_choice="auto")
    assert finish == direct["finish_reason"]
    assert content == direct["message"]["content"]
    expected = [
        (c["function"]["name"], c["function"]["arguments"])
        for c in direct["message"].get("tool_calls") or []
    ]
    assert [(name, arguments) for _, name, arguments in calls] == expected
