"""Retention: `retention:` in toolwire.yaml, the gateway's background prune, and
`toolwire store prune`, each against a real SQLite file."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from server_support import TOOLS_MODULE, config_with
from typer.testing import CliRunner

import toolwire.server.retention as retention_module
from toolwire.cli.main import app as cli
from toolwire.server import create_app, parse_config
from toolwire.server.configuration.config import RetentionConfig, parse_duration
from toolwire.server.retention import keep_pruning
from toolwire.store import (
    ApprovalRecord,
    AuditQuery,
    AuditRecord,
    RunRecord,
    SqliteStore,
    Store,
)

DAY = 86400.0


def test_durations() -> None:
    assert parse_duration("30d") == 30 * DAY
    assert parse_duration(" 12h ") == 12 * 3600
    assert parse_duration("90m") == 5400
    assert parse_duration("1.5w") == 1.5 * 7 * DAY
    assert parse_duration(45) == 45.0
    assert parse_duration("forever") is None
    assert parse_duration(None) is None
    for bad in ("30", "30 days", "-1d", "0s", "d", True, float("inf"), float("nan"), [1]):
        with pytest.raises(ValueError, match="30d, 12h"):
            parse_duration(bad)


def test_defaults_keep_the_audit_log_longest() -> None:
    retention = RetentionConfig()
    assert retention.runs == retention.approvals == 30 * DAY
    assert retention.audit == 365 * DAY
    assert retention.audit > retention.runs


def test_retention_in_the_config_with_line_numbers() -> None:
    doc = parse_config("retention:\n  runs: 7d\n  audit: forever\n", source="tw.yaml")
    assert doc.problems == []
    assert doc.config is not None
    assert doc.config.retention == RetentionConfig(runs=7 * DAY, audit=None)

    text = "retention:\n  runs: 7d\n  approvals: 30 days\n  audit: -1h\n  interval: 1s\n  keep: 1\n"
    problems = [str(p) for p in parse_config(text, source="tw.yaml").problems]
    assert problems[0].startswith("tw.yaml:3: retention.approvals: write a positive duration")
    assert "'30 days'" in problems[0]
    assert problems[1].startswith("tw.yaml:4: retention.audit: write a positive duration")
    assert problems[2].startswith("tw.yaml:5: retention.interval: ")
    assert problems[3].startswith("tw.yaml:6: retention.keep: unknown key")
    assert len(problems) == 4


async def _fill(store: Store, now: float) -> None:
    """One of each kind long past every default retention, and one of each that is not."""
    old, new = now - 400 * DAY, now - 60
    for at, suffix in ((old, "old"), (new, "new")):
        await store.put_run(
            RunRecord(
                id=f"run_{suffix}", status="completed", state={}, created_at=at, updated_at=at
            )
        )
        await store.add_approvals(
            [
                ApprovalRecord(
                    id=f"appr_{suffix}",
                    run_id=f"run_{suffix}",
                    call_id="c",
                    tool="rm",
                    arguments="{}",
                    arguments_hash="sha256:00",
                    status="used",
                    created_at=at,
                    expires_at=at + 60,
                )
            ]
        )
        await store.append_audit(
            AuditRecord(
                time=at,
                event="finished",
                tool="rm",
                effects="destructive",
                arguments_hash="sha256:00",
                arguments=None,
                call_id=f"call_{suffix}",
            )
        )


async def _left(path: Path) -> tuple[list[str], list[str], list[str]]:
    store = SqliteStore(path)
    await store.open()
    try:
        runs = [r.id for r in await store.list_runs()]
        approvals = [a.id for a in await store.list_approvals(now=time.time())]
        audit = [r.call_id for r in await store.list_audit(AuditQuery())]
    finally:
        await store.aclose()
    return runs, approvals, audit


async def test_the_gateway_prunes_its_store_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    seed = SqliteStore(path)
    await seed.open()
    await _fill(seed, time.time())
    await seed.aclose()
    monkeypatch.setattr(retention_module, "_FIRST_DELAY", 0.0)
    config = config_with(
        server_tools={"modules": [TOOLS_MODULE]},
        store=f"sqlite:///{path}",
        retention={"runs": "30d", "approvals": "30d", "audit": "365d"},
    )
    gateway_app = create_app(config, environ={})
    caplog.set_level(logging.INFO, logger="toolwire.retention")
    async with gateway_app.router.lifespan_context(gateway_app):
        for _ in range(100):
            if "retention: deleted" in caplog.text:
                break
            await asyncio.sleep(0.05)
    # Stopped with the app: no task left behind.
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "retention"]
    assert "retention: deleted 1 runs, 1 approvals, 1 audit records" in caplog.text
    assert await _left(path) == (["run_new"], ["appr_new"], ["call_new"])


async def test_a_failing_prune_is_logged_and_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(retention_module, "_FIRST_DELAY", 0.0)
    # The interval's lower bound is for the config; the loop takes what it is given.
    settings = RetentionConfig.model_construct(runs=DAY, approvals=DAY, audit=DAY, interval=0.01)
    closed = SqliteStore(tmp_path / "state.db")  # every prune fails: it is not open
    ticks = 0
    enough = asyncio.Event()

    def opened() -> Store | None:
        nonlocal ticks
        ticks += 1
        if ticks == 4:
            enough.set()
        return closed

    task = asyncio.create_task(keep_pruning(opened, settings))
    await asyncio.wait_for(enough.wait(), 5)
    assert not task.done()  # it survived three failed prunes
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    failures = [r for r in caplog.records if "retention: prune failed" in r.getMessage()]
    assert len(failures) >= 3
    assert "is not open" in failures[0].getMessage()


async def test_a_store_nobody_opened_is_not_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retention_module, "_FIRST_DELAY", 0.0)
    asked = 0
    enough = asyncio.Event()

    def opened() -> Store | None:
        nonlocal asked
        asked += 1
        if asked == 3:
            enough.set()
        return None

    settings = RetentionConfig.model_construct(runs=DAY, approvals=DAY, audit=DAY, interval=0.01)
    task = asyncio.create_task(keep_pruning(opened, settings))
    await asyncio.wait_for(enough.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_store_prune_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"

    async def seed() -> None:
        store = SqliteStore(path)
        await store.open()
        await _fill(store, time.time())
        await store.aclose()

    asyncio.run(seed())
    monkeypatch.chdir(tmp_path)  # no ./toolwire.yaml: the defaults
    monkeypatch.delenv("TOOLWIRE_CONFIG", raising=False)
    runner = CliRunner()

    def prune(*args: str) -> str:
        result = runner.invoke(cli, ["store", "prune", "--store", f"sqlite:///{path}", *args])
        assert result.exit_code == 0, result.output
        return result.output

    # Audit kept forever by flag; runs and approvals by the defaults (30d).
    assert prune("--audit", "forever") == (
        f"Deleted 1 runs, 1 approvals and 0 audit records from sqlite:///{path}.\n"
    )
    assert asyncio.run(_left(path))[2] == ["call_old", "call_new"]
    # The config's retention applies when no flag is given.
    (tmp_path / "toolwire.yaml").write_text("retention:\n  audit: 1h\n")
    assert prune() == f"Deleted 0 runs, 0 approvals and 1 audit records from sqlite:///{path}.\n"
    assert asyncio.run(_left(path)) == (["run_new"], ["appr_new"], ["call_new"])
    assert prune("--runs", "1s", "--approvals", "1s", "--audit", "1s") == (
        f"Deleted 1 runs, 1 approvals and 1 audit records from sqlite:///{path}.\n"
    )

    bad = runner.invoke(cli, ["store", "prune", "--store", f"sqlite:///{path}", "--runs", "x"])
    assert bad.exit_code == 2
    assert "--runs: write a positive duration" in bad.output
