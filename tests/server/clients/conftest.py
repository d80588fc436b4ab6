"""The gateways the client libraries talk to: one without server tools (the direct
path), one with the server tools of `gateway_tools.py` (the agent path), both on a real
socket in front of the fake OpenAI server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chat_support import native_upstream
from live import LiveServer
from server_support import TOOLS_MODULE, config_with

from fakes.openai_server import FakeOpenAIServer
from toolwire.server import create_app


@pytest.fixture(scope="module")
def plain(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    """A gateway without server tools (the direct path)."""
    config = config_with(upstream=native_upstream(_openai_server_session.base_url), store="memory")
    with LiveServer(create_app(config, environ={})) as live:
        yield live


@pytest.fixture(scope="module")
def tooled(_openai_server_session: FakeOpenAIServer) -> Iterator[LiveServer]:
    """A gateway with the server tools of `gateway_tools.py` (the agent path)."""
    config = config_with(
        upstream=native_upstream(_openai_server_session.base_url),
        server_tools={"modules": [TOOLS_MODULE]},
        store="memory",
    )
    with LiveServer(create_app(config, environ={})) as live:
        yield live
