"""Server tools of the approval tests, loaded by dotted name (`approval_tools`) so the
tests see the same module, and the same record of what really ran, as the gateway."""

from __future__ import annotations

from toolwire import tool

DELETED: list[str] = []
"""Every application `delete_application` really deleted, in order."""


@tool(effects="destructive")
def delete_application(app_name: str) -> str:
    """Delete an application and all its resources. This cannot be undone.

    Args:
        app_name: The application to delete.
    """
    DELETED.append(app_name)
    return f"Application {app_name} deleted."


@tool
def list_applications() -> list[str]:
    """List the applications."""
    return ["demo-app", "api-gateway"]


@tool(effects="destructive", approver="ops", audit_arguments=["cluster"])
def drain_cluster(cluster: str, api_token: str) -> str:
    """Drain a cluster; only the ops key may approve it.

    Args:
        cluster: The cluster.
        api_token: A credential for the cluster API.
    """
    DELETED.append(f"cluster {cluster}")
    return f"Cluster {cluster} drained."
