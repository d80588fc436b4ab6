"""`toolwire audit`: read a gateway's audit log (`GET /v1/audit`, admin keys only).

Every tool execution is there: `started` before a write or destructive tool runs,
`finished` after every call, and one record per approval decision. A `started` without
its `finished` is a call a crash cut short.

The filter on the key that ran a tool is `--key-name`: `--key` is, as in every command
that talks to the gateway, the gateway key the request is made with.
"""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolwire.cli._common import CliError, exit_with
from toolwire.cli._gateway import (
    DEFAULT_URL,
    JsonOption,
    KeyOption,
    UrlOption,
    call_text,
    connect,
    write_json,
)

__all__ = ["audit", "audit_table", "parse_time"]

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


def parse_time(value: str, option: str, now: float | None = None) -> float:
    """A time given on the command line as Unix seconds.

    Args:
        value: Unix seconds (`1735689600`), an ISO 8601 time (`2025-01-31`,
            `2025-01-31T12:00`, `2025-01-31T12:00:00Z`; local time when no offset is
            given), or a duration ago (`90s`, `15m`, `2h`, `7d`, `1w`).
        option: The option's name, for the error.

    Raises:
        CliError: `value` is none of those.
    """
    text = value.strip()
    now = time.time() if now is None else now
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(number):
            return number
    match = _DURATION.fullmatch(text.lower())
    if match:
        return now - float(match[1]) * _UNITS[match[2]]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"{option} {value!r} is not a time: give an ISO 8601 time (2025-01-31T12:00), "
            "Unix seconds, or a duration ago (15m, 2h, 7d)."
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the local time zone, as a person means it
    return moment.timestamp()


def audit(
    tool: Annotated[str | None, typer.Option("--tool", help="Only this tool.")] = None,
    key_name: Annotated[
        str | None,
        typer.Option("--key-name", help="Only calls made with the gateway key of this name."),
    ] = None,
    outcome: Annotated[
        str | None,
        typer.Option(
            "--outcome",
            help="Only this outcome: ok, an error code (denied, timeout, ...), "
            "approval_approved, approval_denied.",
        ),
    ] = None,
    run: Annotated[str | None, typer.Option("--run", help="Only this run's records.")] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="From this time: ISO 8601 (local unless an offset is given), Unix seconds, "
            "or a duration ago (15m, 2h, 7d).",
        ),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Up to this time (same forms as --since).")
    ] = None,
    after: Annotated[
        int | None,
        typer.Option("--after", min=0, help="Only records after this id (the next page)."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Records per page.")] = 100,
    follow_pages: Annotated[
        bool, typer.Option("--all", help="Fetch every page, not only the first.")
    ] = False,
    as_json: JsonOption = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Read the gateway's audit log (admin keys): who ran which tool, and how it ended.

    Records come oldest first, with the arguments as they may be logged, the outcome
    (ok or an error code), the duration and the approval the call ran under."""
    now = time.time()
    try:
        since_at = parse_time(since, "--since", now) if since is not None else None
        until_at = parse_time(until, "--until", now) if until is not None else None
    except CliError as exc:
        raise exit_with(exc) from None
    params: dict[str, str | int | float | None] = {
        "tool": tool,
        "key": key_name,
        "outcome": outcome,
        "run_id": run,
        "since": since_at,
        "until": until_at,
        "limit": limit,
    }
    records: list[dict[str, Any]] = []
    cursor = after
    has_more = False
    with connect(url, key) as gateway:
        while True:
            page = gateway.get("/v1/audit", {**params, "after": cursor})
            data = page.get("data", []) if isinstance(page, dict) else []
            records.extend(data)
            has_more = bool(page.get("has_more")) and bool(data)
            last = page.get("last_id") if data else None
            if isinstance(last, int) and (cursor is None or last > cursor):
                cursor = last
            else:
                has_more = False  # a cursor that does not move would loop forever
            if not (follow_pages and has_more):
                break
    if as_json:
        write_json(records)
        return
    console = Console(highlight=False)
    if not records:
        console.print("No audit records match." if _filtered(params, after) else "No records.")
        return
    console.print(audit_table(records))
    summary = f"{len(records)} record{'s' if len(records) != 1 else ''}"
    if has_more:
        summary += f"; more with --after {cursor} (or --all)"
    console.print(Text(summary, style="dim"))


def _filtered(params: dict[str, str | int | float | None], after: int | None) -> bool:
    return after is not None or any(v is not None for k, v in params.items() if k != "limit")


_OUTCOME_STYLE: Final = {
    "ok": "green",
    "approval_approved": "green",
    "approval_denied": "red",
    "run_resumed": "cyan",  # not a failure: who resumed the run
}


def audit_table(records: list[dict[str, Any]]) -> Table:
    """Audit records as a table, oldest first: id, time, key, the call, event, outcome
    (with the approval it ran under) and duration. Narrow terminals wrap the call and the
    outcome; ids, times and events are never cut."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("ID", justify="right", no_wrap=True)
    table.add_column("Time", no_wrap=True)
    table.add_column("Key", overflow="fold")
    table.add_column("Call", overflow="fold", ratio=1)
    table.add_column("Event", no_wrap=True)
    table.add_column("Outcome", overflow="fold")
    table.add_column("ms", justify="right", no_wrap=True)
    for r in records:
        outcome = r.get("outcome")
        outcome_text = (
            Text(str(outcome), style=_OUTCOME_STYLE.get(str(outcome), "red"))
            if outcome
            else Text("—", style="dim")
        )
        if r.get("approved_by") and outcome not in ("approval_approved", "approval_denied"):
            outcome_text.append(f"\napproved by {r['approved_by']}", style="dim")
        elif r.get("approved_by"):
            outcome_text.append(f"\nby {r['approved_by']}", style="dim")
        arguments = r.get("arguments")
        call = (
            call_text(r.get("tool"), arguments, 40)
            if arguments is not None
            else Text(str(r.get("tool")), style="cyan")
        )
        duration = r.get("duration_ms")
        stamp = r.get("time")
        table.add_row(
            str(r.get("id")),
            _short_time(stamp) if isinstance(stamp, int | float) else "—",
            str(r.get("key_name") or "—"),
            call,
            str(r.get("event")),
            outcome_text,
            f"{duration:.0f}" if isinstance(duration, int | float) else "—",
        )
    return table


def _short_time(timestamp: float) -> str:
    """`MM-DD HH:MM:SS` local (the full time is in `--json`)."""
    return datetime.fromtimestamp(timestamp).astimezone().strftime("%m-%d %H:%M:%S")
