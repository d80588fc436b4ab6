"""OpenTelemetry traces, following the GenAI semantic conventions, when turned on.

Off by default: nothing is imported, recorded or sent, and `span()` is a shared no-op
context manager (one attribute read per call). `enable_otlp()` (the gateway's `tracing:`
config, `pip install 'toolwire[otel]'`) installs a tracer provider that exports over
OTLP/HTTP; `enable(provider)` uses one of yours (tests use the SDK's in-memory exporter).

Spans: one per gateway request (`POST /v1/chat/completions`), one per model turn
(`chat {model}`, with `gen_ai.*` request, response and token-usage attributes) and one
per tool call (`execute_tool {name}`, with `gen_ai.tool.name` and `gen_ai.tool.call.id`).
This module imports nothing from toolwire, so every layer may use it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = [
    "disable",
    "enable",
    "enable_otlp",
    "enabled",
    "model_turn",
    "record",
    "set_attributes",
    "span",
]

_tracer: Any = None


def enabled() -> bool:
    """Whether spans are being recorded."""
    return _tracer is not None


def enable(provider: Any) -> None:
    """Record spans with `provider` (an OpenTelemetry SDK `TracerProvider`)."""
    global _tracer
    _tracer = provider.get_tracer("toolwire")


def enable_otlp(endpoint: str | None = None, *, service_name: str = "toolwire") -> None:
    """Export spans over OTLP/HTTP to `endpoint` (default: `OTEL_EXPORTER_OTLP_ENDPOINT`,
    else the collector's `http://localhost:4318`).

    Raises:
        ImportError: The `otel` extra is not installed (the message says how).
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ImportError("tracing needs the otel extra: pip install 'toolwire[otel]'") from None
    exporter = (
        OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
        if endpoint
        else OTLPSpanExporter()
    )
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    enable(provider)


def disable() -> None:
    """Stop recording spans."""
    global _tracer
    _tracer = None


_NOTHING = contextlib.nullcontext(None)


def span(
    name: str, attributes: dict[str, Any] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A span named `name` (the current one's child), or a no-op when tracing is off.

    The value bound by `with` is the span (or `None`); set more attributes on it with
    `set_attributes(span, {...})`.
    """
    tracer = _tracer
    if tracer is None:
        return _NOTHING
    return _recording(tracer, name, attributes)


@contextlib.contextmanager
def _recording(tracer: Any, name: str, attributes: dict[str, Any] | None) -> Iterator[Any]:
    with tracer.start_as_current_span(name, attributes=_clean(attributes)) as current:
        yield current


def record(
    name: str, start_ns: int, attributes: dict[str, Any], *, error: str | None = None
) -> None:
    """A finished span that started at `start_ns` (`time.time_ns()`) and ends now; for
    work inside generators, where a current span would leak across `yield`s."""
    tracer = _tracer
    if tracer is None:
        return
    finished = tracer.start_span(name, start_time=start_ns, attributes=_clean(attributes))
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        finished.set_attribute("error.type", error)
        finished.set_status(Status(StatusCode.ERROR))
    finished.end()


def model_turn(
    model: str, start_ns: int, finish_reason: str, input_tokens: int, output_tokens: int
) -> None:
    """The `chat {model}` span of one model turn (GenAI semantic conventions)."""
    if _tracer is None:
        return
    record(
        f"chat {model}",
        start_ns,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.response.finish_reasons": [finish_reason],
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
        },
    )


def set_attributes(current: Any, attributes: dict[str, Any]) -> None:
    """Add attributes to a span from `span()` (nothing when tracing is off)."""
    if current is not None:
        current.set_attributes(_clean(attributes))


def _clean(attributes: dict[str, Any] | None) -> dict[str, Any]:
    # OpenTelemetry takes str, bool, int, float and sequences of them; None is dropped.
    out: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if value is None:
            continue
        out[key] = list(value) if isinstance(value, tuple) else value
    return out
