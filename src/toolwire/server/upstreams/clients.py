"""The upstream `Model` behind each public model id, built once when the gateway starts.

`upstream.kind` picks the client (OpenAI-compatible, Anthropic, offline) and the route's
`tool_calls` mode wraps it: `native` as it is, `parse:<format>` in a `ParsingModel` (the
upstream writes calls as text), `prompted:<format>` in a `PromptedModel` (the upstream
knows nothing of tools). The `tool_request` dialect adds a parser for the whole-message
`{"tool_request": ...}` form on top of a native upstream.
"""

from __future__ import annotations

from typing import Literal

import httpx

from toolwire.models import Model, OfflineModel, OpenAIChatModel
from toolwire.models.call_ids import IdStyle, id_style_for
from toolwire.models.observed import ModelObserver, ObservedModel
from toolwire.models.parsed import FailureHook, ParsingModel
from toolwire.server.configuration.config import ModelRoute, UpstreamConfig, parse_tool_calls

__all__ = ["build_model", "id_style"]


def id_style(upstream: UpstreamConfig, upstream_model: str) -> IdStyle:
    """How call ids are rewritten for this upstream model (see `UpstreamConfig.tool_call_ids`)."""
    setting = upstream.tool_call_ids
    if setting != "auto":
        return setting
    if upstream.kind == "anthropic":
        return "anthropic"
    return id_style_for(upstream_model)


def build_model(
    upstream: UpstreamConfig,
    route: ModelRoute,
    *,
    api_key: str | None,
    http_client: httpx.AsyncClient,
    dialect: Literal["openai", "tool_request"] = "openai",
    observer: ModelObserver | None = None,
    on_parse_failure: FailureHook | None = None,
) -> Model:
    """The model that serves one route.

    Args:
        upstream: The upstream section of the config.
        route: The route (its `tool_calls` already filled in from the upstream default).
        api_key: The upstream key read from the environment.
        http_client: The pooled client every route shares.
        dialect: The gateway's dialect.
        observer: Told each upstream call's duration and failures (the metrics).
        on_parse_failure: Told each tool call the upstream wrote but could not be parsed.
    """
    mode, fmt = parse_tool_calls(route.tool_calls or upstream.tool_calls)
    base: Model
    if upstream.kind == "offline":
        base = OfflineModel()
    elif upstream.kind == "anthropic":
        from toolwire.models.anthropic import AnthropicModel

        base = AnthropicModel(
            base_url=upstream.effective_base_url or "https://api.anthropic.com",
            api_key=api_key,
            model=route.model,
            timeout=upstream.timeout,
            max_response_bytes=upstream.max_response_bytes,
            retries=upstream.retries,
            http_client=http_client,
            connect_hint="Check upstream.base_url in the gateway config.",
        )
    else:
        base = OpenAIChatModel(
            upstream.effective_base_url or "https://api.openai.com/v1",
            api_key,
            route.model,
            timeout=upstream.timeout,
            max_response_bytes=upstream.max_response_bytes,
            retries=upstream.retries,
            http_client=http_client,
            id_style=id_style(upstream, route.model),
            engine=upstream.engine,
            connect_hint="Check upstream.base_url in the gateway config.",
            # Passed through, a stream keeps the upstream's chunks; a parser reads the
            # text, and joined deltas cost it one pass instead of one per chunk.
            join_deltas=mode != "native" or dialect == "tool_request",
        )
    if observer is not None:
        base = ObservedModel(base, observer)
    if mode == "parse":
        return ParsingModel(base, fmt or "auto", on_parse_failure=on_parse_failure)
    if mode == "prompted":
        from toolwire.models.prompted import PromptedModel

        return PromptedModel(
            base,
            fmt or "hermes",
            instructions=upstream.prompted_instructions,
            on_parse_failure=on_parse_failure,
        )
    if dialect == "tool_request":
        return ParsingModel(base, "tool_request", on_parse_failure=on_parse_failure)
    return base
