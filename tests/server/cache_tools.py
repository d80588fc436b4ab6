"""A cached read tool that answers with the caller's own data, for the cache tests."""

from __future__ import annotations

from toolwire import tool
from toolwire.tools import ToolContext


@tool(cache_ttl=300)
def my_profile(ctx: ToolContext) -> dict[str, object]:
    """The caller's profile, as the API answers for the caller's token."""
    return {"token_seen": ctx.auth_token, "key": ctx.principal}
