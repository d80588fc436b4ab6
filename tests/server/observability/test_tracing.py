"""OpenTelemetry traces: off by default; with `tracing.enabled`, a request span, a
`chat {model}` span per model turn and an `execute_tool {name}` span per tool call, sent
over real OTLP/HTTP to a receiver the test runs on loopback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from chat_support import native_upstream
from live import LiveServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from server_support import TOOLS_MODULE, config_with
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from toolwire import Agent, Toolbox, tool, tracing
from toolwire.models.messages import AssistantMessage
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.tools import ToolCall


@pytest.fixture(autouse=True)
def _off_afterwards() -> Iterator[None]:
    yield
    tracing.disable()


def test_tracing_is_off_by_default() -> None:
    assert not tracing.enabled()
    with tracing.span("anything") as current:
        assert current is None


async def test_an_agent_run_records_model_and_tool_spans() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    call = ToolCall(id="call_7", name="add", arguments='{"a": 1, "b": 2}')
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "3"], name="scripted-1")
    await Agent(model, Toolbox([add])).run("1 + 2?")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"chat scripted-1", "execute_tool add"}
    tool_span = spans["execute_tool add"]
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.name"] == "add"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_7"
    chat = [s for s in exporter.get_finished_spans() if s.name == "chat scripted-1"]
    assert len(chat) == 2  # two model turns
    assert chat[0].attributes is not None
    assert chat[0].attributes["gen_ai.request.model"] == "scripted-1"
    assert chat[0].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)


class _Collector:
    """An OTLP/HTTP receiver: what a collector's `/v1/traces` gets."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.app = Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])])

    async def _traces(self, request: Request) -> Response:
        export = ExportTraceServiceRequest.FromString(await request.body())
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        return Response(b"", media_type="application/x-protobuf")


def _attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = (
            value.string_value or value.int_value or value.bool_value or value.double_value
        )
    return out


def test_the_gateway_sends_spans_over_otlp(openai_server: FakeOpenAIServer) -> None:
    collector = _Collector()
    with LiveServer(collector.app) as otlp:
        config = config_with(
            upstream=native_upstream(openai_server.base_url),
            server_tools={"modules": [TOOLS_MODULE]},
            tracing={"enabled": True, "endpoint": otlp.url, "service_name": "tw-test"},
            store="memory",
        )
        openai_server.reply(
            completion(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="call_x")]),
            completion("5", usage={"prompt_tokens": 11, "completion_tokens": 1}),
        )
        with LiveServer(create_app(config)) as gateway, httpx.Client(base_url=gateway.url) as h:
            response = h.post(
                "/v1/chat/completions",
                json={"model": "gpt", "messages": [{"role": "user", "content": "2+3"}]},
            )
            assert response.status_code == 200
            request_id = response.headers["x-request-id"]
        tracing.disable()
        deadline = time.monotonic() + 10
        names: set[str] = set()
        while time.monotonic() < deadline:
            names = {s.name for s in collector.spans}
            if {"POST /v1/chat/completions", "execute_tool add", "chat gpt-4o"} <= names:
                break
            time.sleep(0.1)
    assert {"POST /v1/chat/completions", "execute_tool add", "chat gpt-4o"} <= names, names
    by_name = {s.name: s for s in collector.spans}
    root = by_name["POST /v1/chat/completions"]
    assert _attributes(root)["toolwire.request_id"] == request_id
    assert _attributes(root)["http.response.status_code"] == 200
    tool_span = by_name["execute_tool add"]
    assert _attributes(tool_span)["gen_ai.tool.call.id"] == "call_x"
    # One trace: the tool and model spans are children of the request's span.
    assert tool_span.trace_id == root.trace_id
    assert by_name["chat gpt-4o"].trace_id == root.trace_id
    usage = [_attributes(s) for s in collector.spans if s.name == "chat gpt-4o"]
    assert any(u.get("gen_ai.usage.input_tokens") == 11 for u in usage)
