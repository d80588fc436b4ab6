"""The operator console at `/console` (issue 28), in a real headless Chromium (Debian's,
through Playwright) against a real `toolwire serve` with a SQLite store.

Keys: `dev` asks for things and decides nothing (`approve: none`), `ops` is an admin
(the approver), `oncall` may decide any approval (`approve: any`), `viewer` has no
rights at all. A destructive call asked for by `dev`
reaches ops' inbox within 2 s, is approved there with a reason, the run resumes from
the Runs view, and the Audit view shows who approved. The viewer sees nothing and cannot
decide by crafting the requests the page would make. Each view is screenshotted into
test-artifacts/console/, copied to docs/console/ (the README shows the inbox).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from browser_support import browser_or_skip, chromium_path
from chat_support import native_upstream
from live import LiveServer
from served import ServeProcess
from server_support import config_with

from toolwire.server import create_app

DEV: Final = "tw-console-dev"
OPS: Final = "tw-console-ops"
VIEWER: Final = "tw-console-viewer"
ONCALL: Final = "tw-console-oncall"
SHOTS: Final = Path(__file__).parents[2] / "test-artifacts" / "console"
"""Where each view's screenshot goes; docs/console/ holds copies (see docs/console.md)."""


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[ServeProcess]:
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        json.dumps(
            {
                "server_tools": {"modules": ["toolwire.tools.demo", "approval_tools"]},
                "store": f"sqlite:///{tmp_path / 'state.db'}",
                "keys": [
                    {"name": "dev", "sha256": _digest(DEV), "approve": "none"},
                    {"name": "ops", "sha256": _digest(OPS), "admin": True},
                    {"name": "viewer", "sha256": _digest(VIEWER), "approve": "none"},
                    {"name": "oncall", "sha256": _digest(ONCALL), "approve": "any"},
                ],
            }
        )
    )
    here = Path(__file__).parent
    path = os.pathsep.join([str(here.parents[1] / "src"), str(here)])
    env = {**os.environ, "TOOLWIRE_LOG_LEVEL": "warning", "PYTHONPATH": path}
    serve = ServeProcess(config, env)
    try:
        yield serve
    finally:
        serve.stop()


def _ask(serve: ServeProcess, key: str, text: str) -> dict[str, Any]:
    with serve.http() as http:
        response = http.post(
            "/v1/chat/completions",
            headers={"authorization": f"Bearer {key}"},
            json={"model": "toolwire-offline", "messages": [{"role": "user", "content": text}]},
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _launch(p: Any) -> Any:
    return p.chromium.launch(
        executable_path=chromium_path(),
        args=["--no-sandbox", "--disable-background-networking"],
    )


def _sign_in(page: Any, key: str) -> None:
    page.get_by_label("Gateway key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("Signed in:").wait_for(timeout=5000)


def test_the_page_is_served_with_a_strict_policy_and_no_key(gateway: ServeProcess) -> None:
    with gateway.http() as http:
        page = http.get("/console")
        script = http.get("/console/app.js")
        missing = http.get("/console/secrets.txt")
        session = http.get("/v1/console/session")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "connect-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert "<title>toolwire console</title>" in page.text
    assert "innerHTML" not in script.text
    # sessionStorage only: nothing the key could outlive the tab in.
    assert "localStorage" not in script.text
    assert "document.cookie" not in script.text
    assert missing.status_code == 404
    assert session.status_code == 401  # the page needs no key; the API does


def test_a_key_without_rights_sees_nothing_and_cannot_decide(gateway: ServeProcess) -> None:
    asked = _ask(gateway, DEV, "Delete the application demo-app.")
    run_id = asked["toolwire"]["run_id"]
    approval_id = asked["toolwire"]["pending_approvals"][0]["id"]
    viewer = {"authorization": f"Bearer {VIEWER}"}
    with gateway.http() as http:
        listed = http.get("/v1/approvals?limit=50", headers=viewer).json()
        assert listed["data"] == []
        assert http.get(f"/v1/approvals/{approval_id}", headers=viewer).status_code == 404
        decided = http.post(
            f"/v1/approvals/{approval_id}",
            headers=viewer,
            json={"decision": "approve", "reason": "crafted"},
        )
        assert decided.status_code == 404
        assert http.get(f"/v1/runs/{run_id}", headers=viewer).status_code == 404
        assert http.post(f"/v1/runs/{run_id}/resume", headers=viewer).status_code == 404
        assert http.get("/v1/runs", headers=viewer).json()["data"] == []
        assert http.get("/v1/audit", headers=viewer).status_code == 403
        assert http.get("/v1/upstreams", headers=viewer).status_code == 403
        session = http.get("/v1/console/session", headers=viewer).json()
        assert session["views"] == ["inbox", "runs"]
        # The requester itself sees its request but may not decide it (approve: none).
        dev = {"authorization": f"Bearer {DEV}"}
        own = http.post(f"/v1/approvals/{approval_id}", headers=dev, json={"decision": "approve"})
        assert own.status_code == 403
        still = http.get(f"/v1/approvals/{approval_id}", headers=dev).json()
        assert still["status"] == "pending"

    sync_playwright = browser_or_skip()
    with sync_playwright() as p:
        browser = _launch(p)
        try:
            page = browser.new_page()
            page.goto(gateway.url + "/console")
            _sign_in(page, VIEWER)
            page.get_by_text("Nothing to see").wait_for(timeout=5000)
            assert page.get_by_role("button", name="Approve").count() == 0
            assert page.get_by_role("link", name="Audit").is_hidden()
            assert page.get_by_role("link", name="Upstreams").is_hidden()
            # The requester sees its own request, without buttons it could not use.
            _sign_in(page, DEV)
            item = page.locator("article.item.pending", has_text="delete_application")
            item.get_by_text("Waiting for a key allowed to approve").wait_for(timeout=5000)
            assert item.get_by_role("button", name="Approve").is_hidden()
        finally:
            browser.close()


def test_approve_in_the_inbox_resume_the_run_and_see_it_in_the_audit(
    gateway: ServeProcess,
) -> None:
    sync_playwright = browser_or_skip()
    requested: list[str] = []
    with sync_playwright() as p:
        browser = _launch(p)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.on("request", lambda request: requested.append(request.url))
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(gateway.url + "/console")
            page.get_by_text("This gateway has keys").wait_for(timeout=5000)
            _sign_in(page, OPS)
            page.get_by_text("Nothing to see").wait_for(timeout=5000)
            # The key lives in the tab's session storage only.
            assert page.evaluate("sessionStorage.length") == 1
            assert page.evaluate("localStorage.length") == 0

            started = time.monotonic()
            asked = _ask(gateway, DEV, "Delete the application demo-app.")
            run_id = asked["toolwire"]["run_id"]
            item = page.locator("article.item", has_text="delete_application")
            item.wait_for(timeout=2000)
            assert time.monotonic() - started < 2.0
            text = item.inner_text()
            assert "destructive" in text
            assert "Requested by dev" in text
            assert "Asked: Delete the application demo-app." in text
            assert "demo-app" in item.locator(".args").inner_text()
            assert "expires in" in text
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "inbox.png"), full_page=True)

            item.get_by_label("Reason").fill("Demo app is retired, ticket OPS-42")
            # By keyboard: from the Reason field, Tab reaches Approve and Enter presses it.
            page.keyboard.press("Tab")
            focused = page.evaluate("document.activeElement.textContent")
            assert focused == "Approve"
            page.keyboard.press("Enter")
            decision = item.locator(".decision")
            decision.get_by_text("Approved by ops").wait_for(timeout=5000)
            assert "OPS-42" in decision.inner_text()
            assert item.get_by_role("button", name="Approve").is_hidden()

            # A second decision (another person at the same moment) finds it decided.
            with httpx.Client(base_url=gateway.url) as http:
                late = http.post(
                    f"/v1/approvals/{asked['toolwire']['pending_approvals'][0]['id']}",
                    headers={"authorization": f"Bearer {OPS}"},
                    json={"decision": "deny"},
                )
            assert late.status_code == 409

            item.get_by_role("link", name=f"Run {run_id}").click()
            page.get_by_role("button", name="Resume run").click()
            timeline = page.get_by_role("list", name="Timeline")
            page.locator(".badge.run-status.completed").wait_for(timeout=15000)
            call = timeline.locator("li.step.ok", has_text="Tool call: delete_application")
            assert " ms" in call.inner_text()
            assert "Approved by ops" in call.inner_text()
            page.screenshot(path=str(SHOTS / "runs.png"), full_page=True)

            page.get_by_role("link", name="Audit").click()
            page.get_by_label("Tool").fill("delete_application")
            page.get_by_role("button", name="Filter").click()
            rows = page.locator("#audit-table tbody tr")
            page.locator("#audit-table tbody tr", has_text="approval_approved").wait_for(
                timeout=5000
            )
            approved = rows.filter(has_text="finished: ok")
            assert "ops" in approved.first.inner_text()  # approved by
            with page.expect_download() as download:
                page.get_by_role("button", name="Export JSON lines").click()
            lines = Path(download.value.path()).read_text().splitlines()
            records = [json.loads(line) for line in lines]
            assert {r["tool"] for r in records} == {"delete_application"}
            assert any(r["approved_by"] == "ops" for r in records)
            page.screenshot(path=str(SHOTS / "audit.png"), full_page=True)

            page.get_by_role("link", name="Upstreams").click()
            page.locator(".upstream .badge.ok").first.wait_for(timeout=5000)
            assert "toolwire-offline" in page.locator("#upstream-list").inner_text()
            page.screenshot(path=str(SHOTS / "upstreams.png"), full_page=True)

            # Phone width: nothing runs off the side.
            page.set_viewport_size({"width": 375, "height": 800})
            page.get_by_role("link", name="Inbox").click()
            page.locator("article.item").first.wait_for(timeout=5000)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth > document.documentElement.clientWidth"
            )
            assert not overflow
            page.screenshot(path=str(SHOTS / "inbox-phone.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()
    assert all(url.startswith((gateway.url, "blob:")) for url in requested)


def test_two_people_deciding_at_once_see_one_winner(gateway: ServeProcess) -> None:
    sync_playwright = browser_or_skip()
    _ask(gateway, DEV, "Delete the application demo-app.")
    with sync_playwright() as p:
        browser = _launch(p)
        try:
            pages = []
            for key in (OPS, ONCALL):
                page = browser.new_context().new_page()  # a tab each: own session storage
                page.goto(gateway.url + "/console")
                _sign_in(page, key)
                page.locator("article.item.pending").wait_for(timeout=5000)
                pages.append(page)
            ops, oncall = (page.locator("article.item") for page in pages)
            # oncall may decide, so it sees what was asked (not the rest of dev's run).
            assert "Asked: Delete the application demo-app." in oncall.inner_text()
            ops.get_by_label("Reason").fill("fine")
            oncall.get_by_label("Reason").fill("no")
            ops.get_by_role("button", name="Approve").click()
            oncall.get_by_role("button", name="Deny").click()
            ops.locator(".decision", has_text="Approved by ops").wait_for(timeout=5000)
            oncall.get_by_role("alert").get_by_text("Not decided").wait_for(timeout=5000)
            # The loser's item says who won instead of failing.
            oncall.locator(".decision", has_text="Approved by ops").wait_for(timeout=5000)
        finally:
            browser.close()


def test_an_open_gateway_needs_no_key() -> None:
    sync_playwright = browser_or_skip()
    config = config_with(server_tools={"modules": ["approval_tools"]}, store="memory")
    with LiveServer(create_app(config)) as live, sync_playwright() as p:
        httpx.post(
            f"{live.url}/v1/chat/completions",
            json={
                "model": "toolwire-offline",
                "messages": [{"role": "user", "content": "Delete the application demo-app."}],
            },
            timeout=15,
        ).raise_for_status()
        browser = _launch(p)
        try:
            page = browser.new_page()
            page.goto(live.url + "/console")
            page.get_by_text("open gateway").wait_for(timeout=5000)
            page.locator("article.item.pending", has_text="delete_application").wait_for(
                timeout=5000
            )
            for view in ("Inbox", "Runs", "Audit", "Upstreams"):
                assert page.get_by_role("link", name=view).is_visible()
        finally:
            browser.close()


def test_the_upstreams_view_reads_the_metrics_figures() -> None:
    # An unreachable upstream: the failure is counted by kind, as on /metrics.
    upstream = {**native_upstream("http://127.0.0.1:9/v1"), "retries": 0}
    keys = [{"name": "ops", "sha256": _digest(OPS), "admin": True}]
    ask = [{"role": "user", "content": "hi"}]
    ops = {"authorization": f"Bearer {OPS}"}
    config = config_with(upstream=upstream, keys=keys, store="memory")
    with (
        LiveServer(create_app(config)) as live,
        httpx.Client(base_url=live.url, timeout=10, headers=ops) as http,
    ):
        failed = http.post("/v1/chat/completions", json={"model": "gpt", "messages": ask})
        assert failed.status_code == 502
        first = http.get("/v1/upstreams").json()
        again = http.get("/v1/upstreams").json()
        assert http.get("/v1/upstreams", headers={"authorization": "Bearer x"}).status_code == 401
    (only,) = first["data"]
    assert only["kind"] == "openai"
    assert only["host"] == "127.0.0.1:9"  # the host only, never the whole base URL
    assert only["health"] == "unreachable"
    (deployment,) = only["deployments"]
    assert deployment["model"] == "gpt"
    assert deployment["failures"] == {"unreachable": 1.0}
    assert deployment["health"] == "unreachable"
    # The first look counts since the start; the next one since the first look.
    assert first["recent_since"] is None
    assert deployment["recent_failures"] == 1.0
    assert again["recent_since"] is not None
    assert again["data"][0]["deployments"][0]["recent_failures"] == 0.0
    assert deployment["in_flight"] is None  # per deployment once routing counts it
    assert deployment["cooldown_until"] is None
