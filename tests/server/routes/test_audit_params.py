"""`GET /v1/audit` refuses times that are no time (issue 22: `since=nan|inf` accepted)."""

from __future__ import annotations

import hashlib

import pytest
from server_support import GatewayFactory, config_with

OPS = "tw-ops-secret"


@pytest.mark.parametrize("param", ["since", "until"])
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "soon"])
async def test_a_time_that_is_no_time_is_400(
    gateway: GatewayFactory, param: str, value: str
) -> None:
    config = config_with(
        keys=[{"name": "ops", "sha256": hashlib.sha256(OPS.encode()).hexdigest(), "admin": True}],
        store="memory",
    )
    async with gateway(config, headers={"Authorization": f"Bearer {OPS}"}) as client:
        response = await client.get("/v1/audit", params={param: value})
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["param"] == param
        assert error["message"] == f"{param} must be a Unix time in seconds, not {value!r}."
        fine = await client.get("/v1/audit", params={param: "1700000000.5"})
        assert fine.status_code == 200
