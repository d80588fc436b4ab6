"""The playground page at `/`: served with a strict CSP, and driven in a real headless
Chromium (Debian's `chromium`, through Playwright) against a gateway on loopback with the
offline model: a message, a tool card, the answer, an approval decided in place."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from approval_tools import DELETED
from browser_support import browser_or_skip, chromium_path
from live import LiveServer
from server_support import config_with

from toolwire.server import create_app

ARTIFACTS = Path(__file__).parents[3] / "test-artifacts"


def _config(**extra: Any) -> Any:
    return config_with(
        server_tools={"modules": ["toolwire.tools.demo", "approval_tools"]},
        store="memory",
        **extra,
    )


@pytest.fixture
def gateway() -> Iterator[LiveServer]:
    DELETED.clear()
    with LiveServer(create_app(_config())) as live:
        yield live
    DELETED.clear()


def test_the_page_and_its_assets_are_served_with_a_strict_policy(gateway: LiveServer) -> None:
    with httpx.Client(base_url=gateway.url) as http:
        page = http.get("/")
        script = http.get("/playground/app.js")
        style = http.get("/playground/style.css")
        missing = http.get("/playground/secrets.txt")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "connect-src 'self'" in policy
    assert "<title>toolwire playground</title>" in page.text
    assert script.headers["content-type"].startswith("text/javascript")
    assert "textContent" in script.text
    assert "innerHTML" not in script.text
    assert style.headers["content-type"].startswith("text/css")
    assert missing.status_code == 404


def test_the_page_needs_no_key_but_the_api_does() -> None:
    key = "tw-playground-key"
    keys = [
        {"name": "me", "sha256": hashlib.sha256(key.encode()).hexdigest()},
        # drain_cluster's approver: a tool's approver must be a configured key.
        {"name": "ops", "sha256": hashlib.sha256(b"tw-ops").hexdigest(), "admin": True},
    ]
    config = _config(keys=keys)
    with LiveServer(create_app(config)) as live, httpx.Client(base_url=live.url) as http:
        assert http.get("/").status_code == 200
        assert http.get("/v1/models").status_code == 401


def test_the_playground_can_be_turned_off() -> None:
    with LiveServer(create_app(_config(playground=False))) as live:
        assert httpx.get(f"{live.url}/").status_code == 404


def test_a_conversation_with_a_tool_card_and_an_approval_in_a_real_browser(
    gateway: LiveServer,
) -> None:
    sync_playwright = browser_or_skip()
    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(),
            args=["--no-sandbox", "--disable-background-networking"],
        )
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.on("request", lambda request: requested.append(request.url))
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(gateway.url + "/")
            page.wait_for_function("document.querySelector('#model').options.length > 0")
            assert page.locator("#model").input_value() == "toolwire-offline"

            page.fill("#message", "What is the weather in Lisbon?")
            page.click("#send")
            card = page.locator(".card.ok", has_text="get_weather")
            card.wait_for(timeout=15000)
            assert "Lisbon" in card.inner_text()
            answer = page.locator(".turn.assistant .text").first
            page.wait_for_function(
                "document.querySelector('.turn.assistant .text').textContent.includes('Lisbon')"
            )
            assert "Lisbon" in answer.inner_text()

            page.check("#raw-toggle")
            page.fill("#message", "Delete the application demo-app.")
            page.click("#send")
            pending = page.locator(".card.pending[data-approval-id]", has_text="delete_application")
            pending.wait_for(timeout=15000)
            assert DELETED == []
            pending.locator("button.approve").click()
            ran = page.locator(".card.ok", has_text="Tool call: delete_application")
            ran.wait_for(timeout=15000)
            assert DELETED == ["demo-app"]  # once, after the approval
            assert "data:" in page.locator("#raw-events").inner_text()
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "playground.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()
    assert requested, "the page made no requests"
    assert all(url.startswith(gateway.url) for url in requested), requested
