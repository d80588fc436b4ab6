"""Server tools of the approval-permission tests, loaded by dotted name
(`permission_tools`): one destructive tool without a named approver, one naming each
kind of key, and a read tool that needs a scope only the admin key holds."""

from __future__ import annotations

from typing import Any

from toolwire import tool

RAN: list[str] = []
"""Every call that really ran, as `tool:target`, in order."""


@tool(effects="destructive")
def wipe(target: str) -> str:
    """Wipe a target (any key allowed to approve may decide)."""
    RAN.append(f"wipe:{target}")
    return f"wiped {target}"


@tool(effects="destructive", approver="ops")
def wipe_by_ops(target: str) -> str:
    """Wipe a target; only the key 'ops' (an admin) decides."""
    RAN.append(f"wipe_by_ops:{target}")
    return f"wiped {target}"


@tool(effects="destructive", approver="lead")
def wipe_by_lead(target: str) -> str:
    """Wipe a target; only the key 'lead' (approve: any) decides."""
    RAN.append(f"wipe_by_lead:{target}")
    return f"wiped {target}"


@tool(effects="destructive", approver="carol")
def wipe_by_carol(target: str) -> str:
    """Wipe a target; only the key 'carol' (approve: own, not admin) decides."""
    RAN.append(f"wipe_by_carol:{target}")
    return f"wiped {target}"


@tool(effects="destructive", audit_arguments=["name", "settings.region"])
def configure(name: str, settings: dict[str, Any]) -> str:
    """Reconfigure a service; only the name and the region may be shown."""
    RAN.append(f"configure:{name}")
    return f"configured {name}"


@tool(effects="destructive")
def connect(name: str, settings: dict[str, Any]) -> str:
    """Connect a service; arguments are shown except secret-looking ones."""
    RAN.append(f"connect:{name}")
    return f"connected {name}"


@tool(scopes=["secrets"])
def read_secret(name: str) -> str:
    """Read a secret (needs the scope 'secrets')."""
    RAN.append(f"read_secret:{name}")
    return "s3cr3t"


@tool(effects="destructive")
def scale(app: str, replicas: int, dry_run: bool = False) -> str:
    """Scale an application (destructive: it may scale to zero)."""
    RAN.append(f"scale:{app}:{replicas}")
    return f"{app} scaled to {replicas}"
