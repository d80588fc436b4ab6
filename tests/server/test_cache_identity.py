"""The gateway's tool cache never hands one caller's result to another (issue 12, HIGH):
on an open gateway with two callers' tokens, and with keys on when one key forwards two
end users' tokens."""

from __future__ import annotations

import hashlib
from pathlib import Path

from server_support import GatewayFactory, config_with

TOOLS = str(Path(__file__).parent / "cache_tools.py")
PORTAL_KEY = "tw-portal"


async def test_open_gateway_two_callers_two_results(gateway: GatewayFactory) -> None:
    config = config_with(server_tools={"modules": [TOOLS]}, store="memory")
    async with gateway(config) as client:
        seen = []
        for token in ("alice-token", "bob-token", "alice-token"):
            response = await client.post(
                "/v1/tools/my_profile/invoke", json={}, headers={"Authorization": f"Bearer {token}"}
            )
            body = response.json()
            seen.append((body["result"]["token_seen"], body["cached"]))
    assert seen == [("alice-token", False), ("bob-token", False), ("alice-token", True)]


async def test_one_key_forwarding_two_end_users_gets_two_results(gateway: GatewayFactory) -> None:
    config = config_with(
        server_tools={"modules": [TOOLS]},
        keys=[{"name": "portal", "sha256": hashlib.sha256(PORTAL_KEY.encode()).hexdigest()}],
        store="memory",
    )
    async with gateway(config, environ={}) as client:
        seen = []
        for user in ("user-1", "user-2", "user-1"):
            response = await client.post(
                "/v1/tools/my_profile/invoke",
                json={},
                headers={
                    "Authorization": f"Bearer {PORTAL_KEY}",
                    "X-Forwarded-Authorization": f"Bearer {user}",
                },
            )
            body = response.json()
            seen.append((body["result"]["token_seen"], body["cached"]))
    assert seen == [("user-1", False), ("user-2", False), ("user-1", True)]
