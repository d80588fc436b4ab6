"""Server tools of the `/v1/responses` tests, loaded by dotted name (`responses_tools`)."""

from __future__ import annotations

from toolwire import tool


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order; the order database is down, so it always fails.

    Args:
        order_id: The order's id.
    """
    raise ConnectionError(f"order database unreachable while reading {order_id}")
