"""toolwire's own REST routes (approvals, runs, audit)."""

from toolwire.server.routes.runs import routes

__all__ = ["routes"]
