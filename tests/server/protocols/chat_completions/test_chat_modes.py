"""`parse:<format>` and `prompted:<format>` routes over a real socket, driven by the
`openai` SDK: the upstream writes calls as text, the client gets proper `tool_calls`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_chat_support import (
    TIME_TOOL,
    WEATHER_TOOL,
    live_gateway,
    openai_upstream,
    post_chat,
    sdk,
    sse_chunks,
    user,
)
from live import LiveServer
from openai.types.chat import ChatCompletion
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, dropped, text_events, text_sse

INSTRUCTIONS = "TOOLWIRE-TEST instructions: use the tools below when they help."

HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
HERMES_ANSWER = "Let me check.\n" + HERMES_CALL
HERMES_TWO = (
    "<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    "</tool_call>\n<tool_call>\n"
    '{"name": "get_time", "arguments": {"city": "Tokyo"}}\n'
    "</tool_call>"
)
QWEN_ANSWER = (
    "Checking the weather.\n"
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</tool_call>"
)


@pytest.fixture(scope="module")
def server(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    models = {
        "hermes-raw": {"model": "qwen2.5-7b-instruct", "tool_calls": "parse:hermes"},
        "qwen-raw": {"model": "qwen3-coder-30b", "tool_calls": "parse:qwen3_xml"},
        "prompted": {"model": "plain-llm", "tool_calls": "prompted:hermes"},
    }
    upstream = openai_upstream(
        _openai_server_session.base_url, models, prompted_instructions=INSTRUCTIONS
    )
    with live_gateway(config_with(upstream=upstream)) as live:
        yield live


def _only_call(answer: ChatCompletion) -> tuple[str, dict[str, Any]]:
    calls = answer.choices[0].message.tool_calls
    assert calls is not None
    assert len(calls) == 1
    call = calls[0]
    assert call.type == "function"
    assert call.id
    return call.function.name, json.loads(call.function.arguments)


# --- parse:<format> -------------------------------------------------------------------------


def test_parse_hermes_stream_assembled_by_the_sdk(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(text_sse(HERMES_ANSWER, chunk=3))
    with (
        sdk(server) as client,
        client.chat.completions.stream(
            model="hermes-raw",
            messages=user(),
            tools=[WEATHER_TOOL],
        ) as stream,
    ):
        answer = stream.get_final_completion()
    choice = answer.choices[0]
    assert (choice.message.content or "").strip() == "Let me check."
    assert "<tool_call>" not in (choice.message.content or "")
    assert _only_call(answer) == ("get_weather", {"city": "Paris"})
    assert choice.finish_reason == "tool_calls"
    # A parse route still hands the tools to the upstream: its template renders them.
    assert [t["function"]["name"] for t in openai_server.last.json["tools"]] == ["get_weather"]


def test_parse_hermes_whole_answer(server: LiveServer, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(completion(HERMES_ANSWER))
    with sdk(server) as client:
        answer = client.chat.completions.create(
            model="hermes-raw",
            messages=user(),
            tools=[WEATHER_TOOL],
        )
    assert (answer.choices[0].message.content or "").strip() == "Let me check."
    assert _only_call(answer) == ("get_weather", {"city": "Paris"})
    assert answer.choices[0].finish_reason == "tool_calls"


def test_parse_hermes_parallel_calls_one_character_at_a_time(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(text_sse(HERMES_TWO, chunk=1))
    body = {
        "model": "hermes-raw",
        "messages": user("Weather in Paris and time in Tokyo?"),
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "stream": True,
    }
    chunks = sse_chunks(post_chat(server, body))
    starts = [
        (call["index"], call["function"]["name"])
        for c in chunks
        if c.get("choices")
        for call in c["choices"][0]["delta"].get("tool_calls", [])
        if "id" in call
    ]
    assert starts == [(0, "get_weather"), (1, "get_time")]
    arguments = {0: "", 1: ""}
    for c in chunks:
        for call in c["choices"][0]["delta"].get("tool_calls", []) if c.get("choices") else []:
            arguments[call["index"]] += call["function"].get("arguments", "")
    assert json.loads(arguments[0]) == {"city": "Paris"}
    assert json.loads(arguments[1]) == {"city": "Tokyo"}
    assert not any(
        "<tool_call>" in (c["choices"][0]["delta"].get("content") or "")
        for c in chunks
        if c.get("choices")
    )


def test_parse_plain_text_stays_content(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(text_sse("It is sunny in Paris, <b>18C</b>.", chunk=4))
    with (
        sdk(server) as client,
        client.chat.completions.stream(
            model="hermes-raw",
            messages=user(),
            tools=[WEATHER_TOOL],
        ) as stream,
    ):
        answer = stream.get_final_completion()
    assert answer.choices[0].message.content == "It is sunny in Paris, <b>18C</b>."
    assert not answer.choices[0].message.tool_calls
    assert answer.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("stream", [False, True])
def test_parse_qwen3_xml(server: LiveServer, openai_server: FakeOpenAIServer, stream: bool) -> None:
    openai_server.reply(text_sse(QWEN_ANSWER, chunk=5) if stream else completion(QWEN_ANSWER))
    answer: ChatCompletion
    with sdk(server) as client:
        if stream:
            with client.chat.completions.stream(
                model="qwen-raw",
                messages=user(),
                tools=[WEATHER_TOOL],
            ) as events:
                answer = events.get_final_completion()
        else:
            answer = client.chat.completions.create(
                model="qwen-raw",
                messages=user(),
                tools=[WEATHER_TOOL],
            )
    assert (answer.choices[0].message.content or "").strip() == "Checking the weather."
    assert _only_call(answer) == ("get_weather", {"city": "Paris"})
    assert answer.choices[0].finish_reason == "tool_calls"


# --- prompted:<format> ----------------------------------------------------------------------


def _system_text(sent: dict[str, Any]) -> str:
    first = sent["messages"][0]
    assert first["role"] == "system"
    content = first["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


@pytest.mark.parametrize("stream", [False, True])
def test_prompted_puts_the_tools_in_the_system_prompt(
    server: LiveServer, openai_server: FakeOpenAIServer, stream: bool
) -> None:
    openai_server.reply(text_sse(HERMES_ANSWER, chunk=7) if stream else completion(HERMES_ANSWER))
    answer: ChatCompletion
    with sdk(server) as client:
        if stream:
            with client.chat.completions.stream(
                model="prompted",
                messages=user(),
                tools=[WEATHER_TOOL],
                tool_choice="auto",
                parallel_tool_calls=True,
            ) as events:
                answer = events.get_final_completion()
        else:
            answer = client.chat.completions.create(
                model="prompted",
                messages=user(),
                tools=[WEATHER_TOOL],
                tool_choice="auto",
                parallel_tool_calls=True,
            )
    assert _only_call(answer) == ("get_weather", {"city": "Paris"})
    assert answer.choices[0].finish_reason == "tool_calls"
    sent = openai_server.last.json
    assert sent["model"] == "plain-llm"
    for field in ("tools", "tool_choice", "parallel_tool_calls"):
        assert field not in sent
    system = _system_text(sent)
    assert INSTRUCTIONS in system  # upstream.prompted_instructions
    assert "get_weather" in system
    assert "The current weather in a city." in system
    assert "<tool_call>" in system  # how to write a call
    assert sent["messages"][-1] == {"role": "user", "content": "What is the weather in Paris?"}


def test_prompted_extends_the_clients_system_message(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("Bonjour."))
    with sdk(server) as client:
        answer = client.chat.completions.create(
            model="prompted",
            messages=[
                {"role": "system", "content": "Answer in French."},
                *user(),
            ],
            tools=[WEATHER_TOOL],
        )
    assert answer.choices[0].message.content == "Bonjour."
    sent = openai_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    system = _system_text(openai_server.last.json)
    assert "Answer in French." in system
    assert "get_weather" in system


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "tool_choice",
    ["required", {"type": "function", "function": {"name": "get_weather"}}],
)
def test_prompted_forced_choice_ignored_once_is_corrected(
    server: LiveServer, openai_server: FakeOpenAIServer, stream: bool, tool_choice: Any
) -> None:
    ignored = "I think it is sunny in Paris."
    if stream:
        openai_server.reply(text_sse(ignored, chunk=5), text_sse(HERMES_CALL, chunk=5))
    else:
        openai_server.reply(completion(ignored), completion(HERMES_CALL))
    body = {
        "model": "prompted",
        "messages": user(),
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "tool_choice": tool_choice,
        "stream": stream,
    }
    response = post_chat(server, body)
    assert response.status_code == 200
    if stream:
        chunks = sse_chunks(response)
        content = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
        )
        names = [
            call["function"]["name"]
            for c in chunks
            if c.get("choices")
            for call in c["choices"][0]["delta"].get("tool_calls", [])
            if "id" in call
        ]
        # The ignored first answer was held back, never shown to the client.
        assert ignored not in content
        assert names == ["get_weather"]
    else:
        message = response.json()["choices"][0]["message"]
        assert message["tool_calls"][0]["function"]["name"] == "get_weather"
        assert ignored not in (message["content"] or "")
    assert len(openai_server.requests) == 2
    first, retry = (r.json for r in openai_server.requests)
    assert "tools" not in retry
    # The retry repeats the conversation, then the ignored answer and a correction.
    assert retry["messages"][: len(first["messages"])] == first["messages"]
    extra = retry["messages"][len(first["messages"]) :]
    assert extra[0] == {"role": "assistant", "content": ignored}
    assert extra[-1]["role"] == "user"
    assert "get_weather" in extra[-1]["content"] or "tool" in extra[-1]["content"]


def test_prompted_forced_choice_obeyed_is_one_request(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion(HERMES_CALL))
    with sdk(server) as client:
        answer = client.chat.completions.create(
            model="prompted",
            messages=user(),
            tools=[WEATHER_TOOL],
            tool_choice="required",
        )
    assert _only_call(answer) == ("get_weather", {"city": "Paris"})
    assert len(openai_server.requests) == 1


def test_prompted_history_is_rewritten_as_text(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(completion("It is 18C in Paris and 9pm in Tokyo."))
    history: list[Any] = [
        *user("Weather in Paris and time in Tokyo?"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_t",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"city": "Tokyo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_w", "content": "18C, clear sky"},
        {"role": "tool", "tool_call_id": "call_t", "content": "21:00"},
    ]
    with sdk(server) as client:
        answer = client.chat.completions.create(
            model="prompted",
            messages=history,
            tools=[WEATHER_TOOL, TIME_TOOL],
        )
    assert answer.choices[0].message.content == "It is 18C in Paris and 9pm in Tokyo."
    sent = openai_server.last.json["messages"]
    assert all(m["role"] in ("system", "user", "assistant") for m in sent)
    assert not any("tool_calls" in m or "tool_call_id" in m for m in sent)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    call_text = sent[2]["content"]
    assert "<tool_call>" in call_text
    assert "get_weather" in call_text
    assert "Tokyo" in call_text
    results = sent[3]["content"]
    assert "18C, clear sky" in results
    assert "21:00" in results
    assert results.index("18C, clear sky") < results.index("21:00")


def test_parse_stream_cut_inside_a_call_is_an_error(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    cut = HERMES_ANSWER[: HERMES_ANSWER.index("Paris")]
    openai_server.reply(dropped(text_events(cut, chunk=4, finish_reason=None)))
    body = {"model": "hermes-raw", "messages": user(), "tools": [WEATHER_TOOL], "stream": True}
    chunks = sse_chunks(post_chat(server, body))
    assert "error" in chunks[-1]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
    assert not any(finishes)  # a half-written call never passes for a finished answer
