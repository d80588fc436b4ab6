"""Each engine's quirks (`toolwire.models.quirks`), against what the real servers sent.

The recordings in `recordings/` were taken from the servers the end-to-end suite runs
(llama-server and llama-cpp-python's server, SmolLM2-135M): the request, and the answer or
the server's log line that shows the quirk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from toolwire.models import (
    AssistantMessage,
    ModelResponse,
    ModelSettings,
    ModelToolCallArgsDelta,
    ModelToolCallStart,
    OpenAIChatModel,
    ToolMessage,
    UserMessage,
)
from toolwire.models import openai_wire as wire
from toolwire.models.quirks import ENGINES, quirks_for
from toolwire.models.sse import SSEDecoder
from toolwire.tools import Tool, ToolCall

RECORDINGS = Path(__file__).with_name("recordings")
WEATHER = Tool(
    name="get_weather",
    description="The current weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
TIME = Tool(
    name="get_time",
    description="The local time in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
HISTORY = [
    UserMessage(content="What is the weather in Paris?"),
    AssistantMessage(
        content=None,
        tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),),
    ),
    ToolMessage(call_id="call_1", name="get_weather", content='{"temperature": 21}'),
]


def _recorded(name: str) -> Any:
    return json.loads((RECORDINGS / name).read_text())


def _body(engine: str, settings: ModelSettings | None = None, **options: Any) -> dict[str, Any]:
    tools = options.pop("tools", [WEATHER])
    body = wire.build_request("m", HISTORY, tools, settings, **options)
    # As it goes on the wire: the profile sees a body it may change, once.
    return dict(orjson.loads(orjson.dumps(quirks_for(engine).request(body))))


@pytest.mark.parametrize("engine", ENGINES)
def test_null_content_beside_tool_calls_goes_as_empty_text(engine: str) -> None:
    recorded = _recorded("llama_cpp_python_requests.json")
    refused = recorded["content_null_beside_tool_calls"]
    accepted = recorded["content_empty_beside_tool_calls"]
    assert refused["status"] == 500
    assert "Input should be a valid string" in refused["body"]["error"]["message"]
    assert accepted["status"] == 200
    sent = _body(engine)["messages"][1]
    assert sent["content"] == accepted["request"]["messages"][1]["content"] == ""
    assert sent["tool_calls"][0]["function"]["name"] == "get_weather"


def test_llama_cpp_python_required_choice_of_one_tool_is_named() -> None:
    recorded = _recorded("llama_cpp_python_requests.json")["tool_choice_required"]
    assert recorded["status"] == 500
    assert recorded["body"]["error"]["message"] == ""
    body = _body("llama-cpp-python", ModelSettings(tool_choice="required"))
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    # With several tools "required" is not one named choice: it goes as it is.
    several = _body(
        "llama-cpp-python", ModelSettings(tool_choice="required"), tools=[WEATHER, TIME]
    )
    assert several["tool_choice"] == "required"


def test_llama_cpp_python_streamed_auto_choice_is_asked_in_one_piece() -> None:
    recorded = _recorded("llama_cpp_python_requests.json")["tool_choice_auto_streamed"]
    # The server said 200, then sent nothing: it raised after the headers.
    assert (recorded["status"], recorded["body"]) == (200, "")
    body = _body("llama-cpp-python", ModelSettings(tool_choice="auto"), stream=True)
    assert "stream" not in body
    assert "stream_options" not in body
    # Without tools, or not streamed, nothing changes.
    plain = _body("llama-cpp-python", ModelSettings(tool_choice="auto"), tools=[], stream=True)
    assert plain["stream"] is True


def test_llama_cpp_python_named_call_stream_is_one_call() -> None:
    # Every delta repeats the call's id and name (and a legacy `function_call`), the
    # arguments come a token at a time, and no usage is sent.
    decoder = SSEDecoder()
    raw = (RECORDINGS / "llama_cpp_python_named_tool_call.sse").read_bytes()
    assembler = wire.ChatStreamAssembler()
    events = []
    for data in decoder.feed(raw) + decoder.finish():
        if data != b"[DONE]":
            events += assembler.feed(orjson.loads(data))
    response = assembler.finish()
    starts = [e for e in events if isinstance(e, ModelToolCallStart)]
    assert len(starts) == 1
    [call] = response.message.tool_calls
    assert call.id == starts[0].id
    assert call.id.startswith("call__0_get_weather_cmpl-")
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert (
        "".join(e.text for e in events if isinstance(e, ModelToolCallArgsDelta)) == call.arguments
    )
    assert response.finish_reason == "tool_calls"
    assert response.message.content is None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (0, 0)


def test_llama_cpp_named_choice_goes_as_required_with_that_tool() -> None:
    recorded = _recorded("llama_cpp_named_tool_choice.json")
    assert "Wrong type supplied for parameter 'tool_choice'" in recorded["server_log"]
    assert recorded["answer_tool_calls"] is None  # the model was free to answer in text
    body = _body("llama.cpp", ModelSettings(tool_choice="get_weather"), tools=[WEATHER, TIME])
    assert body["tool_choice"] == "required"
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]


def test_generic_sends_what_the_protocol_says() -> None:
    body = _body("generic", ModelSettings(tool_choice="get_weather"), stream=True)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["stream"] is True


def test_an_unknown_engine_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"use one of: generic, llama\.cpp, llama-cpp-python"):
        quirks_for("llamacpp")


async def test_a_streamed_auto_choice_on_llama_cpp_python_streams_the_whole_answer(
    openai_server: FakeOpenAIServer,
) -> None:
    # The profile asks for the answer in one piece; the model replays it as a stream.
    openai_server.reply(completion(tool_calls=[tool_call("get_weather", {"city": "Paris"})]))
    model = OpenAIChatModel(openai_server.base_url, None, "smollm2-fc", engine="llama-cpp-python")
    events = [
        e async for e in model.stream(HISTORY[:1], [WEATHER], ModelSettings(tool_choice="auto"))
    ]
    sent = openai_server.last.json
    assert "stream" not in sent
    assert sent["tool_choice"] == "auto"
    [start] = [e for e in events if isinstance(e, ModelToolCallStart)]
    assert start.name == "get_weather"
    response = events[-1]
    assert isinstance(response, ModelResponse)
    assert json.loads(response.message.tool_calls[0].arguments) == {"city": "Paris"}
