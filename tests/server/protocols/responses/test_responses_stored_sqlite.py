"""A stored response on the default store (SQLite): readable by the next request as soon
as it was answered, also by another replica sharing the file, and kept through a kill -9
of the gateway right after the answer (its commit is not fsynced: see
`SqliteStore._quick_write`)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire.server import GatewayConfig, create_app

MODEL = "toolwire-offline"


@asynccontextmanager
async def _gateway(path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(GatewayConfig.model_validate({"store": f"sqlite:///{path}"}), access_log=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            yield client


async def _create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/responses", json={"model": MODEL, **body})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_the_next_request_and_another_replica_read_it_at_once(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with _gateway(path) as first, _gateway(path) as second:
        ids = []
        for turn in range(3):  # the first put after open takes the careful path, the rest not
            previous = {"previous_response_id": ids[-1]} if ids else {}
            # Each turn on the other replica, continuing the one just answered.
            client = (first, second)[turn % 2]
            ids.append((await _create(client, input=f"turn {turn}", **previous))["id"])
            for reader in (first, second):
                got = await reader.get(f"/v1/responses/{ids[-1]}")
                assert got.status_code == 200, got.text
                assert got.json()["id"] == ids[-1]
        gone = await second.delete(f"/v1/responses/{ids[0]}")
        assert gone.status_code == 200
        assert (await first.get(f"/v1/responses/{ids[0]}")).status_code == 404


_GATEWAY = """
import asyncio, sys
import httpx
from toolwire.server import GatewayConfig, create_app

async def main() -> None:
    config = GatewayConfig.model_validate({"store": f"sqlite:///{sys.argv[1]}"})
    app = create_app(config, access_log=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            for i in range(5):
                r = await client.post(
                    "/v1/responses", json={"model": "toolwire-offline", "input": f"hi {i}"}
                )
                assert r.status_code == 200, r.text
                print(r.json()["id"], flush=True)  # answered: it must be kept from now on
            print("ready", flush=True)
            await asyncio.sleep(120)

asyncio.run(main())
"""


async def test_a_stored_response_survives_kill_9_after_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    gateway = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _GATEWAY,
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    ids: list[str] = []
    try:
        assert gateway.stdout is not None
        while (line := (await asyncio.wait_for(gateway.stdout.readline(), 60)).strip()) != b"ready":
            if not line:
                assert gateway.stderr is not None
                pytest.fail(f"the gateway stopped: {(await gateway.stderr.read()).decode()}")
            ids.append(line.decode())
        gateway.send_signal(signal.SIGKILL)
    finally:
        if gateway.returncode is None:
            gateway.kill()
        await gateway.wait()
    assert gateway.returncode == -signal.SIGKILL
    assert len(ids) == 5
    async with _gateway(path) as client:
        for ident in ids:
            got = await client.get(f"/v1/responses/{ident}")
            assert got.status_code == 200, got.text
        # and a conversation goes on from the last one
        await _create(client, input="again", previous_response_id=ids[-1])
