"""`toolwire approvals list | show | approve | deny`: decide what a gateway's runs wait for.

These commands talk to a running gateway (`toolwire serve`) over its REST API
(`/v1/approvals`, see `toolwire.server.routes.runs`) through `toolwire.cli._gateway`.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.json import JSON
from rich.table import Table
from rich.text import Text

from toolwire.cli._gateway import (
    DEFAULT_URL,
    STATUS_STYLE,
    JsonOption,
    KeyOption,
    UrlOption,
    call_text,
    connect,
    format_time,
    path_segment,
    relative,
    write_json,
)

__all__ = ["app", "approval_details", "approvals_table"]

app = typer.Typer(
    help="List, inspect and decide the approvals a gateway's runs wait for.",
    no_args_is_help=True,
)

StatusFilter = Literal["pending", "approved", "denied", "expired", "used", "all"]
IdArgument = Annotated[str, typer.Argument(help="The approval id (apr_…).", show_default=False)]
ReasonOption = Annotated[
    str | None,
    typer.Option("--reason", help="Why; recorded with the decision (a denial tells the model)."),
]


@app.command("list")
def list_approvals(
    status: Annotated[
        StatusFilter, typer.Option("--status", help="Which approvals to list.")
    ] = "pending",
    run: Annotated[str | None, typer.Option("--run", help="Only those of this run.")] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=1000, help="At most this many.")
    ] = 100,
    as_json: JsonOption = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """List approvals: what each run waits for, and what was decided."""
    with connect(url, key) as gateway:
        params = {"status": None if status == "all" else status, "run_id": run, "limit": limit}
        body = gateway.get("/v1/approvals", params)
    approvals: list[dict[str, Any]] = body.get("data", []) if isinstance(body, dict) else []
    if as_json:
        write_json(approvals)
        return
    console = Console(highlight=False)
    if not approvals:
        which = "" if status == "all" else f"{status} "
        console.print(f"No {which}approvals{f' for run {run}' if run else ''}.")
        return
    console.print(approvals_table(approvals))
    if status == "pending":
        console.print(
            Text(
                "Decide with: toolwire approvals approve ID | deny ID --reason TEXT",
                style="dim",
            )
        )


def approvals_table(approvals: list[dict[str, Any]], now: float | None = None) -> Table:
    """Approvals as a table: id, the call (tool and shortened arguments), who asked,
    status, expiry. Ids are never cut (people copy them); the call wraps instead."""
    now = time.time() if now is None else now
    id_width = max((len(str(a.get("id"))) for a in approvals), default=2)
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("ID", no_wrap=True, min_width=id_width)
    table.add_column("Call", overflow="fold", ratio=1)
    table.add_column("Requested by", overflow="fold")
    table.add_column("Status", overflow="fold")
    table.add_column("Expires", no_wrap=True)
    for a in approvals:
        status = str(a.get("status"))
        status_text = Text(status, style=STATUS_STYLE.get(status, ""))
        if status in ("approved", "denied") and a.get("decided_by"):
            status_text.append(f" by {a['decided_by']}", style="dim")
        expires = a.get("expires_at")
        if status in ("pending", "expired") and isinstance(expires, int | float):
            when = relative(expires, now)
        else:
            when = "—"
        table.add_row(
            str(a.get("id")),
            call_text(a.get("name"), a.get("arguments")),
            str(a.get("requested_by") or "—"),
            status_text,
            when,
        )
    return table


@app.command("show")
def show_approval(
    approval_id: IdArgument,
    as_json: JsonOption = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Show one approval: the exact call, who asked, and its decision."""
    with connect(url, key) as gateway:
        approval = gateway.get(f"/v1/approvals/{path_segment(approval_id)}")
    if as_json:
        write_json(approval)
        return
    console = Console(highlight=False, soft_wrap=True)
    console.print(approval_details(approval))
    if approval.get("status") == "pending":
        console.print()
        console.print(
            Text(
                f"Approve: toolwire approvals approve {approval_id}\n"
                f"Deny:    toolwire approvals deny {approval_id} --reason TEXT",
                style="dim",
            )
        )


def approval_details(approval: dict[str, Any], now: float | None = None) -> Table:
    """One approval, field by field."""
    now = time.time() if now is None else now
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    status = str(approval.get("status"))
    status_text = Text(status, style=STATUS_STYLE.get(status, ""))
    expires = approval.get("expires_at")
    if status in ("pending", "expired") and isinstance(expires, int | float):
        word = "expires" if status == "pending" else "expired"
        status_text.append(f" ({word} {relative(expires, now)})", style="dim")
    grid.add_row("Approval", str(approval.get("id")))
    grid.add_row("Status", status_text)
    tool = Text(str(approval.get("name")), style="bold cyan")
    if approval.get("effects"):
        tool.append(f" ({approval['effects']})", style="dim")
    grid.add_row("Tool", tool)
    grid.add_row("Arguments", _arguments_view(approval.get("arguments")))
    grid.add_row("Arguments hash", Text(str(approval.get("arguments_hash") or "—"), style="dim"))
    if approval.get("reason"):
        grid.add_row("Why", str(approval["reason"]))
    grid.add_row("Run", str(approval.get("run_id") or "—"))
    grid.add_row("Call", str(approval.get("call_id") or "—"))
    grid.add_row("Requested by", str(approval.get("requested_by") or "—"))
    grid.add_row("Approver", str(approval.get("approver") or "any key allowed to approve"))
    created = approval.get("created_at")
    if isinstance(created, int | float):
        grid.add_row("Created", f"{format_time(created)} ({relative(created, now)})")
    if isinstance(expires, int | float):
        grid.add_row("Expires", format_time(expires))
    if approval.get("decided_at") is not None:
        decided = f"by {approval.get('decided_by') or '—'} at {format_time(approval['decided_at'])}"
        grid.add_row("Decided", decided)
    if approval.get("decision_reason"):
        grid.add_row("Decision reason", str(approval["decision_reason"]))
    if approval.get("used_at") is not None:
        grid.add_row("Used", format_time(approval["used_at"]))
    return grid


def _arguments_view(arguments: Any) -> JSON | Text:
    if isinstance(arguments, str):
        try:
            return JSON(arguments, indent=2)
        except ValueError:
            return Text(arguments)
    return JSON.from_data(arguments, indent=2, default=str)


@app.command("approve")
def approve(
    approval_id: IdArgument,
    reason: ReasonOption = None,
    as_json: JsonOption = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Approve a pending call: it runs, exactly once, when its run is resumed."""
    _decide(approval_id, "approve", reason, as_json=as_json, url=url, key=key)


@app.command("deny")
def deny(
    approval_id: IdArgument,
    reason: ReasonOption = None,
    as_json: JsonOption = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Deny a pending call: the model is told (with the reason) when its run is resumed."""
    _decide(approval_id, "deny", reason, as_json=as_json, url=url, key=key)


def _decide(
    approval_id: str,
    decision: Literal["approve", "deny"],
    reason: str | None,
    *,
    as_json: bool,
    url: str,
    key: str | None,
) -> None:
    body: dict[str, Any] = {"decision": decision}
    if reason is not None:
        body["reason"] = reason
    with connect(url, key) as gateway:
        approval = gateway.post(f"/v1/approvals/{path_segment(approval_id)}", body)
    if as_json:
        write_json(approval)
        return
    console = Console(highlight=False, soft_wrap=True)
    line = Text()
    if decision == "approve":
        line.append("✓ Approved ", style="bold green")
    else:
        line.append("✗ Denied ", style="bold red")
    line.append(str(approval.get("id", approval_id)))
    line.append(": ")
    line.append_text(call_text(approval.get("name"), approval.get("arguments"), 80))
    if reason:
        line.append(f" — {reason}", style="dim")
    console.print(line)
    run_id = approval.get("run_id")
    if run_id:
        console.print(
            Text(
                f"Once every approval of run {run_id} is decided, go on with: "
                f"toolwire runs resume {run_id}",
                style="dim",
            )
        )
