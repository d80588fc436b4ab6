"""Fixtures of the gateway tests."""

from __future__ import annotations

import pytest
from server_support import GatewayFactory, gateway_client


@pytest.fixture
def gateway() -> GatewayFactory:
    """`async with gateway(config) as client:` — the app in-process, lifespan included."""
    return gateway_client
